"""BLEU and chrF with sacreBLEU, overall and by sentence length.

Scores are computed on detokenized text with sacreBLEU's defaults (BLEU:
13a tokenization, exponential smoothing; chrF: character 6-grams,
`beta=2`), and always reported with their sacreBLEU signatures so that
numbers from different papers and runs can be compared honestly (Post,
2018, "A Call for Clarity in Reporting BLEU Scores").

`evaluate` translates and scores a test set; `evaluate_run` scores the
dev and test splits of a finished training run into its `results.json`.
"""

import json
import time

import sacrebleu

from keras_bahdanau import run_directory
from keras_bahdanau.data import WordTokenizer
from keras_bahdanau.decoding import SearchConfig
from keras_bahdanau.translator import Translator
from keras_bahdanau.validation import check_int


def run_search(evaluation):
    """The `SearchConfig` of a config's `[evaluation]` table: its beam and
    length penalty, the rest at their defaults."""
    return SearchConfig(
        beam_size=evaluation["beam_size"],
        length_penalty=evaluation.get("length_penalty", 0.0),
    )


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
    check_int("bucket_width", bucket_width)
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
    translator, sources, references, search=None, bucket_width=10, **options
):
    """Translates `sources` and scores the translations.

    Args:
        translator: a `keras_bahdanau.translator.Translator`.
        sources: list of str.
        references: list of str, one per source.
        search: a `keras_bahdanau.decoding.SearchConfig` (None: its
            defaults); `n_best` must be 1.
        bucket_width: the word width of the `bleu_by_length` buckets.
        **options: other options of `Translator.translate`
            (e.g. `replace_unknown`, `batch_size`), except
            `return_attention`.

    Returns:
        The dict of `corpus_scores` plus `by_length` (the list of
        `bleu_by_length`) and `hypotheses` (list of str).

    Example:

    ```python
    translator = Translator.from_run_dir("runs/ding_de_en")
    pairs = ding_de_en("test")
    result = evaluate(translator, [s for s, _ in pairs],
                      [t for _, t in pairs], SearchConfig(beam_size=5))
    print(result["bleu"], result["bleu_signature"])
    ```
    """
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
    }


def evaluate_run(run_dir, splits, evaluation):
    """Dev and test BLEU/chrF of a run's best model, into `results.json`.

    Args:
        run_dir: the run directory, a `pathlib.Path`.
        splits: `{"dev": pairs, "test": pairs}`, e.g. from `load_corpus`.
        evaluation: the `evaluation` section of the run's config.

    Returns:
        The results written: per split, `bleu`, `chrf`, their signatures,
        `sentences`, and the wall `seconds` and `ms_per_sentence` of
        translating and scoring them (beam search in batches).
    """
    # Whole sentences: no truncation at the training length limit.
    translator = Translator.from_run_dir(
        run_dir, checkpoint="best", max_source_length=None
    )
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
        started = time.perf_counter()
        scores = evaluate(
            translator,
            [source for source, _ in pairs],
            [target for _, target in pairs],
            run_search(evaluation),
            replace_unknown=replace_unknown,
        )
        keys = ("bleu", "chrf", "bleu_signature", "chrf_signature")
        results[split] = {key: scores[key] for key in keys}
        results[split]["sentences"] = len(pairs)
        # Translating and scoring; the test split runs second, with the
        # search compiled for the shapes the dev split met.
        seconds = time.perf_counter() - started
        results[split]["seconds"] = round(seconds, 2)
        results[split]["ms_per_sentence"] = round(
            1000 * seconds / max(len(pairs), 1), 2
        )
        print(
            f"[{split}] BLEU {scores['bleu']:.2f}  chrF {scores['chrf']:.2f}"
            f"  ({len(pairs)} sentences, beam {evaluation['beam_size']}"
            f"{', unknown words replaced' if replace_unknown else ''}; "
            f"{scores['bleu_signature']})"
        )
    run_directory.atomic_write_text(
        run_dir / run_directory.RESULTS, json.dumps(results, indent=2)
    )
    return results


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


__all__ = ["bleu_by_length", "corpus_scores", "evaluate", "evaluate_run"]
