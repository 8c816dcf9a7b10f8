"""Switching backends: the same RNNsearch trained on JAX, TensorFlow and torch.

What a user checks before moving a model from one backend to another: the
same model, initial weights, data and optimizer give the same training
curve, speed and memory are compared on the same task, and a model file
trained on one backend gives the same logits on the others.

The script runs in phases, each backend in its own processes (this script
again, with `KERAS_BACKEND` set), so that each backend's peak memory is its
own. That peak includes TensorFlow's on JAX and torch too: when
TensorFlow is installed (this package requires it), Keras imports it on
every backend, since `keras.layers.Bidirectional` checks for
`tf.TensorShape` when it serializes its layer.

1. Data: a reversal task (reverse a random sentence of `--vocabulary`
   words, 1 to `--length` tokens long, right-padded) drawn with NumPy from
   `--seed`: one batch per training step and a fixed evaluation batch.
2. Training, once per backend: `RNNSearch` (dropout 0, float32), Adam with
   the gradient norm clipped to 1 (`keras_bahdanau.training.compile_model`),
   `--steps` calls of `model.train_on_batch`. The backends' random number
   generators differ, so seeding alone would give each backend different
   initial weights: the first backend to run draws them and saves
   `initial.weights.h5`, and every backend (that one included) loads that
   file before training. Each backend saves its trained model as
   `<backend>.keras` and the logits it computes on the evaluation batch.
3. Cross-loading, once per backend (the last backend does it in the
   process that trained): load every trained `.keras` file (with
   `safe_mode=True` and `compile=False`, see `load_worker`), compute the
   logits on the evaluation batch, and compare with the logits the
   training backend computed itself.

Then one table: per training backend, the loss of the first and the last
step (`train_on_batch` returns the loss of the batch before its update, so
the first is the loss of the shared initial weights), target tokens per
second (real tokens, steps 2 to N; step 1 holds the XLA compilation or the
tracing), the peak resident memory of its training process, and the
largest |logits difference| of its trained model loaded on each backend.
The exit status is 1 if a backend failed or two backends' logits differ
by more than `--tolerance` times max(1, largest |logit|) (see
`logits_scale`).

Float32 matrix products run in full float32 on every backend: on recent
NVIDIA GPUs, TensorFlow and JAX would otherwise use TF32 (a 10-bit
mantissa, a rounding error near 5e-4 per operand, far above 1e-5) while
torch does not. This only matters on GPUs; the figures below were
measured on CPUs.

What to expect (measured with the defaults on a 2-core CPU, Keras 3.15.1,
JAX 0.10.2, TensorFlow 2.21, torch 2.13):

- The losses agree to about 1e-7 (float32 rounding) while the gradient
  norm stays under the clipping threshold, 1. It first went over at step
  24; from there TensorFlow clipped to a norm of 1.014 instead of 1, and
  its loss moved away from the others' (1e-3 at step 26; 3% at step 100
  with `OMP_NUM_THREADS=1`, 16% without). Keras computes the global norm
  from `tf.IndexedSlices` without adding up the slices of a word that
  occurs several times in the batch, so on TensorFlow the norm of an
  embedding gradient comes out too small. JAX and torch stayed within
  6e-7 of each other until step 76 (with `OMP_NUM_THREADS=1`); then
  float32 rounding, amplified by training, reached 8e-5 to 2e-3 at step
  100. Such figures depend on the thread count, not on the run: the same
  backend with and without `OMP_NUM_THREADS=1` gave losses 1e-6 (JAX) to
  1e-3 (TensorFlow) apart at step 51, and two runs without it gave the
  same losses.
- The logits of one set of weights differed by up to 1.9e-5 between
  backends, the largest logit being about 40; each backend was 0.9e-5 to
  1.7e-5 away from a float64 NumPy computation with the same weights
  (`tests/numpy_reference.py`), so this is float32 rounding.
- The peak memory of every backend includes TensorFlow (see above). With
  the cores busy with other jobs, torch trained at 33 and 90 target
  tokens/s (two runs) with its default 2 threads, and at 440 with
  `OMP_NUM_THREADS=1`.

Usage (on a 2-core CPU shared with other jobs, load average 5 to 7: 7 and
16 minutes in two runs, 5 minutes with `OMP_NUM_THREADS=1`):

    python examples/backend_switching.py
    python examples/backend_switching.py --backends jax torch --steps 20 \\
        --output-dir /tmp/switching --json

With `--output-dir` the models, logits and per-process logs are kept;
by default they go to a temporary directory that is removed at the end.
"""

import argparse
import json
import math
import os
import resource
import runpy
import subprocess
import sys
import tempfile
import time
import traceback
from importlib.util import find_spec
from pathlib import Path

import numpy as np

# Keras is imported only by the worker processes: the parent would import
# its default backend for nothing.

BACKENDS = ("jax", "tensorflow", "torch")
PAD_ID, BOS_ID, EOS_ID, FIRST_WORD_ID = 0, 2, 3, 4  # as in the package
EVALUATION_BATCH_SIZE = 16
INITIAL_WEIGHTS = "initial.weights.h5"


def load_presets():
    """The `RNNSearch` presets, read without importing the package.

    Importing `keras_bahdanau` imports Keras and its default backend; the
    presets file is a plain dict, so it is run on its own.
    """
    spec = find_spec("keras_bahdanau")
    if spec is None or spec.origin is None:
        raise SystemExit(
            "keras_bahdanau is not installed: run `pip install -e .` in the "
            "repository first."
        )
    path = Path(spec.origin).parent / "models" / "rnn_search" / "presets.py"
    return runpy.run_path(str(path))["RNN_SEARCH_PRESETS"]


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--backends",
        nargs="+",
        choices=BACKENDS,
        default=list(BACKENDS),
        help="backends to compare, in the order they run (default: all)",
    )
    parser.add_argument(
        "--steps", type=int, default=100, help="training steps (default 100)"
    )
    parser.add_argument(
        "--preset",
        default="rnnsearch_tiny",
        help="RNNSearch preset giving the layer sizes (default "
        "rnnsearch_tiny); the vocabulary comes from the task",
    )
    parser.add_argument("--embedding-dim", type=int, help="overrides preset")
    parser.add_argument("--hidden-dim", type=int, help="overrides preset")
    parser.add_argument("--maxout-dim", type=int, help="overrides preset")
    parser.add_argument(
        "--initialization",
        choices=("glorot", "paper"),
        default="glorot",
        help="glorot (default) or paper; the paper's N(0, 0.01^2) weights "
        "give near-zero logits, a weak test of the logits comparison",
    )
    parser.add_argument(
        "--vocabulary",
        type=int,
        default=20,
        help="number of words of the task (default 20)",
    )
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument(
        "--length", type=int, default=10, help="maximum sentence length"
    )
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--tolerance",
        type=float,
        default=1e-5,
        help="largest |logits difference| accepted, relative to "
        "max(1, largest |logit|) (default 1e-5)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=1800,
        help="seconds one backend's process may run (default 1800)",
    )
    parser.add_argument(
        "--output-dir",
        type=Path,
        help="new or empty folder to keep the models, logits and logs in "
        "(default: a temporary folder, removed at the end)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="also print one JSON line per backend before the table",
    )
    # Internal: how the parent asks a worker process for a phase.
    parser.add_argument(
        "--worker",
        choices=("train", "load", "train,load"),
        help=argparse.SUPPRESS,
    )
    args = parser.parse_args(argv)
    if args.worker:
        if args.output_dir is None:
            parser.error("--worker needs --output-dir")
        return args
    for name in ("steps", "vocabulary", "batch_size", "length"):
        if getattr(args, name) <= 0:
            flag = "--" + name.replace("_", "-")
            parser.error(f"{flag} must be positive, got {getattr(args, name)}")
    for name in ("embedding_dim", "hidden_dim", "maxout_dim"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            flag = "--" + name.replace("_", "-")
            parser.error(f"{flag} must be positive, got {value}")
    for name in ("learning_rate", "tolerance", "timeout"):
        if not getattr(args, name) > 0:
            flag = "--" + name.replace("_", "-")
            parser.error(f"{flag} must be positive, got {getattr(args, name)}")
    if len(set(args.backends)) != len(args.backends):
        parser.error(f"--backends lists a backend twice: {args.backends}")
    presets = load_presets()
    if args.preset not in presets:
        parser.error(
            f"unknown --preset {args.preset!r}; available: {sorted(presets)}"
        )
    output_dir = args.output_dir
    if output_dir is not None and output_dir.exists():
        if not output_dir.is_dir():
            parser.error(f"--output-dir {output_dir} is not a folder")
        if any(output_dir.iterdir()):
            parser.error(
                f"--output-dir {output_dir} is not empty: files of an "
                "earlier run (initial weights, models) would be mixed with "
                "this one's; pass a new or empty folder"
            )
    return args


def model_arguments(args):
    """The `RNNSearch` constructor arguments: preset sizes, overrides."""
    preset = load_presets()[args.preset]
    vocabulary_size = FIRST_WORD_ID + args.vocabulary
    return {
        "source_vocabulary_size": vocabulary_size,
        "target_vocabulary_size": vocabulary_size,
        "embedding_dim": args.embedding_dim or preset["embedding_dim"],
        "hidden_dim": args.hidden_dim or preset["hidden_dim"],
        "maxout_dim": args.maxout_dim or preset["maxout_dim"],
        "dropout": 0.0,
        "initialization": args.initialization,
    }


# === Data ===


def reversal_batches(rng, num_sentences, length, vocabulary):
    """Random sentences and their reversals, in the models' input format.

    Returns `(source_ids, target_ids, labels)`: `(n, length)`,
    `(n, length + 1)` and `(n, length + 1)` int32; the decoder inputs start
    with BOS, the labels end with EOS, and 0 pads.
    """
    lengths = rng.integers(1, length + 1, num_sentences)
    words = rng.integers(
        FIRST_WORD_ID, FIRST_WORD_ID + vocabulary, (num_sentences, length)
    )
    positions = np.arange(length)
    real = positions < lengths[:, None]  # (n, length)
    source_ids = np.where(real, words, PAD_ID)
    # Position i of the reversal is word lengths - 1 - i of the source.
    reversed_index = np.clip(lengths[:, None] - 1 - positions, 0, None)
    reversed_words = np.take_along_axis(words, reversed_index, axis=1)
    labels = np.zeros((num_sentences, length + 1), "int32")
    labels[:, :length] = np.where(real, reversed_words, PAD_ID)
    labels[np.arange(num_sentences), lengths] = EOS_ID
    decoder_inputs = np.where(labels == EOS_ID, PAD_ID, labels)[:, :-1]
    target_ids = np.concatenate(
        [np.full((num_sentences, 1), BOS_ID), decoder_inputs], axis=1
    )
    return (
        source_ids.astype("int32"),
        target_ids.astype("int32"),
        labels,
    )


def write_data(args, path):
    """One batch per training step and the evaluation batch, as `.npz`."""
    train_rng, evaluation_rng = (
        np.random.default_rng(seed)
        for seed in np.random.SeedSequence(args.seed).spawn(2)
    )
    source, target, labels = reversal_batches(
        train_rng, args.steps * args.batch_size, args.length, args.vocabulary
    )
    batched = (args.steps, args.batch_size, -1)
    evaluation = reversal_batches(
        evaluation_rng, EVALUATION_BATCH_SIZE, args.length, args.vocabulary
    )
    np.savez(
        path,
        source_ids=source.reshape(batched),
        target_ids=target.reshape(batched),
        labels=labels.reshape(batched),
        evaluation_source_ids=evaluation[0],
        evaluation_target_ids=evaluation[1],
        evaluation_labels=evaluation[2],
    )


# === Worker processes ===


def peak_rss_mb():
    """Peak resident set size of this process, in MiB.

    Linux: `VmHWM`, which starts afresh in each process; `ru_maxrss` would
    count the parent's peak too, as it is carried across fork and exec.
    """
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 2**10  # kB
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


def import_backend(backend):
    """Imports Keras on `backend`; float32 products stay float32.

    Returns `(keras, framework version, device)`.
    """
    import keras

    if keras.backend.backend() != backend:
        raise RuntimeError(
            f"Keras runs on {keras.backend.backend()!r}, not {backend!r}: "
            "KERAS_BACKEND must be set before Keras is imported."
        )
    keras.config.set_floatx("float32")
    keras.config.set_dtype_policy("float32")
    # On GPUs each framework has its own switch for TF32 (a 10-bit
    # mantissa) in float32 products; on CPUs these change nothing.
    if backend == "jax":
        import jax

        jax.config.update("jax_default_matmul_precision", "highest")
        return keras, jax.__version__, jax.devices()[0].platform
    if backend == "tensorflow":
        import tensorflow as tf

        tf.config.experimental.enable_tensor_float_32_execution(False)
        device = "gpu" if tf.config.list_logical_devices("GPU") else "cpu"
        return keras, tf.__version__, device
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = "cuda" if torch.cuda.is_available() else "cpu"
    return keras, torch.__version__, device


def evaluation_inputs(data):
    return {
        "source_ids": data["evaluation_source_ids"],
        "target_ids": data["evaluation_target_ids"],
    }


def train_worker(backend, output_dir, config):
    """Phase 2: trains on `backend`; saves the model and its logits."""
    keras, version, device = import_backend(backend)
    from keras_bahdanau import RNNSearch
    from keras_bahdanau.training import compile_model

    data = np.load(output_dir / "data.npz")
    keras.utils.set_random_seed(config["seed"])
    model = RNNSearch(**config["model"])
    initial_weights = output_dir / INITIAL_WEIGHTS
    if not initial_weights.exists():
        # Written under another name first: a process killed mid-write
        # must not leave a half file for the next backend.
        partial = output_dir / f"partial.{backend}.weights.h5"
        model.save_weights(partial)
        os.replace(partial, initial_weights)
    model.load_weights(initial_weights)
    compile_model(model, "adam", learning_rate=config["learning_rate"])

    losses, step_seconds, step_tokens = [], [], []
    for step in range(config["steps"]):
        inputs = {
            "source_ids": data["source_ids"][step],
            "target_ids": data["target_ids"][step],
        }
        labels = data["labels"][step]
        start = time.perf_counter()
        # The logs are NumPy: the step has finished on any device.
        logs = model.train_on_batch(inputs, labels, return_dict=True)
        step_seconds.append(time.perf_counter() - start)
        losses.append(float(logs["loss"]))
        step_tokens.append(int(np.count_nonzero(labels)))
        print(f"step {step + 1}: loss {losses[-1]:.6f}", file=sys.stderr)

    model.save(output_dir / f"{backend}.keras")
    logits = compute_logits(keras, model, evaluation_inputs(data))
    np.save(output_dir / f"{backend}.logits.npy", logits)
    # Step 1 holds the compilation (JAX) or tracing (TensorFlow).
    timed = sum(step_seconds[1:])
    return {
        "keras_version": keras.__version__,
        "framework_version": version,
        "device": device,
        "jit_compile": model.jit_compile,
        "losses": losses,
        "first_step_s": round(step_seconds[0], 3),
        "tokens_per_s": (
            round(sum(step_tokens[1:]) / timed, 1) if timed > 0 else None
        ),
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "logits_max_abs": float(np.abs(logits).max()),
    }


def compute_logits(keras, model, inputs):
    """The logits as NumPy, from a plain call.

    Not `predict_on_batch`: JAX would compile a predict function for each
    loaded model, which takes longer than this whole call.
    """
    return keras.ops.convert_to_numpy(model(inputs, training=False))


def load_worker(backend, output_dir, config):
    """Phase 3: on `backend`, the logits of every trained model file.

    The files are loaded with `compile=False`, as the package loads its
    checkpoints: Keras saves the resolved `jit_compile` of `compile`, so a
    file compiled on JAX says `jit_compile=True`, which turns on XLA on
    TensorFlow and `torch.compile` on torch (measured here: 76 s and
    recompilation warnings for the first torch predict of a tiny model).
    A model moved to a new backend is best compiled again there.
    """
    keras, _, _ = import_backend(backend)
    import keras_bahdanau.models  # noqa: F401 (registers the model classes)

    inputs = evaluation_inputs(np.load(output_dir / "data.npz"))
    differences, errors = {}, {}
    for trained_on in config["backends"]:
        path = output_dir / f"{trained_on}.keras"
        if not path.exists():
            continue  # That backend's training failed; reported there.
        try:
            model = keras.saving.load_model(path, compile=False, safe_mode=True)
            logits = compute_logits(keras, model, inputs)
            own = np.load(output_dir / f"{trained_on}.logits.npy")
            differences[trained_on] = float(np.abs(logits - own).max())
        except Exception as error:  # One bad file must not hide the others.
            traceback.print_exc()
            errors[trained_on] = describe(error)
    return {"max_abs_difference": differences, "errors": errors}


PHASES = {"train": train_worker, "load": load_worker}


def describe(error):
    return f"{type(error).__name__}: {error}".strip().splitlines()[0]


def worker_main(args):
    """Runs phases on the backend named by `KERAS_BACKEND`.

    Each phase writes `<phase>.<backend>.json`, holding its result or the
    error it raised; a failed training does not stop the loading phase.
    """
    backend = os.environ.get("KERAS_BACKEND", "")
    output_dir = args.output_dir
    config = json.loads((output_dir / "config.json").read_text())
    status = 0
    for phase in args.worker.split(","):
        try:
            result = PHASES[phase](backend, output_dir, config)
        except Exception as error:  # Reported in the table by the parent.
            traceback.print_exc()
            result = {"error": describe(error)}
            status = 1
        path = output_dir / f"{phase}.{backend}.json"
        path.write_text(json.dumps(result))
    return status


# === Parent process ===


def run_worker(phases, backend, output_dir, timeout):
    """Runs this script for `phases` on `backend`; `{phase: result}`.

    A crash, a timeout or a failed import gives `{"error": ...}` for the
    phases without a result; the worker's output is kept in
    `<phases>.<backend>.log`.
    """
    name = "+".join(phases)
    command = [
        sys.executable,
        os.path.abspath(__file__),
        "--worker",
        ",".join(phases),
        "--output-dir",
        str(output_dir),
    ]
    env = {**os.environ, "KERAS_BACKEND": backend}
    log_path = output_dir / f"{name}.{backend}.log"
    print(f"{name} on {backend}...", file=sys.stderr, flush=True)
    start = time.perf_counter()
    try:
        with open(log_path, "w") as log:
            process = subprocess.run(
                command,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                timeout=timeout,
            )
        lines = log_path.read_text(errors="replace").strip().splitlines()
        last = lines[-1] if lines else "no output"
        failure = f"exit status {process.returncode}: {last}"
    except subprocess.TimeoutExpired:
        failure = f"timed out after {timeout:g} s"
    seconds = round(time.perf_counter() - start, 1)
    results = {}
    for phase in phases:
        path = output_dir / f"{phase}.{backend}.json"
        if path.exists():
            results[phase] = json.loads(path.read_text())
        else:  # Killed or crashed before it could write its result.
            results[phase] = {"error": failure}
        results[phase]["process_s"] = seconds
    errors = [r["error"] for r in results.values() if "error" in r]
    print(
        f"  {'failed: ' + errors[0] if errors else 'done'} ({seconds} s)",
        file=sys.stderr,
        flush=True,
    )
    return results


def summarize(args, train, load):
    """One record per backend: its training and the cross-loading."""
    records = []
    for backend in args.backends:
        record = {"backend": backend, **train[backend]}
        record["status"] = "error" if "error" in record else "ok"
        if record["status"] == "ok":
            record["first_loss"] = record["losses"][0]
            record["final_loss"] = record["losses"][-1]
            differences = {}
            for loader in args.backends:
                if "error" in load[loader]:
                    differences[loader] = "error: " + load[loader]["error"]
                elif backend in load[loader]["errors"]:
                    error = load[loader]["errors"][backend]
                    differences[loader] = "error: " + error
                else:
                    differences[loader] = load[loader]["max_abs_difference"][
                        backend
                    ]
            record["logits_max_abs_difference"] = differences
            # float32 rounding grows with the logits: see `logits_scale`.
            scale = logits_scale(record)
            record["logits_relative_difference"] = {
                loader: value / scale
                for loader, value in differences.items()
                if isinstance(value, float)
            }
        records.append(record)
    return records


def spread(values):
    """`(max - min, (max - min) / |mean|)` of a list of floats."""
    width = max(values) - min(values)
    mean = abs(sum(values) / len(values))
    return width, (width / mean if mean > 0 else math.inf)


def format_table(args, model, records, initial_weights_from):
    ok = [record for record in records if record["status"] == "ok"]
    lines = [
        f"RNNsearch (embedding {model['embedding_dim']}, hidden "
        f"{model['hidden_dim']}, maxout {model['maxout_dim']}, vocabulary "
        f"{model['target_vocabulary_size']}, {args.initialization} "
        f"initialization), reversal task, batch {args.batch_size}, length "
        f"<= {args.length}, {args.steps} Adam steps (lr "
        f"{args.learning_rate:g}), seed {args.seed}; initial weights drawn "
        f"on {initial_weights_from or '-'}, loaded by every backend",
        "",
        f"{'':45}max |logits - training backend's| loaded on",
    ]
    header = (
        f"{'backend':<11}{'loss@1':>10}{f'loss@{args.steps}':>10}"
        f"{'tokens/s':>10}{'peak RSS':>11}"
    )
    header += "".join(f"{backend:>12}" for backend in args.backends)
    lines += [header, "-" * len(header)]
    for record in records:
        if record["status"] != "ok":
            error = shorten(record["error"])
            lines.append(f"{record['backend']:<11}error: {error}")
            continue
        tokens = record["tokens_per_s"]
        row = (
            f"{record['backend']:<11}{record['first_loss']:>10.6f}"
            f"{record['final_loss']:>10.6f}"
            f"{'-' if tokens is None else f'{tokens:.0f}':>10}"
            f"{record['peak_rss_mb']:>7.0f} MiB"
        )
        for loader in args.backends:
            value = record["logits_max_abs_difference"][loader]
            row += f"{value:>12.1e}" if isinstance(value, float) else "   error"
        lines.append(row)
    for record in ok:
        for loader, value in record["logits_max_abs_difference"].items():
            if isinstance(value, str):
                note = f"{record['backend']} model on {loader}: {value}"
                lines.append("  " + shorten(note))
    lines.append("")
    if len(ok) >= 2:
        by_step = [
            spread([record["losses"][step] for record in ok])
            for step in range(args.steps)
        ]
        shown = {1: by_step[0], args.steps: by_step[-1]}
        worst = max(range(args.steps), key=lambda step: by_step[step][1])
        shown[worst + 1] = by_step[worst]
        lines.append(
            "loss spread across backends (max - min, relative): "
            + ", ".join(
                f"step {step} {width:.1e} ({relative:.1e})"
                for step, (width, relative) in sorted(shown.items())
            )
            + (f"; largest at step {worst + 1}" if args.steps > 1 else "")
        )
    relative = [
        (value, record["logits_max_abs_difference"][loader], record)
        for record in ok
        for loader, value in record["logits_relative_difference"].items()
    ]
    if relative:
        worst, absolute, record = max(relative, key=lambda item: item[0])
        verdict = "ok" if passed(args, records) else "FAILED"
        lines.append(
            f"logits on the evaluation batch: largest difference "
            f"{absolute:.1e} ({record['backend']} model, largest |logit| "
            f"{record['logits_max_abs']:.2f}), {worst:.1e} relative to "
            f"max(1, largest |logit|); tolerance {args.tolerance:g}: "
            f"{verdict}"
        )
    return "\n".join(lines)


def shorten(message, width=150):
    """The start of a long error message (the JSON lines hold all of it)."""
    return message if len(message) <= width else message[: width - 3] + "..."


def passed(args, records):
    """True if every backend ran and every pair of logits agrees."""
    for record in records:
        if record["status"] != "ok":
            return False
        for loader in record["logits_max_abs_difference"]:
            value = record["logits_relative_difference"].get(loader)
            if value is None or not value <= args.tolerance:
                return False
    return True


def logits_scale(record):
    """`max(1, largest |logit|)` of a training backend's own logits.

    Float32 rounding errors grow with the size of the logits: measured
    here after 100 steps (logits up to 41), every backend's logits were
    0.9e-5 to 1.7e-5 away from a float64 computation with the same
    weights, so two backends could not agree to 1e-5 in absolute terms.
    Relative to this scale the backends agreed to 5e-7.
    """
    return max(1.0, record["logits_max_abs"])


def compare(args, output_dir):
    model = model_arguments(args)
    config = {
        "backends": args.backends,
        "model": model,
        "steps": args.steps,
        "learning_rate": args.learning_rate,
        "seed": args.seed,
    }
    (output_dir / "config.json").write_text(json.dumps(config, indent=2))
    write_data(args, output_dir / "data.npz")
    train, load = {}, {}
    initial_weights_from = None
    for index, backend in enumerate(args.backends):
        # The last backend loads the models in the process that trained:
        # one start of a framework less.
        last = index == len(args.backends) - 1
        phases = ("train", "load") if last else ("train",)
        results = run_worker(phases, backend, output_dir, args.timeout)
        train[backend] = results["train"]
        if last:
            load[backend] = results["load"]
        if initial_weights_from is None and (
            (output_dir / INITIAL_WEIGHTS).exists()
        ):
            initial_weights_from = backend
    trained = [b for b in args.backends if (output_dir / f"{b}.keras").exists()]
    for backend in args.backends[:-1]:
        if not trained:
            load[backend] = {"error": "no backend trained a model"}
            continue
        results = run_worker(("load",), backend, output_dir, args.timeout)
        load[backend] = results["load"]
    records = summarize(args, train, load)
    if args.json:
        for record in records:
            extra = {"initial_weights_from": initial_weights_from}
            print(json.dumps({**record, **extra, "config": config}))
    table = format_table(args, model, records, initial_weights_from)
    print(table, flush=True)
    return 0 if passed(args, records) else 1


def main(argv=None):
    args = parse_arguments(argv)
    if args.worker:
        return worker_main(args)
    if args.output_dir is not None:
        args.output_dir.mkdir(parents=True, exist_ok=True)
        return compare(args, args.output_dir)
    with tempfile.TemporaryDirectory(prefix="backend_switching_") as folder:
        return compare(args, Path(folder))


if __name__ == "__main__":
    sys.exit(main())
