import errno
import json

import keras
import numpy as np
import pytest

from keras_bahdanau.callbacks import AtomicModelCheckpoint
from keras_bahdanau.callbacks import CheckpointError
from keras_bahdanau.callbacks import DevScores
from keras_bahdanau.callbacks import EpochWeights
from keras_bahdanau.callbacks import FiniteBackupAndRestore
from keras_bahdanau.callbacks import NonFiniteLoss
from keras_bahdanau.callbacks import TimeBudget
from keras_bahdanau.callbacks import average_weights
from keras_bahdanau.callbacks import epoch_weight_files
from keras_bahdanau.callbacks import inference_copy
from keras_bahdanau.models import PervasiveAttention
from keras_bahdanau.models import RNNEncDec
from keras_bahdanau.models import RNNSearch

STEPS_PER_EPOCH = 5


def _model():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
    return model


def _data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4 * STEPS_PER_EPOCH, 3)).astype("float32")
    return x, x.sum(axis=1, keepdims=True)


class _NaNLearningRate(keras.callbacks.Callback):
    """Sets the learning rate to NaN before one step (0-based indices).

    That step's loss is still finite (computed before the update); the
    update makes every weight NaN, and the next step's loss NaN.
    """

    def __init__(self, epoch, batch):
        super().__init__()
        self.at = (epoch, batch)
        self.epoch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        if (self.epoch, batch) == self.at:
            self.model.optimizer.learning_rate = float("nan")


class _WeightsAfterEachStep(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.weights = []

    def on_train_batch_end(self, batch, logs=None):
        self.weights.append([np.array(w) for w in self.model.get_weights()])


def _fit(model, callbacks, epochs=3):
    x, y = _data()
    return model.fit(
        x, y, batch_size=4, epochs=epochs, callbacks=callbacks, verbose=0
    )


def test_non_finite_loss_names_the_global_step():
    model = _model()
    with pytest.raises(FloatingPointError) as caught:
        # NaN weights after step 7 (epoch 2, batch 2): NaN loss at step 8.
        _fit(model, [NonFiniteLoss(), _NaNLearningRate(epoch=1, batch=1)])
    message = str(caught.value)
    assert "Loss became nan at training step 8 (epoch 2, batch 3)" in message
    assert int(model.optimizer.iterations) == STEPS_PER_EPOCH + 3


def test_non_finite_loss_lets_finite_training_run():
    history = _fit(_model(), [NonFiniteLoss()], epochs=2)
    assert np.isfinite(history.history["loss"]).all()
    assert history.history["loss"][1] < history.history["loss"][0]


def _checkpoint_after_one_epoch(tmp_path, **kwargs):
    model = _model()
    _fit(model, [], epochs=1)
    path = tmp_path / "run" / "last.keras"
    path.parent.mkdir()
    checkpoint = AtomicModelCheckpoint(path, **kwargs)
    checkpoint.set_model(model)
    checkpoint.on_epoch_end(0, {"loss": 1.0, "val_loss": 1.0})
    return model, checkpoint, path


def _same_weights(path, model):
    loaded = keras.saving.load_model(path)
    for a, b in zip(loaded.get_weights(), model.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)


def test_atomic_checkpoint_replaces_the_file(tmp_path):
    model, checkpoint, path = _checkpoint_after_one_epoch(tmp_path)
    _same_weights(path, model)
    _fit(model, [], epochs=1)
    checkpoint.on_epoch_end(1, {"loss": 1.0})
    _same_weights(path, model)  # the new weights, not the old ones
    assert sorted(p.name for p in path.parent.iterdir()) == ["last.keras"]


def test_atomic_checkpoint_keeps_save_best_only(tmp_path):
    model, checkpoint, path = _checkpoint_after_one_epoch(
        tmp_path, monitor="val_loss", save_best_only=True
    )
    first = path.read_bytes()
    _fit(model, [], epochs=1)
    checkpoint.on_epoch_end(1, {"val_loss": 2.0})  # worse: not saved
    assert path.read_bytes() == first
    checkpoint.on_epoch_end(2, {"val_loss": 0.5})
    _same_weights(path, model)


def test_checkpoint_without_the_optimizer(tmp_path):
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(64)])
    model.compile(optimizer="adam", loss="mse")
    x = np.random.default_rng(0).normal(size=(8, 64)).astype("float32")
    model.fit(x, x, epochs=1, verbose=0)
    full, light = tmp_path / "full.keras", tmp_path / "light.keras"
    for path, include in ((full, True), (light, False)):
        checkpoint = AtomicModelCheckpoint(path, include_optimizer=include)
        checkpoint.set_model(model)
        checkpoint.on_epoch_end(0, {})
    _same_weights(light, model)
    assert keras.saving.load_model(light).compiled is False
    assert keras.saving.load_model(full).compiled is True
    # Adam's two moments were 2/3 of the file.
    assert light.stat().st_size < 0.5 * full.stat().st_size
    # The copy is built once and refreshed at each save.
    copy = checkpoint._copy
    model.fit(x, x, epochs=1, verbose=0)
    checkpoint.on_epoch_end(1, {})
    assert checkpoint._copy is copy
    _same_weights(light, model)


def test_inference_copy_of_each_architecture():
    for model in _small_models():
        copy = inference_copy(model)
        assert type(copy) is type(model) and copy is not model
        assert copy.get_config() == model.get_config()
        # In the same order (`set_weights`), under uniquified layer names.
        for a, b in zip(copy.weights, model.weights, strict=True):
            assert a.path.split("/")[-1] == b.path.split("/")[-1]
            np.testing.assert_array_equal(
                keras.ops.convert_to_numpy(a), keras.ops.convert_to_numpy(b)
            )


def _small_models():
    sizes = dict(source_vocabulary_size=20, target_vocabulary_size=22)
    rnn = dict(embedding_dim=8, hidden_dim=8, maxout_dim=4, **sizes)
    return [
        RNNSearch(**rnn),
        RNNEncDec(**rnn),
        PervasiveAttention(
            source_embedding_dim=8, target_embedding_dim=8, **sizes
        ),
    ]


def test_disk_full_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    model, checkpoint, path = _checkpoint_after_one_epoch(tmp_path)
    before = path.read_bytes()

    def save_until_the_disk_is_full(filepath, **kwargs):
        with open(filepath, "wb") as file:
            file.write(before[: len(before) // 2])  # a partial write
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(model, "save", save_until_the_disk_is_full)
    with pytest.raises(CheckpointError) as caught:
        checkpoint.on_epoch_end(1, {"loss": 1.0})
    assert caught.value.errno == errno.ENOSPC
    message = str(caught.value)
    assert f"Writing {path} failed: No space left on device" in message
    assert "last.keras is intact" in message
    assert path.read_bytes() == before
    monkeypatch.undo()
    _same_weights(path, model)  # not trained since: the same weights
    assert sorted(p.name for p in path.parent.iterdir()) == ["last.keras"]


def test_vanished_run_directory_is_not_recreated(tmp_path):
    model, checkpoint, path = _checkpoint_after_one_epoch(tmp_path)
    moved = tmp_path / "moved"
    path.parent.rename(moved)
    with pytest.raises(CheckpointError, match="no longer exists") as caught:
        checkpoint.on_epoch_end(1, {"loss": 1.0})
    assert caught.value.errno == errno.ENOENT
    assert not path.parent.exists()
    _same_weights(moved / "last.keras", model)


def test_non_finite_weights_are_not_checkpointed(tmp_path):
    model, checkpoint, path = _checkpoint_after_one_epoch(tmp_path)
    before = path.read_bytes()
    kernel = model.layers[0].kernel
    kernel.assign(np.full(kernel.shape, np.inf, "float32"))
    with pytest.raises(FloatingPointError) as caught:
        checkpoint.on_epoch_end(1, {"loss": 1.0})
    assert f"(in 1 of 4 variables: {kernel.path})" in str(caught.value)
    assert path.read_bytes() == before


def test_backup_is_never_overwritten_with_nan_weights(tmp_path):
    model = _model()
    backup = FiniteBackupAndRestore(tmp_path / "backup", save_freq=1)
    weights = _WeightsAfterEachStep()
    # Step 8 (epoch 2, batch 3) has a finite loss but leaves NaN weights.
    with pytest.raises(FloatingPointError) as caught:
        _fit(model, [backup, _NaNLearningRate(1, 2), weights])
    assert "Not writing the backup: after training step 8" in str(caught.value)
    assert np.isnan(model.get_weights()[0]).all()
    restored = _model()
    restored.optimizer.build(restored.trainable_variables)
    restored.load_weights(tmp_path / "backup" / "latest.weights.h5")
    # The backup of step 7, the last one with finite weights.
    for a, b in zip(restored.get_weights(), weights.weights[6], strict=True):
        np.testing.assert_array_equal(a, b)
    metadata = json.loads(
        (tmp_path / "backup" / "training_metadata.json").read_text()
    )
    assert metadata["epoch"] == 1


def test_backup_at_each_epoch_end(tmp_path):
    model = _model()
    backup = FiniteBackupAndRestore(
        tmp_path / "backup", save_freq=100, delete_checkpoint=False
    )
    _fit(model, [backup], epochs=2)  # 10 steps: never 100
    metadata = json.loads(
        (tmp_path / "backup" / "training_metadata.json").read_text()
    )
    assert metadata["epoch"] == 2
    restored = _model()
    restored.optimizer.build(restored.trainable_variables)
    restored.load_weights(tmp_path / "backup" / "latest.weights.h5")
    for a, b in zip(restored.get_weights(), model.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)


def test_backup_write_error_is_clear(tmp_path, monkeypatch):
    model = _model()
    backup = FiniteBackupAndRestore(tmp_path / "backup", save_freq=1)

    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(model, "save_weights", no_space)
    with pytest.raises(CheckpointError, match="No space left on device"):
        _fit(model, [backup], epochs=1)


def test_selection_on_bleu_keeps_the_epoch_with_the_best_bleu(tmp_path):
    references = ["the house is small", "the dog sleeps"]
    # What the "model" translates after each epoch: BLEU 0, 100, then ~40
    # (a lower loss every epoch, so selecting on the loss would keep 3).
    outputs = iter(
        [["a b c d", "e f g"], references, ["the house is big", "the cat"]]
    )
    scores = DevScores(lambda: next(outputs), references)
    best = AtomicModelCheckpoint(
        tmp_path / "best.keras",
        monitor="val_bleu",
        mode="max",
        save_best_only=True,
    )
    weights = _WeightsAfterEachStep()
    log = keras.callbacks.CSVLogger(tmp_path / "log.csv")
    model = _model()
    _fit(model, [scores, best, weights, log], epochs=3)
    loaded = keras.saving.load_model(tmp_path / "best.keras")
    epoch_2_end = weights.weights[2 * STEPS_PER_EPOCH - 1]
    for a, b in zip(loaded.get_weights(), epoch_2_end, strict=True):
        np.testing.assert_array_equal(a, b)
    rows = (tmp_path / "log.csv").read_text().splitlines()
    header = rows[0].split(",")
    bleu = [float(row.split(",")[header.index("val_bleu")]) for row in rows[1:]]
    assert bleu[0] == 0.0 and bleu[1] == pytest.approx(100.0)
    assert 0.0 < bleu[2] < 100.0
    assert "val_chrf" in header


def test_epoch_weights_keeps_the_last_epochs(tmp_path):
    weights = _WeightsAfterEachStep()
    model = _model()
    _fit(model, [weights, EpochWeights(tmp_path / "epochs", keep=2)], epochs=4)
    files = epoch_weight_files(tmp_path / "epochs")
    assert [f.name for f in files] == [
        "epoch_0003.weights.h5",
        "epoch_0004.weights.h5",
    ]
    for path, epoch in zip(files, (3, 4), strict=True):
        copy = _model()
        copy.load_weights(path)
        expected = weights.weights[epoch * STEPS_PER_EPOCH - 1]
        for a, b in zip(copy.get_weights(), expected, strict=True):
            np.testing.assert_array_equal(a, b)


def test_epoch_weights_refuses_non_finite_weights(tmp_path):
    model = _model()
    with pytest.raises(FloatingPointError, match="epoch_0001.weights.h5"):
        _fit(
            model,
            [_NaNLearningRate(0, 4), EpochWeights(tmp_path, keep=1)],
            epochs=1,
        )
    assert epoch_weight_files(tmp_path) == []


def test_average_weights_is_the_element_wise_mean(tmp_path):
    rng = np.random.default_rng(1)
    drawn = []
    for i in range(3):
        model = _model()
        model.set_weights(
            [
                rng.normal(size=w.shape).astype("float32")
                for w in model.get_weights()
            ]
        )
        drawn.append(model.get_weights())
        model.save_weights(tmp_path / f"{i}.weights.h5")
    model = average_weights(
        _model(), [tmp_path / f"{i}.weights.h5" for i in range(3)]
    )
    for got, *values in zip(model.get_weights(), *drawn, strict=True):
        expected = (values[0] + values[1] + values[2]) / 3
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, expected, rtol=1e-6)
    with pytest.raises(ValueError, match="nothing to average"):
        average_weights(model, [])


class _Clock(keras.callbacks.Callback):
    """A fake clock that training advances: `batch` seconds a batch and
    `end` seconds at each epoch end (validation, dev translation)."""

    def __init__(self, batch, end):
        super().__init__()
        self.batch, self.end, self.now = batch, end, 0.0

    def __call__(self):
        return self.now

    def on_train_batch_end(self, batch, logs=None):
        self.now += self.batch

    def on_epoch_end(self, epoch, logs=None):
        self.now += self.end


def _fit_with_budget(path, minutes, batch, end, epochs=10, initial_epoch=0):
    """Fits on 12 pairs, 3 batches an epoch; returns the batches run per
    epoch and the callback."""
    clock = _Clock(batch, end)
    budget = TimeBudget(path, minutes, save_every=15, clock=clock)
    batches = {}

    class Count(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            batches[self.epoch] = batch + 1

        def on_epoch_begin(self, epoch, logs=None):
            self.epoch = epoch

    x, y = _data()
    _model().fit(
        x[:12], y[:12], batch_size=4, epochs=epochs,
        initial_epoch=initial_epoch, callbacks=[clock, Count(), budget],
        verbose=0,
    )  # fmt: skip
    return batches, budget


def test_time_budget_is_spent_to_its_end(tmp_path, capsys):
    path = tmp_path / "epoch_times.json"
    # 10 s a batch, 5 s an epoch end, 3 batches: 35 s an epoch. 90 s: two
    # epochs (70 s), then the third ends after its first batch (80 s,
    # whose end brings it to the budget: 85 s of epochs and its end).
    batches, budget = _fit_with_budget(path, 1.5, 10, 5)
    assert batches == {0: 3, 1: 3, 2: 1} and budget.stopped_epoch == 2
    assert json.loads(path.read_text()) == {"0": 35, "1": 35, "2": 15}
    assert "ending epoch 3 after batch 1" in capsys.readouterr().out


def test_time_budget_begins_no_epoch_for_its_end_alone(tmp_path, capsys):
    # 10 s a batch, 20 s an epoch end: 50 s an epoch. After two (100 s),
    # 30 s are left, less than two epoch ends: no third epoch.
    batches, budget = _fit_with_budget(tmp_path / "t.json", 130 / 60, 10, 20)
    assert batches == {0: 3, 1: 3} and budget.stopped_epoch == 1
    assert "stopping after epoch 2" in capsys.readouterr().out


def test_time_budget_counts_the_time_of_a_killed_run(tmp_path):
    path = tmp_path / "epoch_times.json"
    # Epochs 0-1 ran in an earlier process, and 12 s of epoch 2 before the
    # kill: they count. Epoch 2 then ends after 2 batches (12 + 20 + the
    # 5 s end = 37 s; 35 + 35 + 37 = 107 s of 110).
    path.write_text(json.dumps({"0": 35, "1": 35, "2": 12}))
    batches, budget = _fit_with_budget(path, 110 / 60, 10, 5, initial_epoch=2)
    assert batches == {2: 2} and budget.stopped_epoch == 2
    assert json.loads(path.read_text()) == {"0": 35, "1": 35, "2": 37}


def test_time_budget_writes_its_seconds_within_an_epoch(tmp_path):
    path = tmp_path / "epoch_times.json"
    seen = []

    class Read(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if path.is_file():
                seen.append(json.loads(path.read_text()))

    clock = _Clock(10, 5)
    budget = TimeBudget(path, 60, save_every=15, clock=clock)
    x, y = _data()
    _model().fit(
        x[:12], y[:12], batch_size=4, epochs=1,
        callbacks=[clock, budget, Read()], verbose=0,
    )  # fmt: skip
    # Nothing at 10 s; at 20 s, 15 s or more after the epoch's start;
    # not at 30 s (10 s later); then at the epoch end, 35 s.
    assert seen == [{"0": 20}, {"0": 20}]
    assert json.loads(path.read_text()) == {"0": 35}


def test_time_budget_must_be_positive(tmp_path):
    with pytest.raises(ValueError, match="must be positive"):
        TimeBudget(tmp_path / "t.json", 0)
