import json
import shutil

import pytest
import sacrebleu

from keras_bahdanau import run_directory as rd
from keras_bahdanau.decoding import SearchConfig
from keras_bahdanau.evaluation import bleu_by_length
from keras_bahdanau.evaluation import corpus_scores
from keras_bahdanau.evaluation import evaluate
from keras_bahdanau.evaluation import evaluate_run
from keras_bahdanau.translator import Translator
from tests.run_fixture import PAIRS

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


def test_evaluate_run_scores_dev_and_test_into_results_json(
    run_dir, tmp_path, capsys
):
    run = shutil.copytree(run_dir, tmp_path / "run")  # Shared: not written.
    splits = {"dev": PAIRS[:3], "test": PAIRS[3:]}
    settings = {"beam_size": 2, "max_sentences": 5, "replace_unknown": True}
    results = evaluate_run(run, splits, settings)
    assert json.loads((run / rd.RESULTS).read_text()) == results
    translator = Translator.from_run_dir(run, max_source_length=None)
    for split, pairs in (("dev", PAIRS[:3]), ("test", PAIRS[3:8])):
        expected = evaluate(
            translator,
            [s for s, _ in pairs],
            [t for _, t in pairs],
            SearchConfig(beam_size=2),
            replace_unknown=True,  # Word tokenizers.
        )
        timing = {
            k: results[split].pop(k) for k in ("seconds", "ms_per_sentence")
        }
        assert results[split] == {
            **{key: expected[key] for key in ("bleu", "chrf")},
            "bleu_signature": expected["bleu_signature"],
            "chrf_signature": expected["chrf_signature"],
            "sentences": len(pairs),
        }
        assert timing["seconds"] > 0
        # Both rounded to 2 decimals: seconds by up to 5 ms.
        assert timing["ms_per_sentence"] == pytest.approx(
            1000 * timing["seconds"] / len(pairs), abs=5 / len(pairs) + 0.01
        )
    output = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in output] == ["[dev]", "[test]"]
    assert "(5 sentences, beam 2, unknown words replaced; " in output[1]
