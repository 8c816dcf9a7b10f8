"""Multi-host training set-ups, read from the environment.

`keras_bahdanau.distribution.prepare` starts the cluster they describe.
"""

import dataclasses
import json
import os

import keras


@dataclasses.dataclass
class ClusterSettings:
    """A multi-host set-up, read from the environment by `cluster_settings`.

    Attributes:
        call: the function `distribution.prepare` calls with `arguments`.
        arguments: its keyword arguments.
        num_processes: processes (hosts, workers) in the cluster.
        process_id: this process's index, 0 being the coordinator/chief.
    """

    call: str
    arguments: dict
    num_processes: int
    process_id: int


def cluster_settings(backend=None):
    """Reads a multi-host set-up from the environment; connects nowhere.

    JAX: Keras's variables `KERAS_DISTRIBUTION_JOB_ADDRESSES` (the
    coordinator's `host:port`, or every process's, comma-separated),
    `KERAS_DISTRIBUTION_NUM_PROCESSES` and `KERAS_DISTRIBUTION_PROCESS_ID`,
    for `keras.distribution.initialize` (which calls
    `jax.distributed.initialize`). TensorFlow: `TF_CONFIG`, for
    `tf.distribute.MultiWorkerMirroredStrategy`.

    Returns:
        A `ClusterSettings`, or None for a single-host run (no variables,
        or a cluster of one process).
    """
    backend = backend or keras.backend.backend()
    settings = None
    if backend == "jax":
        settings = _jax_cluster_settings()
    elif backend == "tensorflow" and os.environ.get("TF_CONFIG"):
        settings = _tf_cluster_settings()
    # A cluster of one process is a single-host run.
    return settings if settings and settings.num_processes > 1 else None


def _jax_cluster_settings():
    names = (
        "KERAS_DISTRIBUTION_JOB_ADDRESSES",
        "KERAS_DISTRIBUTION_NUM_PROCESSES",
        "KERAS_DISTRIBUTION_PROCESS_ID",
    )
    values = [os.environ.get(name, "").strip() for name in names]
    if not any(values):
        return None
    missing = [n for n, value in zip(names, values, strict=True) if not value]
    if missing:
        raise ValueError(
            f"A multi-host JAX run needs all of {names}; missing: {missing}."
        )
    addresses, num_processes, process_id = values
    try:
        num_processes, process_id = int(num_processes), int(process_id)
    except ValueError:
        raise ValueError(
            f"{names[1]} and {names[2]} must be integers. Received: "
            f"{values[1]!r}, {values[2]!r}"
        ) from None
    if not 0 <= process_id < num_processes:
        raise ValueError(
            f"{names[2]} must be in [0, {num_processes}). "
            f"Received: {process_id}"
        )
    listed = addresses.split(",")
    if len(listed) > 1 and len(listed) != num_processes:
        raise ValueError(
            f"{names[0]} lists {len(listed)} addresses for {num_processes} "
            "processes: give the coordinator's only, or one per process."
        )
    return ClusterSettings(
        call="keras.distribution.initialize",
        arguments={
            "job_addresses": addresses,
            "num_processes": num_processes,
            "process_id": process_id,
        },
        num_processes=num_processes,
        process_id=process_id,
    )


def _tf_cluster_settings():
    import tensorflow as tf

    try:
        tasks = json.loads(os.environ["TF_CONFIG"])
    except ValueError as error:
        raise ValueError(f"TF_CONFIG is not valid JSON: {error}") from None
    if "task" not in tasks or "cluster" not in tasks:
        raise ValueError(
            "TF_CONFIG needs a 'cluster' and a 'task' entry, e.g. "
            '{"cluster": {"worker": ["host1:port", "host2:port"]}, '
            '"task": {"type": "worker", "index": 0}}.'
        )
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    jobs = resolver.cluster_spec().as_dict()
    # The chief (if any) comes first, then the workers, in listed order.
    order = [
        (job, index)
        for job in ("chief", "worker")
        for index in range(len(jobs.get(job, [])))
    ]
    if (resolver.task_type, resolver.task_id) not in order:
        raise ValueError(
            f"TF_CONFIG's task {resolver.task_type}:{resolver.task_id} is "
            f"not a chief or worker of its cluster {jobs}."
        )
    return ClusterSettings(
        call="tf.distribute.MultiWorkerMirroredStrategy",
        arguments={"cluster_resolver": resolver},
        num_processes=len(order),
        process_id=order.index((resolver.task_type, resolver.task_id)),
    )
