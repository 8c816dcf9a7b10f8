"""What the package assumes of Keras beyond its public API.

`FiniteBackupAndRestore` writes the backup files that Keras's
`BackupAndRestore` restores from; Keras names them in private attributes
only. These tests fail if a Keras release renames them or reads them
differently.
"""

import keras
import numpy as np

from keras_bahdanau.callbacks import BACKUP_WEIGHTS
from keras_bahdanau.callbacks import FiniteBackupAndRestore


def _model():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
    return model


def _fit(model, callbacks, epochs):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(20, 3)).astype("float32")
    return model.fit(
        x, x.sum(axis=1), batch_size=4, epochs=epochs, callbacks=callbacks
    )


class _WeightsAtStart(keras.callbacks.Callback):
    def on_train_begin(self, logs=None):
        self.weights = self.model.get_weights()


class _WeightsAtEpochEnd(keras.callbacks.Callback):
    def __init__(self, epoch):
        super().__init__()
        self.epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        if epoch == self.epoch:
            self.weights = self.model.get_weights()


def _resume_with_keras(backup_dir):
    """Epochs run and starting weights of a resume by Keras's callback."""
    model = _model()
    start = _WeightsAtStart()
    backup = keras.callbacks.BackupAndRestore(backup_dir)
    history = _fit(model, [backup, start], epochs=3)
    return len(history.history["loss"]), start.weights


def test_keras_resumes_from_the_backup_written(tmp_path):
    model = _model()
    backup = FiniteBackupAndRestore(tmp_path, delete_checkpoint=False)
    _fit(model, [backup], epochs=2)
    epochs, weights = _resume_with_keras(tmp_path)
    assert epochs == 1  # epochs 1 and 2 were backed up as done
    for a, b in zip(weights, model.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)


def test_keras_falls_back_on_the_previous_backup(tmp_path):
    model = _model()
    after_one_epoch = _WeightsAtEpochEnd(epoch=0)
    backup = FiniteBackupAndRestore(
        tmp_path, double_checkpoint=True, delete_checkpoint=False
    )
    _fit(model, [backup, after_one_epoch], epochs=2)
    (tmp_path / BACKUP_WEIGHTS).write_bytes(b"not an HDF5 file")
    epochs, weights = _resume_with_keras(tmp_path)
    assert epochs == 2  # the copy says: epoch 1 done
    for a, b in zip(weights, after_one_epoch.weights, strict=True):
        np.testing.assert_array_equal(a, b)
