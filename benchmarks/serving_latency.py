"""Latency of an exported SavedModel, served by TensorFlow alone.

Builds a preset (`Translator.save_to_preset`) with an
RNNsearch of a preset, random weights and word vocabularies of made-up
words (`w0`, `w1`, ...), exports it with
`keras_bahdanau.export.export_saved_model` once per beam size (the beam
of `serving_default`; `max_beam_size` is that beam size, so the graph
holds no larger search), and then, in a subprocess that imports only
TensorFlow (keras, jax, torch, keras_hub, tensorflow_text and
keras_bahdanau are blocked, as on a TF Serving machine), loads each
SavedModel and calls `serving_default` on requests of `--batch-sizes`
random sentences of `--source-length` words. Each configuration makes
`--warmup` untimed requests (the first one includes TensorFlow's graph
optimization: `first_request_s`), then `--requests` timed ones. One JSON
line per (beam size, batch size) on stdout; progress on stderr.

The export runs on the current backend (`KERAS_BACKEND`); as
`export_saved_model` does, it builds the graph in a TensorFlow-backend
subprocess when that backend is JAX or torch. A beam size of 1 is
greedy search (the served search is beam search with one beam, which
equals greedy search).

EOS: the output bias of EOS is -1e4 by default, so a random model never
says EOS before the last step (where the search forces it): every
request decodes `--max-length` steps and every translation has
`max_length - 1` words (checked: `translation_words_per_sentence`);
`--allow-eos` keeps the random EOS.

Fields: `backend` (the export's), `preset`, `params`, `vocabulary_size`,
`source_length`, `max_length`, `beam_size`, `batch_size`, `warmup`,
`requests`, `latency_ms` (median over the timed requests),
`latency_ms_min`, `latency_ms_max`, `latency_ms_all`, `sentences_per_s`
(`batch_size / median latency`), `first_request_s`, `load_s`
(`tf.saved_model.load`), `export_s`, `statuses` (the `status` outputs of
the last request, counted), `translation_words_per_sentence`,
`tensorflow_version`, `imported` (blocked modules that the loader
imported anyway: must be empty), `load_average_start`,
`load_average_end` (of the loader process).

Usage:

```
KERAS_BACKEND=jax python benchmarks/serving_latency.py \\
    --preset rnnsearch_small --vocabulary-size 8000 --source-length 20 \\
    --max-length 20 --batch-sizes 1 32 --beam-sizes 1 5
```
"""

import argparse
import contextlib
import json
import pathlib
import subprocess
import sys
import tempfile
import time

from keras_bahdanau.startup import start_tensorflow

# Before Keras loads TensorFlow: without its C++ start-up log.
start_tensorflow()

import keras
import numpy as np

from keras_bahdanau import records
from keras_bahdanau.data import build_tokenizer
from keras_bahdanau.decoding import SearchConfig
from keras_bahdanau.export import export_saved_model
from keras_bahdanau.models import RNNSearch
from keras_bahdanau.preprocessor import TranslationPreprocessor
from keras_bahdanau.reserved import EOS_ID
from keras_bahdanau.reserved import NUM_RESERVED_IDS
from keras_bahdanau.translator import Translator

# What the loader must not import: TF Serving has none of them.
BLOCKED = (
    "keras",
    "jax",
    "torch",
    "keras_hub",
    "tensorflow_text",
    "tf_keras",
    "keras_bahdanau",
)

# The loader process. Its spec comes on stdin as JSON: `models` (a list
# of {"path", "beam_size"}), `requests` (batch size -> sentences),
# `warmup`, `timed`. One JSON line per (model, batch size) on stdout.
LOADER = r"""
import json, os, sys, time
for name in %r:
    sys.modules[name] = None  # an import of any of them raises ImportError
import numpy as np
import tensorflow as tf

spec = json.load(sys.stdin)
for entry in spec["models"]:
    start = time.perf_counter()
    model = tf.saved_model.load(entry["path"])
    load_s = time.perf_counter() - start
    serve = model.signatures["serving_default"]
    for batch_size, sentences in spec["requests"].items():
        load_start = os.getloadavg()
        text = tf.constant(sentences)
        times = []
        for index in range(spec["warmup"] + spec["timed"]):
            start = time.perf_counter()
            outputs = serve(text=text)
            translations = outputs["translation"].numpy()  # waits
            times.append(time.perf_counter() - start)
        words = [len(t.decode("utf-8").split()) for t in translations]
        statuses = [s.decode("utf-8") for s in outputs["status"].numpy()]
        print(json.dumps({
            "beam_size": entry["beam_size"],
            "batch_size": int(batch_size),
            "first_request_s": times[0],
            "times": times[spec["warmup"]:],
            "load_s": load_s,
            "words": words,
            "statuses": {s: statuses.count(s) for s in sorted(set(statuses))},
            "tensorflow_version": tf.__version__,
            "imported": [n for n in %r if sys.modules.get(n) is not None],
            "load_average_start": load_start,
            "load_average_end": os.getloadavg(),
        }), flush=True)
"""


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--preset", choices=sorted(RNNSearch.presets), default="rnnsearch_tiny"
    )
    parser.add_argument(
        "--vocabulary-size",
        type=int,
        default=1000,
        help="source and target vocabulary size (reserved ids included)",
    )
    parser.add_argument(
        "--source-length", type=int, default=20, help="words per sentence"
    )
    parser.add_argument(
        "--max-length",
        type=int,
        default=20,
        help="target tokens per hypothesis (EOS included): decode steps",
    )
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--beam-sizes", type=int, nargs="+", default=[1, 5])
    parser.add_argument(
        "--warmup", type=int, default=3, help="untimed requests first"
    )
    parser.add_argument("--requests", type=int, default=10, help="timed")
    parser.add_argument("--allow-eos", action="store_true")
    parser.add_argument(
        "--output",
        help="folder for the run directory and the SavedModels (default: "
        "a temporary folder, deleted at the end)",
    )
    parser.add_argument("--seed", type=int, default=0)
    records.add_record_argument(parser)
    args = parser.parse_args(argv)
    for name in ("source_length", "max_length", "requests"):
        if getattr(args, name) <= 0:
            parser.error(
                f"--{name.replace('_', '-')} must be positive. Received: "
                f"{getattr(args, name)}"
            )
    if args.vocabulary_size <= NUM_RESERVED_IDS + 1:
        parser.error(
            f"--vocabulary-size must leave words besides the "
            f"{NUM_RESERVED_IDS} reserved ids. Received: "
            f"{args.vocabulary_size}"
        )
    if args.warmup < 1:
        parser.error(
            "--warmup must be >= 1: the first request optimizes the graph. "
            f"Received: {args.warmup}"
        )
    return args


def made_up_words(args):
    """The `vocabulary_size - 4` words of both vocabularies."""
    return [f"w{i}" for i in range(args.vocabulary_size - NUM_RESERVED_IDS)]


def build_run(run_dir, args):
    """Writes a preset with random weights; returns the model."""
    words = made_up_words(args)
    # Every word once, so the vocabulary holds them all.
    tokenizer = build_tokenizer("word", [" ".join(words)], args.vocabulary_size)
    keras.utils.set_random_seed(args.seed)
    model = RNNSearch.from_preset(
        args.preset,
        source_vocabulary_size=tokenizer.vocabulary_size,
        target_vocabulary_size=tokenizer.vocabulary_size,
    )
    if not args.allow_eos:
        bias = model.output_projection.bias
        values = keras.ops.convert_to_numpy(bias).copy()
        values[EOS_ID] = -1e4
        bias.assign(values)
    preprocessor = TranslationPreprocessor(tokenizer, tokenizer)
    Translator(model, preprocessor).save_to_preset(run_dir)
    return model


def random_requests(args):
    """Batch size -> that many random sentences of `--source-length`."""
    words = np.array(made_up_words(args))
    rng = np.random.default_rng(args.seed)
    return {
        str(batch_size): [
            " ".join(rng.choice(words, args.source_length))
            for _ in range(batch_size)
        ]
        for batch_size in args.batch_sizes
    }


def serve(models, args, folder):
    """Runs the TensorFlow-only loader; returns its records."""
    spec = {
        "models": models,
        "requests": random_requests(args),
        "warmup": args.warmup,
        "timed": args.requests,
    }
    process = subprocess.run(
        [sys.executable, "-c", LOADER % (BLOCKED, BLOCKED)],
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        cwd=folder,  # Not the repository.
        check=False,
    )
    if process.returncode:
        raise RuntimeError(
            "The TensorFlow-only loader failed (exit status "
            f"{process.returncode}):\n" + process.stderr[-4000:]
        )
    return [json.loads(line) for line in process.stdout.splitlines()]


def measure(args, folder):
    folder = pathlib.Path(folder)
    model = build_run(folder / "run", args)
    models, export_seconds = [], {}
    for beam_size in args.beam_sizes:
        print(f"exporting beam size {beam_size}...", file=sys.stderr)
        start = time.perf_counter()
        path = export_saved_model(
            folder / "run",
            folder / f"beam_{beam_size}",
            search=SearchConfig(
                beam_size=beam_size, max_length=args.max_length
            ),
            max_source_tokens=args.source_length,
            max_batch=max(args.batch_sizes),
            max_beam_size=beam_size,
        )
        export_seconds[beam_size] = time.perf_counter() - start
        models.append({"path": str(path), "beam_size": beam_size})
    print("serving...", file=sys.stderr)
    for served in serve(models, args, folder):
        times = served.pop("times")
        median = float(np.median(times))
        words = served.pop("words")
        yield {
            "backend": keras.backend.backend(),
            "preset": args.preset,
            "params": model.count_params(),
            "vocabulary_size": args.vocabulary_size,
            "source_length": args.source_length,
            "max_length": args.max_length,
            "eos": "allowed" if args.allow_eos else "only at max_length",
            "beam_size": served["beam_size"],
            "batch_size": served["batch_size"],
            "warmup": args.warmup,
            "requests": args.requests,
            "latency_ms": round(1e3 * median, 3),
            "latency_ms_min": round(1e3 * min(times), 3),
            "latency_ms_max": round(1e3 * max(times), 3),
            "latency_ms_all": [round(1e3 * t, 3) for t in times],
            "sentences_per_s": round(served["batch_size"] / median, 2),
            "first_request_s": round(served["first_request_s"], 3),
            "load_s": round(served["load_s"], 3),
            "export_s": round(export_seconds[served["beam_size"]], 2),
            "statuses": served["statuses"],
            "translation_words_per_sentence": round(float(np.mean(words)), 2),
            "tensorflow_version": served["tensorflow_version"],
            "imported": served["imported"],
            "load_average_start": [
                round(x, 2) for x in served["load_average_start"]
            ],
            "load_average_end": [
                round(x, 2) for x in served["load_average_end"]
            ],
        }


def main(argv=None):
    started = records.start()
    args = parse_arguments(argv)
    measurements = []
    with contextlib.ExitStack() as stack:
        folder = args.output or stack.enter_context(
            tempfile.TemporaryDirectory(prefix="serving_latency-")
        )
        for record in measure(args, folder):
            print(json.dumps(record), flush=True)
            measurements.append(record)
    if args.record:
        records.write_record(
            args.record,
            "serving_latency",
            {"measurements": measurements},
            started,
            argv=[__file__, *(sys.argv[1:] if argv is None else argv)],
        )


if __name__ == "__main__":
    main()
