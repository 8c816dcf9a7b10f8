"""The benchmark scripts run, and what they print is what they claim.

Tiny sizes on the current backend, in subprocesses (the scripts are run as
a user runs them). The timings themselves are not tested: they depend on
the machine.
"""

import json
import os
import pathlib
import subprocess
import sys

import keras
import numpy as np
import pytest

_BENCHMARKS = pathlib.Path(__file__).parents[2] / "benchmarks"
# rnnsearch_tiny (m=128, n=256, l=128) with a 50-word vocabulary.
_VOCABULARY = 50


def _run(script, *arguments):
    result = subprocess.run(
        [sys.executable, str(_BENCHMARKS / script), *arguments],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "KERAS_BACKEND": keras.backend.backend()},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return [json.loads(line) for line in result.stdout.splitlines()]


def _train(*extra):
    (line,) = _run(
        "train_throughput.py",
        "--preset=rnnsearch_tiny",
        f"--vocabulary-size={_VOCABULARY}",
        "--batch-size=3",
        "--length=4",
        "--warmup=1",
        "--steps=2",
        *extra,
    )
    return line


# One run of each kind per module: every run starts a Python process that
# imports Keras (and the reference one that imports torch).
@pytest.fixture(scope="module")
def fit_run():
    """model.fit, in 2 rounds, each followed by a PyTorch reference run."""
    return _train("--rounds=2")


@pytest.fixture(scope="module")
def train_on_batch_run():
    return _train("--no-reference", "--loop=train_on_batch")


def test_train_throughput_fit_and_train_on_batch_run_the_same_steps(
    fit_run, train_on_batch_run
):
    fit, on_batch = fit_run, train_on_batch_run
    assert fit["loop"] == "fit" and on_batch["loop"] == "train_on_batch"
    # 1 warm-up step, then 2 rounds of 2 steps; train_on_batch: 1 + 2.
    assert len(fit["losses"]) == 5 and np.isfinite(fit["losses"]).all()
    assert len(fit["step_times_ms"]) == 4
    # Same seed and batch: the same first three training steps either way.
    np.testing.assert_allclose(fit["losses"][:3], on_batch["losses"], atol=2e-6)
    assert fit["losses"][4] < fit["losses"][0]
    assert fit["tokens_per_step"] == 12
    assert fit["tokens_per_s"] > 0 and fit["peak_memory_mb"] > 0


def test_train_throughput_flop_count_matches_the_formula(fit_run):
    line = fit_run
    sizes = line["sizes"]
    m, n = sizes["embedding_dim"], sizes["hidden_dim"]
    a, l = sizes["attention_dim"], sizes["maxout_dim"]  # noqa: E741
    v, t = sizes["target_vocabulary_size"], 4
    # Per target token, forward: encoder + keys (Tx = Ty), s_0, attention,
    # GRU gates, maxout, output; training is 3x that.
    forward = (
        12 * n * (m + n)
        + 4 * n * a
        + 2 * n * n / t
        + 2 * n * a
        + 2 * t * a
        + 4 * t * n
        + 6 * n * (m + 3 * n)
        + 4 * l * (3 * n + m)
        + 2 * l * v
    )
    assert line["flop_per_token"] == round(3 * forward)
    np.testing.assert_allclose(
        line["achieved_tflops"],
        line["flop_per_token"] * line["tokens_per_s"] / 1e12,
        rtol=1e-2,
        atol=1e-4,
    )


def test_train_throughput_pools_the_reference_rounds(fit_run):
    line = fit_run
    n = line["sizes"]["hidden_dim"]
    # torch.nn.GRU's second bias (b_hh): 3n per direction.
    assert line["pytorch_params"] == line["params"] + 6 * n
    assert len(line["pytorch_losses"]) == 3  # the first round's
    assert np.isfinite(line["pytorch_losses"]).all()
    times = line["pytorch_step_times_ms"]
    assert len(times) == 4  # 2 rounds of 2 timed steps
    assert line["pytorch_step_ms"] == pytest.approx(np.median(times), abs=0.1)
    assert len(line["round_ratios"]) == 2
    np.testing.assert_allclose(
        line["ratio_vs_pytorch"],
        line["tokens_per_s"] / line["pytorch_tokens_per_s"],
        rtol=1e-2,
    )


def test_decode_throughput_counts_words_and_flops():
    lines = _run(
        "decode_throughput.py",
        "--preset=rnnsearch_tiny",
        "--vocabulary-size=40",
        "--source-length=5",
        "--max-length=4",
        "--batch-sizes",
        "2",
        "--beam-sizes",
        "1",
        "3",
        "--repeats=1",
    )
    assert [line["beam_size"] for line in lines] == [1, 3]
    m, n, l, v, tx = 128, 256, 128, 40, 5  # noqa: E741 (rnnsearch_tiny)
    for line in lines:
        # EOS is forced only at the last step: 3 words per sentence.
        assert line["decode_steps"] == 4
        assert line["target_words_per_sentence"] == 3
        encoder = tx * (12 * n * (m + n) + 4 * n * n + 12 * n * n)
        step = (
            2 * n * n
            + 2 * tx * n
            + 10 * tx * n
            + 6 * n * (m + n)
            + 4 * l * (3 * n + m)
            + 2 * l * v
        )
        per_sentence = encoder + 2 * n * n + line["beam_size"] * 4 * step
        assert line["flop_per_word"] == round(per_sentence / 3)
        assert line["peak_memory_mb"] > 0
