import pytest
import sacrebleu

from keras_bahdanau.metrics import bleu_by_length
from keras_bahdanau.metrics import corpus_scores

HYPOTHESES = [
    "The house is small.",
    "The dog sleeps in a house.",
    "I see cat.",
    "We have the house.",
]
REFERENCES = [
    "The house is small.",
    "The dog sleeps in the house.",
    "I see the cat.",
    "We have a house.",
]


def test_corpus_scores_are_sacrebleu_scores_with_signatures():
    scores = corpus_scores(HYPOTHESES, REFERENCES)
    bleu = sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES])
    chrf = sacrebleu.corpus_chrf(HYPOTHESES, [REFERENCES])
    assert scores["bleu"] == bleu.score
    assert scores["chrf"] == chrf.score
    version = sacrebleu.__version__
    assert scores["bleu_signature"] == (
        f"nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:{version}"
    )
    assert scores["chrf_signature"] == (
        f"nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:{version}"
    )
    assert corpus_scores(REFERENCES, REFERENCES)["bleu"] == pytest.approx(100)


def test_bleu_by_length_scores_each_bucket_of_source_words():
    sources = [
        " ".join(["w"] * n) for n in (10, 11, 20, 35)
    ]  # Buckets 1-10, 11-20, 11-20, 31-40; 21-30 is empty.
    buckets = bleu_by_length(sources, HYPOTHESES, REFERENCES)
    assert [
        (b["min_length"], b["max_length"], b["num_sentences"]) for b in buckets
    ] == [(1, 10, 1), (11, 20, 2), (31, 40, 1)]
    assert buckets[0]["bleu"] == pytest.approx(100)
    assert buckets[1]["bleu"] == (
        sacrebleu.corpus_bleu(HYPOTHESES[1:3], [REFERENCES[1:3]]).score
    )
    wide = bleu_by_length(["", *sources[1:]], HYPOTHESES, REFERENCES, 40)
    assert [b["num_sentences"] for b in wide] == [4]  # "" counts in 1-40.


@pytest.mark.parametrize(
    "hypotheses, references, message",
    [
        (HYPOTHESES, REFERENCES[:2], "4 hypotheses and 2 references"),
        ([], [], "empty"),
        ("The house.", "The house.", "not str"),
        ([None], ["The house."], "element None"),
    ],
)
def test_corpus_scores_reject_bad_inputs(hypotheses, references, message):
    with pytest.raises(ValueError, match=message):
        corpus_scores(hypotheses, references)


def test_bleu_by_length_rejects_bad_inputs():
    with pytest.raises(ValueError, match="3 sources and 4 hypotheses"):
        bleu_by_length(["a"] * 3, HYPOTHESES, REFERENCES)
    with pytest.raises(ValueError, match="bucket_width=0"):
        bleu_by_length(["a"] * 4, HYPOTHESES, REFERENCES, bucket_width=0)
