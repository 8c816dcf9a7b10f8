"""The run directory: what `keras-bahdanau train` writes and the rest reads.

```
RUN_DIR/
  config.json          the resolved training config (+ backend, versions)
  source_vocabulary/   Tokenizer.save() of the source tokenizer
  target_vocabulary/   Tokenizer.save() of the target tokenizer
  last.keras           the model after the latest finished epoch
  best.keras           the model with the best dev score so far
                       (both: config and weights, no optimizer state)
  training_log.csv     one row per epoch (keras.callbacks.CSVLogger)
  tensorboard/         TensorBoard logs
  backup/              keras.callbacks.BackupAndRestore state (resume:
                       weights and optimizer state)
  epoch_weights/       the last epochs' weights, with
                       training.average_last (removed once averaged)
  averaging.json       the averaged epochs, their dev score against the
                       best epoch's, and which one best.keras holds
  epoch_times.json     each epoch's seconds, with training.max_minutes
  results.json         dev/test BLEU at the end of training
```

`load_run` refuses (`RunDirectoryError`) a run written in a format this
version does not read (`format_version` in config.json), a truncated or
corrupted file, and vocabularies that do not belong to the model. Model
files hold configs and weights, never code: they are loaded with Keras
`safe_mode=True` (see docs/security.md).
"""

import json
import zipfile
import zlib
from pathlib import Path

import keras

from keras_bahdanau import __version__

# Registers the model classes that the run's `.keras` files name.
from keras_bahdanau import models  # noqa: F401
from keras_bahdanau.data import load_tokenizer
from keras_bahdanau.files import atomic_write
from keras_bahdanau.files import atomic_write_text
from keras_bahdanau.validation import InputError
from keras_bahdanau.validation import check_choice
from keras_bahdanau.validation import is_int

CONFIG = "config.json"
SOURCE_VOCABULARY = "source_vocabulary"
TARGET_VOCABULARY = "target_vocabulary"
LAST_MODEL = "last.keras"
BEST_MODEL = "best.keras"
TRAINING_LOG = "training_log.csv"
TENSORBOARD = "tensorboard"
BACKUP = "backup"
EPOCH_WEIGHTS = "epoch_weights"
AVERAGING = "averaging.json"
EPOCH_TIMES = "epoch_times.json"
RESULTS = "results.json"
CHECKPOINTS = ("best", "last")
_VOCABULARIES = {"source": SOURCE_VOCABULARY, "target": TARGET_VOCABULARY}
# What `Translator` and the decoders use (docs/model_protocol.md).
_MODEL_PROTOCOL = (
    "encode",
    "decode_step",
    "source_vocabulary_size",
    "target_vocabulary_size",
)
# Bumped when the layout or meaning of a run directory changes; readers
# refuse a run written in a format they do not know.
FORMAT_VERSION = 1


def write_config(run_dir, config):
    """Writes the resolved config, stamped with versions, atomically."""
    stamped = {
        **config,
        "format_version": FORMAT_VERSION,
        "keras_bahdanau_version": __version__,
        "backend": keras.backend.backend(),
        "keras_version": keras.__version__,
    }
    atomic_write_text(Path(run_dir) / CONFIG, json.dumps(stamped, indent=2))
    return stamped


def save_run(run_dir, model, source_tokenizer, target_tokenizer, config=None):
    """Writes a run directory for a model trained by your own script.

    The layout that `Translator.from_run_dir`, `evaluate`,
    `export_saved_model` and the CLI read: both tokenizers, the model as
    the best and the last checkpoint, and `config.json`.

    Args:
        run_dir: the folder; created if needed.
        model: a trained translation model (e.g. an `RNNSearch`).
        source_tokenizer, target_tokenizer: the model's tokenizers.
        config: optional dict stored in `config.json` (e.g. the
            hyperparameters); `data.max_length` there bounds the source
            length `Translator.from_run_dir` accepts by default.

    Example:

    ```python
    save_run("runs/mine", model, source_tokenizer, target_tokenizer)
    export_saved_model("runs/mine", "saved_models/mine")
    ```
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    source_tokenizer.save(run_dir / SOURCE_VOCABULARY)
    target_tokenizer.save(run_dir / TARGET_VOCABULARY)
    for name in (BEST_MODEL, LAST_MODEL):
        atomic_write(run_dir / name, model.save)
    write_config(run_dir, dict(config or {}))


class RunDirectoryError(InputError):
    """A run directory, or a file in it, that cannot be read.

    An `InputError` (the command line reports it in one line) naming the
    file and what to do; missing files raise `FileNotFoundError` instead.
    """


def read_config(run_dir):
    """Reads `config.json`, refusing a run of an unknown format.

    Raises:
        FileNotFoundError: `run_dir` has no `config.json`.
        RunDirectoryError: the file is not a JSON object, or its
            `format_version` is missing (an older run) or not
            `FORMAT_VERSION`.
    """
    path = Path(run_dir) / CONFIG
    config = read_json_object(
        path,
        missing=f"{run_dir} is not a run directory: {path} is missing. Train "
        "one with `keras-bahdanau train --config CONFIG --run-dir RUN_DIR`.",
        advice=" Copy the run directory again from where it was trained.",
    )
    _check_format_version(path, config)
    return config


def read_json_object(path, missing, advice=""):
    """A JSON object from a file, with clear errors.

    Args:
        path: the file, a `pathlib.Path`.
        missing: the `FileNotFoundError` message if there is no file.
        advice: said after the `RunDirectoryError` message of a damaged
            file.

    Raises:
        FileNotFoundError: no file at `path`.
        RunDirectoryError: the file is not UTF-8 JSON, or not an object.
    """
    if not path.is_file():
        raise FileNotFoundError(missing)
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise RunDirectoryError(
            f"{path} is damaged: it is not UTF-8 JSON ({error}).{advice}"
        ) from None
    if not isinstance(value, dict):
        raise RunDirectoryError(
            f"{path} is damaged: it holds a JSON {type(value).__name__}, "
            f"not an object.{advice}"
        )
    return value


def _check_format_version(path, config):
    version = config.get("format_version")
    written_by = config.get("keras_bahdanau_version")
    if is_int(version) and version == FORMAT_VERSION:
        return
    if version is None:
        raise RunDirectoryError(
            f"{path} has no `format_version`: the run was written by a "
            "keras_bahdanau older than run format 1, which this one "
            f"(keras_bahdanau {__version__}, run format {FORMAT_VERSION}) "
            "does not read. Train it again with this version, or use the "
            "version that wrote it."
        )
    if is_int(version) and version > FORMAT_VERSION:
        raise RunDirectoryError(
            f"{path} is run format {version}, written by keras_bahdanau "
            f"{written_by or '(unknown version)'}; this keras_bahdanau "
            f"({__version__}) reads run format {FORMAT_VERSION} only. "
            "Upgrade keras_bahdanau to read it."
        )
    raise RunDirectoryError(
        f"{path} has an unknown `format_version`: {version!r} (this "
        f"keras_bahdanau, {__version__}, reads run format "
        f"{FORMAT_VERSION}). Copy the run directory again from where it "
        "was trained, or train it again."
    )


def model_path(run_dir, checkpoint="best"):
    check_choice("checkpoint", checkpoint, CHECKPOINTS)
    path = Path(run_dir) / (BEST_MODEL if checkpoint == "best" else LAST_MODEL)
    if not path.is_file():
        raise FileNotFoundError(
            f"No {checkpoint} model in {run_dir}: {path} is missing. Did "
            "training finish at least one epoch?"
        )
    return path


def check_run(run_dir, checkpoint="best"):
    """Checks a run directory without building its model.

    Everything `load_run` checks except the deserialization itself: the
    config and its format version, that the model file is a complete,
    uncorrupted `.keras` archive, and that both vocabularies load and
    match the model's vocabulary sizes (read from the archive's config).
    Cheap: the weights are read only to verify their checksums.

    Args:
        run_dir: a directory written by `keras-bahdanau train`.
        checkpoint: `"best"` or `"last"`.

    Returns:
        `(config, source_tokenizer, target_tokenizer)`.

    Raises:
        FileNotFoundError: a file of the run is missing.
        RunDirectoryError: a file is damaged, of an unknown format, or
            does not belong with the others.
    """
    config = read_config(run_dir)
    path = model_path(run_dir, checkpoint)
    model_config = _read_keras_archive(path)
    source = load_vocabulary(run_dir, SOURCE_VOCABULARY)
    target = load_vocabulary(run_dir, TARGET_VOCABULARY)
    # The constructor arguments, as Keras writes them: {"config": {...}}.
    arguments = (
        model_config.get("config") if isinstance(model_config, dict) else None
    )
    arguments = arguments if isinstance(arguments, dict) else {}
    for side, tokenizer in (("source", source), ("target", target)):
        size = arguments.get(f"{side}_vocabulary_size")
        if not is_int(size):
            raise RunDirectoryError(
                f"{path} is not a keras_bahdanau translation model: its "
                f"config has no `{side}_vocabulary_size`. A run's model "
                "files are written by `keras-bahdanau train`."
            )
        vocabulary = Path(run_dir) / _VOCABULARIES[side]
        _check_vocabulary_size(vocabulary, side, tokenizer, size)
    return config, source, target


def load_run(run_dir, checkpoint="best"):
    """Loads `(model, source_tokenizer, target_tokenizer, config)`.

    The model is loaded uncompiled (for inference) with Keras
    `safe_mode=True`: a model file that would run Python code on loading
    (a `Lambda` layer, a class outside Keras and the registered ones) is
    refused.

    Raises:
        FileNotFoundError: a file of the run is missing.
        RunDirectoryError: as for `check_run`, or the model file is not a
            safe keras_bahdanau model.
    """
    config, source, target = check_run(run_dir, checkpoint)
    path = model_path(run_dir, checkpoint)
    try:
        model = keras.saving.load_model(path, compile=False, safe_mode=True)
    except MemoryError:
        raise
    except Exception as error:
        # The reason is kept in the message; the backend's traceback is
        # not: it is deep and says nothing about what to do.
        raise RunDirectoryError(load_error_message(path, error)) from None
    vocabularies = [Path(run_dir) / _VOCABULARIES[s] for s in _VOCABULARIES]
    check_model(path, model, source, target, vocabularies)
    return model, source, target, config


def check_model(path, model, source_tokenizer, target_tokenizer, vocabularies):
    """Checks that a loaded model translates, with these tokenizers.

    `path` (the model's file) and `vocabularies` (the tokenizers' folders,
    source then target) are named in the errors.

    Raises:
        RunDirectoryError: the model lacks the decoding protocol, or a
            tokenizer's size is not the model's vocabulary size.
    """
    missing = [name for name in _MODEL_PROTOCOL if not hasattr(model, name)]
    if missing:
        raise RunDirectoryError(
            f"{path} holds a {type(model).__name__}, not a translation model "
            f"(it lacks {missing}; see docs/model_protocol.md). A run's "
            "model files are written by `keras-bahdanau train`."
        )
    for side, tokenizer, vocabulary in zip(
        ("source", "target"),
        (source_tokenizer, target_tokenizer),
        vocabularies,
        strict=True,
    ):
        size = getattr(model, f"{side}_vocabulary_size")
        _check_vocabulary_size(vocabulary, side, tokenizer, size)


# A `.keras` archive of Keras 3 holds config.json and one of these.
_KERAS_WEIGHTS = ("model.weights.h5", "model.weights.npz")
# Keras writes members uncompressed; a member that would expand more than
# this (and past the floor) is a decompression bomb, refused unread.
_MAX_EXPANSION = 100
_EXPANSION_FLOOR_BYTES = 1 << 20


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


def load_error_message(path, error):
    reason = f"{type(error).__name__}: {error}"
    if len(reason) > 500:  # Keras appends whole configs to some errors.
        reason = reason[:500] + " [...]"
    if "safe_mode" in str(error) or "disallowed" in str(error):
        return (
            f"{path} asks to run Python code on loading (e.g. a `Lambda` "
            "layer), which keras_bahdanau refuses: model files are loaded "
            "with Keras safe_mode=True and hold configs and weights only. "
            "`keras-bahdanau train` never writes such a file: do not use "
            f"this run (see docs/security.md). Keras said: {reason}"
        )
    return (
        f"{path} could not be loaded as a keras_bahdanau model ({reason}). "
        "It may be damaged (copy it again from where it was trained), "
        "written by a newer keras_bahdanau or Keras (upgrade), or not "
        "written by `keras-bahdanau train` at all (see docs/security.md)."
    )


def load_vocabulary(run_dir, name):
    path = Path(run_dir) / name
    if not path.is_dir():
        raise FileNotFoundError(
            f"{path} is missing: a run directory holds the vocabularies it "
            "was trained with. Copy the run directory again from where it "
            "was trained."
        )
    try:
        return load_tokenizer(path)
    except FileNotFoundError as error:
        raise FileNotFoundError(
            f"The vocabulary {path} is incomplete ({error}). Copy the run "
            "directory again from where it was trained."
        ) from None
    except (ValueError, KeyError, TypeError, OSError) as error:
        # ValueError includes UnicodeDecodeError and JSONDecodeError.
        raise RunDirectoryError(
            f"The vocabulary {path} is damaged ({type(error).__name__}: "
            f"{error}). Copy the run directory again from where it was "
            "trained."
        ) from None


def _check_vocabulary_size(vocabulary, side, tokenizer, size):
    if tokenizer.vocabulary_size != size:
        raise RunDirectoryError(
            f"The {side} vocabulary {vocabulary} "
            f"has {tokenizer.vocabulary_size} tokens but the model expects "
            f"{size}: the vocabulary does not belong to this model. Use "
            "the vocabularies the model was trained with (copy the run "
            "directory again from where it was trained)."
        )


def training_max_length(config):
    """The longest training sentence (tokens) a run's config allows, or None.

    Read from `config["data"]["max_length"]` (or a top-level
    `max_length`).
    """
    data = config.get("data") or {}
    return data.get("max_length", config.get("max_length"))
