"""JAX's compilation time in a `keras-bahdanau` command, by what compiled.

Runs a `keras-bahdanau` command in this process (as the program runs it,
huge pages included) with a listener on JAX's compilation events
(`jax.monitoring`): tracing a function to a jaxpr (`trace`), lowering it
to MLIR (`lower`) and XLA's compilation of it (`compile`). Each event's
seconds go to the caller found on the Python stack when it fires:

- `fit: training step`: `model.fit`'s step, compiled once per batch shape
  (one per length bucket);
- `fit: validation`: the validation loss `fit` computes after an epoch
  (`evaluate` inside `fit`), once per dev batch shape;
- `fit: translation`: a search run inside `fit` (the dev BLEU of the
  selection sentences, `DevScores`), once per source width and search;
- `evaluate`, `translate`: the same outside `fit` (the test set);
- `other`: anything else (building the model, the optimizer's variables,
  averaging, the export).

Prints one JSON line per caller (`seconds` by phase, `compilations`: the
number of XLA compilations) and a last line with the totals; a record's
`wall_seconds` is the command's. JAX only: the other backends do not
compile with XLA here (TensorFlow's CPU default runs without it, torch
eagerly).

Usage (the main job's first epoch, then its test evaluation and export):

```
KERAS_BACKEND=jax python benchmarks/compile_time.py \\
    demo --set run_dir=runs/compile_time --set training.epochs=1 \\
    --record results/compile_time_jax.json
```
"""

import argparse
import collections
import json
import sys
import traceback

from keras_bahdanau import records
from keras_bahdanau.startup import use_huge_pages

# JAX's event names (jax/_src/dispatch.py, pxla.py) -> the phase reported.
PHASES = {
    "/jax/core/compile/jaxpr_trace_duration": "trace",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
    "/jax/core/compile/backend_compile_duration": "compile",
}


def caller(function_names):
    """The caller of an event from the names of the functions on the stack.

    Args:
        function_names: the names of the stack's functions, in any order.

    Returns:
        One of the callers of the module docstring.
    """
    names = set(function_names)
    inside_fit = "fit" in names
    for name, label in (
        ("translate", "translation"),
        ("evaluate", "validation"),
    ):
        if name in names:
            return f"fit: {label}" if inside_fit else name
    return "fit: training step" if inside_fit else "other"


class CompileEvents:
    """Sums JAX's compilation events by caller and phase while listening.

    Example:

    ```python
    events = CompileEvents()
    with events:
        model.fit(...)
    events.rows()  # [{"caller": "fit: training step", ...}, ...]
    ```
    """

    def __init__(self):
        self.seconds = collections.defaultdict(collections.Counter)
        self._listening = False
        self._registered = False

    def __call__(self, event, duration, **kwargs):
        phase = PHASES.get(event)
        if not self._listening or phase is None:
            return
        # The code objects' names only: no source line is read.
        names = [f.f_code.co_name for f, _ in traceback.walk_stack(None)]
        seconds = self.seconds[caller(names)]
        seconds[phase] += duration
        if phase == "compile":
            seconds["compilations"] += 1

    def __enter__(self):
        import jax

        if not self._registered:  # JAX keeps it for the process.
            jax.monitoring.register_event_duration_secs_listener(self)
            self._registered = True
        self._listening = True
        return self

    def __exit__(self, *exc_info):
        self._listening = False

    def rows(self):
        """One row per caller, most seconds first."""
        rows = []
        for name, counts in self.seconds.items():
            row = {"caller": name}
            row.update({p: round(counts[p], 2) for p in PHASES.values()})
            row["seconds"] = round(sum(counts[p] for p in PHASES.values()), 2)
            row["compilations"] = counts["compilations"]
            rows.append(row)
        return sorted(rows, key=lambda row: -row["seconds"])


def main(argv=None):
    program = argv is None
    command = sys.argv[1:] if program else list(argv)
    # `--record` is ours; every other argument is the command's.
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    records.add_record_argument(parser)
    args, argv = parser.parse_known_args(command)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return
    if program:
        use_huge_pages()  # As the program starts: runs this script again.
    import keras

    if keras.backend.backend() != "jax":
        raise SystemExit(
            "compile_time.py measures JAX's compilations: run it with "
            f"KERAS_BACKEND=jax. Received: {keras.backend.backend()!r}"
        )
    from keras_bahdanau import cli

    started = records.start()
    with CompileEvents() as events:
        cli.main(argv)
    rows = events.rows()
    for row in rows:
        print(json.dumps(row), flush=True)
    total = {
        "caller": "total",
        **{p: round(sum(r[p] for r in rows), 2) for p in PHASES.values()},
        "seconds": round(sum(row["seconds"] for row in rows), 2),
        "compilations": sum(row["compilations"] for row in rows),
    }
    print(json.dumps(total), flush=True)
    if args.record:
        records.write_record(
            args.record,
            "compile_time",
            {"measurements": [*rows, total]},
            started,
            argv=[__file__, *command],
        )


if __name__ == "__main__":
    main()
