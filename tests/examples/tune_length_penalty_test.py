"""examples/tune_length_penalty.py on a tiny run directory."""

import importlib.util
import json
import pathlib
import warnings

from keras_bahdanau import run_directory
from keras_bahdanau.config import resolve_config
from tests.run_fixture import MAX_LENGTH
from tests.run_fixture import build_run_dir
from tests.run_fixture import reversal_corpus

_SCRIPT = (
    pathlib.Path(__file__).parents[2] / "examples" / "tune_length_penalty.py"
)
_spec = importlib.util.spec_from_file_location("tune_length_penalty", _SCRIPT)
tune_length_penalty = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tune_length_penalty)


def test_dev_sentences_are_translated_whole_at_every_alpha(tmp_path):
    run_dir = build_run_dir(tmp_path / "run")
    # A corpus whose sentences are longer than the run's training limit.
    words = ["Das", "Haus", "ist", "klein", "groß", "Hund", "Katze"]
    # Distinct sentences (the split hashes each pair), 13 to 17 tokens.
    sources = [
        f"n{i} "
        + " ".join(
            words[(i + j) % len(words)] for j in range(MAX_LENGTH + i % 5)
        )
        for i in range(200)
    ]
    overrides = reversal_corpus(tmp_path, sources)
    config = json.loads((run_dir / run_directory.TRAINING_CONFIG).read_text())
    config["data"] = {
        **resolve_config(overrides=overrides)["data"],
        "max_length": MAX_LENGTH,  # The run's, below the sentences'.
    }
    (run_dir / run_directory.TRAINING_CONFIG).write_text(json.dumps(config))
    with warnings.catch_warnings():
        # A source cut at the training limit would warn.
        warnings.filterwarnings("error", message=".*max_source_length")
        result = tune_length_penalty.tune(run_dir, [0.0, 1.0], 2, 0)
    assert result["sentences"] >= 1
    assert [row["alpha"] for row in result["alphas"]] == [0.0, 1.0]
    for row in result["alphas"]:
        assert 0.0 <= row["bleu"] <= 100.0
        assert row["length_ratio"] > 0.0
    best = max(result["alphas"], key=lambda row: row["bleu"])
    assert result["best_alpha"] == best["alpha"]
