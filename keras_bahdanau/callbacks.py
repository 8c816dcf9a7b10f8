"""Callbacks that keep a run's files good when training goes wrong.

- `NonFiniteLoss` stops training at the first NaN or Inf loss and names the
  step.
- `AtomicModelCheckpoint` is `keras.callbacks.ModelCheckpoint` writing to a
  temporary file and renaming it: a full disk or a vanished directory never
  leaves a half-written checkpoint in place of the previous one.
- `FiniteBackupAndRestore` is `keras.callbacks.BackupAndRestore` that never
  backs up NaN or Inf weights.
- `DevScores` adds dev BLEU and chrF to the epoch's logs, for model
  selection.

A checkpoint that cannot be written (`CheckpointError`) or weights that
are no longer finite (`FloatingPointError`) stop training: carrying on
would leave a run whose files are older than its log, or a backup that
resumes into NaN. Put `NonFiniteLoss` first in the callbacks list, so that
no later callback saves the weights of the step that diverged.
"""

import contextlib
import errno
import math
import os
from pathlib import Path

import keras
import numpy as np

from keras_bahdanau.evaluation import corpus_scores


class CheckpointError(OSError):
    """A checkpoint could not be written; the previous one is intact."""


def _variables(model):
    variables = list(model.weights)
    if getattr(model, "optimizer", None) is not None:
        variables += list(model.optimizer.variables)
    return variables


def non_finite_variables(model):
    """Paths of the model's and optimizer's variables holding NaN or Inf."""
    return [
        variable.path
        for variable in _variables(model)
        if not np.all(np.isfinite(keras.ops.convert_to_numpy(variable)))
    ]


def _step(model):
    optimizer = getattr(model, "optimizer", None)
    return None if optimizer is None else int(optimizer.iterations)


def check_finite(model, target):
    """Raises `FloatingPointError` instead of saving non-finite weights."""
    bad = non_finite_variables(model)
    if bad:
        shown = ", ".join(bad[:3]) + (", ..." if len(bad) > 3 else "")
        raise FloatingPointError(
            f"Not writing {target}: after training step {_step(model)} the "
            f"weights hold NaN or Inf (in {len(bad)} of "
            f"{len(_variables(model))} variables: {shown}). "
            f"Training stopped; {target} keeps what it held before. Lower "
            "the learning rate or check the data."
        )


def save_atomically(model, path, weights_only=False):
    """Saves `model` to `path` via a temporary file and `os.replace`.

    The temporary file is in the same directory (a rename across file
    systems is not atomic) and is removed if the write fails.

    Args:
        model: a Keras model.
        path: a `.keras` file, or a `.weights.h5` file if `weights_only`.
        weights_only: save the weights only (`model.save_weights`).

    Raises:
        CheckpointError: the write failed (disk full, directory gone, ...);
            `path` still holds the previous checkpoint, if any.
        FloatingPointError: the weights hold NaN or Inf; nothing written.
    """
    path = Path(path)
    if not path.parent.is_dir():
        raise CheckpointError(
            errno.ENOENT,
            f"Cannot write {path.name}: its directory {path.parent} no "
            "longer exists (deleted, moved or unmounted). Training stopped",
        )
    check_finite(model, path.name)
    # The name keeps the suffix `save` requires (".keras", ".weights.h5").
    temporary = path.with_name(f".tmp-{path.name}")
    try:
        if weights_only:
            model.save_weights(temporary, overwrite=True)
        else:
            model.save(temporary, overwrite=True)
        descriptor = os.open(temporary, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        os.replace(temporary, path)
    except OSError as error:
        raise CheckpointError(
            error.errno,
            f"Writing {path} failed: {error.strerror or error}. Training "
            f"stopped; any previous {path.name} is intact. Free some space "
            "(or restore the directory) and run the same command again to "
            "resume",
        ) from error
    finally:
        with contextlib.suppress(OSError):
            temporary.unlink()


class NonFiniteLoss(keras.callbacks.Callback):
    """Stops training at the first NaN or Inf loss, naming the step.

    The step is the global training step (`optimizer.iterations`: it
    counts across epochs and resumes), with the epoch and the batch within
    it, all counted from 1. Keras logs the running mean of the epoch's
    loss, which becomes NaN or Inf at the first step whose loss is.

    Place it first in the callbacks list: it raises before any later
    callback (checkpoint, backup) handles the step, so the files they
    wrote before are kept.

    Raises:
        FloatingPointError: at the first non-finite loss.

    Example:

    >>> model.fit(x, y, callbacks=[NonFiniteLoss(), *other_callbacks])
    """

    def __init__(self):
        super().__init__()
        self._epoch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is None or math.isfinite(float(loss)):
            return
        self.model.stop_training = True
        raise FloatingPointError(
            f"Loss became {float(loss)} at training step "
            f"{_step(self.model)} (epoch {self._epoch + 1}, batch "
            f"{batch + 1}). Training stopped; the checkpoints written "
            "before that step are kept. Lower the learning rate or check "
            "the data."
        )


class AtomicModelCheckpoint(keras.callbacks.ModelCheckpoint):
    """`ModelCheckpoint` that replaces its file atomically, never in place.

    Same arguments and saving rules as `keras.callbacks.ModelCheckpoint`
    (`monitor`, `save_best_only`, `save_freq`, ...); each save goes to a
    temporary file in the same directory, then `os.replace`s the
    checkpoint. Unlike `ModelCheckpoint`, it does not recreate a missing
    directory: a run directory that vanished stops training.

    Raises:
        CheckpointError: a write failed; the previous checkpoint is intact.
        FloatingPointError: the weights to save hold NaN or Inf.

    Example:

    >>> best = AtomicModelCheckpoint(
    ...     "run/best.keras", monitor="val_loss", save_best_only=True)
    """

    def _save_model(self, epoch, batch, logs):
        filepath = self._get_file_path(epoch, batch, logs)
        if self._should_save_model(epoch, batch, logs, filepath):
            save_atomically(self.model, filepath, self.save_weights_only)


class FiniteBackupAndRestore(keras.callbacks.BackupAndRestore):
    """`BackupAndRestore` that refuses to back up NaN or Inf weights.

    A step whose loss is finite can still leave NaN weights (the update
    itself overflowed); the next backup would then resume into NaN. This
    one checks the model's and optimizer's variables first and stops
    training instead, keeping the previous backup. Write errors become a
    `CheckpointError`; with `double_checkpoint=True`, Keras restores from
    the backup before a half-written one.

    With an integer `save_freq`, it also backs up at the end of each epoch
    (Keras's backs up every `save_freq` batches only): a resume starts
    the next epoch from its end instead of repeating part of it.

    Same arguments as `keras.callbacks.BackupAndRestore`.

    Raises:
        FloatingPointError: the weights to back up hold NaN or Inf.
        CheckpointError: the backup could not be written.
    """

    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, logs)
        if self.save_freq != "epoch":
            self._save_model()

    def _save_model(self):
        check_finite(self.model, "the backup")
        try:
            super()._save_model()
        except OSError as error:
            raise CheckpointError(
                error.errno,
                f"Writing the backup in {self.backup_dir} failed: "
                f"{error.strerror or error}. Training stopped",
            ) from error


class DevScores(keras.callbacks.Callback):
    """Dev BLEU and chrF at the end of each epoch, as `val_bleu`/`val_chrf`.

    Translates the dev sentences with the model being trained (the run's
    own search settings) and scores them with sacreBLEU. The scores go into
    the epoch's logs, so the callbacks after this one see them: the CSV
    log and TensorBoard record them, and `ModelCheckpoint`,
    `EarlyStopping` and `ReduceLROnPlateau` can monitor `val_bleu` (mode
    `max`). Selecting on BLEU rather than on dev loss matters on small
    data, where the loss starts rising epochs before BLEU stops improving.

    Args:
        translate: a function of no argument returning the translations
            (list of str) of the dev sources with the current weights.
        references: list of str, one per dev source.
    """

    def __init__(self, translate, references):
        super().__init__()
        self.translate = translate
        self.references = list(references)

    def on_epoch_end(self, epoch, logs=None):
        scores = corpus_scores(self.translate(), self.references)
        if logs is not None:
            logs["val_bleu"] = scores["bleu"]
            logs["val_chrf"] = scores["chrf"]
