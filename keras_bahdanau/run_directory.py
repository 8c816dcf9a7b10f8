"""The run directory: what `keras-bahdanau train` writes.

A preset of the best epoch at the top (`presets.py`: what every command
and `Translator.from_preset` read), and the training state beside it:

```
RUN_DIR/
  metadata.json, config.json, model.weights.h5, translator.json, assets/
                        the preset; model.weights.h5 holds the best
                        epoch's weights (or their average, see below)
  training_config.json  the resolved training config (+ backend, versions,
                        parameters)
  last.weights.h5       the weights after the latest finished epoch
                        (`--checkpoint last`)
  training_log.csv      one row per epoch (keras.callbacks.CSVLogger)
  tensorboard/          TensorBoard logs
  backup/               keras.callbacks.BackupAndRestore state (resume:
                        weights and optimizer state)
  epoch_weights/        the last epochs' weights, with
                        training.average_last (removed once averaged)
  averaging.json        the averaged epochs, their dev score against the
                        best epoch's, and which one the preset holds
  epoch_times.json      each epoch's seconds, with training.max_minutes
  results.json          dev/test BLEU at the end of training
```

The weights files hold weights only (no optimizer state, no code).
keras_bahdanau 0.2.0 wrote the training config as `config.json` and the
checkpoints as `best.keras` and `last.keras`: such a run still loads
(`presets.load_preset`) but does not resume.
"""

import json
from pathlib import Path

import keras

from keras_bahdanau import __version__
from keras_bahdanau.files import atomic_write  # noqa: F401 (callbacks)
from keras_bahdanau.files import atomic_write_text
from keras_bahdanau.validation import InputError

TRAINING_CONFIG = "training_config.json"
LAST_WEIGHTS = "last.weights.h5"
TRAINING_LOG = "training_log.csv"
TENSORBOARD = "tensorboard"
BACKUP = "backup"
EPOCH_WEIGHTS = "epoch_weights"
AVERAGING = "averaging.json"
EPOCH_TIMES = "epoch_times.json"
RESULTS = "results.json"
# Where keras_bahdanau 0.2.0 wrote the training config; a preset's
# config.json is the model's Keras config.
LEGACY_CONFIG = "config.json"


class RunDirectoryError(InputError):
    """A preset or run directory, or a file in it, that cannot be read.

    An `InputError` (the command line reports it in one line) naming the
    file and what to do; missing files raise `FileNotFoundError` instead.
    """


def write_training_config(run_dir, config):
    """Writes the resolved config, stamped with versions, atomically."""
    stamped = {
        **config,
        "keras_bahdanau_version": __version__,
        "backend": keras.backend.backend(),
        "keras_version": keras.__version__,
    }
    text = json.dumps(stamped, indent=2)
    atomic_write_text(Path(run_dir) / TRAINING_CONFIG, text)
    return stamped


def read_training_config(run_dir):
    """The training config of a run directory; None for a preset of
    `save_to_preset`, which has none.

    A run directory of keras_bahdanau 0.2.0 holds it as `config.json`,
    stamped with `"format_version": 1`.

    Raises:
        RunDirectoryError: the file is not a JSON object.
    """
    run_dir = Path(run_dir)
    path = run_dir / TRAINING_CONFIG
    if not path.is_file() and not (run_dir / "metadata.json").is_file():
        path = run_dir / LEGACY_CONFIG
    if not path.is_file():
        return None
    return read_json_object(path, missing="")


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


def training_max_length(config):
    """The longest training sentence (tokens) a run's config allows, or None.

    Read from `config["data"]["max_length"]` (or a top-level
    `max_length`).
    """
    data = config.get("data") or {}
    return data.get("max_length", config.get("max_length"))
