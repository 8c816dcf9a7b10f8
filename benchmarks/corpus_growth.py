"""Start-up time, speed and memory of `train` as the corpus grows.

Runs `keras_bahdanau.trainer.train` (what `keras-bahdanau train` runs)
on each corpus given, each in a fresh child process, with the default
config (or `--config`) and `data.corpus = "files"`, and stops it after
`--steps` training steps past the first. A corpus is a folder holding
`train.de` and `train.en` (`benchmarks/make_corpus.py` writes them;
plain or gzipped). Each run prints one JSON line:

- `first_step_s`: seconds from the child's start to the end of the
  first training step (reading the corpus, learning the vocabularies,
  building the model, XLA's compilation of the first step);
- `scan_s`: of which reading the corpus (`data.open_corpus`: the scan
  of its files, or reading them whole in memory);
- `vocabulary_s`: of which learning the two vocabularies;
- `steps_per_s`: steps 2 to `--steps + 1` (a new length bucket's first
  step compiles with XLA: as on any corpus), and `step_ms_median`;
- `peak_rss_mb`: the child's peak resident set (`VmHWM`) at that point:
  the whole start-up, and the training steps with the shuffle buffer
  full.

Usage:

```
python benchmarks/make_corpus.py --pairs 10000000 --output data_cache/10m
KERAS_BACKEND=jax python benchmarks/corpus_growth.py \\
    data_cache/100k data_cache/1m data_cache/10m --memory data_cache/100k \\
    --record results/corpus_growth_jax.json
```

`--memory` also runs the given corpora held in memory (`data.stream =
"false"`); `--ding` runs the built-in main job's config on the Ding
corpus, in memory and streamed.
"""

import time

STARTED = time.monotonic()  # the child's clock starts before its imports

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from keras_bahdanau import records


class _Stop(Exception):
    """Ends `train` after the measured steps (no evaluation)."""


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "corpora", nargs="*", help="folders of train.de and train.en"
    )
    parser.add_argument(
        "--memory",
        nargs="*",
        default=[],
        help="corpora also run held in memory (data.stream=false)",
    )
    parser.add_argument(
        "--ding",
        action="store_true",
        help="the main job's config on Ding, in memory and streamed",
    )
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument(
        "--config", help="a config file or built-in config (default: none)"
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="a config override for every run",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    records.add_record_argument(parser)
    args = parser.parse_args(argv)
    if not (args.corpora or args.memory or args.ding or args.child):
        parser.error("give a corpus folder, --memory or --ding")
    if args.steps < 1:
        parser.error(f"--steps must be positive. Received: {args.steps}")
    return args


def corpus_files(folder):
    """`(train.de, train.en)` of a folder, gzipped or not."""
    for suffix in ("", ".gz"):
        paths = [
            Path(folder) / f"train.{side}{suffix}" for side in "de en".split()
        ]
        if all(path.is_file() for path in paths):
            return [str(path) for path in paths]
    raise SystemExit(f"{folder} holds no train.de and train.en")


def runs(args):
    """`(label, config, overrides)` of each run, in order."""
    found = []
    for folder in args.corpora:
        found.append((folder, "true"))
    for folder in args.memory:
        found.append((folder, "false"))
    plans = []
    for folder, stream in found:
        source, target = corpus_files(folder)
        overrides = [
            "data.corpus=files",
            f"data.source_file={source}",
            f"data.target_file={target}",
            f"data.stream={stream}",
        ]
        plans.append((Path(folder).name, args.config, overrides))
    if args.ding:
        for stream in ("false", "true"):
            plans.append(
                ("ding_de_en", "ding_de_en", [f"data.stream={stream}"])
            )
    return plans


def measure(label, config_file, overrides, steps):
    """One run, in this (child) process: its JSON row."""
    from keras_bahdanau.startup import start_tensorflow

    start_tensorflow(torch_first=True)
    import keras
    from _memory import peak_rss_mb

    from keras_bahdanau import data as kd
    from keras_bahdanau import trainer
    from keras_bahdanau.config import resolve_config
    from keras_bahdanau.data.text_corpus import count_lines

    timings = {}

    def timed(name, function):
        def wrapper(*args, **kwargs):
            start = time.monotonic()
            try:
                return function(*args, **kwargs)
            finally:
                timings[name] = time.monotonic() - start

        return wrapper

    kd.open_corpus = timed("scan_s", kd.open_corpus)
    trainer._tokenizers = timed("vocabulary_s", trainer._tokenizers)
    ends = []

    class Probe(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            ends.append(time.monotonic())
            if len(ends) == steps + 1:
                raise _Stop()

    with tempfile.TemporaryDirectory() as run_dir:
        config = resolve_config(config_file, [*overrides, f"run_dir={run_dir}"])
        try:
            trainer.train(config, callbacks=[Probe()])
        except _Stop:
            pass
    step_s = [b - a for a, b in zip(ends, ends[1:], strict=False)]
    data = config["data"]
    return {
        "corpus": label,
        "pairs": (
            count_lines(data["source_file"])
            if data["corpus"] == "files"
            else None
        ),
        "stream": data["stream"] == "true",
        "first_step_s": round(ends[0] - STARTED, 1),
        "scan_s": round(timings["scan_s"], 1),
        "vocabulary_s": round(timings["vocabulary_s"], 1),
        "steps": steps,
        "steps_per_s": round(steps / (ends[-1] - ends[0]), 3),
        "step_ms_median": round(1000 * statistics.median(step_s), 1),
        "peak_rss_mb": round(peak_rss_mb(), 0),
        "sample_sentences": config["tokenizer"]["sample_sentences"],
        "batch_size": config["training"]["batch_size"],
        "backend": keras.backend.backend(),
    }


def main(argv=None):
    args = parse_arguments(argv)
    if args.child:
        row = measure(*json.loads(args.child), args.steps)
        print("ROW " + json.dumps(row), flush=True)
        return
    started = records.start()
    rows = []
    for plan in runs(args):
        command = [
            sys.executable,
            __file__,
            "--steps",
            str(args.steps),
            "--child",
            json.dumps([plan[0], plan[1], [*args.overrides, *plan[2]]]),
        ]
        print(f"{plan[0]}: {' '.join(plan[2])}", file=sys.stderr, flush=True)
        process = subprocess.run(
            command,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            capture_output=True,
            text=True,
        )
        if process.returncode:
            sys.stderr.write(process.stdout[-5000:] + process.stderr[-5000:])
            raise SystemExit(f"the run on {plan[0]} failed")
        line = next(
            line for line in process.stdout.splitlines() if line[:4] == "ROW "
        )
        rows.append(json.loads(line[4:]))
        print(json.dumps(rows[-1]), flush=True)
    if args.record:
        records.write_record(
            args.record,
            "corpus_growth",
            {"measurements": rows},
            started,
            argv=[__file__, *(sys.argv[1:] if argv is None else argv)],
        )


if __name__ == "__main__":
    main()
