import json
import shutil

from keras_bahdanau import cli
from keras_bahdanau import evaluation
from keras_bahdanau.commands import demo
from keras_bahdanau.translator import Translator
from tests.run_fixture import PAIRS


def test_demo_trains_once_then_translates_plots_exports_and_records(
    run_dir, tmp_path, monkeypatch, capsys
):
    """The built-in config with the `--set` overrides, trained once (a
    second run reuses the run), then the steps that follow training."""
    trained, exported = [], []

    def fake_train(config):
        trained.append(config)
        shutil.copytree(run_dir, config["run_dir"])
        (tmp_path / "run" / "results.json").write_text('{"test": {}}')

    def fake_export(preset, output):
        exported.append((preset, output))
        return f"{output}/1"

    monkeypatch.setattr(demo, "train", fake_train)
    monkeypatch.setattr(demo, "export_saved_model", fake_export)
    monkeypatch.setattr(evaluation, "load_corpus", lambda data: {"test": PAIRS})
    arguments = ["demo", "--set", f"run_dir={tmp_path / 'run'}"]
    arguments += ["--set", "training.epochs=2"]
    arguments += ["--saved-model", str(tmp_path / "saved")]
    arguments += ["--record", str(tmp_path / "record.json")]
    assert cli.main(arguments) == 0
    assert cli.main(arguments) == 0
    assert len(trained) == 1  # The second run reuses the trained run.
    assert "is already trained; reusing it" in capsys.readouterr().out
    (config,) = trained
    assert config["training"]["epochs"] == 2
    assert config["run_dir"] == str(tmp_path / "run")
    assert config["data"]["corpus"] == "ding_de_en"  # The built-in's.
    assert exported == [(tmp_path / "run", str(tmp_path / "saved"))] * 2
    # The first 5 test sentences, translated as the API translates them.
    sources = [source for source, _ in PAIRS[: demo.NUM_EXAMPLES]]
    expected = Translator.from_preset(run_dir).translate(sources)
    record = json.loads((tmp_path / "record.json").read_text())
    assert record["kind"] == "demo"
    (row,) = record["rows"]
    assert [t["translation"] for t in row["translations"]] == [
        t.text for t in expected
    ]
    plots = sorted(p.name for p in (tmp_path / "run" / "attention").iterdir())
    assert plots == [f"test_{i}.png" for i in range(demo.NUM_EXAMPLES)]
