"""Translating and scoring: a test set, or the splits of a finished run.

`evaluate` translates sentences with a `Translator` and scores them with
`keras_bahdanau.metrics` (sacreBLEU BLEU and chrF, with signatures, and
BLEU by source length); `evaluate_run` scores the dev and test splits of a
finished training run into its `results.json`.
"""

import json
import time

from keras_bahdanau import run_directory
from keras_bahdanau.data import WordTokenizer
from keras_bahdanau.decoding.config import run_search
from keras_bahdanau.metrics import bleu_by_length
from keras_bahdanau.metrics import corpus_scores
from keras_bahdanau.translator import Translator


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


__all__ = ["evaluate", "evaluate_run", "run_search"]
