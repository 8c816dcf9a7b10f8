"""Multi-device training gives the losses of one device; wrong set-ups fail.

A device count can only be chosen before the backend initializes, so the
multi-device runs happen in a fresh Python process (`_SCRIPT`), which
splits the CPU into two devices through `[distribution] devices = 2`,
exactly as `keras-bahdanau train` does on a host without accelerators.
"""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from keras_bahdanau import distribution as kdist
from keras_bahdanau import presets
from keras_bahdanau.cluster import ClusterSettings
from keras_bahdanau.config import ConfigError
from keras_bahdanau.config import resolve_config
from keras_bahdanau.trainer import train
from tests.run_fixture import reversal_corpus

TINY = [
    "recipe=paper",  # word vocabularies, no dropout: the plumbing alone
    # RNNencdec compiles faster than RNNsearch and has the same vocabulary
    # matrices (embeddings and output projection).
    "model.architecture=rnnencdec",
    "model.preset=",
    "model.embedding_dim=8",
    "model.hidden_dim=8",
    "model.maxout_dim=4",
    "model.initialization=glorot",
    "training.optimizer=adam",
    "training.learning_rate=0.01",
    "training.batch_size=8",
    "training.epochs=1",
    "data.max_length=10",
]

# Runs in a fresh process, in the order given: the first run that asks for
# two devices splits the CPU, before anything ran on the backend.
_SCRIPT = r"""
import json
import sys

import keras

from keras_bahdanau.trainer import train
from keras_bahdanau.config import ConfigError, resolve_config

args = json.loads(sys.argv[1])
backend = keras.backend.backend()


def placement(model):
    # Per variable: the devices holding it and the shape of one piece.
    found = []
    for variable in model.weights:
        value = variable.value
        if backend == "jax":
            pieces = len(value.sharding.device_set)
            shape = value.addressable_shards[0].data.shape
        else:  # a tf.distribute MirroredVariable has one value per device
            values = getattr(value, "values", (value,))
            pieces, shape = len(values), values[0].shape
        found.append([variable.path, list(variable.shape), pieces, list(shape)])
    return found


class SkipEvaluation(Exception):
    pass


class Probe(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.losses = []

    def on_train_begin(self, logs=None):
        self.placement = placement(self.model)

    def on_train_batch_end(self, batch, logs=None):
        self.losses.append(float(logs["loss"]))

    def on_train_end(self, logs=None):
        raise SkipEvaluation()  # BLEU is not what these runs check


def run(name, overrides):
    config = resolve_config(
        None, args["overrides"] + overrides + [f"run_dir={args['tmp']}/{name}"]
    )
    probe = Probe()
    try:
        train(config, callbacks=[probe])
    except ConfigError as error:
        return str(error)
    except SkipEvaluation:
        pass
    return {"losses": probe.losses, "placement": probe.placement}


result = {name: run(name, overrides) for name, overrides in args["runs"]}
print("RESULT " + json.dumps(result))
"""


def _corpus(tmp_path, n=100):
    """Sentences of 4 words: every replica gets as many target tokens."""
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(12)]  # 16 entries with the reserved 4
    sources = [" ".join(rng.choice(words, 4)) for _ in range(n)]
    return reversal_corpus(tmp_path, sources)


def _run_script(tmp_path, runs):
    arguments = {
        "overrides": TINY + _corpus(tmp_path),
        "runs": runs,
        "tmp": str(tmp_path),
    }
    process = subprocess.run(
        [sys.executable, "-c", _SCRIPT, json.dumps(arguments)],
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert process.returncode == 0, process.stdout[-3000:] + process.stderr
    line = next(
        line for line in process.stdout.splitlines() if line[:7] == "RESULT "
    )
    return json.loads(line[7:]), process.stdout


def _check_wrong_backend(tmp_path, backend, strategy):
    """Refused first, before a run directory or a device is touched."""
    config = resolve_config(
        None, [f"distribution.strategy={strategy}", f"run_dir={tmp_path / 'r'}"]
    )
    needed = kdist.BACKENDS[strategy]
    with pytest.raises(
        ConfigError, match=f"needs KERAS_BACKEND={needed}"
    ) as caught:
        train(config)
    if backend == "torch":
        assert "DistributedDataParallel" in str(caught.value)
    assert not (tmp_path / "r").exists()


def _check_same_losses(distributed, single):
    assert len(distributed["losses"]) == len(single["losses"]) >= 10
    np.testing.assert_allclose(
        distributed["losses"], single["losses"], rtol=1e-5
    )
    assert distributed["losses"][-1] < distributed["losses"][0]  # it learns
    assert all(pieces == 1 for *_, pieces, _ in single["placement"])


def _check_checkpoint(run_dir):
    """The checkpoint of a distributed run loads on one device."""
    model, source, target, _ = presets.load_preset(run_dir, "last")
    assert model.target_vocabulary_size == target.vocabulary_size == 16
    assert all(np.isfinite(w).all() for w in model.get_weights())


VOCABULARY_MATRICES = [
    "source_embedding/embeddings",
    "target_embedding/embeddings",
    "output_projection/kernel",
    "output_projection/bias",
]


def test_jax_strategies_train_like_one_device(tmp_path, backend):
    if backend != "jax":
        for strategy in ("data_parallel", "model_parallel"):
            _check_wrong_backend(tmp_path, backend, strategy)
        return
    # A (batch 2, model 2) mesh: the batch split over 2 replicas and the
    # vocabulary matrices over 2 devices each, in one run.
    model_parallel = [
        "distribution.strategy=model_parallel",
        "distribution.devices=4",
        "distribution.model_shards=2",
    ]
    result, stdout = _run_script(
        tmp_path,
        [
            ("odd_batch", [*model_parallel, "training.batch_size=7"]),
            ("odd_vocabulary",
             [*model_parallel, "tokenizer.target_vocabulary_size=15"]),
            ("model_parallel", model_parallel),
            ("single", []),
            ("too_many", [*model_parallel[:1], "distribution.devices=64"]),
        ],
    )  # fmt: skip
    assert "divisible by the 2 replicas" in result["odd_batch"]
    assert "it has 15 entries" in result["odd_vocabulary"]
    assert "JAX sees 4 cpu device(s)" in result["too_many"]
    assert (
        "model_parallel on 4 devices (cpu:0, cpu:1, cpu:2, cpu:3): global "
        "batch 8, 4 per replica, vocabulary matrices split over 2" in stdout
    )
    _check_same_losses(result["model_parallel"], result["single"])
    for path, shape, pieces, piece in result["model_parallel"]["placement"]:
        assert pieces == 4, path  # every variable is on every device
        if path in VOCABULARY_MATRICES:
            # Split along the vocabulary (16 entries): 8 per device.
            axis = 1 if path.endswith("kernel") else 0
            assert shape[axis] == 16 and piece[axis] == 8, path
            shape[axis] = 8
        assert piece == shape, path
    _check_checkpoint(tmp_path / "model_parallel")


@pytest.mark.large
def test_data_parallel_trains_like_one_device(tmp_path, backend):
    if backend != "jax":
        _check_wrong_backend(tmp_path, backend, "data_parallel")
        return
    data_parallel = ["distribution.strategy=data_parallel"]
    result, stdout = _run_script(
        tmp_path,
        [
            ("data_parallel", [*data_parallel, "distribution.devices=2"]),
            ("single", []),
        ],
    )
    assert (
        "data_parallel on 2 devices (cpu:0, cpu:1): global batch 8, 4 per "
        "replica" in stdout
    )
    _check_same_losses(result["data_parallel"], result["single"])
    for path, shape, pieces, piece in result["data_parallel"]["placement"]:
        assert (pieces, piece) == (2, shape), path
    _check_checkpoint(tmp_path / "data_parallel")


def test_mirrored_trains_like_one_device(tmp_path, backend):
    if backend != "tensorflow":
        _check_wrong_backend(tmp_path, backend, "mirrored")
        return
    mirrored = ["distribution.strategy=mirrored"]
    # Keras clips each replica's gradient before summing them; without
    # clipping, the updates are those of one device.
    no_clipping = ["training.clipnorm=0"]
    result, stdout = _run_script(
        tmp_path,
        [
            ("odd_batch", [*mirrored, "distribution.devices=2",
                           "training.batch_size=7"]),
            ("mirrored", [*mirrored, "distribution.devices=2", *no_clipping]),
            # Under tf.distribute, Keras reads a batch before fit, which
            # moves the reshuffling dataset on by one epoch: compare with
            # one device under the same strategy.
            ("single", [*mirrored, "distribution.devices=1", *no_clipping]),
            ("too_many", [*mirrored, "distribution.devices=64"]),
        ],
    )  # fmt: skip
    assert "divisible by the 2 replicas" in result["odd_batch"]
    assert "TensorFlow sees 2 cpu device(s)" in result["too_many"]
    assert "mirrored on 2 devices (cpu:0, cpu:1): global batch 8, 4 per " \
        "replica" in stdout  # fmt: skip
    _check_same_losses(result["mirrored"], result["single"])
    for path, shape, pieces, piece in result["mirrored"]["placement"]:
        assert (pieces, piece) == (2, shape), path
    _check_checkpoint(tmp_path / "mirrored")


@pytest.mark.parametrize(
    "architecture", ["RNNSearch", "RNNEncDec", "PervasiveAttention"]
)
def test_vocabulary_layouts_match_the_vocabulary_matrices(architecture):
    """Exactly the (vocabulary, ...) or (..., vocabulary) variables match."""
    from keras_bahdanau import models

    if architecture == "PervasiveAttention":
        model = models.PervasiveAttention(
            17, 19, source_embedding_dim=6, target_embedding_dim=6,
            growth_rate=4, num_layers=2,
        )  # fmt: skip
    else:
        model = getattr(models, architecture)(
            17, 19, embedding_dim=6, hidden_dim=5, maxout_dim=3
        )
    matched = {
        variable.path: tuple(variable.shape)
        for variable in model.weights
        if any(
            re.fullmatch(pattern, variable.path)
            for pattern in kdist.VOCABULARY_LAYOUTS
        )
    }
    features = model.get_layer("output_projection").kernel.shape[0]
    assert matched == {
        "source_embedding/embeddings": (17, 6),
        "target_embedding/embeddings": (19, 6),
        "output_projection/kernel": (features, 19),
        "output_projection/bias": (19,),
    }


def test_unknown_strategy_and_negative_devices():
    with pytest.raises(ConfigError, match="distribution.strategy must be one"):
        resolve_config(None, ["distribution.strategy=horovod"])
    with pytest.raises(ConfigError, match="distribution.devices must be 0"):
        resolve_config(None, ["distribution.devices=-1"])


def test_plan_describes_the_per_replica_batch():
    devices = ["gpu:0", "gpu:1", "gpu:2", "gpu:3"]
    plan = kdist.Plan("data_parallel", devices, replicas=4)
    assert plan.describe(64) == (
        "data_parallel on 4 devices (gpu:0, gpu:1, gpu:2, gpu:3): global "
        "batch 64, 16 per replica"
    )
    plan = kdist.Plan("model_parallel", devices, replicas=2, model_shards=2)
    assert plan.describe(64).endswith(
        "32 per replica, vocabulary matrices split over 2"
    )
    cluster = ClusterSettings("tf.distribute...", {}, 3, 0)
    plan = kdist.Plan("mirrored", ["gpu:0"], replicas=3, cluster=cluster)
    assert plan.describe(48) == (
        "mirrored on 1 device of 3 hosts (gpu:0): global batch 48, 16 per "
        "replica"
    )
    assert kdist.Plan("none", []).describe(64) == "one device"
