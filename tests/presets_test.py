"""The one format of a trained model, and the older one it still reads.

Presets written by `Translator.save_to_preset` and by training (the tiny
run directory of tests/run_fixture.py) load back and translate as they
were saved; damaged, incompatible and unsafe ones fail with an error that
names the file and what to do, never with a backend, h5py or zipfile
traceback, and never by running code. A run directory written by
keras_bahdanau 0.2.0 (tests/fixtures/release_0_2_0, built by its
`build.py` with that release) translates as that release translated it.
"""

import json
import pathlib
import shutil
import zipfile

import keras
import numpy as np
import pytest

from keras_bahdanau import cli
from keras_bahdanau import presets
from keras_bahdanau.data import WordTokenizer
from keras_bahdanau.decoding import SearchConfig
from keras_bahdanau.decoding import SearchResult
from keras_bahdanau.decoding import beam_search
from keras_bahdanau.models import RNNEncDec
from keras_bahdanau.models import RNNSearch
from keras_bahdanau.preprocessor import TranslationPreprocessor
from keras_bahdanau.run_directory import RunDirectoryError
from keras_bahdanau.translator import Translator
from tests.run_fixture import MAX_LENGTH
from tests.run_fixture import PAIRS
from tests.run_fixture import build_run_dir

SEARCH = SearchConfig(beam_size=2, max_length=10)
SOURCES = [source for source, _ in PAIRS]
RELEASE_0_2_0 = pathlib.Path(__file__).parent / "fixtures" / "release_0_2_0"


@pytest.fixture(scope="module")
def preset(translator, tmp_path_factory):
    changed = Translator(
        translator.model,
        TranslationPreprocessor(*translator.preprocessor.tokenizers, 7),
        bucket_width=4,
        search=SEARCH,
    )
    return changed.save_to_preset(tmp_path_factory.mktemp("p") / "preset")


@pytest.fixture
def copy(run_dir, tmp_path):
    """A private copy of the session's run directory, free to damage."""
    return pathlib.Path(shutil.copytree(run_dir, tmp_path / "run"))


@pytest.fixture
def old_run(tmp_path):
    """A private copy of the run directory of keras_bahdanau 0.2.0."""
    return pathlib.Path(
        shutil.copytree(RELEASE_0_2_0 / "run", tmp_path / "old")
    )


def refused(path, error=RunDirectoryError, match=None, checkpoint="best"):
    """Asserts that `check_preset` and `load_preset` raise `error`, not
    chained to the h5py/zipfile/JSON error; returns the message."""
    for load in (presets.check_preset, presets.load_preset):
        with pytest.raises(error, match=match) as caught:
            load(path, checkpoint)
        assert caught.value.__cause__ is None
        assert caught.value.__suppress_context__ or (
            caught.value.__context__ is None
        )
    return str(caught.value)


def weights(model):
    return [keras.ops.convert_to_numpy(w) for w in model.weights]


def test_a_preset_has_keras_hub_s_layout(preset, translator):
    names = sorted(
        str(p.relative_to(preset)) for p in preset.rglob("*") if p.is_file()
    )
    assert names == [
        "assets/source_vocabulary/tokenizer.json",
        "assets/source_vocabulary/vocabulary.txt",
        "assets/target_vocabulary/tokenizer.json",
        "assets/target_vocabulary/vocabulary.txt",
        "config.json",
        "metadata.json",
        "model.weights.h5",
        "translator.json",
    ]
    metadata = json.loads((preset / "metadata.json").read_text())
    assert metadata["model"] == "RNNSearch"
    # 8-dimensional embeddings of both vocabularies, among others.
    sizes = [v.vocabulary_size for v in translator.preprocessor.tokenizers]
    assert metadata["parameter_count"] > 8 * sum(sizes)
    assert metadata["parameter_count"] == sum(
        w.size for w in weights(translator.model)
    )
    assert metadata["format_version"] == 1
    assert metadata["backend"] == keras.backend.backend()
    config = json.loads((preset / "config.json").read_text())
    assert config["class_name"] == "RNNSearch"
    assert config["config"]["source_vocabulary_size"] == sizes[0]
    assert "compile_config" not in config  # Weights and configs only.
    assert json.loads((preset / "translator.json").read_text()) == {
        "max_source_length": 7,
        "long_sources": "truncate",
        "bucket_width": 4,
        "search": {
            "beam_size": 2,
            "n_best": 1,
            "length_penalty": 0.0,
            "coverage_penalty": 0.0,
            "max_length": 10,
            "relative_max_length": None,
        },
    }


def test_a_preset_loads_back_as_it_was_saved(preset, translator):
    loaded = Translator.from_preset(preset)
    assert (loaded.search, loaded.bucket_width) == (SEARCH, 4)
    assert loaded.max_source_length == 7
    for a, b in zip(
        weights(translator.model), weights(loaded.model), strict=True
    ):
        np.testing.assert_array_equal(a, b)
    assert [v.get_vocabulary() for v in loaded.preprocessor.tokenizers] == [
        v.get_vocabulary() for v in translator.preprocessor.tokenizers
    ]
    # Loaded compiled, so that it trains on (see translator_test.py).
    assert loaded.model.compiled and loaded.model.optimizer is not None
    expected = translator.translate(SOURCES, SEARCH, return_attention=True)
    results = loaded.translate(SOURCES, return_attention=True)
    assert [r.text for r in results] == [e.text for e in expected]
    np.testing.assert_allclose(
        [r.score for r in results], [e.score for e in expected], atol=1e-5
    )
    overridden = Translator.from_preset(
        preset, max_source_length=None, long_sources="error", bucket_width=8
    )
    assert (overridden.max_source_length, overridden.long_sources) == (
        None,
        "error",
    )
    assert overridden.bucket_width == 8
    with pytest.raises(TypeError, match="beam_size"):
        Translator.from_preset(preset, beam_size=3)


def test_generate_is_the_best_hypothesis_of_the_search(preset):
    """Each sentence alone through `beam_search`, as `generate` must give
    it whatever its batching, sorting and padding."""
    translator = Translator.from_preset(preset)
    source, target = translator.preprocessor.tokenizers
    for max_length, texts in (
        (None, translator.generate(SOURCES[:4])),
        (3, translator.generate(SOURCES[:4], max_length=3)),
    ):
        config = (
            SEARCH
            if max_length is None
            else SearchConfig(beam_size=2, max_length=3)
        )
        for sentence, text in zip(SOURCES[:4], texts, strict=True):
            ids = source.tokenize([sentence]).to_tensor().numpy()
            result = SearchResult(*beam_search(translator.model, ids, config))
            best = np.asarray(result.token_ids)[0, 0]
            assert text == target.detokenize(best).numpy().decode()
    assert (
        translator.generate(SOURCES[0]) == translator.generate(SOURCES[:1])[0]
    )


def test_a_training_run_is_a_preset_with_its_training_state(run_dir):
    """Its search and length policy are those its config set."""
    translator = Translator.from_preset(run_dir)
    # tests/run_fixture.py trains with max_length 12, beam 5, alpha 0.
    assert translator.search == SearchConfig(beam_size=5, length_penalty=0.0)
    assert translator.max_source_length == MAX_LENGTH == 12
    best = presets.load_preset(run_dir, "best")[0]
    last = presets.load_preset(run_dir, "last")[0]
    for a, b in zip(weights(best), weights(last), strict=True):
        np.testing.assert_array_equal(a, b)  # The fixture saved one model.


def test_a_pervasive_attention_preset_round_trips(tmp_path):
    run = build_run_dir(tmp_path / "run", architecture="pervasive_attention")
    original = Translator.from_preset(run, search=SEARCH)
    loaded = Translator.from_preset(original.save_to_preset(tmp_path / "p"))
    assert type(loaded.model).__name__ == "PervasiveAttention"
    assert loaded.generate(SOURCES) == original.generate(SOURCES)


def test_a_model_class_loads_a_trained_preset(preset, translator):
    model = RNNSearch.from_preset(preset)
    for a, b in zip(weights(translator.model), weights(model), strict=True):
        np.testing.assert_array_equal(a, b)
    fresh = RNNSearch.from_preset(preset, load_weights=False)
    assert fresh.count_params() == model.count_params()
    assert any(
        not np.array_equal(a, b)
        for a, b in zip(weights(fresh), weights(model), strict=True)
    )
    with pytest.raises(ValueError, match="holds a RNNSearch, not a RNNEncDec"):
        RNNEncDec.from_preset(preset)
    with pytest.raises(ValueError, match="pass no constructor arguments"):
        RNNSearch.from_preset(preset, hidden_dim=4)
    with pytest.raises(ValueError, match="Available presets.*rnnsearch_50"):
        RNNSearch.from_preset("rnnsearch_500")


def test_the_preprocessor_of_a_preset(preset, tmp_path):
    preprocessor = TranslationPreprocessor.from_preset(preset)
    assert (preprocessor.max_source_length, preprocessor.long_sources) == (
        7,
        "truncate",
    )
    assert (
        TranslationPreprocessor.from_preset(
            preset, max_source_length=3
        ).max_source_length
        == 3
    )
    folder = tmp_path / "folder"
    TranslationPreprocessor(
        *preprocessor.tokenizers, 5, "error"
    ).save_to_preset(folder)
    assert json.loads((folder / "translator.json").read_text()) == {
        "max_source_length": 5,
        "long_sources": "error",
    }
    loaded = WordTokenizer.load(folder / "assets" / "target_vocabulary")
    assert loaded.get_vocabulary() == (
        preprocessor.target_tokenizer.get_vocabulary()
    )


def test_an_interrupted_save_leaves_no_preset(preset, tmp_path, monkeypatch):
    translator = Translator.from_preset(preset)

    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(translator.target_tokenizer, "save", fail)
    with pytest.raises(OSError, match="disk full"):
        translator.save_to_preset(tmp_path / "preset")
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(FileExistsError, match="not an empty folder"):
        translator.save_to_preset(tmp_path / "full")


# === Damaged, incompatible and unsafe presets ===


def test_what_is_not_a_preset_says_what_one_is(tmp_path):
    with pytest.raises(FileNotFoundError, match="RNNSearch.from_preset"):
        Translator.from_preset("rnnsearch_tiny")
    message = refused(tmp_path, FileNotFoundError, match="is not a preset")
    assert "metadata.json is missing" in message
    assert "save_to_preset" in message


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty"])
def test_damaged_weights_are_named(copy, damage):
    path = copy / "model.weights.h5"
    data = path.read_bytes()
    path.write_bytes(
        {
            "truncated": data[: len(data) // 2],  # An interrupted copy.
            "garbage": np.random.default_rng(0).bytes(len(data)),
            "empty": b"",  # A full disk.
        }[damage]
    )
    message = refused(copy, match="truncated or corrupted")
    assert str(path) in message and "--checkpoint" in message
    # The other checkpoint is intact and still loads.
    assert presets.load_preset(copy, "last")[0].count_params()


def test_missing_weights_say_what_to_do(copy, preset):
    (copy / "model.weights.h5").unlink()
    message = refused(copy, FileNotFoundError, match="No weights")
    assert "Did training finish at least one epoch?" in message
    refused(
        preset,
        FileNotFoundError,
        match="No last checkpoint",
        **{"checkpoint": "last"},
    )


@pytest.mark.parametrize("version", [2, None, "1", True])
def test_another_format_version_is_refused(copy, version):
    path = copy / "metadata.json"
    metadata = json.loads(path.read_text())
    metadata["format_version"] = version
    path.write_text(json.dumps(metadata))
    message = refused(copy, match=f"preset format {version!r}")
    assert "reads preset format 1" in message and str(path) in message


@pytest.mark.parametrize(
    "name, text",
    [
        ("metadata.json", '{"format_version": 1'),
        ("config.json", "[1, 2]"),
        ("translator.json", b"\xff"),
        ("translator.json", '{"search": {"beam_width": 3}}'),
        ("translator.json", '{"bucket": 3}'),
    ],
)
def test_a_damaged_json_file_is_named(copy, name, text):
    path = copy / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    assert str(path) in refused(copy, match="is damaged")


def test_swapped_vocabularies_do_not_belong_to_the_model(copy):
    source = copy / "assets" / "source_vocabulary"
    target = copy / "assets" / "target_vocabulary"
    sizes = [WordTokenizer.load(p).vocabulary_size for p in (source, target)]
    assert sizes[0] != sizes[1]  # Else the swap could not be seen.
    source.rename(copy / "swap")
    target.rename(source)
    (copy / "swap").rename(target)
    message = refused(copy, match="does not belong to this model")
    assert f"The source vocabulary {source} has {sizes[1]} tokens" in message
    assert f"model expects {sizes[0]}" in message


@pytest.mark.parametrize(
    "file, content, error, match",
    [
        ("tokenizer.json", None, FileNotFoundError, "is incomplete"),
        ("vocabulary.txt", None, FileNotFoundError, "is incomplete"),
        ("tokenizer.json", b"{not json", RunDirectoryError, "damaged"),
        ("tokenizer.json", b"{}", RunDirectoryError, "damaged"),
        ("vocabulary.txt", b"\xff\xfe", RunDirectoryError, "damaged"),
        ("vocabulary.txt", b"a\nb\n", RunDirectoryError, "must start"),
        ("vocabulary.txt", "two lost", RunDirectoryError, "does not belong"),
    ],
)
def test_a_damaged_vocabulary_is_named(copy, file, content, error, match):
    folder = copy / "assets" / "source_vocabulary"
    if content is None:
        (folder / file).unlink()
    elif content == "two lost":
        lines = (folder / file).read_text("utf-8").splitlines(keepends=True)
        (folder / file).write_text("".join(lines[:-2]), "utf-8")
    else:
        (folder / file).write_bytes(content)
    message = refused(copy, error, match=match)
    assert str(folder) in message
    shutil.rmtree(folder)
    refused(copy, FileNotFoundError, match="is missing")


def lambda_model():
    # Python bytecode in the model's config, run when the layer is
    # rebuilt: it writes `lambda_ran` in the current folder.
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


def with_sizes(config, model_config):
    """`config` claiming the vocabulary sizes of `model_config` (a
    translation model's), so that every check before the model is built
    passes."""
    for key in ("source_vocabulary_size", "target_vocabulary_size"):
        config["config"][key] = model_config["config"][key]
    return config


def test_a_model_config_with_code_is_refused_unrun(copy, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = keras.saving.serialize_keras_object(lambda_model())
    (tmp_path / "lambda_ran").unlink()  # Written when the model was built.
    run = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps(with_sizes(config, run)))
    presets.check_preset(copy)  # Whole files, matching sizes...
    with pytest.raises(RunDirectoryError) as caught:
        Translator.from_preset(copy)  # ...but code: refused.
    message = str(caught.value)
    assert "asks to run Python code" in message
    assert "docs/security.md" in message
    assert not (tmp_path / "lambda_ran").exists()
    # The payload is live: without safe_mode it runs when rebuilt.
    keras.saving.deserialize_keras_object(config, safe_mode=False)
    assert (tmp_path / "lambda_ran").read_text() == "!"


def test_a_class_outside_keras_is_not_imported(copy):
    config = json.loads((copy / "config.json").read_text())
    config.update(module="os", class_name="system", registered_name=None)
    (copy / "config.json").write_text(json.dumps(config))
    with pytest.raises(RunDirectoryError) as caught:
        presets.load_preset(copy)
    message = str(caught.value)
    assert "could not be loaded as a keras_bahdanau model" in message
    assert "Could not locate class 'system'" in message
    assert len(message) < 1000  # Not the whole config.


def test_a_model_that_is_not_a_translation_model_is_refused(copy):
    dense = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    config = keras.saving.serialize_keras_object(dense)
    run = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps(config))
    refused(copy, match="is not a keras_bahdanau translation model")
    (copy / "config.json").write_text(json.dumps(with_sizes(config, run)))
    with pytest.raises(RunDirectoryError, match="could not be loaded|not a"):
        presets.load_preset(copy)


# === Run directories of keras_bahdanau 0.2.0 ===


def test_a_run_of_release_0_2_0_translates_as_that_release_did(old_run):
    expected = json.loads((RELEASE_0_2_0 / "expected.json").read_text())
    for checkpoint in ("best", "last"):
        translator = Translator.from_preset(old_run, checkpoint)
        # Its config's max_length and [evaluation] search, as 0.2.0's
        # `Translator.from_run_dir` read them (build.py set them).
        assert translator.max_source_length == 12
        assert translator.search == SearchConfig(
            beam_size=5, length_penalty=0.6
        )
        results = translator.translate(expected["sentences"])
        assert [r.text for r in results] == [
            e["text"] for e in expected[checkpoint]
        ]
        np.testing.assert_allclose(
            [r.score for r in results],
            [e["score"] for e in expected[checkpoint]],
            atol=1e-4,
        )
    assert expected["best"] != expected["last"]  # Two different models.


def test_the_keras_files_of_release_0_2_0_load(old_run):
    translator = Translator.from_preset(old_run)
    for name in ("best.keras", "last.keras"):
        model = keras.saving.load_model(old_run / name, compile=False)
        assert type(model) is RNNSearch
    # The best one is the model the translator runs, and saves anew.
    best = keras.saving.load_model(old_run / "best.keras", compile=False)
    for a, b in zip(weights(best), weights(translator.model), strict=True):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(
        weights(best), weights(RNNSearch.from_preset(old_run)), strict=True
    ):
        np.testing.assert_array_equal(a, b)


def test_the_commands_take_a_run_of_release_0_2_0(old_run, tmp_path, capsys):
    expected = json.loads((RELEASE_0_2_0 / "expected.json").read_text())
    (tmp_path / "in.de").write_text("\n".join(expected["sentences"]) + "\n")
    arguments = ["translate", str(old_run), "--input", str(tmp_path / "in.de")]
    assert cli.main([*arguments, "--checkpoint", "last"]) == 0
    texts = capsys.readouterr().out.splitlines()
    assert texts == [e["text"] for e in expected["last"]]


def test_a_damaged_keras_file_of_release_0_2_0_is_named(old_run):
    path = old_run / "best.keras"
    data = bytearray(path.read_bytes())
    # One bit flipped inside the weights: only a checksum sees it.
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo("model.weights.h5")
    data[info.header_offset + 30 + len(info.filename) + 64] ^= 0x01
    path.write_bytes(bytes(data))
    message = refused(old_run, match="truncated or corrupted")
    assert "fails its checksum" in message and str(path) in message
    assert presets.load_preset(old_run, "last")[0].count_params()
    path.write_bytes(bytes(data[: len(data) // 2]))
    refused(old_run, match="truncated or corrupted")


def test_a_decompression_bomb_is_refused_unread(old_run):
    path = old_run / "best.keras"
    # 8 MiB of zeros deflate to ~8 KiB: Keras itself stores members
    # uncompressed, so such a ratio only comes from a crafted file.
    with zipfile.ZipFile(path, "a", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("assets/zeros", bytes(8 << 20))
    message = refused(old_run, match="decompression bomb")
    assert "assets/zeros (8388608 bytes stored in" in message


def test_a_keras_file_with_code_is_refused_unrun(
    old_run, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    unsafe = tmp_path / "unsafe.keras"
    lambda_model().save(unsafe)
    (tmp_path / "lambda_ran").unlink()  # Written when the model was built.
    with zipfile.ZipFile(unsafe) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    with zipfile.ZipFile(old_run / "last.keras") as archive:
        run = json.loads(archive.read("config.json"))
    config = json.loads(members["config.json"])
    members["config.json"] = json.dumps(with_sizes(config, run))
    with zipfile.ZipFile(old_run / "best.keras", "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    with pytest.raises(RunDirectoryError, match="asks to run Python code"):
        presets.load_preset(old_run)
    assert not (tmp_path / "lambda_ran").exists()


@pytest.mark.parametrize("version", [None, 2])
def test_an_unknown_run_format_is_refused(old_run, version):
    path = old_run / "config.json"
    config = json.loads(path.read_text())
    config["format_version"] = version
    path.write_text(json.dumps(config))
    message = refused(old_run, match="not a preset")
    assert f"format_version={version!r}" in message
