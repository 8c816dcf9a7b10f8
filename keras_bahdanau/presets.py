"""Trained models as presets: a folder with what a `Translator` needs.

The layout follows keras-hub's presets, one file per concern:

    PRESET/
        metadata.json        versions, the model's class and parameters
        config.json          the model's Keras config (its constructor)
        model.weights.h5     the weights
        translator.json      the `Translator`'s settings and search
        assets/source_vocabulary/, assets/target_vocabulary/
                             the tokenizers (`Tokenizer.save`)

`Translator.save_to_preset` writes one and `Translator.from_preset` reads
it back, or a run directory of `keras-bahdanau train`, which holds the
same things in the layout training needs (checkpoints as `.keras` files,
`config.json` the run's config). The model is rebuilt from its config with
Keras `safe_mode=True`: a preset cannot run Python code on loading.
"""

import json
import shutil
import tempfile
from pathlib import Path

import keras

from keras_bahdanau import __version__
from keras_bahdanau import run_directory
from keras_bahdanau.run_directory import RunDirectoryError

METADATA = "metadata.json"
CONFIG = "config.json"
WEIGHTS = "model.weights.h5"
TRANSLATOR = "translator.json"
ASSETS = "assets"
_VOCABULARIES = {
    "source": f"{ASSETS}/source_vocabulary",
    "target": f"{ASSETS}/target_vocabulary",
}
# The preset layout's version; a newer one is refused with a clear error.
FORMAT_VERSION = 1


def is_preset(path):
    """Whether `path` is a preset folder (it has `metadata.json`)."""
    return (Path(path) / METADATA).is_file()


def save_preset(path, model, source_tokenizer, target_tokenizer, settings):
    """Writes a preset folder, atomically.

    Args:
        path: the folder to write; must not exist, or be empty.
        model: a trained translation model.
        source_tokenizer, target_tokenizer: the model's tokenizers.
        settings: the `Translator`'s settings, a JSON-able dict
            (`translator.json`).

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
        config = keras.saving.serialize_keras_object(model)
        _write_json(temporary / CONFIG, config)
        model.save_weights(temporary / WEIGHTS)
        for side, tokenizer in (
            ("source", source_tokenizer),
            ("target", target_tokenizer),
        ):
            tokenizer.save(temporary / _VOCABULARIES[side])
        _write_json(temporary / TRANSLATOR, settings)
        _write_json(
            temporary / METADATA,
            {
                "format_version": FORMAT_VERSION,
                "keras_bahdanau_version": __version__,
                "keras_version": keras.__version__,
                "backend": keras.backend.backend(),
                "model": type(model).__name__,
                "parameter_count": model.count_params(),
            },
        )
        temporary.chmod(0o755)
        if path.exists():
            path.rmdir()  # Empty, checked above.
        temporary.rename(path)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
    return path


def read_metadata(path):
    """A preset's `metadata.json`, its format version checked."""
    path = Path(path)
    metadata = _read_json(path / METADATA)
    version = metadata.get("format_version")
    if version != FORMAT_VERSION:
        raise RunDirectoryError(
            f"{path / METADATA} is preset format {version!r}, written by "
            f"keras_bahdanau {metadata.get('keras_bahdanau_version')}; this "
            f"keras_bahdanau ({__version__}) reads preset format "
            f"{FORMAT_VERSION}. Use the version that wrote it."
        )
    return metadata


def check_preset(path):
    """Checks that a preset folder is whole, without building its model.

    Returns:
        What it read: `(metadata, model_config, settings, tokenizers)`,
        `tokenizers` the source and the target one.

    Raises:
        FileNotFoundError, RunDirectoryError: as `load_preset`.
    """
    path = Path(path)
    metadata = read_metadata(path)
    config, settings = (
        _read_json(path / name) for name in (CONFIG, TRANSLATOR)
    )
    if not (path / WEIGHTS).is_file():
        raise FileNotFoundError(
            f"{path / WEIGHTS} is missing: not a whole preset."
        )
    tokenizers = [
        run_directory.load_vocabulary(path, _VOCABULARIES[side])
        for side in ("source", "target")
    ]
    return metadata, config, settings, tokenizers


def load_preset(path):
    """Reads a preset folder.

    Returns:
        `(model, source_tokenizer, target_tokenizer, settings)`, the model
        built from its config and its weights loaded.

    Raises:
        FileNotFoundError: a file of the preset is missing.
        RunDirectoryError: a file is damaged, of a newer format, not a
            keras_bahdanau model, or asks to run code on loading.
    """
    path = Path(path)
    _, config, settings, tokenizers = check_preset(path)
    weights = path / WEIGHTS
    try:
        model = keras.saving.deserialize_keras_object(config, safe_mode=True)
        model.load_weights(weights)
    except MemoryError:
        raise
    except Exception as error:
        raise RunDirectoryError(
            run_directory.load_error_message(path, error)
        ) from None
    run_directory.check_model(
        path / WEIGHTS,
        model,
        *tokenizers,
        [path / _VOCABULARIES[side] for side in ("source", "target")],
    )
    return (model, *tokenizers, settings)


def _write_json(path, value):
    path.write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")


def _read_json(path):
    return run_directory.read_json_object(
        path,
        missing=f"{path} is missing: {path.parent} is not a whole preset (one "
        "is written by `Translator.save_to_preset`).",
    )


__all__ = [
    "FORMAT_VERSION",
    "check_preset",
    "is_preset",
    "load_preset",
    "read_metadata",
    "save_preset",
]
