"""Trained models as presets: `Translator.save_to_preset` / `from_preset`."""

import json
import shutil

import keras
import numpy as np
import pytest

from keras_bahdanau import presets
from keras_bahdanau import run_directory
from keras_bahdanau.decoding import SearchConfig
from keras_bahdanau.run_directory import RunDirectoryError
from keras_bahdanau.translator import Translator
from tests.run_fixture import PAIRS
from tests.run_fixture import build_run_dir

SEARCH = SearchConfig(beam_size=2, max_length=10)
SOURCES = [source for source, _ in PAIRS]


@pytest.fixture(scope="module")
def preset(run_dir, tmp_path_factory):
    translator = Translator.from_run_dir(run_dir, search=SEARCH)
    return translator.save_to_preset(tmp_path_factory.mktemp("p") / "preset")


def test_a_preset_has_keras_hub_s_layout(preset, run_dir):
    names = sorted(
        str(p.relative_to(preset)) for p in preset.rglob("*") if p.is_file()
    )
    assert [n for n in names if not n.startswith("assets/")] == [
        "config.json",
        "metadata.json",
        "model.weights.h5",
        "translator.json",
    ]
    assert {n.split("/")[1] for n in names if n.startswith("assets/")} == {
        "source_vocabulary",
        "target_vocabulary",
    }
    metadata = json.loads((preset / "metadata.json").read_text())
    model, *_ = run_directory.load_run(run_dir)
    assert metadata["model"] == "RNNSearch"
    assert metadata["parameter_count"] == model.count_params()
    assert metadata["format_version"] == presets.FORMAT_VERSION
    assert metadata["backend"] == keras.backend.backend()
    config = json.loads((preset / "config.json").read_text())
    assert config["config"]["source_vocabulary_size"] == (
        model.source_vocabulary_size
    )
    settings = json.loads((preset / "translator.json").read_text())
    assert settings["search"]["beam_size"] == 2
    assert settings["search"]["max_length"] == 10


def test_a_preset_translates_as_its_run(preset, run_dir):
    original = Translator.from_run_dir(run_dir)
    loaded = Translator.from_preset(preset)
    assert loaded.search == SEARCH  # Saved with the translator.
    assert loaded.max_source_length == original.max_source_length
    for a, b in zip(original.model.weights, loaded.model.weights, strict=True):
        np.testing.assert_array_equal(np.array(a), np.array(b))
    expected = original.translate(SOURCES, SEARCH, return_attention=True)
    results = loaded.translate(SOURCES, return_attention=True)
    assert [r.text for r in results] == [e.text for e in expected]
    np.testing.assert_allclose(
        [r.score for r in results], [e.score for e in expected], atol=1e-5
    )
    np.testing.assert_allclose(
        results[-1].attention, expected[-1].attention, atol=1e-5
    )


def test_generate_returns_the_best_texts(preset):
    translator = Translator.from_preset(preset)
    texts = translator.generate(SOURCES[:3])
    assert texts == [t.text for t in translator.translate(SOURCES[:3])]
    assert translator.generate(SOURCES[0]) == texts[0]
    short = translator.generate(SOURCES[:3], max_length=2)
    for result in translator.translate(
        SOURCES[:3], SearchConfig(beam_size=2, max_length=2)
    ):
        assert result.text in short and len(result.target_tokens) <= 2


def test_from_preset_reads_run_directories_and_overrides(run_dir):
    translator = Translator.from_preset(
        run_dir, checkpoint="last", search=SEARCH, max_source_length=4
    )
    assert translator.search == SEARCH and translator.max_source_length == 4
    # The run's own search: its evaluation settings.
    config = run_directory.read_config(run_dir)
    assert Translator.from_preset(run_dir).search == SearchConfig(
        beam_size=config["evaluation"]["beam_size"],
        length_penalty=config["evaluation"].get("length_penalty", 0.0),
    )


def test_a_pervasive_attention_preset_round_trips(tmp_path):
    run = build_run_dir(tmp_path / "run", architecture="pervasive_attention")
    original = Translator.from_run_dir(run, search=SEARCH)
    loaded = Translator.from_preset(original.save_to_preset(tmp_path / "p"))
    assert type(loaded.model).__name__ == "PervasiveAttention"
    assert loaded.generate(SOURCES) == original.generate(SOURCES)


def test_bad_presets_raise_clear_errors(preset, tmp_path):
    with pytest.raises(FileNotFoundError, match="RNNSearch.from_preset"):
        Translator.from_preset("rnnsearch_tiny")
    with pytest.raises(FileNotFoundError, match="neither a preset folder"):
        Translator.from_preset(tmp_path)
    translator = Translator.from_preset(preset)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(FileExistsError, match="not an empty folder"):
        translator.save_to_preset(tmp_path / "full")

    def damaged(name, change):
        copy = shutil.copytree(preset, tmp_path / name)
        change(copy)
        return copy

    no_weights = damaged("w", lambda p: (p / "model.weights.h5").unlink())
    with pytest.raises(FileNotFoundError, match="model.weights.h5"):
        Translator.from_preset(no_weights)

    def newer(path):
        metadata = json.loads((path / "metadata.json").read_text())
        metadata["format_version"] = presets.FORMAT_VERSION + 1
        (path / "metadata.json").write_text(json.dumps(metadata))

    with pytest.raises(RunDirectoryError, match="preset format 2"):
        Translator.from_preset(damaged("v", newer))

    def lambda_model(path):
        config = {
            "module": "keras.layers",
            "class_name": "Lambda",
            "config": {"function": "lambda x: x", "name": "l"},
            "registered_name": None,
        }
        (path / "config.json").write_text(json.dumps(config))

    with pytest.raises(RunDirectoryError, match="could not be loaded|code"):
        Translator.from_preset(damaged("l", lambda_model))

    def other_vocabulary(path):
        target = path / "assets" / "target_vocabulary"
        shutil.rmtree(target)
        shutil.copytree(path / "assets" / "source_vocabulary", target)

    with pytest.raises(RunDirectoryError, match="does not belong"):
        Translator.from_preset(damaged("t", other_vocabulary))


def test_an_interrupted_save_leaves_no_preset(preset, tmp_path, monkeypatch):
    translator = Translator.from_preset(preset)

    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(translator.target_tokenizer, "save", fail)
    with pytest.raises(OSError, match="disk full"):
        translator.save_to_preset(tmp_path / "preset")
    assert list(tmp_path.iterdir()) == []


def test_the_top_level_names_the_task_api():
    import keras_bahdanau
    from keras_bahdanau.config import resolve_config
    from keras_bahdanau.trainer import train

    assert keras_bahdanau.Translator is Translator
    assert keras_bahdanau.SearchConfig is SearchConfig
    assert keras_bahdanau.train is train
    assert keras_bahdanau.resolve_config is resolve_config
