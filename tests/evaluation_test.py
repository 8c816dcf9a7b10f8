import json
import shutil

import pytest

from keras_bahdanau import evaluation
from keras_bahdanau import run_directory as rd
from keras_bahdanau.decoding import SearchConfig
from keras_bahdanau.evaluation import evaluate
from keras_bahdanau.evaluation import evaluate_run
from keras_bahdanau.translator import Translator
from tests.run_fixture import PAIRS


def test_evaluate_run_scores_dev_and_test_into_results_json(
    run_dir, tmp_path, capsys
):
    run = shutil.copytree(run_dir, tmp_path / "run")  # Shared: not written.
    splits = {"dev": PAIRS[:3], "test": PAIRS[3:]}
    settings = {"beam_size": 5, "max_sentences": 5, "replace_unknown": True}
    results = evaluate_run(run, splits, settings)
    assert json.loads((run / rd.RESULTS).read_text()) == results
    translator = Translator.from_preset(run, max_source_length=None)
    for split, pairs in (("dev", PAIRS[:3]), ("test", PAIRS[3:8])):
        expected = evaluate(
            translator,
            [s for s, _ in pairs],
            [t for _, t in pairs],
            # The run's search (tests/run_fixture.py: beam 5, alpha 0).
            SearchConfig(beam_size=5, length_penalty=0.0),
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
    assert "(5 sentences, beam 5, unknown words replaced; " in output[1]


def test_translate_examples_translates_and_plots_the_first_test_pairs(
    run_dir, tmp_path, monkeypatch
):
    monkeypatch.setattr(evaluation, "load_corpus", lambda data: {"test": PAIRS})
    config = {"data": {}, "evaluation": {"beam_size": 5}}
    plots = tmp_path / "plots"  # The shared run directory is not written.
    examples = evaluation.translate_examples(run_dir, config, 2, plots)
    expected = Translator.from_preset(run_dir).translate(
        [source for source, _ in PAIRS[:2]], SearchConfig(beam_size=5)
    )
    assert examples == [
        {"source": source, "reference": reference, "translation": t.text}
        for (source, reference), t in zip(PAIRS[:2], expected, strict=True)
    ]
    assert sorted(path.name for path in plots.iterdir()) == [
        "test_0.png",
        "test_1.png",
    ]
