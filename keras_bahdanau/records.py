"""Records of measured runs: the figures, with what ran and where.

Every measuring script (the `train`, `demo` and `evaluate` commands,
`benchmarks/*`, `examples/reproduce_bahdanau.py`,
`examples/compare_models.py`, `examples/tune_length_penalty.py`) takes
`--record PATH` and writes one JSON record there at the end: `rows`, one
per measurement, each with the fields of its kind (every row of a kind
has the same ones, null where not measured), and the environment they
were measured in (the command, the resolved config, the package version,
the git commit, the backend and library versions, the CPU, its cores and
load, the GPU, the start and end times). The records the documentation
cites are kept under `results/`; `results/render.py` renders
`docs/results.md`, the README's results table and the measured tables of
`docs/small_data.md` from them.

This module imports nothing beyond the standard library: it works before
Keras or a backend loads, and it never imports one to record it (library
versions come from the installed distributions' metadata).

Example:

```python
from keras_bahdanau import records

start = records.start()
rows = [{"batch_size": 64, "tokens_per_s": 1200.0}]  # ... measured here ...
records.write_record("results/my_run.json", "my_benchmark", rows, start)
```
"""

import argparse
import datetime
import importlib.metadata
import json
import math
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from keras_bahdanau import __version__

# Bumped when the meaning of a record's fields changes (2: `rows`).
FORMAT_VERSION = 2
# The fields of a training run's row (kinds `train` and `demo`): the
# run's figures (`run_figures`), the command's use of the machine
# (`process_usage`), then those of a transcribed record that has no field
# of its own (`other`), or the section of docs/small_data.md that
# describes its run (`section`, `run`, `change`).
TRAINING_FIELDS = tuple(
    "run_dir config_file model parameters epochs training_minutes "
    "epoch_seconds dev test log averaging translations best_epoch "
    "cpu_seconds cpu_share peak_rss_mb section run change other".split()
)
# The fields of each split's scores in a training run's row.
SPLIT_FIELDS = tuple(
    "bleu chrf bleu_signature chrf_signature sentences seconds "
    "ms_per_sentence".split()
)
# The distributions whose versions a record holds, where installed.
LIBRARIES = (
    "keras",
    "jax",
    "jaxlib",
    "tensorflow",
    "tensorflow-text",
    "torch",
    "numpy",
    "sacrebleu",
)
_REPOSITORY = Path(__file__).resolve().parent.parent


def _utc_now():
    return datetime.datetime.now(datetime.UTC)


def _iso(moment):
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def _load_average():
    try:
        return [round(value, 2) for value in os.getloadavg()]
    except (AttributeError, OSError):  # Not on this platform.
        return None


def start():
    """Marks the start of a measured run: the time and the load.

    Returns:
        A dict to pass to `write_record` (`started_utc`,
        `load_average_start`, and a monotonic clock reading).
    """
    return {
        "started_utc": _iso(_utc_now()),
        "load_average_start": _load_average(),
        "monotonic": time.monotonic(),
        "cpu_seconds": _cpu_seconds(),
    }


def _cpu_seconds():
    """User and system seconds of this process and its finished children."""
    import resource

    return sum(
        usage.ru_utime + usage.ru_stime
        for usage in map(
            resource.getrusage,
            (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN),
        )
    )


def process_usage(started):
    """This process's use of the machine since `start()`, children included.

    Returns:
        A dict: `cpu_seconds` (user and system time of the process and of
        its finished children since `start()`), `cpu_share` (that over the
        wall seconds times the cores: 1.0 keeps every core busy) and
        `peak_rss_mb` (the largest resident set, MiB, of the process or of
        a child).
    """
    import resource

    cpu = _cpu_seconds() - started["cpu_seconds"]
    wall = time.monotonic() - started["monotonic"]
    # KiB on Linux (bytes on macOS); the peak of one process, not a sum.
    unit = 2**20 if sys.platform == "darwin" else 2**10
    peak = max(
        resource.getrusage(who).ru_maxrss
        for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    return {
        "cpu_seconds": round(cpu, 1),
        "cpu_share": round(cpu / (wall * (os.cpu_count() or 1)), 3),
        "peak_rss_mb": round(peak / unit, 1),
    }


def command_line(argv=None):
    """The command as typed, from `argv` (default `sys.argv`).

    A script is shown as `python PATH` (relative to the working directory
    when under it), a console script by its name, and `KERAS_BACKEND`
    first when it is set.
    """
    argv = list(sys.argv if argv is None else argv)
    if not argv:
        return None
    program = Path(argv[0])
    if program.suffix == ".py":
        try:
            program = program.resolve().relative_to(Path.cwd())
        except ValueError:
            pass
        words = ["python", str(program)]
    elif program.name == "-c":
        words = ["python", "-c"]
    else:
        words = [program.name]
    words += argv[1:]
    backend = os.environ.get("KERAS_BACKEND")
    prefix = f"KERAS_BACKEND={shlex.quote(backend)} " if backend else ""
    return prefix + shlex.join(words)


def git_state(directory=_REPOSITORY):
    """`{"commit": ..., "dirty": ...}` of the checkout holding the package.

    `dirty` is true when tracked files differ from the commit or files git
    does not ignore are untracked. Both are null without git or outside a
    git checkout (e.g. an installed wheel).
    """
    unknown = {"commit": None, "dirty": None}
    if shutil.which("git") is None:
        return unknown
    try:
        commit = subprocess.run(
            ["git", "-C", str(directory), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout.strip()
        status = subprocess.run(
            ["git", "-C", str(directory), "status", "--porcelain"],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return unknown
    return {"commit": commit or None, "dirty": bool(status.strip())}


def library_versions():
    """Installed versions of `LIBRARIES` (null where not installed)."""
    versions = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def backend():
    """The Keras backend: Keras's own if loaded, else `KERAS_BACKEND`."""
    keras = sys.modules.get("keras")
    if keras is not None and hasattr(keras, "backend"):
        return keras.backend.backend()
    return os.environ.get("KERAS_BACKEND")


def cpu_model():
    """The CPU's model name (from /proc/cpuinfo on Linux), or null."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as file:
            for line in file:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Processor", "cpu model"):
                    return value.strip() or None
    except OSError:
        pass
    return platform.processor() or None


def gpus():
    """Names of the GPUs, or null when none is found.

    Asks `nvidia-smi` when it is installed, else a framework that is
    already loaded (JAX, torch, TensorFlow); never imports one.
    """
    if shutil.which("nvidia-smi"):
        try:
            names = subprocess.run(
                ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                check=True,
                timeout=30,
            ).stdout.split("\n")
            names = [name.strip() for name in names if name.strip()]
            if names:
                return names
        except (OSError, subprocess.SubprocessError):
            pass
    if "jax" in sys.modules:
        devices = sys.modules["jax"].devices()
        names = [d.device_kind for d in devices if d.platform == "gpu"]
        if names:
            return names
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        return [
            torch.cuda.get_device_name(i)
            for i in range(torch.cuda.device_count())
        ]
    if "tensorflow" in sys.modules:
        config = sys.modules["tensorflow"].config
        names = [device.name for device in config.list_physical_devices("GPU")]
        if names:
            return names
    return None


def machine():
    """The CPU model, its cores (all, and usable by this process), GPUs."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # Not on Linux.
        usable = None
    return {
        "cpu_model": cpu_model(),
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "gpus": gpus(),
        "platform": platform.platform(),
    }


def _plain(value):
    """`value` with NumPy numbers as Python ones and NaN/Inf as null.

    JSON has no NaN or infinity.
    """
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return _plain(value.tolist())  # NumPy arrays and scalars.
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Path):
        return str(value)
    return value


def rows_of(kind, figures):
    """The rows of `write_record`'s `figures`: a list of rows as it is,
    `{"measurements": rows}` (the benchmark scripts) as its list, any
    other dict as one row. A training run's row gets every field of
    `TRAINING_FIELDS` (and its splits `SPLIT_FIELDS`), null if missing."""
    if isinstance(figures, dict) and set(figures) == {"measurements"}:
        figures = figures["measurements"]
    rows = figures if isinstance(figures, list) else [figures]
    if kind not in ("train", "demo"):
        return rows
    rows = [{**dict.fromkeys(TRAINING_FIELDS), **row} for row in rows]
    for row, split in ((row, s) for row in rows for s in ("dev", "test")):
        row[split] = {**dict.fromkeys(SPLIT_FIELDS), **(row[split] or {})}
    return rows


def build_record(kind, figures, started=None, config=None, argv=None, **fields):
    """The record of a run (a dict); see `write_record`."""
    ended = _utc_now()
    started = started or {}
    wall = None
    if "monotonic" in started:
        wall = round(time.monotonic() - started["monotonic"], 1)
    record = {
        "format_version": FORMAT_VERSION,
        "kind": kind,
        "transcribed": False,
        "source": None,
        "command": command_line(argv),
        "argv": list(sys.argv if argv is None else argv),
        "config": config,
        "package_version": __version__,
        "git": git_state(),
        "backend": backend(),
        "versions": library_versions(),
        "machine": {
            **machine(),
            "load_average_start": started.get("load_average_start"),
            "load_average_end": _load_average(),
        },
        "started_utc": started.get("started_utc"),
        "ended_utc": _iso(ended),
        "wall_seconds": wall,
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        **fields,
        "rows": rows_of(kind, figures),
    }
    return _plain(record)


def check_record_path(path):
    """Raises `ValueError` if a record cannot be written at `path`.

    For argument parsers: a bad `--record` stops a script before it
    measures, not after.
    """
    path = Path(path)
    if path.is_dir():
        raise ValueError(
            f"--record names a directory; give a file name such as "
            f"{path / 'record.json'}. Received: {path}"
        )
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        raise ValueError(
            f"--record: cannot write into {folder}. Received: {path}"
        )
    return path


def add_record_argument(parser):
    """Adds `--record PATH` to an `argparse` parser, checked at parsing."""

    def record_path(text):
        try:
            return check_record_path(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    parser.add_argument(
        "--record",
        type=record_path,
        metavar="PATH",
        help="also write the figures and the environment (command, "
        "versions, commit, machine, load) to this JSON record "
        "(keras_bahdanau/records.py)",
    )


def write_record(path, kind, figures, started=None, config=None, **fields):
    """Writes the record of a run to `path` as JSON, atomically.

    Args:
        path: the file to write (its folders are created); an existing
            file is replaced, never left half-written.
        kind: what measured, e.g. `"decode_throughput"` or `"demo"`.
        figures: the measured figures (JSON-able; NumPy numbers allowed,
            NaN and infinities become null): a list of rows, one per
            measurement, or `{"measurements": rows}`, or one row.
        started: `start()`'s value at the start of the run (gives the
            start time, the load at the start and the wall seconds).
        config: the resolved config of the run, if it has one.
        **fields: more top-level fields (e.g. `transcribed`, `source`).

    Returns:
        The record written, a dict.
    """
    record = build_record(kind, figures, started, config, **fields)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(record, indent=2, ensure_ascii=False, allow_nan=False)
    descriptor, temporary = tempfile.mkstemp(
        dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"
    )
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(text + "\n")
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return record


def run_figures(run_dir, config_file=None):
    """The row of a training run (`TRAINING_FIELDS`), from its run directory.

    The model (its size preset, else its architecture) and parameters
    (`training_config.json`), the epochs trained and the per-epoch log
    (`training_log.csv`: losses, dev BLEU), the training minutes
    (`epoch_times.json`, written with `training.max_minutes`; else null),
    each epoch's seconds in order (`epoch_seconds`), the checkpoint
    averaging (`averaging.json`, null without it) and the dev and test
    scores (`results.json`: BLEU and chrF, their signatures,
    the sentences and the seconds of translating them). `config_file`:
    the TOML file the run was configured with, if any.
    """
    import csv

    from keras_bahdanau import run_directory as rd

    run_dir = Path(run_dir)

    def read_json(name):
        path = run_dir / name
        if not path.is_file():
            return None
        return json.loads(path.read_text(encoding="utf-8"))

    log = []
    if (run_dir / rd.TRAINING_LOG).is_file():
        with open(run_dir / rd.TRAINING_LOG, newline="") as file:
            log = [
                {key: _number(value) for key, value in row.items()}
                for row in csv.DictReader(file)
            ]
    seconds = read_json(rd.EPOCH_TIMES)
    config = read_json(rd.TRAINING_CONFIG) or {}
    model = config.get("model") or {}
    results = read_json(rd.RESULTS) or {}
    row = dict(
        run_dir=str(run_dir),
        config_file=None if config_file is None else str(config_file),
        model=model.get("preset") or model.get("architecture"),
        parameters=config.get("parameters"),
        epochs=len(log),
        training_minutes=(
            None if seconds is None else round(sum(seconds.values()) / 60, 2)
        ),
        epoch_seconds=(
            None
            if seconds is None
            else [round(seconds[e], 1) for e in sorted(seconds, key=int)]
        ),
        log=log,
        averaging=read_json(rd.AVERAGING),
    )
    (row,) = rows_of("train", {**results, **row})
    return row


def _number(text):
    try:
        value = float(text)
    except (TypeError, ValueError):
        return text
    return int(value) if value.is_integer() and "." not in text else value
