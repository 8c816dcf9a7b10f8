"""Training on several devices, and hosts, with each backend's own tools.

`[distribution] strategy` in a training config picks one:

- `"none"` (any backend): one device.
- `"data_parallel"` (JAX): `keras.distribution.DataParallel`, the model
  replicated on every device, each batch split across them.
- `"model_parallel"` (JAX): `keras.distribution.ModelParallel` on a
  `("batch", "model")` device mesh; the embeddings and the output
  projection are split along the vocabulary over the "model" axis
  (`VOCABULARY_LAYOUTS`), everything else is replicated.
- `"mirrored"` (TensorFlow): `tf.distribute.MirroredStrategy`, or
  `MultiWorkerMirroredStrategy` when `TF_CONFIG` names several tasks.

Keras implements `keras.distribution` for JAX only (its TensorFlow version
is a prototype marked "DO NOT USE"), so TensorFlow uses its own
`tf.distribute`; the torch backend has neither (multi-GPU torch training
needs a hand-written `DistributedDataParallel` loop around the model).

`training.batch_size` is the global batch: with N replicas each one gets
`batch_size / N` examples, so a run gives the same updates (up to float
rounding) on one device or on N.

Order of calls (what `keras-bahdanau train` does):

```python
plan = prepare(config["distribution"], batch_size=64)  # before any backend op
...  # tokenizers, tf.data
check_vocabulary_sizes(plan, source_size, target_size)
with training_scope(plan):
    ...  # build the model, compile, fit
```

See `docs/distributed.md` for multi-host set-ups.
"""

import contextlib
import dataclasses
import os

import keras

from keras_bahdanau.cluster import ClusterSettings
from keras_bahdanau.cluster import cluster_settings
from keras_bahdanau.validation import check_choice

STRATEGIES = ("none", "data_parallel", "model_parallel", "mirrored")
# The backend each strategy needs.
BACKENDS = {
    "data_parallel": "jax",
    "model_parallel": "jax",
    "mirrored": "tensorflow",
}
# Variables split along the vocabulary by "model_parallel", as regular
# expressions over `variable.path` (`LayoutMap` matches them in full).
# Embeddings are (vocabulary, embedding_dim); the output projection (`W_o`)
# is (features, target_vocabulary), with one bias per word. The names are
# the same in RNNsearch, RNNencdec and Pervasive Attention.
VOCABULARY_LAYOUTS = {
    r"(source|target)_embedding/embeddings": ("model", None),
    r"output_projection/kernel": (None, "model"),
    r"output_projection/bias": ("model",),
}


@dataclasses.dataclass
class Plan:
    """What `prepare` set up: the strategy and the devices it runs on.

    Attributes:
        strategy: one of `STRATEGIES`.
        devices: device names (`"cpu:0"`, `"gpu:1"`, ...); empty for
            `"none"`.
        replicas: model replicas (over all hosts); each one gets
            `batch_size / replicas` examples of a batch.
        model_shards: devices each vocabulary matrix is split over
            (`"model_parallel"`), else 1.
        cluster: the `ClusterSettings` of a multi-host run, or None.
        tf_strategy: the `tf.distribute.Strategy` of `"mirrored"`.
    """

    strategy: str
    devices: list
    replicas: int = 1
    model_shards: int = 1
    cluster: ClusterSettings | None = None
    tf_strategy: object = None

    def describe(self, batch_size):
        """One line for the log: devices, global and per-replica batch."""
        if self.strategy == "none":
            return "one device"
        count = len(self.devices)
        text = f"{self.strategy} on {count} device{'s' * (count != 1)}"
        if self.cluster:
            text += f" of {self.cluster.num_processes} hosts"
        text += (
            f" ({', '.join(self.devices)}): global batch {batch_size}, "
            f"{batch_size // self.replicas} per replica"
        )
        if self.strategy == "model_parallel":
            text += f", vocabulary matrices split over {self.model_shards}"
        return text


def check_strategy(strategy, backend=None):
    """Raises `ValueError` if `strategy` cannot run on `backend`."""
    backend = backend or keras.backend.backend()
    check_choice("distribution.strategy", strategy, STRATEGIES)
    needed = BACKENDS.get(strategy)
    if needed is None or needed == backend:
        return
    if backend == "torch":
        hint = (
            "The Keras torch backend has no multi-device support "
            "(keras.distribution is JAX-only); use torch's "
            "DistributedDataParallel in your own training loop, or train "
            "with KERAS_BACKEND=jax (data_parallel, model_parallel) or "
            "KERAS_BACKEND=tensorflow (mirrored)."
        )
    elif needed == "jax":
        hint = (
            "keras.distribution (DataParallel, ModelParallel) is implemented "
            "for JAX only; on TensorFlow use strategy 'mirrored'."
        )
    else:
        hint = (
            "tf.distribute strategies run only on the TensorFlow backend; "
            "on JAX use strategy 'data_parallel' or 'model_parallel'."
        )
    raise ValueError(
        f"distribution.strategy={strategy!r} needs KERAS_BACKEND={needed}, "
        f"but the backend is {backend!r}. {hint}"
    )


def prepare(config, batch_size):
    """Sets up the devices (and cluster) of a distribution config.

    Call it before anything runs on the backend: the JAX CPU device count,
    TensorFlow's logical devices and a multi-host set-up can only be chosen
    before the backend initializes. On a host without accelerators,
    `devices=N` splits the CPU into N devices (to try a strategy, or to
    test it); with GPUs or TPUs it takes the first N.

    Args:
        config: the `[distribution]` section: `strategy`, `devices` (0: all
            devices) and `model_shards` (0: all devices).
        batch_size: int, the global batch; divisible by the replicas.

    Returns:
        A `Plan`.
    """
    strategy = config["strategy"]
    check_strategy(strategy)
    if strategy == "none":
        return Plan("none", [])
    plan = Plan(strategy, [], cluster=cluster_settings())
    if strategy == "mirrored":
        plan.devices, plan.tf_strategy = _tf_devices(config["devices"], plan)
        plan.replicas = plan.tf_strategy.num_replicas_in_sync
    else:
        if plan.cluster:
            keras.distribution.initialize(**plan.cluster.arguments)
        # With several hosts, the devices of all of them.
        plan.devices = _jax_devices(config["devices"])
        if strategy == "model_parallel":
            plan.model_shards = config["model_shards"] or len(plan.devices)
            if len(plan.devices) % plan.model_shards:
                raise ValueError(
                    f"distribution.model_shards={plan.model_shards} must "
                    f"divide the {len(plan.devices)} devices."
                )
        plan.replicas = len(plan.devices) // plan.model_shards
    if batch_size % plan.replicas:
        raise ValueError(
            f"training.batch_size={batch_size} is the global batch and must "
            f"be divisible by the {plan.replicas} replicas of {strategy}."
        )
    return plan


def _jax_devices(count):
    import jax

    flags = os.environ.get("XLA_FLAGS", "")
    if count > 1 and "xla_force_host_platform_device_count" not in flags:
        # Only the CPU platform takes this; GPUs and TPUs are unaffected.
        with contextlib.suppress(RuntimeError):  # JAX already running
            jax.config.update("jax_num_cpu_devices", count)
    return _take(keras.distribution.list_devices(), count, "JAX")


def _tf_devices(count, plan):
    import tensorflow as tf

    if plan.cluster:
        if count:
            raise ValueError(
                "With TF_CONFIG, each worker trains on all its GPUs (or its "
                f"CPU); set distribution.devices=0. Received: {count}"
            )
        # Must be created before TensorFlow runs any op.
        strategy = tf.distribute.MultiWorkerMirroredStrategy(
            **plan.cluster.arguments
        )
        # This host's devices; `num_replicas_in_sync` counts all hosts'.
        devices = [name.lower() for name in strategy.extended.worker_devices]
        return devices, strategy
    if not tf.config.list_physical_devices("GPU") and count > 1:
        cpu = tf.config.list_physical_devices("CPU")[0]
        with contextlib.suppress(RuntimeError):  # TensorFlow already running
            tf.config.set_logical_device_configuration(
                cpu, [tf.config.LogicalDeviceConfiguration()] * count
            )
    names = [
        f"{device.device_type.lower()}:{device.name.split(':')[-1]}"
        for device in tf.config.list_logical_devices("GPU")
        or tf.config.list_logical_devices("CPU")
    ]
    devices = _take(names, count, "TensorFlow")
    return devices, tf.distribute.MirroredStrategy(devices=devices)


def _take(devices, count, backend):
    if count > len(devices):
        kind = devices[0].split(":")[0]
        hint = ""
        if kind == "cpu":
            hint = (
                " The CPU is split into N devices only if nothing ran on the "
                "backend before (for JAX, XLA_FLAGS=--xla_force_host_"
                f"platform_device_count={count} set before starting Python "
                "also does it)."
            )
        raise ValueError(
            f"distribution.devices={count}, but {backend} sees "
            f"{len(devices)} {kind} device(s).{hint}"
        )
    return devices[:count] if count else devices


def check_vocabulary_sizes(
    plan, source_vocabulary_size, target_vocabulary_size
):
    """Raises `ValueError` if `model_parallel` cannot split a vocabulary."""
    if plan.strategy != "model_parallel":
        return
    for side, size in (
        ("source", source_vocabulary_size),
        ("target", target_vocabulary_size),
    ):
        if size % plan.model_shards:
            raise ValueError(
                f"model_parallel splits the {side} vocabulary over "
                f"{plan.model_shards} devices, but it has {size} entries. Set "
                f"tokenizer.{side}_vocabulary_size to a multiple of "
                f"{plan.model_shards} (word vocabularies reach it only if "
                "the corpus has that many words), or change "
                "distribution.model_shards."
            )


def layout_map(device_mesh):
    """`VOCABULARY_LAYOUTS` as a `keras.distribution.LayoutMap`.

    Variables matching none of them are replicated on every device.
    """
    layouts = keras.distribution.LayoutMap(device_mesh)
    for pattern, axes in VOCABULARY_LAYOUTS.items():
        layouts[pattern] = axes
    return layouts


def compile_arguments(plan):
    """Extra `model.compile` arguments a strategy needs.

    `"mirrored"`: `tf.distribute` sums the replicas' gradients, and Keras
    divides by the replicas only a loss that returns per-example values,
    not `MaskedSparseCategoricalCrossentropy`'s one scalar (the mean over
    real tokens). Weighting the loss by `1 / replicas` makes the update the
    mean over replicas (one device's update when every replica gets as
    many target tokens).
    """
    if plan.strategy == "mirrored":
        return {"loss_weights": 1.0 / plan.replicas}
    return {}


def validation_data(plan, dataset):
    """Fills up `(inputs, labels)` batches to a multiple of the replicas.

    `keras.distribution` splits every batch evenly over the replicas, and
    the last dev batch rarely divides. It is completed with copies of its
    first pair (real inputs) whose labels are all padding (id 0): they add
    nothing to the loss or the token accuracy, though Keras weighs that
    batch's mean loss by its filled-up size in `val_loss`. Other strategies
    get `dataset` as it is (`tf.distribute` splits uneven batches itself).
    """
    if plan.strategy == "mirrored" or plan.replicas == 1:
        return dataset
    import tensorflow as tf

    def fill(inputs, labels):
        missing = -tf.shape(labels)[0] % plan.replicas
        inputs = {
            name: tf.concat([ids, tf.repeat(ids[:1], missing, axis=0)], 0)
            for name, ids in inputs.items()
        }
        padding = tf.zeros_like(tf.repeat(labels[:1], missing, axis=0))
        return inputs, tf.concat([labels, padding], 0)

    return dataset.map(fill)


def build_compiled_model(plan, model, dataset):
    """Builds a compiled model's loss and metrics from a batch of `dataset`.

    Needed for `"mirrored"` only: Keras 3.15 builds them on the first `fit`
    under `tf.distribute` from the MEAN of the replicas' first batches,
    which turns integer token ids into floats, and the models refuse float
    ids. `test_on_batch` builds them from the batch it is given, as it is
    (and evaluates it; `fit` resets the metrics before its first epoch).
    """
    if plan.strategy == "mirrored":
        inputs, labels = next(iter(dataset))
        with plan.tf_strategy.scope():
            model.test_on_batch(inputs, labels)


def data_shard(plan):
    """This process's share of each global batch: `(shards, index)`.

    One process: `(1, 0)`, the whole batch. Several (JAX's multi-host
    strategies): the rule of Keras's `distribute_dataset`, by process
    when each holds whole replicas, else by replica. Keras's own sharding
    cannot size the bucketed batches here (`tf.data`'s
    `compute_batch_size` finds no fixed batch size), so `training_scope`
    turns it off and the trainer shards with `data.shard_batches`. TF's
    `MultiWorkerMirroredStrategy` shards in `tf.distribute`: `(1, 0)`.
    """
    if plan.cluster is None or plan.strategy in ("none", "mirrored"):
        return 1, 0
    processes, process = plan.cluster.num_processes, plan.cluster.process_id
    if plan.replicas >= processes:
        return processes, process
    return plan.replicas, process // (processes // plan.replicas)


def training_scope(plan):
    """The context to build, compile and fit the model in."""
    if plan.strategy == "none":
        return contextlib.nullcontext()
    if plan.strategy == "mirrored":
        return plan.tf_strategy.scope()
    # The trainer shards the data itself (`data_shard`).
    if plan.strategy == "data_parallel":
        return keras.distribution.DataParallel(
            devices=plan.devices, auto_shard_dataset=False
        ).scope()
    mesh = keras.distribution.DeviceMesh(
        shape=(plan.replicas, plan.model_shards),
        axis_names=("batch", "model"),
        devices=plan.devices,
    )
    return keras.distribution.ModelParallel(
        layout_map=layout_map(mesh),
        batch_dim_name="batch",
        auto_shard_dataset=False,
    ).scope()
