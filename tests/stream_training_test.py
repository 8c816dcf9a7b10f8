"""`keras-bahdanau train` on a streamed corpus: resume, and devices.

The stream's own behaviour (batches, reports, where it starts) is tested
in `tests/data/stream_test.py`; here the trainer's use of it.
"""

import csv
import json
import os
import re
import signal
import subprocess
import sys
import time
import types

import keras
import numpy as np
import pytest

from keras_bahdanau import distribution as kdist
from keras_bahdanau import run_directory as rd
from keras_bahdanau.cluster import ClusterSettings
from keras_bahdanau.data import STREAM_FILE
from tests import distribution_test
from tests.run_fixture import TINY
from tests.run_fixture import reversal_corpus

STREAMED = ["data.stream=true"]


def _corpus(tmp_path, n=400):
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(12)]
    sources = [
        " ".join(rng.choice(words, rng.integers(2, 6))) for _ in range(n)
    ]
    return reversal_corpus(tmp_path, sources)


def _command(run_dir, overrides):
    command = [sys.executable, "-m", "keras_bahdanau.cli", "train"]
    for override in [*overrides, f"run_dir={run_dir}"]:
        command += ["--set", override]
    return command


def test_a_stream_resumes_after_sigkill_where_it_stopped(tmp_path):
    run_dir = tmp_path / "run"
    overrides = [
        *TINY,
        *_corpus(tmp_path),
        *STREAMED,
        "training.epochs=3",
        "training.batch_size=8",
        "training.backup_every_steps=5",
        "training.patience=10",
    ]
    command = _command(run_dir, overrides)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    first = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    metadata = run_dir / rd.BACKUP / "training_metadata.json"
    deadline = time.time() + 240
    backup = {}
    while time.time() < deadline and first.poll() is None:
        try:
            backup = json.loads(metadata.read_text())
            if backup["batch"] > 0:
                break  # a backup inside an epoch
        except (OSError, ValueError):
            pass
        time.sleep(0.02)
    assert first.poll() is None, first.stdout.read().decode()[-3000:]
    first.send_signal(signal.SIGKILL)
    first.wait()
    output = first.stdout.read().decode()
    per_epoch = int(re.search(r"in ([\d,]+) batches per pass", output)[1])
    backup = json.loads(metadata.read_text())  # the last one written

    second = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=400
    )
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr
    assert "Keras restarts" not in second.stdout
    assert re.search(
        rf"from its backup: epoch {backup['epoch'] + 1}, from its start as "
        r"Keras counts its \d+ steps done again; the corpus stream goes on",
        second.stdout,
    ), second.stdout[-3000:]
    # The optimizer's steps at the backup: its epochs, then its batches.
    step = backup["epoch"] * per_epoch + backup["batch"] + 1
    record = run_dir / STREAM_FILE
    per_pass = (
        json.loads(record.read_text())["report"]["num_batches"]
        if record.is_file()
        else 0
    )
    number, skipped = divmod(step, per_pass) if per_pass else (0, step)
    assert (
        f"The training stream goes on after step {step:,}: in pass "
        f"{number + 1}, after its first {skipped:,} batches"
    ) in second.stdout
    with open(run_dir / rd.TRAINING_LOG, newline="") as file:
        epochs = [int(row["epoch"]) for row in csv.DictReader(file)]
    assert epochs == [0, 1, 2]
    # Its first pass, counted in the killed run or in this one.
    report = json.loads(record.read_text())["report"]
    assert report["num_pairs"] == report["num_examples"] > 300
    assert "[test] BLEU" in second.stdout


def test_a_stream_trains_like_one_device_on_two(tmp_path, backend):
    """The CPU split in two (as `tests/distribution_test.py` does it)."""
    strategy = {"jax": "data_parallel", "tensorflow": "mirrored"}.get(backend)
    if strategy is None:
        pytest.skip("torch: Keras has no multi-device training for it")
    parallel = [f"distribution.strategy={strategy}", "distribution.devices=2"]
    single = []
    if strategy == "mirrored":  # as in tests/distribution_test.py
        parallel.append("training.clipnorm=0")
        single = [
            "distribution.strategy=mirrored",
            "distribution.devices=1",
            "training.clipnorm=0",
        ]
    result, stdout = distribution_test._run_script(
        tmp_path,
        [
            ("parallel", [*STREAMED, *parallel]),
            ("single", [*STREAMED, *single]),
        ],
    )
    assert f"{strategy} on 2 devices (cpu:0, cpu:1)" in stdout
    assert "pairs streamed from" in stdout
    distribution_test._check_same_losses(result["parallel"], result["single"])


def _plan(strategy, replicas, processes, process):
    cluster = ClusterSettings("initialize", {}, processes, process)
    return kdist.Plan(strategy, [], replicas=replicas, cluster=cluster)


def test_each_host_takes_its_share_of_every_batch():
    assert kdist.data_shard(kdist.Plan("none", [])) == (1, 0)
    assert kdist.data_shard(_plan("mirrored", 8, 2, 1)) == (1, 0)
    # data_parallel: 2 hosts of 4 devices, by host.
    assert kdist.data_shard(_plan("data_parallel", 8, 2, 1)) == (2, 1)
    # model_parallel: 2 replicas over 4 hosts: hosts 2 and 3 hold
    # replica 1, and read its share.
    assert kdist.data_shard(_plan("model_parallel", 2, 4, 2)) == (2, 1)
    assert kdist.data_shard(_plan("model_parallel", 2, 4, 1)) == (2, 0)


def test_keras_does_not_shard_what_the_trainer_shards(backend):
    if backend != "jax":
        pytest.skip("keras.distribution is JAX's")
    device = keras.distribution.list_devices()[:1]
    plan = types.SimpleNamespace(
        strategy="data_parallel", devices=device, replicas=1, model_shards=1
    )
    with kdist.training_scope(plan):
        assert not keras.distribution.distribution().auto_shard_dataset
    plan.strategy = "model_parallel"
    with kdist.training_scope(plan):
        assert not keras.distribution.distribution().auto_shard_dataset
