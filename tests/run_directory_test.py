"""The run directory's own files: the training config, atomic writes.

What a run directory shares with every preset (its model, vocabularies
and settings, damaged or not) is tests/presets_test.py's.
"""

import json
import pathlib

import keras
import pytest

from keras_bahdanau import run_directory as rd

RELEASE_0_2_0 = pathlib.Path(__file__).parent / "fixtures" / "release_0_2_0"


def test_the_training_config_is_stamped_and_read_back(tmp_path):
    config = {"data": {"max_length": 7}, "parameters": 12}
    rd.write_training_config(tmp_path, config)
    saved = json.loads((tmp_path / "training_config.json").read_text())
    assert saved == {
        **config,
        "keras_bahdanau_version": saved["keras_bahdanau_version"],
        "backend": keras.backend.backend(),
        "keras_version": keras.__version__,
    }
    assert rd.read_training_config(tmp_path) == saved
    assert rd.training_max_length(saved) == 7


def test_a_preset_has_no_training_config_and_release_0_2_0_its_own(
    run_dir, tmp_path
):
    assert rd.read_training_config(run_dir)["data"]["max_length"] == 12
    (tmp_path / "metadata.json").write_text("{}")  # a save_to_preset folder
    (tmp_path / "config.json").write_text('{"class_name": "RNNSearch"}')
    assert rd.read_training_config(tmp_path) is None
    # keras_bahdanau 0.2.0 wrote it as config.json.
    old = rd.read_training_config(RELEASE_0_2_0 / "run")
    assert old["format_version"] == 1
    assert old["evaluation"]["length_penalty"] == 0.6


@pytest.mark.parametrize("text", ['{"data": 1', "[1, 2]", b"\xff"])
def test_a_damaged_training_config_is_named(tmp_path, text):
    path = tmp_path / "training_config.json"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    with pytest.raises(rd.RunDirectoryError, match="is damaged") as caught:
        rd.read_training_config(tmp_path)
    assert str(path) in str(caught.value)


def test_a_failed_write_leaves_the_file_as_it_was(tmp_path):
    path = tmp_path / "results.json"
    rd.atomic_write_text(path, "old")

    def half_then_full(file):
        file.write_text("ne")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        rd.atomic_write(path, half_then_full)
    assert path.read_text() == "old"
    rd.atomic_write_text(path, "new")
    assert path.read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]
