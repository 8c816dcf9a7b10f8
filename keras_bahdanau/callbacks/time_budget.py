"""`TimeBudget`: trains until a wall-time budget is spent, then stops."""

import json
import time
from pathlib import Path

import keras

from keras_bahdanau.run_directory import atomic_write_text


class TimeBudget(keras.callbacks.Callback):
    """Ends training when `minutes` of wall time are spent, mid-epoch if so.

    After each batch, training stops if one more batch (as long as this
    one) and the epoch-end work (validation, dev translation, checkpoints:
    measured at the last epoch's end, between its last batch and this
    callback; 0 before the first epoch end) would end past `minutes`:
    the epoch is cut short there, and its end runs as any epoch's does, so
    the last batches count in the selection of the best checkpoint and in
    the backup a resumed run starts from. At an epoch end, no further
    epoch is begun if what is left of the budget is less than twice that
    epoch-end work (it would be mostly evaluation).

    The seconds spent on each epoch are kept in `path`, a JSON object keyed
    by epoch (0-based), written at each epoch end and every `save_every`
    seconds within one: a resumed run counts the time of the processes
    before it, a repeated epoch adding to its entry. Place it after the
    callbacks whose epoch-end work it should count.

    Args:
        path: the JSON file of the epochs' seconds.
        minutes: float > 0, the budget.
        save_every: seconds between two writes of `path` within an epoch.
        clock: a function returning seconds (`time.monotonic`).
    """

    def __init__(self, path, minutes, save_every=30.0, clock=time.monotonic):
        super().__init__()
        if not minutes > 0:
            raise ValueError(f"`minutes` must be positive. Received: {minutes}")
        self.path = Path(path)
        self.minutes = minutes
        self.save_every = save_every
        self.clock = clock
        self.stopped_epoch = None
        self.end_seconds = None  # the last measured epoch-end work

    def on_train_begin(self, logs=None):
        # `{epoch: seconds}` of the epochs of earlier processes.
        self._seconds = {}
        if self.path.is_file():
            saved = json.loads(self.path.read_text(encoding="utf-8"))
            self._seconds = {int(e): t for e, t in saved.items()}

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch
        # Time an interrupted process already spent on this epoch.
        self._carried = self._seconds.get(epoch, 0.0)
        self._start = self._saved = self._last_batch = self.clock()

    def _epoch_seconds(self, now):
        return self._carried + now - self._start

    def _spent(self, now):
        """Seconds of every epoch so far, this one's until `now`."""
        before = sum(t for e, t in self._seconds.items() if e != self._epoch)
        return before + self._epoch_seconds(now)

    def _save(self, now):
        self._seconds[self._epoch] = self._epoch_seconds(now)
        atomic_write_text(self.path, json.dumps(self._seconds))
        self._saved = now

    def on_train_batch_end(self, batch, logs=None):
        now = self.clock()
        took, self._last_batch = now - self._last_batch, now
        needed = self._spent(now) + took + (self.end_seconds or 0.0)
        if self.stopped_epoch is None and needed > 60.0 * self.minutes:
            self.model.stop_training = True
            self.stopped_epoch = self._epoch
            print(
                f"\nTime budget: ending epoch {self._epoch + 1} after batch "
                f"{batch + 1}; {self._spent(now) / 60:.1f} of "
                f"{self.minutes:g} minutes spent, its end follows."
            )
        elif now - self._saved >= self.save_every:
            self._save(now)

    def on_epoch_end(self, epoch, logs=None):
        now = self.clock()
        self.end_seconds = now - self._last_batch
        self._save(now)
        left = 60.0 * self.minutes - self._spent(now)
        if self.stopped_epoch is None and left < 2 * self.end_seconds:
            self.model.stop_training = True
            self.stopped_epoch = epoch
            print(
                f"Time budget: stopping after epoch {epoch + 1}; "
                f"{left / 60:.1f} of {self.minutes:g} minutes are left and "
                f"an epoch's end alone takes about {self.end_seconds:.0f} s."
            )
