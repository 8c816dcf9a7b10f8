"""Loading run directories: damaged, incompatible and unsafe ones.

Each test copies the session's tiny run directory (tests/run_fixture.py),
damages one file the way a failed copy, a full disk, a mix-up or a hostile
sender would, and checks that `load_run` (and `check_run`, and the
`Translator` built on them) fails with an error that names the file and
what to do, never with a backend or zipfile traceback, and never by
running code from the model file.
"""

import json
import pathlib
import shutil
import zipfile

import keras
import numpy as np
import pytest

from keras_bahdanau import run_directory as rd
from keras_bahdanau.data import WordTokenizer
from keras_bahdanau.translator import Translator
from tests.run_fixture import shared_run_dir


@pytest.fixture(scope="module")
def original(tmp_path_factory):
    return shared_run_dir(tmp_path_factory)


@pytest.fixture
def run_dir(original, tmp_path):
    """A private copy of the run directory, free to damage."""
    return pathlib.Path(shutil.copytree(original, tmp_path / "run"))


def refused(run_dir, error=rd.RunDirectoryError, match=None):
    """Asserts that both `check_run` and `load_run` raise `error`."""
    for load in (rd.check_run, rd.load_run):
        with pytest.raises(error, match=match) as caught:
            load(run_dir)
        # Not chained to the zipfile/h5py/JSON error: the traceback shows
        # only the clear one.
        assert caught.value.__cause__ is None
        assert caught.value.__suppress_context__ or (
            caught.value.__context__ is None
        )
    return str(caught.value)


def rewrite_archive(path, change):
    """Rewrites the `.keras` zip at `path` with `change(name, data)`."""
    with zipfile.ZipFile(path) as archive:
        members = [(i, archive.read(i.filename)) for i in archive.infolist()]
    with zipfile.ZipFile(path, "w") as archive:
        for info, data in members:
            archive.writestr(info, change(info.filename, data))


def give_run_sizes(path, run_dir):
    """Gives the model file at `path` the run's vocabulary sizes.

    So that every check before deserialization passes: the archive's
    config then claims the sizes of the run's vocabularies.
    """
    with zipfile.ZipFile(run_dir / rd.BEST_MODEL) as archive:
        run_config = json.loads(archive.read("config.json"))["config"]

    def add_sizes(name, data):
        if name != "config.json":
            return data
        config = json.loads(data)
        for side in ("source", "target"):
            key = f"{side}_vocabulary_size"
            config["config"][key] = run_config[key]
        return json.dumps(config)

    rewrite_archive(path, add_sizes)


def test_an_intact_copy_loads(run_dir):
    model, source, target, config = rd.load_run(run_dir)
    assert config["format_version"] == rd.FORMAT_VERSION
    assert model.source_vocabulary_size == source.vocabulary_size
    assert model.target_vocabulary_size == target.vocabulary_size
    checked, checked_source, _ = rd.check_run(run_dir)
    assert checked == config
    assert checked_source.get_vocabulary() == source.get_vocabulary()


@pytest.mark.parametrize(
    "damage",
    ["truncated", "garbage", "empty", "flipped_byte"],
)
def test_a_damaged_model_file_is_named(run_dir, damage):
    path = run_dir / rd.BEST_MODEL
    data = path.read_bytes()
    if damage == "truncated":  # An interrupted copy.
        path.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        path.write_bytes(np.random.default_rng(0).bytes(len(data)))
    elif damage == "empty":  # A full disk.
        path.write_bytes(b"")
    else:  # One bit flipped inside the weights: only a checksum sees it.
        with zipfile.ZipFile(path) as archive:
            info = archive.getinfo("model.weights.h5")
        # The member's data starts after its 30-byte local header + name.
        offset = info.header_offset + 30 + len(info.filename) + 64
        data = bytearray(data)
        data[offset] ^= 0x01
        path.write_bytes(bytes(data))
    message = refused(run_dir, match="truncated or corrupted")
    assert str(path) in message
    assert "--checkpoint" in message  # What to do.
    # The other checkpoint is intact and still loads.
    model, *_ = rd.load_run(run_dir, checkpoint="last")
    assert model.name


def test_a_model_file_without_weights_is_named(run_dir):
    path = run_dir / rd.BEST_MODEL
    with zipfile.ZipFile(path) as archive:
        members = {n: archive.read(n) for n in archive.namelist()}
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            if name != "model.weights.h5":
                archive.writestr(name, data)
    message = refused(run_dir, match=r"lacks \['model.weights.h5'\]")
    assert str(path) in message


def test_a_decompression_bomb_is_refused_unread(run_dir):
    path = run_dir / rd.BEST_MODEL
    # 8 MiB of zeros deflate to ~8 KiB: Keras itself stores members
    # uncompressed, so such a ratio only comes from a crafted file.
    with zipfile.ZipFile(path, "a", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("assets/zeros", bytes(8 << 20))
    message = refused(run_dir, match="decompression bomb")
    assert "assets/zeros (8388608 bytes stored in" in message
    assert str(path) in message


def test_a_missing_model_file_says_what_to_do(run_dir):
    (run_dir / rd.BEST_MODEL).unlink()
    message = refused(run_dir, FileNotFoundError, match="best model")
    assert "Did training finish at least one epoch?" in message


@pytest.mark.parametrize(
    "version, match",
    [
        (999, r"run format 999.*reads run format 1 only. Upgrade"),
        (None, r"has no `format_version`.*older.*Train it again"),
        ("1", r"unknown `format_version`: '1'"),
        (True, r"unknown `format_version`: True"),
    ],
)
def test_an_incompatible_run_format_is_refused(run_dir, version, match):
    path = run_dir / rd.CONFIG
    config = json.loads(path.read_text())
    if version is None:  # A run written before formats were versioned.
        del config["format_version"]
    else:
        config["format_version"] = version
    path.write_text(json.dumps(config))
    message = refused(run_dir, match=match)
    assert str(path) in message
    with pytest.raises(rd.RunDirectoryError, match=match):
        rd.read_config(run_dir)
    with pytest.raises(rd.RunDirectoryError, match=match):
        Translator.from_run_dir(run_dir)


@pytest.mark.parametrize("text", ['{"format_version": 1', "[1, 2]", b"\xff"])
def test_a_damaged_config_is_named(run_dir, text):
    path = run_dir / rd.CONFIG
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    message = refused(run_dir, match="is damaged")
    assert str(path) in message


def test_a_missing_config_means_not_a_run_directory(run_dir):
    (run_dir / rd.CONFIG).unlink()
    refused(run_dir, FileNotFoundError, match="is not a run directory")


def test_swapped_vocabularies_do_not_belong_to_the_model(run_dir):
    source = run_dir / rd.SOURCE_VOCABULARY
    target = run_dir / rd.TARGET_VOCABULARY
    sizes = [WordTokenizer.load(p).vocabulary_size for p in (source, target)]
    assert sizes[0] != sizes[1]  # Else the swap could not be seen.
    source.rename(run_dir / "swap")
    target.rename(source)
    (run_dir / "swap").rename(target)
    message = refused(run_dir, match="does not belong to this model")
    assert f"The source vocabulary {source} has {sizes[1]} tokens" in message
    assert f"model expects {sizes[0]}" in message


def test_a_vocabulary_of_another_size_does_not_belong(run_dir):
    path = run_dir / rd.TARGET_VOCABULARY / "vocabulary.txt"
    lines = path.read_text("utf-8").splitlines(keepends=True)
    path.write_text("".join(lines[:-2]), "utf-8")  # Two words lost.
    refused(run_dir, match=f"target vocabulary {path.parent} has")


@pytest.mark.parametrize(
    "file, content, error, match",
    [
        ("tokenizer.json", None, FileNotFoundError, "is incomplete"),
        ("vocabulary.txt", None, FileNotFoundError, "is incomplete"),
        ("tokenizer.json", b"{not json", rd.RunDirectoryError, "damaged"),
        ("tokenizer.json", b"{}", rd.RunDirectoryError, "damaged"),
        ("vocabulary.txt", b"\xff\xfe", rd.RunDirectoryError, "damaged"),
        ("vocabulary.txt", b"a\nb\n", rd.RunDirectoryError, "must start"),
    ],
)
def test_a_damaged_vocabulary_is_named(run_dir, file, content, error, match):
    folder = run_dir / rd.SOURCE_VOCABULARY
    if content is None:
        (folder / file).unlink()
    else:
        (folder / file).write_bytes(content)
    message = refused(run_dir, error, match=match)
    assert str(folder) in message
    assert "Copy the run directory again" in message


def test_a_missing_vocabulary_folder_is_named(run_dir):
    shutil.rmtree(run_dir / rd.TARGET_VOCABULARY)
    message = refused(run_dir, FileNotFoundError, match="is missing")
    assert str(run_dir / rd.TARGET_VOCABULARY) in message


def lambda_model():
    # Python bytecode in the model file, run when the layer is rebuilt: it
    # writes `lambda_ran` in the current folder.
    return keras.Sequential(
        [
            keras.Input((3,)),
            keras.layers.Lambda(
                lambda x: (
                    __import__("pathlib").Path("lambda_ran").write_text("!")
                    and x
                )
            ),
        ]
    )


def test_a_model_file_with_code_is_refused_unrun(
    run_dir, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    unsafe = tmp_path / "unsafe.keras"
    lambda_model().save(unsafe)
    (tmp_path / "lambda_ran").unlink()  # Written when the model was built.
    give_run_sizes(unsafe, run_dir)
    shutil.copy(unsafe, run_dir / rd.BEST_MODEL)
    rd.check_run(run_dir)  # Intact archive, matching sizes...
    with pytest.raises(rd.RunDirectoryError) as caught:
        rd.load_run(run_dir)  # ...but code: refused.
    message = str(caught.value)
    assert str(run_dir / rd.BEST_MODEL) in message
    assert "asks to run Python code" in message
    assert "docs/security.md" in message
    assert not (tmp_path / "lambda_ran").exists()
    # The payload is live: without safe_mode it runs when loaded.
    keras.saving.load_model(unsafe, safe_mode=False)
    assert (tmp_path / "lambda_ran").read_text() == "!"


def test_a_class_outside_keras_is_not_imported(run_dir):
    def point_at_os(name, data):
        if name != "config.json":
            return data
        config = json.loads(data)
        config.update(module="os", class_name="system", registered_name=None)
        return json.dumps(config)

    rewrite_archive(run_dir / rd.BEST_MODEL, point_at_os)
    with pytest.raises(rd.RunDirectoryError) as caught:
        rd.load_run(run_dir)
    message = str(caught.value)
    assert "could not be loaded as a keras_bahdanau model" in message
    assert "Could not locate class 'system'" in message
    assert len(message) < 1000  # Not the whole config.


def test_a_model_that_is_not_a_translation_model_is_refused(run_dir, tmp_path):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    path = tmp_path / "dense.keras"
    model.save(path)
    sized = tmp_path / "sized.keras"
    shutil.copy(path, sized)
    give_run_sizes(sized, run_dir)  # Sequential ignores the extra keys.
    shutil.copy(path, run_dir / rd.BEST_MODEL)
    refused(run_dir, match="is not a keras_bahdanau translation model")
    shutil.copy(sized, run_dir / rd.BEST_MODEL)
    with pytest.raises(rd.RunDirectoryError, match="not a translation model"):
        rd.load_run(run_dir)


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


def test_save_run_writes_a_run_that_loads_back(original, tmp_path):
    model, source, target, _ = rd.load_run(original)
    rd.save_run(
        tmp_path / "mine", model, source, target, {"data": {"max_length": 7}}
    )
    loaded, loaded_source, loaded_target, config = rd.load_run(
        tmp_path / "mine", checkpoint="last"
    )
    for saved, read in zip(model.weights, loaded.weights, strict=True):
        np.testing.assert_array_equal(
            keras.ops.convert_to_numpy(saved), keras.ops.convert_to_numpy(read)
        )
    assert loaded_source.get_vocabulary() == source.get_vocabulary()
    assert loaded_target.get_vocabulary() == target.get_vocabulary()
    assert config["data"] == {"max_length": 7}
    assert config["format_version"] == rd.FORMAT_VERSION
    assert Translator.from_run_dir(tmp_path / "mine").max_source_length == 7
