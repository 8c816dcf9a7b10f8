"""The one format of a trained model: a preset folder, keras-hub's layout.

```
PRESET/
  metadata.json      the format version, versions, the model's class and
                     parameter count, the backend that wrote it
  config.json        the model's Keras config (its constructor arguments)
  model.weights.h5   the weights (of a training run: its best epoch)
  translator.json    the `Translator`'s search and length policy
  assets/source_vocabulary/, assets/target_vocabulary/
                     the tokenizers (`Tokenizer.save`)
```

`Translator.save_to_preset` writes one into a new folder; `keras-bahdanau
train` writes one at the top of its run directory, with the training state
beside it (`run_directory.py`; `last.weights.h5`, the last epoch, is the
checkpoint `"last"`). `load_preset` reads both, and the run directories of
keras_bahdanau 0.2.0 (`config.json` the training config, the model in
`best.keras` and `last.keras`), the one older layout it reads.

`check_preset` refuses (`RunDirectoryError`) a preset of a format this
version does not read (`format_version` in `metadata.json`), a damaged
file, and vocabularies that do not fit the model. The model is rebuilt
from its config with Keras `safe_mode=True`: a preset cannot run Python
code on loading (docs/security.md).
"""

import collections
import json
import shutil
import tempfile
import zipfile
import zlib
from pathlib import Path

import h5py
import keras

from keras_bahdanau import __version__

# Registers the model classes that the configs name.
from keras_bahdanau import models  # noqa: F401
from keras_bahdanau import run_directory as rd
from keras_bahdanau.callbacks import inference_copy
from keras_bahdanau.data import load_tokenizer
from keras_bahdanau.decoding import SearchConfig
from keras_bahdanau.files import atomic_write_text
from keras_bahdanau.run_directory import RunDirectoryError
from keras_bahdanau.run_directory import read_json_object
from keras_bahdanau.validation import check_choice
from keras_bahdanau.validation import is_int

METADATA = "metadata.json"
CONFIG = "config.json"
WEIGHTS = "model.weights.h5"
TRANSLATOR = "translator.json"
ASSETS = "assets"
VOCABULARIES = {
    "source": f"{ASSETS}/source_vocabulary",
    "target": f"{ASSETS}/target_vocabulary",
}
# The weights of each checkpoint; "last" only in a run directory.
CHECKPOINTS = {"best": WEIGHTS, "last": rd.LAST_WEIGHTS}
# The preset layout's version; another one is refused with a clear error.
FORMAT_VERSION = 1
# What `Translator` and the decoders use (docs/model_protocol.md).
_MODEL_PROTOCOL = "encode decode_step source_vocabulary_size".split()
_MODEL_PROTOCOL += ["target_vocabulary_size"]
# The `translator.json` settings, and their values where a file lacks one.
SETTINGS = {
    "max_source_length": None,
    "bucket_width": 16,
    "long_sources": "truncate",
    "search": None,
}

# What `check_preset` read: `settings` with `search` a `SearchConfig`,
# the source and target `tokenizers`, the checkpoint's `weights` file.
Preset = collections.namedtuple(
    "Preset", "metadata config settings tokenizers weights"
)


def save_preset(path, translator):
    """Writes a `Translator` as a preset into a new folder, atomically.

    Args:
        path: the folder to write; must not exist, or be empty.
        translator: a `Translator`: its model, preprocessor and settings.

    Returns:
        The `pathlib.Path` of the preset.

    Raises:
        FileExistsError: `path` exists and is not an empty folder.
    """
    path = Path(path)
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise FileExistsError(
            f"{path} exists and is not an empty folder: a preset is written "
            "into a new folder. Choose another path or delete that one."
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    # Built beside `path` and renamed into place: an interrupted save
    # never leaves a preset that loads with missing files.
    temporary = Path(
        tempfile.mkdtemp(prefix=f".{path.name}.partial-", dir=path.parent)
    )
    try:
        write_preset(temporary, translator)
        # Without the optimizer's state, as the checkpoints of training.
        inference_copy(translator.model).save_weights(temporary / WEIGHTS)
        temporary.chmod(0o755)
        if path.exists():
            path.rmdir()  # Empty, checked above.
        temporary.rename(path)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
    return path


def write_preset(folder, translator):
    """Writes every file of a preset but the weights into `folder`.

    `save_preset` adds the weights; training writes this at the top of
    its run directory, whose checkpoints write the weights.
    """
    model, preprocessor = translator.model, translator.preprocessor
    settings = {**preprocessor.get_config(), **translator.get_config()}
    write_preprocessor(folder, preprocessor.tokenizers, settings)
    metadata = {
        "format_version": FORMAT_VERSION,
        "keras_bahdanau_version": __version__,
        "keras_version": keras.__version__,
        "backend": keras.backend.backend(),
        "model": type(model).__name__,
        "parameter_count": model.count_params(),
    }
    config = keras.saving.serialize_keras_object(model)
    config.pop("compile_config", None)  # Configs and weights, no training.
    # metadata.json last: it marks a whole preset.
    for name, value in ((CONFIG, config), (METADATA, metadata)):
        _write(Path(folder) / name, value)


def write_preprocessor(folder, tokenizers, settings):
    """Writes the tokenizers into `folder`'s assets and `settings` into
    its `translator.json` (over the settings it holds)."""
    folder = Path(folder)
    for side, tokenizer in zip(("source", "target"), tokenizers, strict=True):
        tokenizer.save(folder / VOCABULARIES[side])
    if (folder / TRANSLATOR).is_file():
        settings = {**_read(folder, TRANSLATOR), **settings}
    _write(folder / TRANSLATOR, settings)


def check_preset(path, checkpoint="best"):
    """Checks a preset without building its model; returns what it read.

    Everything `load_preset` checks but the model itself: the format
    version, that every file is there and reads, and that the vocabulary
    sizes are the model's (read from its config). Cheap: the weights are
    not read.

    Args:
        path: a preset folder, a run directory of `keras-bahdanau train`,
            or one of keras_bahdanau 0.2.0.
        checkpoint: `"best"` (a preset's weights) or `"last"` (run
            directories only).

    Returns:
        A `Preset`.

    Raises:
        FileNotFoundError: `path` is not a preset, or misses a file.
        RunDirectoryError: a file is damaged, of an unknown format, or
            does not belong with the others.
    """
    check_choice("checkpoint", checkpoint, tuple(CHECKPOINTS))
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(
            f"No preset folder {str(path)!r}: a preset is a folder of "
            "`Translator.save_to_preset` or a run directory of "
            "`keras-bahdanau train`. (A size name such as "
            "'rnnsearch_tiny' builds an untrained model with "
            "`RNNSearch.from_preset`.)"
        )
    if not (path / METADATA).is_file() and (path / rd.LEGACY_CONFIG).is_file():
        return _check_legacy_run(path, checkpoint)
    metadata = _read(path, METADATA)
    version = metadata.get("format_version")
    if not (is_int(version) and version == FORMAT_VERSION):
        raise RunDirectoryError(
            f"{path / METADATA} is preset format {version!r}, written by "
            f"keras_bahdanau {metadata.get('keras_bahdanau_version')}; this "
            f"keras_bahdanau ({__version__}) reads preset format "
            f"{FORMAT_VERSION}. Use the version that wrote it."
        )
    config, settings = _read(path, CONFIG), _read(path, TRANSLATOR)
    weights = path / CHECKPOINTS[checkpoint]
    if not weights.is_file():
        raise FileNotFoundError(_missing_weights(path, checkpoint, weights))
    _check_weights(weights)
    settings = _settings(path / TRANSLATOR, settings)
    tokenizers = _tokenizers(path, VOCABULARIES, config, path / CONFIG)
    return Preset(metadata, config, settings, tokenizers, weights)


def load_preset(path, checkpoint="best"):
    """Reads a preset (or a run directory, see `check_preset`).

    Returns:
        `(model, source_tokenizer, target_tokenizer, settings)`: the model
        built from its config with the checkpoint's weights, uncompiled;
        `settings` as `Preset.settings`.

    Raises:
        FileNotFoundError: a file of the preset is missing.
        RunDirectoryError: as for `check_preset`, or the model is not a
            keras_bahdanau translation model, or asks to run code.
    """
    preset = check_preset(path, checkpoint)
    try:
        if preset.weights.suffix == ".keras":  # keras_bahdanau 0.2.0
            model = keras.saving.load_model(
                preset.weights, compile=False, safe_mode=True
            )
        else:
            model = keras.saving.deserialize_keras_object(
                preset.config, safe_mode=True
            )
            model.load_weights(preset.weights)
    except MemoryError:
        raise
    except Exception as error:
        # The reason is kept in the message; the backend's traceback is
        # not: it is deep and says nothing about what to do.
        raise RunDirectoryError(
            load_error_message(preset.weights, error)
        ) from None
    missing = [name for name in _MODEL_PROTOCOL if not hasattr(model, name)]
    if missing:
        raise RunDirectoryError(
            f"{preset.weights} holds a {type(model).__name__}, not a "
            f"translation model (it lacks {missing}; see "
            "docs/model_protocol.md)."
        )
    return (model, *preset.tokenizers, preset.settings)


def load_error_message(path, error):
    """What a model file that Keras could not load gets as its error."""
    reason = f"{type(error).__name__}: {error}"
    if len(reason) > 500:  # Keras appends whole configs to some errors.
        reason = reason[:500] + " [...]"
    if "safe_mode" in str(error) or "disallowed" in str(error):
        return (
            f"{path} asks to run Python code on loading (e.g. a `Lambda` "
            "layer), which keras_bahdanau refuses: models are loaded with "
            "Keras safe_mode=True and hold configs and weights only. "
            "`keras-bahdanau train` and `save_to_preset` never write such "
            f"a file: do not use it (see docs/security.md). Keras said: "
            f"{reason}"
        )
    return (
        f"{path} could not be loaded as a keras_bahdanau model ({reason}). "
        "It may be damaged (copy it again from where it was trained), "
        "written by a newer keras_bahdanau or Keras (upgrade), or not "
        "written by keras_bahdanau at all (see docs/security.md)."
    )


def _write(path, value):
    atomic_write_text(path, json.dumps(value, indent=2) + "\n")


def _read(path, name):
    return read_json_object(
        path / name,
        missing=f"{path} is not a preset: {path / name} is missing. One is "
        "written by `keras-bahdanau train` (its run directory) or "
        "`Translator.save_to_preset`.",
        advice=" Copy the preset again from where it was written.",
    )


def _missing_weights(path, checkpoint, weights):
    if checkpoint == "last":
        return (
            f"No last checkpoint in {path}: {weights} is missing. Only a "
            "run directory of `keras-bahdanau train` has one (the best is "
            "the preset's own, --checkpoint best)."
        )
    return (
        f"No weights in {path}: {weights} is missing. Did training finish "
        "at least one epoch?"
    )


def _check_weights(path):
    """Refuses a weights file that is not a whole HDF5 file, before h5py
    fails on it deep inside Keras."""
    try:
        with h5py.File(path, "r"):
            pass
    except OSError as error:
        raise RunDirectoryError(
            f"{path} is truncated or corrupted (not a readable HDF5 file: "
            f"{error}). Copy it again from where it was written, use the "
            "other checkpoint (--checkpoint best|last), or train again."
        ) from None


def _settings(path, settings):
    """`translator.json`'s settings, checked, with a `SearchConfig`."""
    unknown = sorted(set(settings) - set(SETTINGS))
    try:
        if unknown:
            raise ValueError(f"unknown settings {unknown}")
        settings = {**SETTINGS, **settings}
        settings["search"] = SearchConfig.from_dict(settings["search"] or {})
    except ValueError as error:
        raise RunDirectoryError(
            f"{path} is damaged: {error}. Its keys are {list(SETTINGS)}."
        ) from None
    return settings


def _tokenizers(path, folders, config, config_path):
    """The source and target tokenizers, their sizes the model's."""
    # The constructor arguments, as Keras writes them: {"config": {...}}.
    arguments = config.get("config") if isinstance(config, dict) else None
    arguments = arguments if isinstance(arguments, dict) else {}
    tokenizers = []
    for side in ("source", "target"):
        size = arguments.get(f"{side}_vocabulary_size")
        if not is_int(size):
            raise RunDirectoryError(
                f"{config_path} is not a keras_bahdanau translation model: "
                f"its config has no `{side}_vocabulary_size`."
            )
        folder = path / folders[side]
        tokenizer = _load_vocabulary(folder)
        if tokenizer.vocabulary_size != size:
            raise RunDirectoryError(
                f"The {side} vocabulary {folder} has "
                f"{tokenizer.vocabulary_size} tokens but the model expects "
                f"{size}: the vocabulary does not belong to this model. Use "
                "the vocabularies the model was trained with (copy the "
                "preset again from where it was written)."
            )
        tokenizers.append(tokenizer)
    return tokenizers


def _load_vocabulary(folder):
    advice = "Copy the preset again from where it was written."
    if not folder.is_dir():
        raise FileNotFoundError(
            f"{folder} is missing: a preset holds the vocabularies its "
            f"model was trained with. {advice}"
        )
    try:
        return load_tokenizer(folder)
    except FileNotFoundError as error:
        raise FileNotFoundError(
            f"The vocabulary {folder} is incomplete ({error}). {advice}"
        ) from None
    except (ValueError, KeyError, TypeError, OSError) as error:
        # ValueError includes UnicodeDecodeError and JSONDecodeError.
        raise RunDirectoryError(
            f"The vocabulary {folder} is damaged ({type(error).__name__}: "
            f"{error}). {advice}"
        ) from None


# === Run directories of keras_bahdanau 0.2.0 ===

_LEGACY_VOCABULARIES = {side: f"{side}_vocabulary" for side in VOCABULARIES}
# A `.keras` archive of Keras 3 holds config.json and one of these.
_KERAS_WEIGHTS = ("model.weights.h5", "model.weights.npz")
# Keras writes members uncompressed; a member that would expand more than
# this (and past the floor) is a decompression bomb, refused unread.
_MAX_EXPANSION = 100
_EXPANSION_FLOOR_BYTES = 1 << 20


def _check_legacy_run(path, checkpoint):
    """`check_preset` of a run directory of keras_bahdanau 0.2.0.

    Its `config.json` is the training config (run format 1); its settings
    are those `Translator.from_run_dir` of that release used: the training
    `max_length`, the `[evaluation]` search.
    """
    config = read_json_object(path / rd.LEGACY_CONFIG, missing="")
    if config.get("format_version") != 1:
        raise RunDirectoryError(
            f"{path} has no {METADATA}, so it is not a preset, and its "
            f"{rd.LEGACY_CONFIG} is not that of a run directory of "
            "keras_bahdanau 0.2.0 (run format 1, the older layout this one "
            f"reads; it has format_version={config.get('format_version')!r}"
            "). Train it again with this version."
        )
    evaluation = config.get("evaluation") or {}
    search = {
        key: evaluation[key]
        for key in ("beam_size", "length_penalty")
        if key in evaluation
    }
    settings = {
        **SETTINGS,
        "max_source_length": rd.training_max_length(config),
        "search": SearchConfig.from_dict(search),
    }
    weights = path / f"{checkpoint}.keras"
    if not weights.is_file():
        raise FileNotFoundError(_missing_weights(path, checkpoint, weights))
    model_config = _read_keras_archive(weights)
    tokenizers = _tokenizers(path, _LEGACY_VOCABULARIES, model_config, weights)
    metadata = {
        "format_version": None,
        "keras_bahdanau_version": config.get("keras_bahdanau_version"),
        "backend": config.get("backend"),
    }
    return Preset(metadata, model_config, settings, tokenizers, weights)


def _read_keras_archive(path):
    """Checks that `path` is a complete `.keras` zip; returns its config.

    Only a zip reaches Keras (never the legacy HDF5 loader, which ignores
    `safe_mode`). Every member's checksum is verified, so a truncated or
    bit-flipped file fails here with its name rather than deep in h5py, or
    not at all.
    """
    damaged = f"{path} is truncated or corrupted (not a complete .keras archive"
    fix = (
        "Copy it again from where it was trained, use the other checkpoint "
        "(--checkpoint best|last), or train again."
    )
    try:
        with zipfile.ZipFile(path) as archive:
            bombs = [
                f"{info.filename} ({info.file_size} bytes stored in "
                f"{info.compress_size})"
                for info in archive.infolist()
                if info.file_size
                > max(
                    _EXPANSION_FLOOR_BYTES, _MAX_EXPANSION * info.compress_size
                )
            ]
            if bombs:
                raise RunDirectoryError(
                    f"{path} is not a model file keras_bahdanau reads: "
                    f"{bombs} would expand more than {_MAX_EXPANSION}x (a "
                    "decompression bomb). `keras-bahdanau train` never "
                    "writes such a file (see docs/security.md)."
                )
            names = set(archive.namelist())
            bad_member = archive.testzip()
            missing = [n for n in ["config.json"] if n not in names]
            if not names & set(_KERAS_WEIGHTS):
                missing.append(_KERAS_WEIGHTS[0])
            config = None if missing else archive.read("config.json")
    except (zipfile.BadZipFile, EOFError, OSError, zlib.error) as error:
        raise RunDirectoryError(f"{damaged}: {error}). {fix}") from None
    if bad_member is not None:
        raise RunDirectoryError(
            f"{damaged}: member {bad_member!r} fails its checksum). {fix}"
        )
    if missing:
        raise RunDirectoryError(f"{damaged}: it lacks {missing}). {fix}")
    try:
        return json.loads(config.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise RunDirectoryError(
            f"{damaged}: its config.json is not UTF-8 JSON, {error}). {fix}"
        ) from None


__all__ = [
    "CHECKPOINTS",
    "FORMAT_VERSION",
    "Preset",
    "check_preset",
    "load_preset",
    "save_preset",
    "write_preprocessor",
    "write_preset",
]
