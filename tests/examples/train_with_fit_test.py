"""examples/train_with_fit.py end to end on a toy corpus (the public API)."""

import importlib.util
import pathlib

import numpy as np

from keras_bahdanau.translator import Translator
from tests.run_fixture import reversal_corpus

_SCRIPT = pathlib.Path(__file__).parents[2] / "examples" / "train_with_fit.py"
_spec = importlib.util.spec_from_file_location("train_with_fit", _SCRIPT)
train_with_fit = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(train_with_fit)


def test_trains_translates_and_exports(tmp_path, capsys):
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(12)]
    sources = [
        " ".join(rng.choice(words, rng.integers(1, 6))) for _ in range(160)
    ]
    reversal_corpus(tmp_path, sources)
    run_dir = tmp_path / "run"
    train_with_fit.main(
        [
            f"--source={tmp_path / 'train.src'}",
            f"--target={tmp_path / 'train.tgt'}",
            f"--run-dir={run_dir}",
            "--epochs=8",
            "--tokenizer=word",
            "--vocabulary-size=100",
            "--dim=16",
            "--batch-size=8",
            "--learning-rate=0.02",
        ]
    )
    lines = capsys.readouterr().out.splitlines()
    # Five dev sentences, each followed by its translation, then the
    # SavedModel's path.
    dev_sources, arrows = lines[-11:-1:2], lines[-10:-1:2]
    assert all(line.startswith("  -> ") for line in arrows)
    printed = [line.removeprefix("  -> ") for line in arrows]
    assert pathlib.Path(lines[-1]) == run_dir / "saved_model" / "1"
    assert (run_dir / "saved_model" / "1" / "saved_model.pb").is_file()
    assert (run_dir / "training_log.csv").is_file()
    # The preset it wrote translates as the trained model did.
    reloaded = Translator.from_preset(run_dir / "preset")
    assert [t.text for t in reloaded.translate(dev_sources)] == printed
    assert any(printed), "all translations empty: nothing compared"
