"""BLEU and chrF with sacreBLEU, overall and by sentence length.

Scores are computed on detokenized text with sacreBLEU's defaults (BLEU:
13a tokenization, exponential smoothing; chrF: character 6-grams,
`beta=2`), and always reported with their sacreBLEU signatures so that
numbers from different papers and runs can be compared honestly (Post,
2018, "A Call for Clarity in Reporting BLEU Scores").

`keras-bahdanau evaluate RUN_DIR [RUN_DIR ...]` translates a test set with
each run and prints BLEU, chrF, their signatures and a table of BLEU per
source-length bucket (Figure 2 of the paper), optionally drawn as a PNG.
"""

import json
import warnings
from pathlib import Path

import sacrebleu

from keras_bahdanau import run_directory


def corpus_scores(hypotheses, references):
    """Corpus BLEU and chrF of detokenized translations, with signatures.

    Args:
        hypotheses: list of str, the system's translations.
        references: list of str, one reference per hypothesis.

    Returns:
        A dict: `bleu` and `chrf` (floats, 0-100), `bleu_signature` and
        `chrf_signature` (sacreBLEU signature strings such as
        `"nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"`).

    Example:

    >>> scores = corpus_scores(["The house is small."],
    ...                        ["The house is small."])
    >>> scores["bleu"], scores["chrf"]
    (100.00000000000004, 100.0)
    """
    hypotheses, references = _check_corpus(hypotheses, references)
    bleu = sacrebleu.BLEU()
    chrf = sacrebleu.CHRF()
    return {
        "bleu": bleu.corpus_score(hypotheses, [references]).score,
        "chrf": chrf.corpus_score(hypotheses, [references]).score,
        "bleu_signature": str(bleu.get_signature()),
        "chrf_signature": str(chrf.get_signature()),
    }


def bleu_by_length(sources, hypotheses, references, bucket_width=10):
    """Corpus BLEU per bucket of source-sentence length (Figure 2).

    A sentence of `n` words (whitespace-separated, as the paper counts
    them) falls in the bucket `[k * w + 1, (k + 1) * w]` with `w =
    bucket_width`, i.e. 1-10, 11-20, ... for the default (an empty
    sentence counts in the first bucket). Each bucket's BLEU is a corpus
    BLEU over its sentences only.

    Args:
        sources: list of str, the source sentences.
        hypotheses: list of str, their translations.
        references: list of str, their references.
        bucket_width: int >= 1, in words.

    Returns:
        A list of dicts, one per non-empty bucket, shortest first:
        `min_length`, `max_length` (the bucket's word range), `num_sentences`
        and `bleu`.

    Example:

    >>> bleu_by_length(
    ...     ["Das Haus ist sehr klein.",
    ...      "Der Hund schläft heute Nacht wieder einmal in dem alten Haus."],
    ...     ["The house is very small.", "The dog sleeps in the house."],
    ...     ["The house is small.", "The dog sleeps in the house."])
    [{'min_length': 1, 'max_length': 10, 'num_sentences': 1, 'bleu': 37.99...},
     {'min_length': 11, 'max_length': 20, 'num_sentences': 1, 'bleu': 100.0...}]

    Reference: Bahdanau et al., 2015, Figure 2 and §5.1.
    """
    hypotheses, references = _check_corpus(hypotheses, references)
    sources = list(sources)
    if len(sources) != len(hypotheses):
        raise ValueError(
            "`sources` and `hypotheses` must have the same length. "
            f"Received: {len(sources)} sources and {len(hypotheses)} "
            "hypotheses"
        )
    if (
        not isinstance(bucket_width, int)
        or isinstance(bucket_width, bool)
        or bucket_width < 1
    ):
        raise ValueError(
            "`bucket_width` must be a positive int. "
            f"Received: bucket_width={bucket_width!r}"
        )
    buckets = {}
    for source, hypothesis, reference in zip(
        sources, hypotheses, references, strict=True
    ):
        bucket = max(len(source.split()) - 1, 0) // bucket_width
        buckets.setdefault(bucket, ([], []))
        buckets[bucket][0].append(hypothesis)
        buckets[bucket][1].append(reference)
    return [
        {
            "min_length": bucket * bucket_width + 1,
            "max_length": (bucket + 1) * bucket_width,
            "num_sentences": len(bucket_hypotheses),
            "bleu": sacrebleu.BLEU()
            .corpus_score(bucket_hypotheses, [bucket_references])
            .score,
        }
        for bucket, (bucket_hypotheses, bucket_references) in sorted(
            buckets.items()
        )
    ]


def evaluate(
    translator, sources, references, bucket_width=10, **translate_options
):
    """Translates `sources` and scores the translations.

    Args:
        translator: a `keras_bahdanau.translator.Translator`.
        sources: list of str.
        references: list of str, one per source.
        bucket_width: the word width of the `bleu_by_length` buckets.
        **translate_options: options of `Translator.translate` (e.g.
            `beam_size`, `length_penalty`, `batch_size`), except `n_best`
            and `return_attention`.

    Returns:
        The dict of `corpus_scores` plus `by_length` (the list of
        `bleu_by_length`) and `hypotheses` (list of str).

    Example:

    ```python
    translator = Translator.from_run_dir("runs/ding_de_en")
    pairs = ding_de_en("test")
    result = evaluate(translator, [s for s, _ in pairs],
                      [t for _, t in pairs], beam_size=5)
    print(result["bleu"], result["bleu_signature"])
    ```
    """
    sources = list(sources)
    hypotheses = [
        translation.text
        for translation in translator.translate(sources, **translate_options)
    ]
    return {
        **corpus_scores(hypotheses, references),
        "by_length": bleu_by_length(
            sources, hypotheses, references, bucket_width
        ),
        "hypotheses": hypotheses,
    }


def _check_corpus(hypotheses, references):
    if isinstance(hypotheses, str) or isinstance(references, str):
        raise ValueError(
            "`hypotheses` and `references` must be lists of str, not str."
        )
    hypotheses, references = list(hypotheses), list(references)
    if len(hypotheses) != len(references):
        raise ValueError(
            "`hypotheses` and `references` must have the same length. "
            f"Received: {len(hypotheses)} hypotheses and {len(references)} "
            "references"
        )
    if not hypotheses:
        raise ValueError("Nothing to score: `hypotheses` is empty.")
    for name, texts in (("hypotheses", hypotheses), ("references", references)):
        bad = [t for t in texts if not isinstance(t, str)]
        if bad:
            raise ValueError(
                f"`{name}` must hold str. Received an element {bad[0]!r} of "
                f"type {type(bad[0]).__name__}"
            )
    return hypotheses, references


# === The `evaluate` command ===


def add_arguments(parser):
    from keras_bahdanau.translator import add_search_arguments

    parser.description = (
        "Translate a test set with one or more runs; print sacreBLEU BLEU "
        "and chrF with their signatures, and BLEU per source-length bucket "
        "(the paper's Figure 2). The test set is --split of each run's "
        "training corpus (config.json) or the files --source/--reference."
    )
    parser.add_argument(
        "run_dirs", nargs="+", metavar="RUN_DIR", help="run directories"
    )
    parser.add_argument(
        "--split",
        choices=("test", "dev"),
        default="test",
        help="split of the runs' corpus (default: test)",
    )
    parser.add_argument(
        "--source",
        help="source file, one sentence a line (UTF-8, see --errors)",
    )
    parser.add_argument("--reference", help="reference file, aligned")
    parser.add_argument(
        "--max-sentences",
        type=int,
        default=0,
        help="score only the first N sentences (0: all)",
    )
    parser.add_argument(
        "--bucket-width", type=int, default=10, help="words per length bucket"
    )
    parser.add_argument(
        "--plot", help="draw BLEU by length into this .png/.svg/.pdf file"
    )
    parser.add_argument(
        "--json", help="also write all scores (no hypotheses) to this file"
    )
    add_search_arguments(parser)


def run(args):
    from keras_bahdanau.translator import search_options
    from keras_bahdanau.translator import translator_from_args

    if bool(args.source) != bool(args.reference):
        raise ValueError(
            "Pass both --source and --reference, or neither (then --split "
            f"of the runs' corpus is used). Received: --source={args.source}"
            f", --reference={args.reference}"
        )
    labels = _labels(args.run_dirs)
    # Every test set is read and checked before any model loads.
    test_sets = _test_sets(args)
    results = {}
    for run_dir, label, pairs in zip(
        args.run_dirs, labels, test_sets, strict=True
    ):
        results[label] = evaluate(
            translator_from_args(args, run_dir),
            [source for source, _ in pairs],
            [target for _, target in pairs],
            bucket_width=args.bucket_width,
            **search_options(args),
        )
    print(_format_report(results, args))
    if args.plot:
        from keras_bahdanau.plotting import plot_bleu_by_length

        plot_bleu_by_length(
            {
                label: (
                    [bucket["max_length"] for bucket in result["by_length"]],
                    [bucket["bleu"] for bucket in result["by_length"]],
                )
                for label, result in results.items()
            },
            path=args.plot,
        )
        print(f"BLEU by length plotted in {args.plot}")
    if args.json:
        scores = {
            label: {k: v for k, v in result.items() if k != "hypotheses"}
            for label, result in results.items()
        }
        run_directory.atomic_write_text(
            args.json, json.dumps(scores, indent=2) + "\n"
        )
    return 0


def _labels(run_dirs):
    """Short run names for tables and plots: folder names if unique."""
    names = [Path(run_dir).resolve().name for run_dir in run_dirs]
    if len(set(names)) == len(names):
        return names
    paths = [str(Path(run_dir).resolve()) for run_dir in run_dirs]
    if len(set(paths)) < len(paths):
        raise ValueError(
            f"A run directory is given twice. Received: {list(run_dirs)}"
        )
    return paths


def _test_sets(args):
    """The test pairs of each run, up to --max-sentences.

    The same files for every run with --source/--reference; else the
    --split of each run's corpus, whose sources must be the same.
    """
    from keras_bahdanau.cli import InputError
    from keras_bahdanau.data import read_parallel_files

    limit = args.max_sentences if args.max_sentences > 0 else None
    if args.source:
        try:
            pairs = read_parallel_files(
                args.source, args.reference, errors=args.errors
            )
        except OSError as error:
            raise InputError(
                f"{str(error.filename)!r}: {error.strerror or error}"
            ) from None
        except ValueError as error:  # Not UTF-8, unaligned or empty.
            raise InputError(str(error)) from None
        return [pairs[:limit]] * len(args.run_dirs)
    test_sets, corpora = [], {}
    for run_dir in args.run_dirs:
        config = run_directory.read_config(run_dir)
        if "data" not in config:
            raise ValueError(
                f"{run_dir}/config.json names no training corpus (no `data` "
                "section). Pass --source and --reference."
            )
        key = json.dumps(config["data"], sort_keys=True)
        if key not in corpora:
            from keras_bahdanau.train import load_corpus

            corpora[key] = load_corpus(config["data"])
        pairs = corpora[key][args.split][:limit]
        sources = [source for source, _ in pairs]
        if test_sets and sources != [source for source, _ in test_sets[0]]:
            raise ValueError(
                f"{run_dir} was trained on another corpus than "
                f"{args.run_dirs[0]}, so their {args.split} sets differ. "
                "Compare them on the same files with --source/--reference."
            )
        test_sets.append(pairs)
    return test_sets


def _format_report(results, args):
    width = max(len("run"), *(len(label) for label in results))
    lines = [
        f"{'run':<{width}}  {'BLEU':>6}  {'chrF':>6}  sentences",
        *(
            f"{label:<{width}}  {r['bleu']:6.2f}  {r['chrf']:6.2f}  "
            f"{len(r['hypotheses'])}"
            for label, r in results.items()
        ),
    ]
    signatures = {
        (r["bleu_signature"], r["chrf_signature"]) for r in results.values()
    }
    if len(signatures) > 1:  # Only with different sacreBLEU versions.
        warnings.warn("The runs' sacreBLEU signatures differ.", stacklevel=2)
    for bleu_signature, chrf_signature in sorted(signatures):
        lines += [
            f"BLEU signature: {bleu_signature}",
            f"chrF signature: {chrf_signature}",
        ]
    first = next(iter(results.values()))
    lines += [
        "",
        f"BLEU by source length (words), beam size {args.beam_size}:",
        f"{'words':>7}  {'sentences':>9}  "
        + "  ".join(f"{label:>{max(len(label), 6)}}" for label in results),
    ]
    for i, bucket in enumerate(first["by_length"]):
        span = f"{bucket['min_length']}-{bucket['max_length']}"
        lines.append(
            f"{span:>7}  {bucket['num_sentences']:>9}  "
            + "  ".join(
                f"{r['by_length'][i]['bleu']:>{max(len(label), 6)}.2f}"
                for label, r in results.items()
            )
        )
    return "\n".join(lines)


__all__ = ["bleu_by_length", "corpus_scores", "evaluate"]
