"""Translating and scoring: a test set, runs compared, a finished run.

`evaluate` translates sentences with a `Translator` and scores them with
`keras_bahdanau.metrics` (sacreBLEU BLEU and chrF, with signatures, and
BLEU by source length); `read_test_sets`, `compare_runs` and
`format_report` compare presets (`keras-bahdanau evaluate`);
`evaluate_run` scores the dev and test splits of a finished training run
into its `results.json`.
"""

import json
import time
import warnings
from pathlib import Path

from keras_bahdanau import run_directory
from keras_bahdanau.config import config_errors
from keras_bahdanau.data import WordTokenizer
from keras_bahdanau.data import load_corpus
from keras_bahdanau.data import read_parallel_files
from keras_bahdanau.metrics import bleu_by_length
from keras_bahdanau.metrics import corpus_scores
from keras_bahdanau.plotting import plot_attention
from keras_bahdanau.translator import Translator
from keras_bahdanau.validation import InputError


def evaluate(
    translator, sources, references, search=None, bucket_width=10, **options
):
    """Translates `sources` and scores the translations.

    Args:
        translator: a `keras_bahdanau.translator.Translator`.
        sources: list of str.
        references: list of str, one per source.
        search: a `keras_bahdanau.decoding.SearchConfig` (None: the
            translator's); `n_best` must be 1.
        bucket_width: the word width of the `bleu_by_length` buckets.
        **options: other options of `Translator.translate`
            (e.g. `replace_unknown`, `batch_size`), except
            `return_attention`.

    Returns:
        The dict of `corpus_scores` plus `by_length` (the list of
        `bleu_by_length`), `hypotheses` (list of str) and `seconds` (the
        wall time of translating and scoring, compilation included).

    Example:

    ```python
    translator = Translator.from_preset("runs/ding_de_en")
    pairs = ding_de_en("test")
    result = evaluate(translator, [s for s, _ in pairs],
                      [t for _, t in pairs], SearchConfig(beam_size=5))
    print(result["bleu"], result["bleu_signature"])
    ```
    """
    started = time.perf_counter()
    sources = list(sources)
    hypotheses = [
        translation.text
        for translation in translator.translate(sources, search, **options)
    ]
    return {
        **corpus_scores(hypotheses, references),
        "by_length": bleu_by_length(
            sources, hypotheses, references, bucket_width
        ),
        "hypotheses": hypotheses,
        "seconds": round(time.perf_counter() - started, 2),
    }


def evaluate_run(run_dir, splits, evaluation):
    """Dev and test BLEU/chrF of a run's preset, into `results.json`.

    Args:
        run_dir: the run directory, a `pathlib.Path`.
        splits: `{"dev": pairs, "test": pairs}`, e.g. from `load_corpus`.
        evaluation: the `evaluation` section of the run's config: its
            `max_sentences` and `replace_unknown` (the search is the
            preset's, which training wrote from it).

    Returns:
        The results written: per split, `bleu`, `chrf`, their signatures,
        `sentences`, and the wall `seconds` and `ms_per_sentence` of
        translating and scoring them (the preset's search, in batches).
    """
    # Whole sentences: no truncation at the training length limit.
    translator = Translator.from_preset(run_dir, max_source_length=None)
    # Off for subwords, which have (almost) no [UNK] and no word to copy.
    replace_unknown = evaluation["replace_unknown"] and all(
        isinstance(tokenizer, WordTokenizer)
        for tokenizer in (
            translator.source_tokenizer,
            translator.target_tokenizer,
        )
    )
    results = {}
    for split in ("dev", "test"):
        pairs = splits[split][: evaluation["max_sentences"] or None]
        scores = evaluate(
            translator,
            [source for source, _ in pairs],
            [target for _, target in pairs],
            replace_unknown=replace_unknown,
        )
        keys = ("bleu", "chrf", "bleu_signature", "chrf_signature")
        results[split] = {key: scores[key] for key in keys}
        # The test split runs second, with the search compiled for the
        # shapes the dev split met.
        results[split].update(sentences=len(pairs), seconds=scores["seconds"])
        milliseconds = 1000 * scores["seconds"] / max(len(pairs), 1)
        results[split]["ms_per_sentence"] = round(milliseconds, 2)
        print(
            f"[{split}] BLEU {scores['bleu']:.2f}  chrF {scores['chrf']:.2f}"
            f"  ({len(pairs)} sentences, beam {translator.search.beam_size}"
            f"{', unknown words replaced' if replace_unknown else ''}; "
            f"{scores['bleu_signature']})"
        )
    run_directory.atomic_write_text(
        run_dir / run_directory.RESULTS, json.dumps(results, indent=2)
    )
    return results


def read_test_sets(run_dirs, split, max_sentences, source, reference, errors):
    """The test pairs of presets, `{label: pairs}`, read before a model
    loads.

    The aligned files `source` and `reference` (both or neither; `errors`
    as for `read_lines`) for every preset, else the `split` of each run's
    training corpus, whose sources must be the same; the first
    `max_sentences` pairs (0: all). A preset's label is its folder's name,
    or its path if two names are the same.
    """
    if bool(source) != bool(reference):
        raise ValueError(
            "Pass both --source and --reference, or neither (then --split "
            f"of the runs' corpus is used). Received: --source={source}, "
            f"--reference={reference}"
        )
    labels = [Path(run_dir).resolve().name for run_dir in run_dirs]
    if len(set(labels)) < len(labels):
        labels = [str(Path(run_dir).resolve()) for run_dir in run_dirs]
    if len(set(labels)) < len(labels):
        raise ValueError(
            f"A run directory is given twice. Received: {list(run_dirs)}"
        )
    limit = max_sentences if max_sentences > 0 else None
    if source:
        try:
            pairs = read_parallel_files(source, reference, errors=errors)
        except ValueError as error:  # Unreadable, not UTF-8, unaligned.
            raise InputError(str(error)) from None
        return dict.fromkeys(labels, pairs[:limit])
    test_sets, corpora = [], {}
    for run_dir in run_dirs:
        config = run_directory.read_training_config(run_dir) or {}
        if "data" not in config:
            raise ValueError(
                f"{run_dir} names no training corpus (no training config "
                "with a `data` section: not a run directory of "
                "`keras-bahdanau train`). Pass --source and --reference."
            )
        key = json.dumps(config["data"], sort_keys=True)
        if key not in corpora:
            with config_errors("[data]", OSError, ValueError):
                corpora[key] = load_corpus(config["data"])
        pairs = corpora[key][split][:limit]
        if test_sets and [s for s, _ in pairs] != [s for s, _ in test_sets[0]]:
            raise ValueError(
                f"{run_dir} was trained on another corpus than "
                f"{run_dirs[0]}, so their {split} sets differ. "
                "Compare them on the same files with --source/--reference."
            )
        test_sets.append(pairs)
    return dict(zip(labels, test_sets, strict=True))


def compare_runs(test_sets, translators, **options):
    """The scores of presets, each on its test set (`read_test_sets`).

    `translators`: `(Translator, SearchConfig)` pairs, in the order of
    `test_sets` (a generator loads one model at a time); `**options` are
    `evaluate`'s. Returns `{label: scores}`: `evaluate`'s results without
    the hypotheses, with the number of `sentences` and the `search` as a
    dict.
    """
    scores = {}
    for (label, pairs), (translator, search) in zip(
        test_sets.items(), translators, strict=True
    ):
        scores[label] = evaluate(
            translator,
            [source for source, _ in pairs],
            [target for _, target in pairs],
            search,
            **options,
        )
        del scores[label]["hypotheses"]
        scores[label].update(sentences=len(pairs), search=search.to_dict())
    return scores


def format_report(scores):
    """The table of runs' scores (`compare_runs`), then BLEU by length at
    the first run's beam size; a warning if their sacreBLEU signatures
    (versions) differ."""
    width = max(len("run"), *(len(label) for label in scores))
    lines = [
        f"{'run':<{width}}  {'BLEU':>6}  {'chrF':>6}  sentences",
        *(
            f"{label:<{width}}  {r['bleu']:6.2f}  {r['chrf']:6.2f}  "
            f"{sum(bucket['num_sentences'] for bucket in r['by_length'])}"
            for label, r in scores.items()
        ),
    ]
    signatures = {
        (r["bleu_signature"], r["chrf_signature"]) for r in scores.values()
    }
    if len(signatures) > 1:
        warnings.warn("The runs' sacreBLEU signatures differ.", stacklevel=2)
    for bleu, chrf in sorted(signatures):
        lines += [f"BLEU signature: {bleu}", f"chrF signature: {chrf}"]
    first = next(iter(scores.values()))
    beam_size = first["search"]["beam_size"]
    lines += [
        "",
        f"BLEU by source length (words), beam size {beam_size}:",
        f"{'words':>7}  {'sentences':>9}  "
        + "  ".join(f"{label:>{max(len(label), 6)}}" for label in scores),
    ]
    for i, bucket in enumerate(first["by_length"]):
        span = f"{bucket['min_length']}-{bucket['max_length']}"
        lines.append(
            f"{span:>7}  {bucket['num_sentences']:>9}  "
            + "  ".join(
                f"{r['by_length'][i]['bleu']:>{max(len(label), 6)}.2f}"
                for label, r in scores.items()
            )
        )
    return "\n".join(lines)


def length_curves(scores):
    """The input of `plot_bleu_by_length` for runs' scores."""
    return {
        label: (
            [bucket["max_length"] for bucket in r["by_length"]],
            [bucket["bleu"] for bucket in r["by_length"]],
        )
        for label, r in scores.items()
    }


def translate_examples(run_dir, config, count, plots):
    """The first `count` test pairs of a run's corpus (`config["data"]`)
    as `{"source", "reference", "translation"}` dicts, translated with the
    run's preset and its search; their alignments (the paper's Figure 3)
    go to `plots/test_0.png`, `test_1.png`, ... (the folder is created)."""
    pairs = load_corpus(config["data"])["test"][:count]
    translations = Translator.from_preset(run_dir).translate(
        [source for source, _ in pairs], return_attention=True
    )
    Path(plots).mkdir(exist_ok=True)
    for i, translation in enumerate(translations):
        plot_attention(
            translation.attention,
            translation.source_tokens,
            translation.target_tokens,
            path=Path(plots) / f"test_{i}.png",
        )
    return [
        {"source": source, "reference": reference, "translation": t.text}
        for (source, reference), t in zip(pairs, translations, strict=True)
    ]
