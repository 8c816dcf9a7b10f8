"""Training throughput of RNNsearch, against a plain-PyTorch reference.

Builds `RNNSearch` from a preset on the current backend (`KERAS_BACKEND`),
compiles it with the package's masked cross-entropy and optimizer, and
times training steps of `model.fit` (or `model.train_on_batch`, with
`--loop train_on_batch`) on one fixed batch of random ids: every source
and target sentence is `--length` tokens long, with no padding. The first
`--warmup` steps (XLA compilation on JAX, tracing on TensorFlow) are
excluded; `step_ms` is the median of the next `--steps` (times
`--rounds`).

In the same run, unless `--no-reference`, the script times what a user
would otherwise write by hand: the same equations and sizes in plain
PyTorch (a bidirectional `torch.nn.GRU` encoder, a Python loop over the
target with the additive attention and the conditional GRU step, the
maxout readout, the output projection, the masked cross-entropy, gradient
clipping and the same optimizer). The reference runs in a child process
(this script again, given the model sizes), so that each process holds
only the framework it measures and its peak memory is its own. With
`--rounds R`, the Keras steps come in R blocks, each followed by one run
of the reference, so that both see the same state of a noisy machine.

One JSON line is printed to stdout; progress goes to stderr.

Usage:

```
KERAS_BACKEND=jax python benchmarks/train_throughput.py \\
    --preset rnnsearch_small --vocabulary-size 8000 --batch-size 64 \\
    --length 30 --warmup 2 --steps 5 --rounds 3
```
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from keras_bahdanau.startup import start_tensorflow

# Before Keras loads TensorFlow: without its C++ start-up log.
start_tensorflow(torch_first=True)

import numpy as np
from _memory import keras_device_and_peak_memory
from _memory import peak_rss_mb

from keras_bahdanau import records

# Keras, the package and torch are imported inside the functions that use
# them: the parent process must not hold torch (nor the reference process
# Keras or TensorFlow), or one framework's memory would count in the
# other's peak RSS.

PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
OPTIMIZERS = ("adam", "adadelta")
BOS_ID = 2
FIRST_WORD_ID = 4  # ids 0-3 are reserved: padding, unknown, begin, end


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--preset",
        default="rnnsearch_tiny",
        help="an RNNSearch preset: rnnsearch_tiny, rnnsearch_small, "
        "rnnsearch_30 or rnnsearch_50",
    )
    parser.add_argument(
        "--vocabulary-size",
        type=int,
        help="source and target vocabulary size (default: the preset's)",
    )
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument(
        "--length", type=int, default=30, help="source and target length T"
    )
    parser.add_argument("--precision", choices=PRECISIONS, default="float32")
    parser.add_argument("--optimizer", choices=OPTIMIZERS, default="adam")
    parser.add_argument("--steps", type=int, default=5, help="timed steps")
    parser.add_argument(
        "--warmup", type=int, default=2, help="untimed steps before timing"
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="blocks of --steps steps, each followed by a run of the "
        "reference: on a noisy machine both see the same conditions",
    )
    parser.add_argument(
        "--jit-compile",
        choices=("auto", "true", "false"),
        default="auto",
        help="as a config's training.jit_compile (auto: XLA on JAX and "
        "TensorFlow, not on torch)",
    )
    parser.add_argument(
        "--loop",
        choices=("fit", "train_on_batch"),
        default="fit",
        help="how Keras steps are run: model.fit (one epoch per step of the "
        "fixed batch) or model.train_on_batch",
    )
    parser.add_argument(
        "--peak-tflops",
        type=float,
        help="the device's peak TFLOP/s, to report the utilisation",
    )
    parser.add_argument(
        "--torch-threads",
        type=int,
        help="torch.set_num_threads for the reference (default: torch's)",
    )
    parser.add_argument(
        "--no-reference", action="store_true", help="skip the PyTorch run"
    )
    # Internal: how the parent asks the child process for the reference.
    parser.add_argument(
        "--reference-sizes", type=json.loads, help=argparse.SUPPRESS
    )
    parser.add_argument("--seed", type=int, default=0)
    records.add_record_argument(parser)
    args = parser.parse_args(argv)
    for name in ("batch_size", "length", "steps", "rounds"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name.replace('_', '-')} must be positive")
    if args.warmup < 0:
        parser.error("--warmup must be >= 0")
    return args


def model_sizes(args):
    """The preset's sizes, with `--vocabulary-size` applied to both sides."""
    from keras_bahdanau.models.rnn_search.presets import RNN_SEARCH_PRESETS

    if args.preset not in RNN_SEARCH_PRESETS:
        raise ValueError(
            f"Unknown preset {args.preset!r}. Available presets: "
            f"{sorted(RNN_SEARCH_PRESETS)}"
        )
    sizes = dict(RNN_SEARCH_PRESETS[args.preset])
    if args.vocabulary_size is not None:
        sizes["source_vocabulary_size"] = args.vocabulary_size
        sizes["target_vocabulary_size"] = args.vocabulary_size
    sizes["attention_dim"] = sizes["hidden_dim"]  # RNNSearch's default
    return sizes


def flop_per_token(sizes, source_length, target_length):
    """Training FLOPs per target token: 3 x the forward matmul FLOPs.

    A multiply-add counts 2 FLOPs. With m = embedding_dim, n = hidden_dim,
    a = attention_dim, l = maxout_dim, V = target vocabulary size and
    Tx, Ty the source and target lengths, the forward pass costs, per
    target token:

        (Tx / Ty) * (12 n (m + n)     bidirectional GRU encoder
                     + 4 n a          keys U_a h_j
                     + 12 n^2)        the gates' share C h_j, once per word
        + 2 n^2 / Ty                  s_0 = tanh(W_s h<-_1)
        + 2 n a + 2 Tx a              W_a s_{i-1} and v_a^T tanh(...)
        + 4 Tx n                      c_i = sum_j alpha_ij h_j
        + 6 Tx n                      sum_j alpha_ij C h_j
        + 6 n (m + n)                 gates from E y_{i-1} and s_{i-1}
        + 4 l (3 n + m)               maxout readout [s; E y; c] -> 2l
        + 2 l V                       output projection W_o

    The backward pass costs about twice the forward one (each product
    gets a gradient for its input and one for its weight). Element-wise
    work, softmaxes and embedding lookups are not counted.
    """
    m = sizes["embedding_dim"]
    n = sizes["hidden_dim"]
    a = sizes["attention_dim"]
    l = sizes["maxout_dim"]  # noqa: E741 (the paper's name)
    vocabulary = sizes["target_vocabulary_size"]
    tx, ty = source_length, target_length
    forward = (
        tx / ty * (12 * n * (m + n) + 4 * n * a + 12 * n * n)
        + 2 * n * n / ty
        + 2 * n * a
        + 2 * tx * a
        + 10 * tx * n
        + 6 * n * (m + n)
        + 4 * l * (3 * n + m)
        + 2 * l * vocabulary
    )
    return 3 * forward


def random_batch(sizes, args):
    """Source ids, decoder inputs and labels, all full length (no padding)."""
    rng = np.random.default_rng(args.seed)
    shape = (args.batch_size, args.length)
    source_ids = rng.integers(
        FIRST_WORD_ID, sizes["source_vocabulary_size"], shape, dtype="int32"
    )
    labels = rng.integers(
        FIRST_WORD_ID, sizes["target_vocabulary_size"], shape, dtype="int32"
    )
    # Decoder inputs are the labels shifted right behind BOS.
    target_ids = np.concatenate(
        [np.full((args.batch_size, 1), BOS_ID, "int32"), labels[:, :-1]], 1
    )
    return source_ids, target_ids, labels


def time_steps(train_step, warmup, steps):
    """Runs `warmup` then `steps` steps.

    Returns (warm-up s, step wall times, step CPU times of this process,
    the loss of every step). CPU time counts all threads, so on a shared
    machine it shows the work done where wall time also shows the wait.
    """
    losses = []
    start = time.perf_counter()
    for _ in range(warmup):
        losses.append(train_step())
    warmup_s = time.perf_counter() - start
    times, cpu_times = [], []
    for _ in range(steps):
        start, cpu_start = time.perf_counter(), time.process_time()
        losses.append(train_step())
        times.append(time.perf_counter() - start)
        cpu_times.append(time.process_time() - cpu_start)
    return warmup_s, times, cpu_times, losses


def throughput_fields(timed, tokens_per_step, flop, args):
    """Timing, throughput, utilisation and loss fields of the JSON line."""
    times = timed.pop("times")
    step_s = statistics.median(times)
    tokens_per_s = tokens_per_step / step_s
    tflops = flop * tokens_per_s / 1e12
    utilisation = tflops / args.peak_tflops if args.peak_tflops else None
    return {
        "step_times_ms": [round(1e3 * t, 1) for t in times],
        "step_ms": round(1e3 * step_s, 1),
        "step_ms_min": round(1e3 * min(times), 1),
        "step_ms_max": round(1e3 * max(times), 1),
        "step_cpu_ms": round(
            1e3 * statistics.median(timed.pop("cpu_times")), 1
        ),
        "warmup_s": round(timed.pop("warmup_s"), 1),
        "tokens_per_s": round(tokens_per_s, 1),
        "achieved_tflops": round(tflops, 4),
        "utilisation": (None if utilisation is None else round(utilisation, 4)),
        # Same seed, same batch: equal before and after an optimisation.
        "losses": [round(float(loss), 6) for loss in timed.pop("losses")],
    }


# === Keras ===


def time_fit_steps(model, inputs, labels, warmup, steps):
    """Times `warmup + steps` training steps of `model.fit`.

    One epoch per step, each of the one fixed batch, so the `loss` Keras
    logs at the end of a step is that step's loss, not a running mean. A
    step is timed from `on_train_batch_begin` to `on_train_batch_end`: the
    batch's transfer, the compiled train step, and Keras's conversion of the
    logs to Python numbers (which waits for the step to finish on any
    device; a callback that is not `async_safe` makes Keras do it every
    step). Per-epoch work (callbacks' epoch hooks, metric resets, the data
    iterator's start) is outside the steps, as it is in a long epoch.

    Returns the same as `time_steps`.
    """
    import keras

    class StepTimer(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.times, self.cpu_times, self.losses = [], [], []

        def on_train_batch_begin(self, batch, logs=None):
            self.start = time.perf_counter()
            self.cpu_start = time.process_time()

        def on_train_batch_end(self, batch, logs=None):
            self.times.append(time.perf_counter() - self.start)
            self.cpu_times.append(time.process_time() - self.cpu_start)
            self.losses.append(logs["loss"])

    timer = StepTimer()
    model.fit(
        inputs,
        labels,
        batch_size=len(labels),
        epochs=warmup + steps,
        shuffle=False,
        verbose=0,
        callbacks=[timer],
    )
    return (
        sum(timer.times[:warmup]),
        timer.times[warmup:],
        timer.cpu_times[warmup:],
        timer.losses,
    )


def time_keras(args, sizes, between_rounds=None):
    """Times `args.rounds` blocks of `args.steps` steps of `RNNSearch`.

    The first block is preceded by `args.warmup` untimed steps; training
    continues from block to block, and `between_rounds()` (the reference,
    in `main`) runs after each block.
    """
    import keras

    from keras_bahdanau.models import RNNSearch
    from keras_bahdanau.training import MaskedSparseCategoricalCrossentropy
    from keras_bahdanau.training import jit_compile_argument
    from keras_bahdanau.training import make_optimizer

    keras.utils.set_random_seed(args.seed)
    keras.mixed_precision.set_global_policy(args.precision)
    model = RNNSearch.from_preset(
        args.preset,
        source_vocabulary_size=sizes["source_vocabulary_size"],
        target_vocabulary_size=sizes["target_vocabulary_size"],
    )
    # `compile_model` without its accuracy metric: the reference computes
    # none either. Under mixed_float16, compile adds loss scaling.
    model.compile(
        optimizer=make_optimizer(args.optimizer),
        loss=MaskedSparseCategoricalCrossentropy(),
        jit_compile=jit_compile_argument(args.jit_compile),
    )
    source_ids, target_ids, labels = random_batch(sizes, args)
    inputs = {"source_ids": source_ids, "target_ids": target_ids}
    memory_before = peak_rss_mb()

    def train_step():
        # Returns the loss as NumPy: the step has finished on any device.
        return model.train_on_batch(inputs, labels)

    warmup_s, times, cpu_times, losses, round_times = 0.0, [], [], [], []
    for round_index in range(args.rounds):
        print(
            f"timing Keras ({keras.backend.backend()}, {args.loop}), round "
            f"{round_index + 1} of {args.rounds}...",
            file=sys.stderr,
        )
        warmup = args.warmup if round_index == 0 else 0
        if args.loop == "fit":
            timed = time_fit_steps(model, inputs, labels, warmup, args.steps)
        else:
            timed = time_steps(train_step, warmup, args.steps)
        warmup_s += timed[0]
        times += timed[1]
        cpu_times += timed[2]
        losses += timed[3]
        round_times.append(timed[1])
        if between_rounds is not None:
            between_rounds()
    device, peak_memory = keras_device_and_peak_memory()
    return {
        "device": device,
        "params": model.count_params(),
        "jit_compile": model.jit_compile,
        "times": times,
        "round_times": round_times,
        "cpu_times": cpu_times,
        "losses": losses,
        "warmup_s": warmup_s,
        "peak_memory_mb": round(peak_memory, 1),
        "rss_before_training_mb": round(memory_before, 1),
    }


# === PyTorch reference ===


def build_reference_model(sizes):
    """RNNsearch in plain PyTorch, written as a user would write it."""
    import torch
    from torch import nn
    from torch.nn import functional

    class ReferenceRNNSearch(nn.Module):
        def __init__(
            self,
            source_vocabulary_size,
            target_vocabulary_size,
            embedding_dim,
            hidden_dim,
            maxout_dim,
            attention_dim,
        ):
            super().__init__()
            m, n, a = embedding_dim, hidden_dim, attention_dim
            self.maxout_dim = maxout_dim
            self.source_embedding = nn.Embedding(source_vocabulary_size, m)
            self.encoder = nn.GRU(m, n, batch_first=True, bidirectional=True)
            self.initial_state = nn.Linear(n, n)  # W_s
            self.target_embedding = nn.Embedding(target_vocabulary_size, m)
            self.query = nn.Linear(n, a, bias=False)  # W_a
            self.key = nn.Linear(2 * n, a, bias=False)  # U_a
            self.score = nn.Linear(a, 1, bias=False)  # v_a
            self.input_gates = nn.Linear(m, 3 * n)  # [W_z, W_r, W] + bias
            self.context_gates = nn.Linear(2 * n, 3 * n, bias=False)  # C
            self.recurrent_gates = nn.Linear(n, 2 * n, bias=False)  # U_z, U_r
            self.recurrent = nn.Linear(n, n, bias=False)  # U
            self.maxout = nn.Linear(3 * n + m, 2 * maxout_dim)  # U_o,V_o,C_o
            self.output_projection = nn.Linear(
                maxout_dim, target_vocabulary_size
            )

        def forward(self, source_ids, target_ids):
            source_mask = source_ids != 0
            # (b, Tx, 2n); final (2, b, n): [forward, backward].
            annotations, final = self.encoder(self.source_embedding(source_ids))
            state = torch.tanh(self.initial_state(final[1]))  # s_0
            keys = self.key(annotations)  # (b, Tx, a), once per sentence
            embedded = self.target_embedding(target_ids)  # (b, Ty, m)
            readout_states, contexts = [], []
            for i in range(target_ids.shape[1]):
                # (b, 1, a) + (b, Tx, a) -> (b, Tx)
                scores = self.score(
                    torch.tanh(self.query(state)[:, None] + keys)
                ).squeeze(-1)
                # The softmax runs in float32, as in the Keras layer.
                scores = scores.float().masked_fill(~source_mask, -1e9)
                alpha = torch.softmax(scores, dim=-1)
                # (b, 1, Tx) @ (b, Tx, 2n) -> (b, 2n)
                context = torch.bmm(alpha[:, None], annotations)[:, 0]
                gates = self.input_gates(embedded[:, i]) + self.context_gates(
                    context
                )
                z, r, candidate = gates.chunk(3, dim=-1)
                z_recurrent, r_recurrent = self.recurrent_gates(state).chunk(
                    2, dim=-1
                )
                z = torch.sigmoid(z + z_recurrent)
                r = torch.sigmoid(r + r_recurrent)
                candidate = torch.tanh(candidate + self.recurrent(r * state))
                readout_states.append(state)  # s_{i-1}
                contexts.append(context)
                state = (1 - z) * state + z * candidate
            features = torch.cat(
                [
                    torch.stack(readout_states, 1),
                    embedded,
                    torch.stack(contexts, 1),
                ],
                dim=-1,
            )  # (b, Ty, 3n + m)
            pieces = self.maxout(features)  # (b, Ty, 2l)
            # (b, Ty, 2l) -> (b, Ty, l, 2): the max over neighbouring pairs.
            hidden = pieces.unflatten(-1, (self.maxout_dim, 2)).amax(-1)
            return self.output_projection(hidden)  # (b, Ty, V)

        def loss(self, logits, labels):
            return functional.cross_entropy(
                logits.flatten(0, 1).float(), labels.flatten(), ignore_index=0
            )

    return ReferenceRNNSearch(**sizes)


def time_reference(args, sizes):
    """Times the PyTorch reference; runs in its own process."""
    import torch

    if args.torch_threads is not None:
        torch.set_num_threads(args.torch_threads)
    torch.manual_seed(args.seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = build_reference_model(sizes).to(device)
    if args.optimizer == "adam":
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    else:  # The paper's Adadelta, as in `make_optimizer`.
        optimizer = torch.optim.Adadelta(
            model.parameters(), lr=1.0, rho=0.95, eps=1e-6
        )
    autocast_dtype = {
        "float32": None,
        "mixed_bfloat16": torch.bfloat16,
        "mixed_float16": torch.float16,
    }[args.precision]
    scaler = torch.amp.GradScaler(
        device, enabled=args.precision == "mixed_float16"
    )
    source_ids, target_ids, labels = (
        torch.from_numpy(array).long().to(device)
        for array in random_batch(sizes, args)
    )
    memory_before = peak_rss_mb()

    def train_step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(
            device, dtype=autocast_dtype, enabled=autocast_dtype is not None
        ):
            loss = model.loss(model(source_ids, target_ids), labels)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        return loss.item()  # waits for the device

    print("timing the PyTorch reference...", file=sys.stderr)
    warmup_s, times, cpu_times, losses = time_steps(
        train_step, args.warmup, args.steps
    )
    if device == "cuda":
        name = torch.cuda.get_device_name()
        peak_memory = torch.cuda.max_memory_allocated() / 2**20
    else:
        name, peak_memory = "cpu", peak_rss_mb()
    return {
        "device": name,
        "params": sum(p.numel() for p in model.parameters()),
        "threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "torch_version": torch.__version__,
        "times": times,
        "cpu_times": cpu_times,
        "losses": losses,
        "warmup_s": warmup_s,
        "peak_memory_mb": round(peak_memory, 1),
        "rss_before_training_mb": round(memory_before, 1),
    }


def run_reference_process(argv, sizes):
    """Runs this script for the reference only; returns its JSON line."""
    command = [sys.executable, os.path.abspath(__file__), *argv]
    command += ["--reference-sizes", json.dumps(sizes)]
    result = subprocess.run(
        command, stdout=subprocess.PIPE, text=True, check=True
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


# === Main ===

REFERENCE_FIELDS = (
    "device",
    "params",
    "threads",
    "interop_threads",
    "step_ms",
    "step_ms_min",
    "step_ms_max",
    "step_cpu_ms",
    "warmup_s",
    "tokens_per_s",
    "achieved_tflops",
    "utilisation",
    "peak_memory_mb",
    "rss_before_training_mb",
    "losses",
)


def reference_fields(references, round_times, tokens_per_step, flop, peak):
    """The reference's `pytorch_*` fields over all rounds, and the ratios.

    Step times are pooled over the rounds (each round is a fresh process
    with its own warm-up); the other fields are the first round's, peak
    memory the largest. `round_ratios` compares each round's medians, the
    reference run right after that round's Keras steps.
    """
    if not references:
        return {"ratio_vs_pytorch": None}
    fields = {"torch_version": references[0]["torch_version"]}
    for key in REFERENCE_FIELDS:
        fields[f"pytorch_{key}"] = references[0][key]
    times = [t for r in references for t in r["step_times_ms"]]
    step_ms = statistics.median(times)
    tokens_per_s = tokens_per_step / (step_ms / 1e3)
    fields.update(
        pytorch_step_times_ms=times,
        pytorch_step_ms=round(step_ms, 1),
        pytorch_step_ms_min=min(times),
        pytorch_step_ms_max=max(times),
        pytorch_tokens_per_s=round(tokens_per_s, 1),
        pytorch_achieved_tflops=round(flop * tokens_per_s / 1e12, 4),
        pytorch_utilisation=(
            round(flop * tokens_per_s / 1e12 / peak, 4) if peak else None
        ),
        pytorch_peak_memory_mb=max(r["peak_memory_mb"] for r in references),
    )
    ours = [t * 1e3 for block in round_times for t in block]
    fields["ratio_vs_pytorch"] = round(step_ms / statistics.median(ours), 3)
    fields["round_ratios"] = [
        round(
            statistics.median(r["step_times_ms"])
            / (1e3 * statistics.median(b)),
            3,
        )
        for r, b in zip(references, round_times, strict=True)
    ]
    return fields


def main(argv=None):
    started = records.start()
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_arguments(argv)
    sizes = args.reference_sizes or model_sizes(args)
    tokens_per_step = args.batch_size * args.length  # all real tokens
    flop = flop_per_token(sizes, args.length, args.length)
    load_start = os.getloadavg()
    common = {
        "preset": args.preset,
        "sizes": sizes,
        "batch": args.batch_size,
        "length": args.length,
        "precision": args.precision,
        "optimizer": args.optimizer,
        "warmup": args.warmup,
        "steps": args.steps,
        "tokens_per_step": tokens_per_step,
        "flop_per_token": round(flop),
    }
    references = []
    if args.reference_sizes:  # The child process: the reference only.
        timed = time_reference(args, sizes)
        framework = {"framework": "pytorch"}
    else:
        import keras

        def run_reference():
            if not args.no_reference:
                references.append(run_reference_process(argv, sizes))

        timed = time_keras(args, sizes, between_rounds=run_reference)
        framework = {
            "backend": keras.backend.backend(),
            "keras_version": keras.__version__,
            "loop": args.loop,
            "rounds": args.rounds,
        }
    round_times = timed.pop("round_times", None)
    throughput = throughput_fields(timed, tokens_per_step, flop, args)
    record = {
        **framework,
        **common,
        **timed,
        **throughput,
        "peak_tflops": args.peak_tflops,
    }
    if not args.reference_sizes:
        record.update(
            reference_fields(
                references, round_times, tokens_per_step, flop, args.peak_tflops
            )
        )
    # Caps the threads of torch (both processes) and of other OpenMP code.
    record["omp_num_threads"] = os.environ.get("OMP_NUM_THREADS")
    record["load_average_start"] = [round(x, 2) for x in load_start]
    record["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(record), flush=True)
    if args.record and not args.reference_sizes:  # Not the child's.
        records.write_record(
            args.record,
            "train_throughput",
            {"measurements": [record]},
            started,
            argv=[__file__, *argv],
        )


if __name__ == "__main__":
    main()
