"""Multi-host set-ups, read from the environment without connecting."""

import json

import pytest

from keras_bahdanau import distribution
from keras_bahdanau.cluster import cluster_settings

JAX_CLUSTER = {
    "KERAS_DISTRIBUTION_JOB_ADDRESSES": "10.0.0.1:1234",
    "KERAS_DISTRIBUTION_NUM_PROCESSES": "4",
    "KERAS_DISTRIBUTION_PROCESS_ID": "2",
}


def _environment(monkeypatch, variables):
    for name in [*JAX_CLUSTER, "TF_CONFIG"]:
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)


def test_jax_cluster_settings(monkeypatch):
    _environment(monkeypatch, JAX_CLUSTER)
    settings = cluster_settings("jax")
    assert settings.call == "keras.distribution.initialize"
    assert settings.arguments == {
        "job_addresses": "10.0.0.1:1234",
        "num_processes": 4,
        "process_id": 2,
    }
    assert (settings.num_processes, settings.process_id) == (4, 2)
    # What `distribution.prepare` reads (docs/distributed.md names it).
    assert distribution.cluster_settings is cluster_settings
    # TF_CONFIG is TensorFlow's; the torch backend has no cluster set-up.
    assert cluster_settings("tensorflow") is None
    assert cluster_settings("torch") is None


@pytest.mark.parametrize(
    "variables, message",
    [
        ({"KERAS_DISTRIBUTION_NUM_PROCESSES": "2"}, "missing"),
        ({**JAX_CLUSTER, "KERAS_DISTRIBUTION_PROCESS_ID": "4"}, r"\[0, 4\)"),
        ({**JAX_CLUSTER, "KERAS_DISTRIBUTION_PROCESS_ID": "x"}, "integers"),
        (
            {**JAX_CLUSTER, "KERAS_DISTRIBUTION_JOB_ADDRESSES": "a:1,b:2"},
            "lists 2 addresses for 4 processes",
        ),
    ],
)
def test_bad_jax_cluster_settings(monkeypatch, variables, message):
    _environment(monkeypatch, variables)
    with pytest.raises(ValueError, match=message):
        cluster_settings("jax")


TF_CONFIG = {
    "cluster": {
        "chief": ["host0:2222"],
        "worker": ["host1:2222", "host2:2222"],
    },
    "task": {"type": "worker", "index": 1},
}


def test_tf_config_cluster_settings(monkeypatch):
    _environment(monkeypatch, {"TF_CONFIG": json.dumps(TF_CONFIG)})
    settings = cluster_settings("tensorflow")
    assert settings.call == "tf.distribute.MultiWorkerMirroredStrategy"
    resolver = settings.arguments["cluster_resolver"]
    assert resolver.cluster_spec().as_dict() == TF_CONFIG["cluster"]
    assert (resolver.task_type, resolver.task_id) == ("worker", 1)
    # The chief is process 0, then the workers in order.
    assert (settings.num_processes, settings.process_id) == (3, 2)
    assert cluster_settings("jax") is None


@pytest.mark.parametrize(
    "tf_config, message",
    [
        ("{not json", "not valid JSON"),
        (json.dumps({"cluster": TF_CONFIG["cluster"]}), "needs a 'cluster'"),
        (
            json.dumps({**TF_CONFIG, "task": {"type": "ps", "index": 0}}),
            "not a chief or worker",
        ),
    ],
)
def test_bad_tf_config(monkeypatch, tf_config, message):
    _environment(monkeypatch, {"TF_CONFIG": tf_config})
    with pytest.raises(ValueError, match=message):
        cluster_settings("tensorflow")


def test_one_process_is_not_a_cluster(monkeypatch):
    _environment(
        monkeypatch,
        {**JAX_CLUSTER, "KERAS_DISTRIBUTION_NUM_PROCESSES": "1",
         "KERAS_DISTRIBUTION_PROCESS_ID": "0",
         "TF_CONFIG": json.dumps({"cluster": {"worker": ["h:1"]},
                                  "task": {"type": "worker", "index": 0}})},
    )  # fmt: skip
    assert cluster_settings("jax") is None
    assert cluster_settings("tensorflow") is None
