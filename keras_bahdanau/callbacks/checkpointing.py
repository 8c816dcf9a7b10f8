"""Callbacks that keep a run's files good when training goes wrong.

Checkpoints and backups are written to a temporary file renamed over the
old one (a full disk never leaves a half-written checkpoint), from the
public `Callback` hooks (Keras's own callbacks save through private
methods). A checkpoint that cannot be written (`CheckpointError`) or
weights that are no longer finite (`FloatingPointError`) stop training:
carrying on would leave a run whose files are older than its log, or a
backup that resumes into NaN.
"""

import errno
import json
import math
import operator
import shutil
import warnings
from pathlib import Path

import keras
import numpy as np

from keras_bahdanau.run_directory import atomic_write
from keras_bahdanau.run_directory import atomic_write_text
from keras_bahdanau.validation import check_choice

# The files `keras.callbacks.BackupAndRestore` restores from, in its
# `backup_dir` (Keras names them in private attributes only);
# tests/keras_api_test.py fails if Keras renames them.
BACKUP_WEIGHTS = "latest.weights.h5"
BACKUP_METADATA = "training_metadata.json"


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


def save_atomically(model, path):
    """Saves `model` to `path` with `atomic_write`.

    A `.weights.h5` file gets the weights only, any other name the whole
    model (`model.save`).

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
    try:
        weights_only = path.name.endswith(".weights.h5")
        atomic_write(path, model.save_weights if weights_only else model.save)
    except OSError as error:
        raise CheckpointError(
            error.errno,
            f"Writing {path} failed: {error.strerror or error}. Training "
            f"stopped; any previous {path.name} is intact. Free some space "
            "(or restore the directory) and run the same command again to "
            "resume",
        ) from error


def inference_copy(model, copy=None):
    """A model with `model`'s config and weights, and no optimizer.

    Built with `from_config` and `build_from_config`: Keras has no public
    way to save a compiled model without its optimizer
    (`include_optimizer` is the legacy HDF5 format's only).

    Args:
        model: a built Keras model whose class round-trips `get_config`.
        copy: a copy returned before for `model`: only its weights are
            refreshed (building one costs a model build).

    Returns:
        The copy, uncompiled, its weights equal to `model`'s.
    """
    if copy is None:
        copy = model.__class__.from_config(model.get_config())
        copy.build_from_config(model.get_build_config())
    copy.set_weights(model.get_weights())
    return copy


class NonFiniteLoss(keras.callbacks.Callback):
    """Stops training at the first NaN or Inf loss, naming the step.

    Place it first in the callbacks list: it raises before any later
    callback (checkpoint, backup) handles the step, so their files are
    kept. The step is `optimizer.iterations`, with the epoch and batch.

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


class AtomicModelCheckpoint(keras.callbacks.Callback):
    """Saves the model at each epoch end, replacing its file atomically.

    `keras.callbacks.ModelCheckpoint`'s rules for one file: saved every
    epoch, or with `save_best_only` when `monitor` improves on `best` (a
    value missing from the logs warns and saves). Unlike Keras's, it
    writes via `save_atomically` and does not recreate a missing
    directory: a run directory that vanished stops training.

    Args:
        filepath: the `.keras` file to write.
        monitor: the logged value that `save_best_only` compares.
        mode: `"min"` or `"max"`: whether lower or higher is better.
        save_best_only: save only when `monitor` improves.
        include_optimizer: save the optimizer's variables and the compile
            config too (a file `load_model` returns compiled). False: only
            what translation needs (`inference_copy`), not the optimizer
            state (Adam's: twice the weights again; the backup keeps it).

    Attributes:
        best: the best `monitor` value so far (None: none yet); a resumed
            run sets it to the best value it logged.

    Raises:
        CheckpointError: a write failed; the previous checkpoint is intact.
        FloatingPointError: the weights to save hold NaN or Inf.

    Example:

    >>> best = AtomicModelCheckpoint(
    ...     "run/best.keras", monitor="val_loss", save_best_only=True,
    ...     include_optimizer=False)
    """

    def __init__(
        self,
        filepath,
        monitor="val_loss",
        mode="min",
        save_best_only=False,
        include_optimizer=True,
    ):
        super().__init__()
        check_choice("mode", mode, ("min", "max"))
        self.filepath = filepath
        self.monitor = monitor
        self.save_best_only = save_best_only
        self.include_optimizer = include_optimizer
        self.best = None
        self._improves = operator.lt if mode == "min" else operator.gt
        self._copy = None  # the inference copy, built at the first save

    def on_epoch_end(self, epoch, logs=None):
        if self.save_best_only:
            current = (logs or {}).get(self.monitor)
            if current is None:
                warnings.warn(
                    f"Can save best model only with {self.monitor} available.",
                    stacklevel=2,
                )
            elif self.best is None or self._improves(current, self.best):
                self.best = current
            else:
                return
        model = self.model
        if not self.include_optimizer:
            model = self._copy = inference_copy(model, self._copy)
        save_atomically(model, self.filepath)


class FiniteBackupAndRestore(keras.callbacks.BackupAndRestore):
    """`BackupAndRestore` that writes atomically, never NaN or Inf weights.

    Backs up with `atomic_write` every `save_freq` batches (an int) and at
    each epoch end (so a resume never repeats part of a finished epoch),
    after checking the variables: a step with a finite loss can still
    leave NaN weights (the update overflowed). Same arguments as
    `keras.callbacks.BackupAndRestore`, `double_checkpoint` included.

    Raises:
        FloatingPointError: the weights to back up hold NaN or Inf.
        CheckpointError: the backup could not be written.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._epoch_running, self._batch_seen = 0, -1
        self._unsaved = 0  # batches since the last backup

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_running, self._batch_seen = epoch, -1

    def on_train_batch_end(self, batch, logs=None):
        # More than one batch per call with `steps_per_execution`.
        self._unsaved += batch - self._batch_seen
        self._batch_seen = batch
        if self.save_freq != "epoch" and self._unsaved >= self.save_freq:
            self._unsaved = 0
            self._back_up({"epoch": self._epoch_running, "batch": batch})

    def on_epoch_end(self, epoch, logs=None):
        self._back_up({"epoch": epoch + 1, "batch": 0})

    def _back_up(self, metadata):
        check_finite(self.model, "the backup")
        directory = Path(self.backup_dir)
        weights = directory / BACKUP_WEIGHTS
        try:
            directory.mkdir(parents=True, exist_ok=True)
            for path in (weights, directory / BACKUP_METADATA):
                if self.double_checkpoint and path.is_file():
                    shutil.copyfile(path, f"{path}.bkp")
            atomic_write(weights, self.model.save_weights)
            atomic_write_text(directory / BACKUP_METADATA, json.dumps(metadata))
        except OSError as error:
            raise CheckpointError(
                error.errno,
                f"Writing the backup in {self.backup_dir} failed: "
                f"{error.strerror or error}. Training stopped",
            ) from error
