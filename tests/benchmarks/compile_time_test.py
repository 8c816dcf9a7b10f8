"""benchmarks/compile_time.py: JAX's compilation time by caller.

The attribution of an event to its caller is checked on stacks whose
answer is known, and the listener on real compilations of `jax.jit`
(JAX is installed with every backend's extras, and compiles here whatever
`KERAS_BACKEND` says); `main` runs a stand-in command on JAX and refuses
the other backends.
"""

import importlib.util
import json

import keras
import numpy as np
import pytest

from tests.benchmarks.benchmark_scripts_test import _load

requires_jax = pytest.mark.skipif(
    importlib.util.find_spec("jax") is None,
    reason="the listener listens to JAX, which is not installed "
    "(pip install -e '.[all,dev]' installs it)",
)


@pytest.fixture(scope="module")
def compile_time():
    return _load("compile_time")


@pytest.mark.parametrize(
    "names, expected",
    [
        (["main", "run", "fit", "iterator_step"], "fit: training step"),
        (["run", "fit", "evaluate", "test_step"], "fit: validation"),
        (["fit", "on_epoch_end", "translate", "run"], "fit: translation"),
        (["run", "evaluate"], "evaluate"),
        (["run", "translate", "search"], "translate"),
        (["run", "export", "build"], "other"),
        ([], "other"),
    ],
)
def test_caller_of_a_stack(compile_time, names, expected):
    assert compile_time.caller(names) == expected


def _compile_in(function_name, width):
    """Compiles a new program (a new shape) from a function of that name."""
    import jax

    def fresh(x):
        return x * 2.0 + 1.0

    def run():
        return jax.jit(fresh)(np.ones((width,), "float32"))

    run.__code__ = run.__code__.replace(co_name=function_name)
    return run()


@requires_jax
def test_events_go_to_their_caller_while_listening(compile_time):
    events = compile_time.CompileEvents()
    _compile_in("fit", 3)  # Before listening: not counted.
    with events:
        _compile_in("fit", 5)
        _compile_in("translate", 7)
        _compile_in("translate", 9)
    _compile_in("translate", 11)  # After: not counted.
    rows = {row["caller"]: row for row in events.rows()}
    assert set(rows) == {"fit: training step", "translate"}
    assert rows["fit: training step"]["compilations"] == 1
    assert rows["translate"]["compilations"] == 2
    for name, row in rows.items():
        seconds = events.seconds[name]  # Unrounded: a tiny trace is fast.
        assert seconds["trace"] > 0 and seconds["compile"] > 0
        phases = row["trace"] + row["lower"] + row["compile"]
        assert row["seconds"] == pytest.approx(phases, abs=0.02)
    # Entered again, the same listener goes on counting (registered once).
    with events:
        _compile_in("translate", 13)
    assert {r["caller"]: r for r in events.rows()}["translate"][
        "compilations"
    ] == 3


@pytest.mark.skipif(
    keras.backend.backend() != "jax",
    reason="on JAX main runs the command; the other backends' refusal is "
    "the next test",
)
def test_main_sums_a_commands_compilations(
    compile_time, monkeypatch, tmp_path, capsys
):
    from keras_bahdanau import cli

    def command(argv):
        assert argv == ["demo", "--set", "training.epochs=1"]
        _compile_in("fit", 17)
        _compile_in("evaluate", 19)

    monkeypatch.setattr(cli, "main", command)
    record = tmp_path / "record.json"
    compile_time.main(
        ["demo", "--set", "training.epochs=1", "--record", str(record)]
    )
    out = capsys.readouterr().out
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines[-1]["caller"] == "total"
    callers = {line["caller"]: line for line in lines}
    assert callers["fit: training step"]["compilations"] == 1
    assert callers["evaluate"]["compilations"] == 1
    assert callers["total"]["compilations"] == 2
    written = json.loads(record.read_text())
    assert written["kind"] == "compile_time"
    assert written["rows"][-1] == callers["total"]
    # Every row has the same fields (tests/records_test.py).
    assert len({tuple(row) for row in written["rows"]}) == 1
    assert "--record" in written["argv"]


@pytest.mark.skipif(
    keras.backend.backend() == "jax",
    reason="JAX is the backend the script measures (the test above)",
)
def test_main_refuses_other_backends(compile_time, monkeypatch):
    from keras_bahdanau import cli

    monkeypatch.setattr(cli, "main", lambda argv: pytest.fail("ran"))
    with pytest.raises(SystemExit, match="KERAS_BACKEND=jax"):
        compile_time.main(["demo"])
