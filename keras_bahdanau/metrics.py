"""BLEU and chrF with sacreBLEU, overall and by sentence length.

Scores are computed on detokenized text with sacreBLEU's defaults (BLEU:
13a tokenization, exponential smoothing; chrF: character 6-grams,
`beta=2`), and always reported with their sacreBLEU signatures so that
numbers from different papers and runs can be compared honestly (Post,
2018, "A Call for Clarity in Reporting BLEU Scores"). Text only: no model,
no Keras (`keras_bahdanau.evaluation` translates and scores).
"""

import sacrebleu

from keras_bahdanau.validation import check_int


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


__all__ = ["bleu_by_length", "corpus_scores"]
