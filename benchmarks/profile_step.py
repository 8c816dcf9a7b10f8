"""Where the time of a training step and of a beam-search step goes.

Profiles the main job (the built-in config `ding_de_en`: rnnsearch_tiny,
SentencePiece 4k/4k, batches of 32) on the backend named by
`KERAS_BACKEND`, on the real length mix: the Ding corpus, tokenized and
bucketed as training does it. Two phases:

- training: `model.fit` over `--steps` batches of the training pipeline,
  after one untimed step per batch shape (compilation);
- beam search: the compiled search of `Translator` (beam 5, the run's
  length penalty) over `--search-batches` batches of 64 dev sentences,
  after one untimed run per shape. The weights are random (a profile of
  where a step's time goes, not of how many steps a trained model takes).

Each phase runs once timed and once under the backend's profiler
(`jax.profiler` and `tf.profiler`, both read back from their XSpace
protobuf; `torch.profiler` on torch), and the op time is summed per op
family: matrix products, elementwise (with reductions and softmaxes),
gathers and copies (slices, concatenations, transposes, gathers, scatters),
the loop's own control (the `while` ops' self time), and other ops. What
the ops do not cover is the framework's and Python's time around them
(dispatch, host-device transfers, Keras's loop); `input_s` is the time
between two training steps (the input pipeline and the callbacks).

One JSON line per phase on stdout. On a CPU the ops of one step can run
on several threads at once, so op time may exceed wall time.

Usage:

```
KERAS_BACKEND=jax python benchmarks/profile_step.py --steps 40 \\
    --search-batches 4 --record results/profile_step_jax.json
```
"""

import argparse
import collections
import glob
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

from keras_bahdanau.startup import start_tensorflow

start_tensorflow()

import keras
import numpy as np

from keras_bahdanau import records
from keras_bahdanau.config import add_override_argument
from keras_bahdanau.config import resolve_config
from keras_bahdanau.data import load_corpus
from keras_bahdanau.decoding import compile_search
from keras_bahdanau.decoding.config import run_search
from keras_bahdanau.models.factory import build_model
from keras_bahdanau.preprocessor import TranslationPreprocessor
from keras_bahdanau.reserved import EOS_ID
from keras_bahdanau.trainer import _tokenizers as learn_tokenizers
from keras_bahdanau.training import compile_model
from keras_bahdanau.training import jit_compile_argument
from keras_bahdanau.training import make_optimizer

FAMILIES = ("matmul", "elementwise", "gather_copy", "loop", "other")
# Op names (XLA instructions and fusions, TensorFlow op types, ATen ops),
# first match wins. XLA names a fusion after the ops it fuses, and its
# CPU backend calls fused matrix products `ynn_fusion` (YNNPACK). A
# bitcast (a reshape that moves no data) does not make a fusion a copy:
# `tanh_bitcast_fusion` is elementwise.
_PATTERNS = [
    (
        "matmul",
        r"dot|ynn_fusion|onednn|matmul|\bmm\b|addmm|bmm|linear|convolution"
        r"|conv2d|einsum|gemm|baddbmm",
    ),
    ("loop", r"^while|\bwhile\b|^cond(ition)?\b|conditional|^call\b"),
    (
        "gather_copy",
        r"gather|scatter|slice|concat|copy|transpose|index|take|stack|cat\b"
        r"|select_backward|unbind|split|permute|clone|flip|pad|reverse"
        r"|tile|repeat|expand|reshape|view|narrow|_to_copy|contiguous"
        r"|embedding|dynamic-update|tensorlist",
    ),
    (
        "elementwise",
        r"fusion|add|sub|mul|div|tanh|sigmoid|exp|log|max|min|where|select"
        r"|softmax|reduce|sum|mean|neg|sqrt|rsqrt|pow|compare|equal|less"
        r"|greater|and|or|not|relu|clamp|fill|zero|ones|full|broadcast|cast"
        r"|convert|sort|top_?k|argmax|abs|sign|square|floor|clip|random|rng"
        r"|dropout|bernoulli|uniform|threefry|iota|arange|cumsum|erf",
    ),
]
_COMPILED = [(family, re.compile(p, re.I)) for family, p in _PATTERNS]
# Not ops: the profilers' own and the runtimes' wrappers around the ops,
# and waits (TensorFlow's `BlockUntilReady`: the host waiting for a step).
_NOT_OPS = re.compile(
    r"^\d+ |^end: |\.py|\$|Thunk|Threadpool|PythonRef|PjitFunction|Execute"
    r"|TraceMe|::Run|Iterator|FunctionRun|ExecutorState|EagerLocalExecute"
    r"|InstantiatedC|Session|_Send|_Recv|Process|Transfer|Buffer|Wait"
    r"|Prepare|Handle|Pjrt|BlockUntilReady|ExecutorDoneCallback",
    re.I,
)


def family_of(name):
    """The op family of an op name (see `FAMILIES`)."""
    for family, pattern in _COMPILED:
        if pattern.search(name):
            return family
    return "other"


# === Reading the profilers ===


def xspace_op_seconds(trace_dir):
    """Self time of the op events of an XSpace, by `(op, layer)`.

    `jax.profiler` and `tf.profiler` write one `*.xplane.pb` per session.
    Events nest on a thread's line (a `while` holds its body's ops), so an
    event's self time is its duration less that of the events inside it.
    The layer comes from the op's name scope: the HLO module's metadata for
    XLA ops (`jax.profiler` keeps the compiled modules in the XSpace), the
    node name for TensorFlow's graph ops (`node:OpType`).
    """
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    (path,) = glob.glob(f"{trace_dir}/**/*.xplane.pb", recursive=True)
    space = xplane_pb2.XSpace()
    with open(path, "rb") as file:
        space.ParseFromString(file.read())
    scopes = _hlo_scopes(space)
    totals = collections.Counter()
    for plane in space.planes:
        if not plane.name.startswith("/host:CPU"):
            continue
        names = {k: v.name for k, v in plane.event_metadata.items()}
        stat_names = {k: v.name for k, v in plane.stat_metadata.items()}
        for line in plane.lines:
            events = []
            for event in line.events:
                name = names.get(event.metadata_id, "")
                if not name or _NOT_OPS.search(name):
                    continue
                stats = {
                    stat_names.get(stat.metadata_id): _value(stat)
                    for stat in event.stats
                }
                if "program_id" not in stats:  # TF: `scope:OpType`
                    scope, _, name = name.rpartition(":")
                else:  # XLA: the op's scope in its module's metadata
                    program = scopes.get(stats.get("program_id"), {})
                    scope = program.get(name, "")
                start = event.offset_ps
                key = (name, layer_of(scope))
                events.append((start, start + event.duration_ps, key))
            totals.update(_self_times(events))
    return {key: ps / 1e12 for key, ps in totals.items()}


def _hlo_scopes(space):
    """`{program id: {instruction: op name scope}}` of the XLA modules."""
    from tensorflow.compiler.xla.service import hlo_pb2

    scopes = {}
    for plane in space.planes:
        if plane.name != "/host:metadata":
            continue
        stat_names = {k: v.name for k, v in plane.stat_metadata.items()}
        for metadata in plane.event_metadata.values():
            stats = {stat_names[s.metadata_id]: s for s in metadata.stats}
            # TensorFlow's XLA modules come without a program id: their
            # ops' layers are then unknown ("other").
            if "Hlo Proto" not in stats or "program_id" not in stats:
                continue
            proto = hlo_pb2.HloProto()
            proto.ParseFromString(stats["Hlo Proto"].bytes_value)
            scopes[_value(stats["program_id"])] = {
                instruction.name: instruction.metadata.op_name
                for computation in proto.hlo_module.computations
                for instruction in computation.instructions
            }
    return scopes


def _value(stat):
    """The value of an `XStat`, whichever of its fields holds it."""
    return getattr(stat, stat.WhichOneof("value") or "int64_value")


def layer_of(scope):
    """`"layer"` or `"layer (backward)"` of an op's name scope.

    JAX scopes read `jit(train_step)/jvp(decoder)/rnn/...` in the forward
    pass and `.../transpose(jvp(decoder))/...` in the backward pass;
    TensorFlow's `rnn_search/decoder/...` and `gradient_tape/rnn_search/
    decoder/...`.
    """
    parts = [p for p in scope.split("/") if p and not p.startswith("jit(")]
    backward = bool(parts) and parts[0] in ("gradient_tape", "gradients")
    if backward:
        parts = parts[1:]
    if parts and re.match(r"(rnn_search|pervasive_attention)\w*$", parts[0]):
        parts = parts[1:]
    if not parts:
        return "other"
    match = re.fullmatch(r"(transpose\()?jvp\((\w*)\)\)?", parts[0])
    if match:
        backward = backward or bool(match.group(1))
        layer = match.group(2) or "model"
    else:
        layer = parts[0]
    return f"{layer} (backward)" if backward else layer


def _self_times(events):
    """`{key: self time}` of nested `(start, end, key)` intervals."""
    totals = collections.Counter()
    stack = []  # [end, key, time of the events inside, duration]
    for start, end, key in sorted(events, key=lambda e: (e[0], -e[1])):
        while stack and stack[-1][0] <= start:
            _pop(stack, totals)
        stack.append([end, key, 0, end - start])
    while stack:
        _pop(stack, totals)
    return totals


def _pop(stack, totals):
    end, key, inside, duration = stack.pop()
    totals[key] += max(duration - inside, 0)
    if stack:
        stack[-1][2] += duration


def torch_op_seconds(profiler):
    """Self CPU time of every ATen op of a `torch.profiler` run."""
    return {
        (event.key, "?"): event.self_cpu_time_total / 1e6
        for event in profiler.key_averages()
        if event.key.startswith("aten::")
    }


def profiled(function, trace_dir):
    """Runs `function()` under the backend's profiler; op seconds by name."""
    backend = keras.backend.backend()
    if backend == "torch":
        import torch

        with torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU]
        ) as profiler:
            function()
        return torch_op_seconds(profiler)
    if backend == "jax":
        import jax

        with jax.profiler.trace(trace_dir):
            function()
    else:
        import tensorflow as tf

        tf.profiler.experimental.start(trace_dir)
        try:
            function()
        finally:
            tf.profiler.experimental.stop()
    return xspace_op_seconds(trace_dir)


def by_family(op_seconds, wall_s, top=25):
    """The op time per family and per layer, and the costliest ops."""
    families, layers = collections.Counter(), collections.Counter()
    by_layer = collections.Counter()
    for (name, layer), seconds in op_seconds.items():
        families[family_of(name)] += seconds
        layers[layer] += seconds
        by_layer[layer, family_of(name)] += seconds
    total = sum(families.values())
    costliest = sorted(op_seconds.items(), key=lambda item: -item[1])[:top]
    return {
        "op_s": round(total, 4),
        "families_s": {f: round(families[f], 4) for f in FAMILIES},
        "families_share": {
            f: round(families[f] / total, 3) if total else None
            for f in FAMILIES
        },
        "layers_share": {
            layer: round(seconds / total, 3)
            for layer, seconds in layers.most_common()
        },
        # Wall time the ops leave to the framework, Python and transfers.
        "outside_ops_share": round(max(wall_s - total, 0.0) / wall_s, 3),
        "families_by_layer_s": {
            layer: {
                family: round(seconds, 4)
                for (f_layer, family), seconds in sorted(
                    by_layer.items(), key=lambda item: -item[1]
                )
                if f_layer == layer
            }
            for layer, _ in layers.most_common()
        },
        "top_ops": [
            [name, family_of(name), layer, round(seconds, 4)]
            for (name, layer), seconds in costliest
        ],
    }


# === The main job's data and model ===


def main_job(config_path, overrides):
    """A config's splits, preprocessor and compiled model."""
    config = resolve_config(config_path, overrides)
    splits = load_corpus(config["data"])
    # As `train` learns them (joint, threads), saved in a scratch folder.
    tokenizers = learn_tokenizers(
        Path(tempfile.mkdtemp(prefix="profile_vocabularies_")),
        config,
        splits["train"],
        resuming=False,
    )
    preprocessor = TranslationPreprocessor(*tokenizers)
    training = config["training"]
    keras.utils.set_random_seed(training["seed"])
    sizes = [tokenizer.vocabulary_size for tokenizer in tokenizers]
    model = build_model(config["model"], *sizes)
    compile_model(
        model,
        make_optimizer(training["optimizer"], training["learning_rate"]),
        label_smoothing=training["label_smoothing"],
        jit_compile=jit_compile_argument(training["jit_compile"]),
    )
    return config, splits, preprocessor, model


def training_phase(args, config, splits, preprocessor, model):
    """Profiles `args.steps` training steps of `model.fit`."""
    training = config["training"]
    dataset, _ = preprocessor.make_dataset(
        splits["train"],
        batch_size=training["batch_size"],
        max_length=config["data"]["max_length"],
        shuffle=True,
        seed=training["seed"],
        drop_remainder=True,
        bucket_width=config["data"]["bucket_width"],
        buckets=config["data"]["buckets"] or None,
    )
    dataset = dataset.take(args.steps)

    class Times(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            self.steps, self.between, self.last = [], [], None
            self.begin = time.perf_counter()

        def on_train_batch_begin(self, batch, logs=None):
            self.start = time.perf_counter()
            if self.last is None:
                self.first = self.start - self.begin
            else:
                self.between.append(self.start - self.last)

        def on_train_batch_end(self, batch, logs=None):
            self.last = time.perf_counter()
            self.steps.append(self.last - self.start)

    def fit():
        times = Times()
        model.fit(dataset, epochs=1, verbose=0, callbacks=[times])
        return times

    start = time.perf_counter()
    fit()  # Compiles one step per batch shape.
    compile_s = time.perf_counter() - start
    start = time.perf_counter()
    times = fit()
    wall_s = time.perf_counter() - start
    trace_dir = tempfile.mkdtemp(prefix="profile_train_")
    op_seconds = profiled(fit, trace_dir)
    tokens = sum(
        int(np.count_nonzero(labels))
        for _, labels in dataset.as_numpy_iterator()
    )
    return {
        "phase": "training",
        "steps": args.steps,
        "batch_shapes": len(
            {x["source_ids"].shape for x, _ in dataset.as_numpy_iterator()}
        ),
        "compile_s": round(compile_s, 2),
        "wall_s": round(wall_s, 3),
        "step_ms_median": round(1e3 * float(np.median(times.steps)), 1),
        "steps_ms": [round(1e3 * t) for t in times.steps],
        "steps_s": round(sum(times.steps), 3),
        "input_s": round(sum(times.between), 3),
        "to_first_step_s": round(times.first, 3),
        "real_target_tokens_per_s": round(tokens / wall_s, 1),
        # The profiled run's ops, over the profiled run's steps.
        **by_family(op_seconds, wall_s),
    }


def search_phase(args, config, splits, preprocessor, model):
    """Profiles the beam search over `args.search_batches` dev batches.

    EOS gets an output bias of -50, as in `decode_throughput.py`: the
    random model then decodes every sentence to its maximum length.
    """
    bias = (
        model.target_embedding.reverse_bias
        if model.output_projection is None
        else model.output_projection.bias
    )
    values = keras.ops.convert_to_numpy(bias).copy()
    values[EOS_ID] = -50.0
    bias.assign(values)
    search = run_search(config["evaluation"])
    ids = preprocessor.source_tokenizer.tokenize([s for s, _ in splits["dev"]])
    lengths = ids.row_lengths().numpy()
    order = np.argsort(lengths, kind="stable")
    run = compile_search(model, search)
    longest = int(lengths.max())
    # Zero columns up to the widest batch's multiple of 16.
    padded = ids.to_tensor(shape=[None, -(-longest // 16) * 16]).numpy()
    padded = padded.astype("int32")
    # `--search-batches` batches of 64 sentences of similar length, spread
    # over the dev set's length order, padded as `Translator` pads them.
    groups = [order[i : i + 64] for i in range(0, len(order) - 63, 64)]
    batches = []
    for index in np.linspace(0, len(groups) - 1, args.search_batches):
        rows = groups[round(index)]
        width = -(-int(lengths[rows].max()) // 16) * 16
        batches.append(padded[rows, :width])
    start = time.perf_counter()
    for batch in batches:
        run(batch)
    compile_s = time.perf_counter() - start
    steps = 0

    def decode():
        nonlocal steps
        steps = sum(int(np.max(run(batch).lengths)) for batch in batches)

    start = time.perf_counter()
    decode()
    wall_s = time.perf_counter() - start
    trace_dir = tempfile.mkdtemp(prefix="profile_search_")
    op_seconds = profiled(decode, trace_dir)
    return {
        "phase": "beam_search",
        "beam_size": search.beam_size,
        "batches": len(batches),
        "batch_size": 64,
        "source_widths": [int(b.shape[1]) for b in batches],
        "compile_s": round(compile_s, 2),
        "wall_s": round(wall_s, 3),
        "decode_steps": steps,
        "step_ms": round(1e3 * wall_s / steps, 3),
        **by_family(op_seconds, wall_s),
    }


PHASES = {"training": training_phase, "beam_search": search_phase}
# A row's fields, the same for both phases (null where a phase has none),
# as records keep fixed fields per kind.
FIELDS = (
    "backend", "architecture", "preset", "phase",
    # training
    "steps", "batch_shapes",
    # beam search
    "beam_size", "batches", "batch_size", "source_widths",
    "compile_s", "wall_s",
    # training
    "step_ms_median", "steps_ms", "steps_s", "input_s", "to_first_step_s",
    "real_target_tokens_per_s",
    # beam search
    "decode_steps", "step_ms",
    # both: `by_family`
    "op_s", "families_s", "families_share", "layers_share",
    "outside_ops_share", "families_by_layer_s", "top_ops", "load_average",
)  # fmt: skip


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--search-batches", type=int, default=4)
    parser.add_argument(
        "--phases",
        nargs="+",
        choices=sorted(PHASES),
        default=list(PHASES),
        help="what to profile (default: both)",
    )
    parser.add_argument(
        "--config",
        default="ding_de_en",
        help="a train config (default: the main job's, ding_de_en)",
    )
    add_override_argument(
        parser, "override a setting of the config; repeatable"
    )
    records.add_record_argument(parser)
    args = parser.parse_args(argv)
    if args.steps <= 0 or args.search_batches <= 0:
        parser.error("--steps and --search-batches must be positive")
    return args


def main(argv=None):
    started = records.start()
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_arguments(argv)
    config, splits, preprocessor, model = main_job(args.config, args.set)
    measurements = []
    for name in args.phases:
        measurement = {
            "backend": keras.backend.backend(),
            "architecture": config["model"]["architecture"],
            "preset": config["model"]["preset"],
            **PHASES[name](args, config, splits, preprocessor, model),
            "load_average": [round(x, 2) for x in os.getloadavg()],
        }
        measurement = {field: measurement.get(field) for field in FIELDS}
        print(json.dumps(measurement), flush=True)
        measurements.append(measurement)
    if args.record:
        records.write_record(
            args.record,
            "profile_step",
            {"measurements": measurements},
            started,
            config,
            argv=[__file__, *argv],
        )


if __name__ == "__main__":
    main()
