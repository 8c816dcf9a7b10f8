import argparse
import csv
import errno
import json
import os
import re
import signal
import subprocess
import sys
import time

import h5py
import keras
import numpy as np
import pytest

from keras_bahdanau import presets
from keras_bahdanau import run_directory as rd
from keras_bahdanau.callbacks import CheckpointError
from keras_bahdanau.commands import train as train_module
from keras_bahdanau.config import ConfigError
from keras_bahdanau.config import resolve_config
from keras_bahdanau.data import load_corpus
from keras_bahdanau.trainer import _check_same_run
from keras_bahdanau.trainer import train
from keras_bahdanau.training import compile_model
from tests.run_fixture import TINY
from tests.run_fixture import reversal_corpus


def _corpus(tmp_path, n=160):
    """A toy parallel corpus: the target is the source reversed."""
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(12)]
    sources = [
        " ".join(rng.choice(words, rng.integers(2, 6))) for _ in range(n)
    ]
    return reversal_corpus(tmp_path, sources)


def test_missing_corpus_file(tmp_path):
    # Named but missing: found by resolve_config, before Keras loads.
    with pytest.raises(ConfigError, match="data.source_file"):
        resolve_config(
            None,
            ["data.corpus=files", "data.source_file=nope.src",
             f"run_dir={tmp_path / 'run'}"],
        )  # fmt: skip
    # Not named: found when the corpus loads.
    config = resolve_config(
        None, ["data.corpus=files", f"run_dir={tmp_path / 'run'}"]
    )
    with pytest.raises(ConfigError, match="data.source_file"):
        train(config)


def test_empty_corpus(tmp_path):
    (tmp_path / "a").write_text("")
    (tmp_path / "b").write_text("")
    config = resolve_config(
        None,
        ["data.corpus=files", f"data.source_file={tmp_path / 'a'}",
         f"data.target_file={tmp_path / 'b'}", f"run_dir={tmp_path / 'run'}"],
    )  # fmt: skip
    with pytest.raises(ConfigError, match="empty"):
        train(config)


def test_unwritable_run_directory(tmp_path):
    (tmp_path / "file").write_text("not a directory")
    config = resolve_config(
        None, _corpus(tmp_path) + [f"run_dir={tmp_path / 'file' / 'run'}"]
    )
    with pytest.raises(ConfigError, match="not writable"):
        train(config)


def _train_command(run_dir, overrides):
    command = [sys.executable, "-m", "keras_bahdanau.cli", "train"]
    for override in overrides + [f"run_dir={run_dir}"]:
        command += ["--set", override]
    return command


def _epochs_logged(run_dir):
    with open(run_dir / rd.TRAINING_LOG, newline="") as file:
        return [int(row["epoch"]) for row in csv.DictReader(file)]


def test_train_end_to_end_and_resume_after_sigkill(tmp_path):
    run_dir = tmp_path / "run"
    overrides = (
        TINY
        + _corpus(tmp_path)
        + [
            "training.epochs=4",
            "training.batch_size=8",
            "training.backup_every_steps=3",
            "training.patience=10",
        ]
    )
    command = _train_command(run_dir, overrides)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    first = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    metadata = run_dir / rd.BACKUP / "training_metadata.json"
    deadline = time.time() + 240
    while time.time() < deadline and first.poll() is None:
        try:
            if json.loads(metadata.read_text())["epoch"] >= 1:
                break  # a backup from the end of epoch 1 or inside epoch 2
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    assert first.poll() is None, first.stdout.read().decode()[-3000:]
    first.send_signal(signal.SIGKILL)
    first.wait()
    finished = _epochs_logged(run_dir)
    assert finished == list(range(len(finished))) and 1 <= len(finished) < 4

    second = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=400
    )
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr
    # Resumed in the epoch it was killed in, not from scratch, and said so.
    assert re.search(r"from its backup: epoch [1-4], from", second.stdout)
    assert "Epoch 1/4" not in second.stdout
    assert f"Epoch {len(finished) + 1}/4" in second.stdout
    assert _epochs_logged(run_dir) == [0, 1, 2, 3]
    assert "[test] BLEU" in second.stdout
    results = json.loads((run_dir / rd.RESULTS).read_text())
    assert 0.0 <= results["test"]["bleu"] <= 100.0
    assert results["dev"]["sentences"] == 4
    # A preset at the top, the training state beside it.
    for name in ("metadata.json", "config.json", "translator.json",
                 presets.WEIGHTS, *presets.VOCABULARIES.values(),
                 rd.TRAINING_CONFIG, rd.LAST_WEIGHTS,
                 rd.TENSORBOARD):  # fmt: skip
        assert (run_dir / name).exists(), name
    config = json.loads((run_dir / rd.TRAINING_CONFIG).read_text())
    assert config["backend"] == os.environ.get("KERAS_BACKEND", "tensorflow")
    model, source, target, _ = presets.load_preset(run_dir)
    assert model.target_vocabulary_size == target.vocabulary_size
    # The checkpoints hold what translation needs, not Adam's moments: the
    # backup kept those for the resume above.
    for name in (presets.WEIGHTS, rd.LAST_WEIGHTS):
        with h5py.File(run_dir / name, "r") as weights:
            assert set(weights.keys()) == {"layers", "vars"}
    keras_config = json.loads((run_dir / "config.json").read_text())
    assert "compile_config" not in keras_config


def test_different_config_in_same_run_dir_is_refused(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    saved = resolve_config(None, [f"run_dir={run_dir}"])
    (run_dir / rd.TRAINING_CONFIG).write_text(json.dumps(saved))
    config = resolve_config(
        None, [f"run_dir={run_dir}", "training.batch_size=7"]
    )
    with pytest.raises(ConfigError, match="different config"):
        train(config)


def test_a_run_may_resume_on_other_devices(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    saved = resolve_config(None, [f"run_dir={run_dir}"])
    del saved["distribution"]  # a run from before [distribution] existed
    (run_dir / rd.TRAINING_CONFIG).write_text(json.dumps(saved))
    config = resolve_config(
        None,
        [f"run_dir={run_dir}", "distribution.strategy=mirrored",
         "distribution.devices=2"],
    )  # fmt: skip
    assert _check_same_run(run_dir, config)  # the same run: resumed


def test_a_run_may_resume_with_another_xla_setting(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    saved = resolve_config(None, [f"run_dir={run_dir}"])
    del saved["training"]["jit_compile"]  # a run from before the key
    (run_dir / rd.TRAINING_CONFIG).write_text(json.dumps(saved))
    config = resolve_config(
        None, [f"run_dir={run_dir}", "training.jit_compile=false"]
    )
    assert _check_same_run(run_dir, config)


def test_xla_with_mirrored_is_refused_before_training(tmp_path):
    config = resolve_config(
        None,
        [f"run_dir={tmp_path / 'run'}", "training.jit_compile=true",
         "distribution.strategy=mirrored"],
    )  # fmt: skip
    with pytest.raises(ConfigError, match="jit_compile=true does not work"):
        train(config)
    assert not (tmp_path / "run").exists()


class _TrainingDone(Exception):
    pass


class _StepLosses(keras.callbacks.Callback):
    """Records each step's loss; stops `train` before its evaluation."""

    def __init__(self):
        super().__init__()
        self.losses = []

    def on_train_batch_end(self, batch, logs=None):
        self.losses.append(float(logs["loss"]))

    def on_train_end(self, logs=None):
        raise _TrainingDone()


# RNNencdec: the same training code, compiled faster than RNNsearch.
FAST = TINY + [
    "model.architecture=rnnencdec",
    "training.batch_size=8",
    "training.patience=10",
]


def test_same_seed_same_losses(tmp_path):
    """Same seed, backend and machine: the same losses, step by step."""
    corpus = _corpus(tmp_path)
    losses = []
    for run in ("a", "b"):
        config = resolve_config(
            None,
            FAST
            + corpus
            + [
                "training.epochs=1",
                "model.dropout=0.3",  # its random masks must repeat too
                f"run_dir={tmp_path / run}",
            ],
        )
        recorder = _StepLosses()
        with pytest.raises(_TrainingDone):
            train(config, callbacks=[recorder])
        losses.append(recorder.losses)
    assert len(losses[0]) >= 10 and len(set(losses[0])) == len(losses[0])
    assert losses[0] == losses[1]  # exactly


class _JitCompile(keras.callbacks.Callback):
    """Records the model's `jit_compile`; stops `train` before a step."""

    def on_train_begin(self, logs=None):
        self.jit_compile = self.model.jit_compile
        raise _TrainingDone()


def _on_a_gpu():
    if keras.backend.backend() != "tensorflow":
        return False
    import tensorflow as tf

    return bool(tf.config.list_physical_devices("GPU"))


@pytest.mark.parametrize("setting", ["auto", "forced"])
def test_jit_compile_reaches_the_model(tmp_path, setting):
    backend = keras.backend.backend()
    if setting == "auto":
        # XLA on JAX and on TensorFlow's GPU; none on TensorFlow's CPU
        # (dropout's RNG is slow under XLA there) nor on torch.
        expected = backend == "jax" or _on_a_gpu()
    else:
        # The setting that is not the default: on torch "true" is
        # torch.compile (minutes), so "false" is forced there too. Training
        # with XLA on TensorFlow: tests/models/translation_model_test.py.
        setting = "true" if backend == "tensorflow" else "false"
        expected = setting == "true"
    config = resolve_config(
        None,
        FAST
        + _corpus(tmp_path, n=80)
        + ["training.epochs=1", f"training.jit_compile={setting}",
           f"run_dir={tmp_path / 'run'}"],
    )  # fmt: skip
    recorder = _JitCompile()
    with pytest.raises(_TrainingDone):
        train(config, callbacks=[recorder])
    assert recorder.jit_compile is expected


class _LearningRateAtEpoch(keras.callbacks.Callback):
    def __init__(self, epoch, learning_rate, run_dir):
        super().__init__()
        self.epoch, self.learning_rate = epoch, learning_rate
        self.run_dir = run_dir
        self.saved = {}

    def on_epoch_begin(self, epoch, logs=None):
        if epoch == self.epoch:
            self.model.optimizer.learning_rate = self.learning_rate

    def on_epoch_end(self, epoch, logs=None):
        # After the built-in checkpoints of this epoch.
        self.saved = {
            name: (self.run_dir / name).read_bytes()
            for name in (presets.WEIGHTS, rd.LAST_WEIGHTS)
        }


def test_diverging_run_stops_and_keeps_its_checkpoints(tmp_path):
    run_dir = tmp_path / "run"
    config = resolve_config(
        None,
        FAST + _corpus(tmp_path) + ["training.epochs=3", f"run_dir={run_dir}"],
    )
    # From the second epoch on, a learning rate that overflows the weights.
    diverge = _LearningRateAtEpoch(1, 1e30, run_dir)
    with pytest.raises(FloatingPointError) as caught:
        train(config, callbacks=[diverge])
    message = str(caught.value)
    match = re.search(
        r"Loss became (nan|inf) at training step (\d+) \(epoch 2, batch "
        r"(\d+)\)",
        message,
    )
    assert match, message
    steps_per_epoch = int(match[2]) - int(match[3])
    assert steps_per_epoch >= 10  # the global step counts epoch 1's steps
    for name, content in diverge.saved.items():
        assert (run_dir / name).read_bytes() == content, name
    model, _, _, _ = presets.load_preset(run_dir, "last")
    assert all(np.isfinite(w).all() for w in model.get_weights())
    assert _epochs_logged(run_dir) == [0]
    # The backup of epoch 1's end stays for a resume (fit did not finish).
    metadata = json.loads(
        (run_dir / rd.BACKUP / "training_metadata.json").read_text()
    )
    assert metadata["epoch"] == 1
    last = model.get_weights()
    compile_model(model, "adam")  # the backup holds Adam's state too
    model.optimizer.build(model.trainable_variables)
    model.load_weights(run_dir / rd.BACKUP / "latest.weights.h5")
    for backed_up, saved in zip(model.get_weights(), last, strict=True):
        np.testing.assert_array_equal(backed_up, saved)


class _DiskFullAfterEpoch(keras.callbacks.Callback):
    def __init__(self, monkeypatch, run_dir):
        super().__init__()
        self.monkeypatch, self.run_dir = monkeypatch, run_dir
        self.saved = {}

    def on_epoch_end(self, epoch, logs=None):
        self.saved = {
            name: (self.run_dir / name).read_bytes()
            for name in (presets.WEIGHTS, rd.LAST_WEIGHTS)
        }

        def full(model, filepath, **kwargs):
            with open(filepath, "wb") as file:
                file.write(b"\x89HDF half a file")
            raise OSError(errno.ENOSPC, "No space left on device")

        self.monkeypatch.setattr(keras.Model, "save_weights", full)


def test_full_disk_stops_training_and_keeps_checkpoints(tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    config = resolve_config(
        None,
        FAST + _corpus(tmp_path) + ["training.epochs=3", f"run_dir={run_dir}"],
    )
    disk = _DiskFullAfterEpoch(monkeypatch, run_dir)
    with pytest.raises(CheckpointError, match="No space left on device"):
        train(config, callbacks=[disk])
    monkeypatch.undo()
    for name, content in disk.saved.items():
        assert (run_dir / name).read_bytes() == content, name
    presets.load_preset(run_dir, "best")
    presets.load_preset(run_dir, "last")
    assert not list(run_dir.glob(".tmp-*"))


def test_command_reports_faults_in_one_line(monkeypatch):
    parser = argparse.ArgumentParser()
    train_module.add_arguments(parser)
    args = parser.parse_args(["--distribution", "none", "--devices", "0"])
    for error in (
        FloatingPointError("Loss became nan at training step 12"),
        CheckpointError(errno.ENOSPC, "Writing model.weights.h5 failed"),
    ):

        def fail(config, error=error):
            raise error

        monkeypatch.setattr(train_module, "train", fail)
        with pytest.raises(SystemExit) as caught:
            train_module.run(args)
        assert str(caught.value) == f"keras-bahdanau train: {error}"


def _write(path, lines):
    path.write_text("\n".join(lines) + "\n")
    return path


def test_files_corpus_with_explicit_dev_and_test(tmp_path):
    files = {}
    for split, n in (("train", 5), ("dev", 2), ("test", 3)):
        for side in ("src", "tgt"):
            files[split, side] = _write(
                tmp_path / f"{split}.{side}",
                [f"{split} {side} {i}" for i in range(n)],
            )
    data = [
        "data.corpus=files",
        f"data.source_file={files['train', 'src']}",
        f"data.target_file={files['train', 'tgt']}",
        f"data.dev_source_file={files['dev', 'src']}",
        f"data.dev_target_file={files['dev', 'tgt']}",
        f"data.test_source_file={files['test', 'src']}",
        f"data.test_target_file={files['test', 'tgt']}",
    ]
    splits = load_corpus(resolve_config(None, data)["data"])
    assert splits["train"] == [
        (f"train src {i}", f"train tgt {i}") for i in range(5)
    ]
    assert splits["dev"] == [
        ("dev src 0", "dev tgt 0"),
        ("dev src 1", "dev tgt 1"),
    ]
    assert [source for source, _ in splits["test"]] == [
        f"test src {i}" for i in range(3)
    ]
    # The train command reports the corpus's errors as ConfigErrors.
    run_dir = f"run_dir={tmp_path / 'run'}"
    with pytest.raises(ConfigError, match="both a dev and a test set"):
        train(resolve_config(None, [*data[:5], run_dir]))
    with pytest.raises(ConfigError, match="data.test_target_file"):
        train(
            resolve_config(
                None,
                [*data[:-1], "data.test_target_file=missing.tgt", run_dir],
            )
        )


def test_small_data_recipe_learns_the_reversal_task(tmp_path):
    """The default recipe (dropouts, label smoothing, tied embeddings,
    selection on dev BLEU, learning-rate decay) learns: BLEU, not only a
    falling loss."""
    run_dir = tmp_path / "run"
    config = resolve_config(
        None,
        _corpus(tmp_path, n=600)
        + [
            "tokenizer.kind=word",
            "model.preset=",
            "model.embedding_dim=16",
            "model.hidden_dim=32",
            "model.maxout_dim=16",
            "training.learning_rate=0.01",
            "training.batch_size=16",
            "training.epochs=6",
            "data.max_length=10",
            "evaluation.beam_size=2",
            "evaluation.max_sentences=20",
            f"run_dir={run_dir}",
        ],
    )
    train(config)
    with open(run_dir / rd.TRAINING_LOG, newline="") as file:
        rows = list(csv.DictReader(file))
    bleu = [float(row["val_bleu"]) for row in rows]
    assert len(bleu) == 6
    results = json.loads((run_dir / rd.RESULTS).read_text())
    assert results["test"]["bleu"] >= 50.0, (bleu, results)
    assert results["dev"]["bleu"] >= 50.0
    model, _, _, _ = presets.load_preset(run_dir)
    assert model.get_config()["tie_embeddings"] is True


class _EpochEndWeights(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.weights = []

    def on_epoch_end(self, epoch, logs=None):
        self.weights.append([np.array(w) for w in self.model.get_weights()])


@pytest.mark.parametrize("selection", ["bleu", "loss"])
def test_checkpoint_averaging(tmp_path, selection):
    """The mean of the last epochs' weights is scored on the selection
    criterion and becomes the preset's weights only if it beats the best
    epoch."""
    run_dir = tmp_path / "run"
    config = resolve_config(
        None,
        FAST
        + _corpus(tmp_path)
        + [
            "training.epochs=3",
            "training.average_last=2",
            f"training.selection={selection}",
            f"run_dir={run_dir}",
        ],
    )
    recorder = _EpochEndWeights()
    train(config, callbacks=[recorder])
    record = json.loads((run_dir / rd.AVERAGING).read_text())
    assert record["epochs"] == [2, 3]
    assert record["monitor"] == f"val_{selection}"
    assert not list((run_dir / rd.EPOCH_WEIGHTS).glob("*.h5"))
    with open(run_dir / rd.TRAINING_LOG, newline="") as file:
        logged = [
            float(row[f"val_{selection}"]) for row in csv.DictReader(file)
        ]
    pick = max if selection == "bleu" else min
    assert record["best_epoch"] == pytest.approx(pick(logged))
    better = (
        record["average"] > record["best_epoch"]
        if selection == "bleu"
        else record["average"] < record["best_epoch"]
    )
    assert record["best_model"] == ("average" if better else "best epoch")
    if better:
        expected = [
            (a + b) / 2 for a, b in zip(*recorder.weights[1:], strict=True)
        ]
    else:
        expected = recorder.weights[logged.index(pick(logged))]
    best, *_ = presets.load_preset(run_dir)
    for got, want in zip(best.get_weights(), expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def test_time_budget_ends_training_and_the_run_is_evaluated(tmp_path):
    run_dir = tmp_path / "run"
    config = resolve_config(
        None,
        FAST
        + _corpus(tmp_path, n=80)
        + ["training.epochs=5", "training.max_minutes=0.0001",
           f"run_dir={run_dir}"],
    )  # fmt: skip
    train(config)
    # Any epoch outlasts 6 ms: one epoch, then the final evaluation.
    with open(run_dir / rd.TRAINING_LOG) as log:
        assert len(list(csv.DictReader(log))) == 1
    assert list(json.loads((run_dir / rd.EPOCH_TIMES).read_text())) == ["0"]
    assert (run_dir / rd.RESULTS).is_file()
    with pytest.raises(ConfigError, match="max_minutes must be"):
        resolve_config(None, ["training.max_minutes=-1"])
