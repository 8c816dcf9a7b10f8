"""`examples/backend_switching.py`, run as a user runs it.

Each backend trains in its own process, so the cost is starting the
frameworks and compiling, not the tiny model. In CI two backends train for
one step: the backend under test and the next one, so the three CI runs
(one per `KERAS_BACKEND`) cover the three pairs. All three over three
steps is marked `large`.
"""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "backend_switching.py"
BACKENDS = ("jax", "tensorflow", "torch")
# A tiny model and task; learning rate 0.05 so that a few steps take the
# logits to order 1 and a difference of 1e-5 is a relative 1e-5.
TINY = [
    "--embedding-dim", "8", "--hidden-dim", "16", "--maxout-dim", "8",
    "--vocabulary", "10", "--batch-size", "8", "--length", "5",
    "--learning-rate", "0.05",
]  # fmt: skip
# Step 1 starts from the same weights and batch on every backend: only the
# float32 rounding of the sums differs (measured: 9e-8 relative). Later
# steps add Adam updates computed from gradients that differ in their last
# bits; Adam divides by the gradient's own scale, so these differences do
# not blow up over a few steps (measured: 9e-8 relative after 3 steps at
# lr 0.05). 1e-5 leaves a wide margin and still catches a real difference
# (other initial weights or batches, dropout, another optimizer setting),
# which changes the loss by 1e-3 or more. (Once the gradient norm goes
# over the clipping threshold, TensorFlow clips by a wrong norm and its
# losses part from the others': see the example's docstring. These runs
# stay below the threshold.)
FIRST_LOSS_RTOL = 1e-6
LOSS_RTOL = 1e-5
LOGITS_ATOL = 1e-5  # the bar


def load_example():
    spec = importlib.util.spec_from_file_location("backend_switching", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


example = load_example()


def run_example(tmp_path, *args, env=None):
    command = [sys.executable, str(SCRIPT), *TINY, "--json"]
    command += ["--output-dir", str(tmp_path / "out"), *args]
    return subprocess.run(
        command, capture_output=True, text=True, timeout=1200, env=env
    )


def parse_output(stdout):
    lines = stdout.splitlines()
    records = [json.loads(line) for line in lines if line.startswith("{")]
    table = [line for line in lines if not line.startswith("{")]
    # A row starts with its backend; notes under the table are indented.
    rows = [line for line in table if line.split(" ", 1)[0] in BACKENDS]
    return records, table, rows


def check_agreement(result, backends, steps):
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    records, table, rows = parse_output(result.stdout)
    assert [record["backend"] for record in records] == backends
    assert [row.split()[0] for row in rows] == backends
    for record in records:
        assert record["status"] == "ok", record.get("error")
        assert record["initial_weights_from"] == backends[0]
    losses = np.array([record["losses"] for record in records])
    assert losses.shape == (len(backends), steps)
    assert np.all(np.isfinite(losses))
    np.testing.assert_allclose(losses[:, 0], losses[0, 0], rtol=FIRST_LOSS_RTOL)
    np.testing.assert_allclose(
        losses, np.broadcast_to(losses[0], losses.shape), rtol=LOSS_RTOL
    )

    for record, row in zip(records, rows, strict=True):
        # The logits must be large enough for the bar to mean something.
        assert record["logits_max_abs"] > 0.25  # measured: 0.59 at step 1
        differences = record["logits_max_abs_difference"]
        assert list(differences) == backends
        scale = max(1.0, record["logits_max_abs"])
        for loader, difference in differences.items():
            assert isinstance(difference, float), difference
            relative = record["logits_relative_difference"][loader]
            assert relative == pytest.approx(difference / scale)
            # Reloaded on its own backend: the same float32 weights and
            # the same computation.
            bar = 1e-6 if loader == record["backend"] else LOGITS_ATOL
            assert difference <= bar, (record["backend"], loader)
        # The table shows the measured values.
        fields = row.split()
        assert float(fields[1]) == pytest.approx(record["first_loss"], abs=1e-6)
        assert float(fields[2]) == pytest.approx(record["final_loss"], abs=1e-6)
        assert fields[5] == "MiB"
        assert float(fields[4]) == pytest.approx(record["peak_rss_mb"], abs=1)
        shown = [float(field) for field in fields[6:]]
        expected = [differences[loader] for loader in backends]
        np.testing.assert_allclose(shown, expected, rtol=0.06, atol=1e-12)
    assert any(line.endswith("tolerance 1e-05: ok") for line in table)
    return records


def test_two_backends_agree_after_one_step(tmp_path, backend):
    other = BACKENDS[(BACKENDS.index(backend) + 1) % len(BACKENDS)]
    backends = [backend, other]
    result = run_example(tmp_path, "--backends", *backends, "--steps", "1")
    records = check_agreement(result, backends, steps=1)
    for record in records:
        assert record["tokens_per_s"] is None  # step 1 is never timed
    # Kept with --output-dir: the models and logits of both backends.
    for name in backends:
        assert (tmp_path / "out" / f"{name}.keras").exists()
        logits = np.load(tmp_path / "out" / f"{name}.logits.npy")
        assert logits.shape == (example.EVALUATION_BATCH_SIZE, 6, 14)


@pytest.mark.large
def test_three_backends_agree_after_three_steps(tmp_path):
    backends = list(BACKENDS)
    result = run_example(tmp_path, "--steps", "3")
    records = check_agreement(result, backends, steps=3)
    for record in records:
        # Three Adam steps lower the loss from about ln(14) = 2.64: by 0.045
        # (measured, every backend alike) since each weight draws its own
        # initial values; a step that did not train would leave it within
        # float32 noise of the first loss.
        assert record["losses"][-1] < record["losses"][0] - 0.02
        assert record["tokens_per_s"] > 0 and record["peak_rss_mb"] > 0


def test_missing_framework_is_reported_not_raised(tmp_path):
    # A `torch` that cannot be imported, as on a machine without it.
    fake = tmp_path / "fake_packages"
    (fake / "torch").mkdir(parents=True)
    (fake / "torch" / "__init__.py").write_text(
        "raise ImportError('torch is not installed here (simulated)')\n"
    )
    paths = [str(fake), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, paths))}
    result = run_example(
        tmp_path, "--backends", "torch", "--steps", "1", env=env
    )
    assert result.returncode == 1, result.stderr[-3000:]
    records, _, rows = parse_output(result.stdout)
    assert records[0]["status"] == "error"
    assert "simulated" in records[0]["error"]
    assert rows == [
        "torch      error: ImportError: torch is not installed here (simulated)"
    ]


def test_reversal_batches():
    rng = np.random.default_rng(0)
    source, target, labels = example.reversal_batches(rng, 200, 6, 10)
    assert source.shape == (200, 6) and target.shape == labels.shape == (200, 7)
    lengths = np.count_nonzero(source, axis=1)
    assert set(lengths) == set(range(1, 7))
    for row, length in enumerate(lengths):
        words = source[row, :length]
        assert np.all((words >= 4) & (words < 14))
        np.testing.assert_array_equal(source[row, length:], 0)
        np.testing.assert_array_equal(labels[row, :length], words[::-1])
        assert labels[row, length] == 3  # EOS
        np.testing.assert_array_equal(labels[row, length + 1 :], 0)
        assert target[row, 0] == 2  # BOS
        np.testing.assert_array_equal(target[row, 1 : length + 1], words[::-1])
        np.testing.assert_array_equal(target[row, length + 1 :], 0)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--steps", "0"], "--steps must be positive, got 0"),
        (["--hidden-dim", "-2"], "--hidden-dim must be positive, got -2"),
        (["--learning-rate", "0"], "--learning-rate must be positive"),
        (["--backends", "jax", "jax"], "lists a backend twice"),
        (["--backends", "theano"], "invalid choice: 'theano'"),
        (["--preset", "rnnsearch_huge"], "unknown --preset 'rnnsearch_huge'"),
    ],
)
def test_bad_arguments_are_named(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        example.parse_arguments(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_output_dir_must_be_new_or_empty(tmp_path, capsys):
    (tmp_path / "initial.weights.h5").write_text("from an earlier run")
    with pytest.raises(SystemExit):
        example.parse_arguments(["--output-dir", str(tmp_path)])
    assert "is not empty" in capsys.readouterr().err
    example.parse_arguments(["--output-dir", str(tmp_path / "new")])
