"""Checkpoint averaging: the weights of the last epochs, and their mean
(Vaswani et al. 2017, arXiv:1706.03762, 6.1)."""

from pathlib import Path

import keras
import numpy as np

from keras_bahdanau.callbacks.checkpointing import save_atomically
from keras_bahdanau.validation import check_int


class EpochWeights(keras.callbacks.Callback):
    """Keeps the weights of the last `keep` epochs, for `average_weights`.

    At each epoch end it writes `directory/epoch_NNNN.weights.h5` (epochs
    counted from 1) with `save_atomically`, and deletes older epochs' files
    beyond the last `keep`. Place it before the backup callback, so that a
    backup marking an epoch done comes after its file.

    Args:
        directory: the folder of the files, created when training starts.
        keep: int >= 1, how many epochs to keep.

    Raises:
        CheckpointError: a file could not be written.
        FloatingPointError: the weights hold NaN or Inf; nothing written.
    """

    def __init__(self, directory, keep):
        super().__init__()
        self.directory = Path(directory)
        check_int("keep", keep)
        self.keep = keep

    def on_train_begin(self, logs=None):
        self.directory.mkdir(parents=True, exist_ok=True)

    def on_epoch_end(self, epoch, logs=None):
        path = self.directory / f"epoch_{epoch + 1:04d}.weights.h5"
        save_atomically(self.model, path)
        for old in epoch_weight_files(self.directory)[: -self.keep]:
            old.unlink()


def epoch_weight_files(directory):
    """The files `EpochWeights` wrote in `directory`, oldest first."""
    return sorted(Path(directory).glob("epoch_[0-9]*.weights.h5"))


def average_weights(model, paths):
    """Sets `model`'s weights to the mean of the weight files `paths`.

    Checkpoint averaging smooths the noise of the last updates (Vaswani et
    al., 2017, arXiv:1706.03762, section 6.1, average the last 5).
    Floating-point variables are averaged in float64 and cast back; others
    (integer states) take the last file's values.

    Args:
        model: a built model of the architecture that wrote the files.
        paths: `.weights.h5` files written by `model.save_weights`
            (e.g. `EpochWeights`'s), at least one.

    Returns:
        `model`, its weights now the average.
    """
    paths = list(paths)
    if not paths:
        raise ValueError("`paths` is empty: there is nothing to average.")
    total = [np.zeros(w.shape, "float64") for w in model.get_weights()]
    for path in paths:
        model.load_weights(path)
        weights = model.get_weights()
        for accumulator, weight in zip(total, weights, strict=True):
            accumulator += weight  # integers too: their sums go unused
    model.set_weights(
        [
            (accumulator / len(paths)).astype(weight.dtype)
            if np.issubdtype(weight.dtype, np.floating)
            else weight
            for accumulator, weight in zip(total, weights, strict=True)
        ]
    )
    return model
