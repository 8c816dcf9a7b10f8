"""The run directory: what `keras-bahdanau train` writes and the rest reads.

```
RUN_DIR/
  config.json          the resolved training config (+ backend, versions)
  source_vocabulary/   Tokenizer.save() of the source tokenizer
  target_vocabulary/   Tokenizer.save() of the target tokenizer
  last.keras           the model after the latest finished epoch
  best.keras           the model with the lowest dev loss so far
  training_log.csv     one row per epoch (keras.callbacks.CSVLogger)
  tensorboard/         TensorBoard logs
  backup/              keras.callbacks.BackupAndRestore state (resume)
  results.json         dev/test BLEU at the end of training
```

Model files are loaded with Keras `safe_mode=True`: they hold configs and
weights, never code or pickles.
"""

import json
import os
from pathlib import Path

import keras

CONFIG = "config.json"
SOURCE_VOCABULARY = "source_vocabulary"
TARGET_VOCABULARY = "target_vocabulary"
LAST_MODEL = "last.keras"
BEST_MODEL = "best.keras"
TRAINING_LOG = "training_log.csv"
TENSORBOARD = "tensorboard"
BACKUP = "backup"
RESULTS = "results.json"
CHECKPOINTS = ("best", "last")
# Bumped when the layout or meaning of a run directory changes; readers
# refuse a run written in a format they do not know.
FORMAT_VERSION = 1


def write_config(run_dir, config):
    """Writes the resolved config, stamped with versions, atomically."""
    from keras_bahdanau import __version__

    stamped = {
        **config,
        "format_version": FORMAT_VERSION,
        "keras_bahdanau_version": __version__,
        "backend": keras.backend.backend(),
        "keras_version": keras.__version__,
    }
    atomic_write_text(Path(run_dir) / CONFIG, json.dumps(stamped, indent=2))
    return stamped


def read_config(run_dir):
    path = Path(run_dir) / CONFIG
    if not path.is_file():
        raise FileNotFoundError(
            f"{run_dir} is not a run directory: {path} is missing. Train one "
            "with `keras-bahdanau train --config CONFIG --run-dir RUN_DIR`."
        )
    with open(path, encoding="utf-8") as file:
        return json.load(file)


def model_path(run_dir, checkpoint="best"):
    if checkpoint not in CHECKPOINTS:
        raise ValueError(
            f"`checkpoint` must be one of {CHECKPOINTS}. "
            f"Received: checkpoint={checkpoint!r}"
        )
    path = Path(run_dir) / (BEST_MODEL if checkpoint == "best" else LAST_MODEL)
    if not path.is_file():
        raise FileNotFoundError(
            f"No {checkpoint} model in {run_dir}: {path} is missing. Did "
            "training finish at least one epoch?"
        )
    return path


def load_run(run_dir, checkpoint="best"):
    """Loads `(model, source_tokenizer, target_tokenizer, config)`.

    Raises a clear error if the directory is not a run directory, or if the
    vocabularies do not match the model's embedding sizes.
    """
    from keras_bahdanau.data import load_tokenizer

    config = read_config(run_dir)
    model = keras.saving.load_model(
        model_path(run_dir, checkpoint), safe_mode=True
    )
    source = load_tokenizer(Path(run_dir) / SOURCE_VOCABULARY)
    target = load_tokenizer(Path(run_dir) / TARGET_VOCABULARY)
    for side, tokenizer, size in (
        ("source", source, model.source_vocabulary_size),
        ("target", target, model.target_vocabulary_size),
    ):
        if tokenizer.vocabulary_size != size:
            raise ValueError(
                f"The {side} vocabulary in {run_dir} has "
                f"{tokenizer.vocabulary_size} tokens but the model expects "
                f"{size}: the vocabulary does not belong to this model."
            )
    return model, source, target, config


def atomic_write_text(path, text):
    """Writes `text` to `path` via a temporary file and a rename."""
    path = Path(path)
    temporary = path.with_name(f".{path.name}.tmp")
    with open(temporary, "w", encoding="utf-8") as file:
        file.write(text)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)
