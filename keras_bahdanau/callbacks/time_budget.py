"""`TimeBudget`: stops training before a wall-time budget runs out."""

import json
import time
from pathlib import Path

import keras

from keras_bahdanau.run_directory import atomic_write_text


class TimeBudget(keras.callbacks.Callback):
    """Stops training before an epoch that would end past `minutes`.

    Each finished epoch's wall time (with its validation and the epoch-end
    work of the callbacks before this one, such as dev BLEU) is written to
    `path`, a JSON object keyed by epoch: a resumed run counts the epochs
    of earlier processes, and a repeated epoch replaces its entry.
    Training stops if the epochs so far plus one more as long as the last
    one would pass `minutes`.

    Args:
        path: the JSON file of the epochs' seconds.
        minutes: float > 0, the budget.
        clock: a function returning seconds (`time.monotonic`).
    """

    def __init__(self, path, minutes, clock=time.monotonic):
        super().__init__()
        if not minutes > 0:
            raise ValueError(f"`minutes` must be positive. Received: {minutes}")
        self.path = Path(path)
        self.minutes = minutes
        self.clock = clock
        self.stopped_epoch = None

    def on_train_begin(self, logs=None):
        # `{epoch: seconds}` (0-based) of the epochs of earlier processes.
        self._seconds = {}
        if self.path.is_file():
            saved = json.loads(self.path.read_text(encoding="utf-8"))
            self._seconds = {int(e): t for e, t in saved.items()}

    def on_epoch_begin(self, epoch, logs=None):
        self._start = self.clock()

    def on_epoch_end(self, epoch, logs=None):
        took = self.clock() - self._start
        self._seconds[epoch] = took
        atomic_write_text(self.path, json.dumps(self._seconds))
        spent = sum(t for e, t in self._seconds.items() if e <= epoch)
        last = epoch + 1 == self.params.get("epochs")  # ends anyway
        if spent + took > 60.0 * self.minutes and not last:
            self.model.stop_training = True
            self.stopped_epoch = epoch
            print(
                f"Time budget: stopping after epoch {epoch + 1}; "
                f"{spent / 60:.1f} of {self.minutes:g} minutes spent and an "
                f"epoch takes about {took / 60:.1f}."
            )
