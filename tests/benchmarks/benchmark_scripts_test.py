"""The benchmark scripts run, and what they print is what they claim.

Tiny sizes on the current backend, in subprocesses (the scripts are run as
a user runs them). The timings themselves are not tested: they depend on
the machine.
"""

import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import keras
import numpy as np
import pytest

from keras_bahdanau.decoding import beam_search
from keras_bahdanau.decoding import greedy_search
from keras_bahdanau.models import PervasiveAttention
from keras_bahdanau.models import RNNEncDec
from keras_bahdanau.models import RNNSearch
from keras_bahdanau.reserved import EOS_ID
from keras_bahdanau.reserved import NUM_RESERVED_IDS

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


# === The plain-PyTorch reference decoder of decode_throughput.py ===


def _load_torch_decoder():
    """benchmarks/_torch_decoder.py (the benchmarks are no package)."""
    spec = importlib.util.spec_from_file_location(
        "_torch_decoder", _BENCHMARKS / "_torch_decoder.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _random_rnn_search(reset_after, readout_state, eos_bias):
    """A tiny RNNSearch whose every weight is N(0, 0.5^2), the same on every
    backend; `eos_bias` added to EOS's output bias so that some outputs end
    early."""
    model = RNNSearch(
        40,
        45,
        embedding_dim=8,
        hidden_dim=12,
        maxout_dim=6,
        attention_dim=10,
        reset_after=reset_after,
        readout_state=readout_state,
        initialization="glorot",
    )
    rng = np.random.default_rng(0)
    for variable in model.weights:
        variable.assign(rng.normal(0, 0.5, variable.shape).astype("float32"))
    bias = keras.ops.convert_to_numpy(model.output_projection.bias).copy()
    bias[EOS_ID] += eos_bias
    model.output_projection.bias.assign(bias)
    return model


def _random_sources(batch_size=12, width=7):
    """Random ids, right-padded to lengths 1 to `width`."""
    rng = np.random.default_rng(1)
    lengths = rng.integers(1, width + 1, size=batch_size)
    ids = rng.integers(NUM_RESERVED_IDS, 40, size=(batch_size, width))
    ids[np.arange(width)[None, :] >= lengths[:, None]] = 0
    return ids.astype("int32")


@pytest.mark.parametrize(
    "reset_after, readout_state, eos_bias, beam_size",
    [
        (False, "previous", 1.5, 1),  # the paper's form, as the presets
        (False, "previous", 1.5, 3),
        (False, "previous", 1.5, 5),
        (True, "current", 0.0, 1),
        (True, "current", 0.0, 4),
    ],
)
def test_reference_decoder_gives_the_tokens_of_the_package_searches(
    reset_after, readout_state, eos_bias, beam_size
):
    """What makes decode_throughput.py's ratio a like-for-like one."""
    model = _random_rnn_search(reset_after, readout_state, eos_bias)
    reference = _load_torch_decoder().TorchRNNSearchDecoder.from_keras(model)
    assert reference.parameter_count() == model.count_params()
    source_ids = _random_sources()
    max_length = 8
    if beam_size == 1:
        result = greedy_search(model, source_ids, max_length)
        tokens, scores, lengths = reference.greedy_search(
            source_ids, max_length
        )
    else:
        result = beam_search(model, source_ids, beam_size, max_length)
        tokens, scores, lengths = reference.beam_search(
            source_ids, beam_size, max_length
        )
    expected_tokens = keras.ops.convert_to_numpy(result.token_ids)[:, 0]
    expected_lengths = keras.ops.convert_to_numpy(result.lengths)[:, 0]
    np.testing.assert_array_equal(tokens.numpy(), expected_tokens)
    np.testing.assert_array_equal(lengths.numpy(), expected_lengths)
    np.testing.assert_allclose(
        scores.numpy(),
        keras.ops.convert_to_numpy(result.scores)[:, 0],
        rtol=1e-5,
        atol=1e-5,
    )
    if eos_bias:
        # Both ways of ending occur: EOS chosen early, and EOS forced at
        # the maximum length.
        assert (expected_lengths < max_length).any()
        assert (expected_lengths == max_length).any()


def test_decode_throughput_times_the_reference_on_the_same_sources():
    (line,) = _run(
        "decode_throughput.py",
        "--preset=rnnsearch_tiny",
        "--vocabulary-size=40",
        "--source-length=5",
        "--max-length=4",
        "--batch-sizes",
        "3",
        "--beam-sizes",
        "2",
        "--repeats=2",
        "--torch-threads=1",
    )
    assert line["pytorch_threads"] == 1
    assert line["pytorch_params"] == line["params"]
    assert len(line["pytorch_times_s"]) == len(line["times_s"]) == 2
    assert 0 <= line["pytorch_same_tokens"] <= 1
    # The reference also runs every hypothesis to the forced EOS.
    np.testing.assert_allclose(
        line["pytorch_target_words_per_s"],
        9 / line["pytorch_seconds_per_batch"],
        rtol=1e-2,
    )
    np.testing.assert_allclose(
        line["ratio_vs_pytorch"],
        line["target_words_per_s"] / line["pytorch_target_words_per_s"],
        rtol=1e-2,
    )
    assert len(line["round_ratios"]) == 2


def test_decode_throughput_runs_pervasive_attention_against_rnnencdec():
    lines = _run(
        "decode_throughput.py",
        "--preset=pervasive_attention_small",
        "--compare-with=rnnencdec_tiny",
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
    expected_params = {
        name: cls.from_preset(
            name, source_vocabulary_size=40, target_vocabulary_size=40
        ).count_params()
        for cls, name in [
            (PervasiveAttention, "pervasive_attention_small"),
            (RNNEncDec, "rnnencdec_tiny"),
        ]
    }
    for line in lines:
        # Every hypothesis of both models runs to the forced EOS.
        assert line["decode_steps"] == 4
        assert line["target_words_per_sentence"] == 3
        np.testing.assert_allclose(
            line["compare_target_words_per_s"],
            6 / line["compare_seconds_per_batch"],
            rtol=1e-2,
        )
        # pervasive_attention_small: 8 layers of growth 16 on 64 + 64
        # input channels, 3x3 kernels (2 causal rows), bottleneck 4 x 16,
        # max pooling. The source embedding's share of the 1x1 convolutions
        # once per sentence (Tx = 5 positions, 64 channels); per step the
        # target token's (64 channels), the new row of Tx = 5 cells over
        # the layers' own features, then W_o (C = 256).
        encoder = 8 * 2 * 5 * 64 * 64
        step = 8 * 2 * 64 * 64
        step += sum(2 * 5 * 16 * layer * 64 for layer in range(8))
        step += 8 * 2 * 5 * 2 * 3 * 64 * 16 + 2 * 256 * 40
        per_sentence = encoder + line["beam_size"] * 4 * step  # 4 steps
        assert line["flop_per_word"] == round(per_sentence / 3)
        assert line["ratio_vs_pytorch"] is None  # no reference for PA
        assert line["params"] == expected_params["pervasive_attention_small"]
        assert line["compare_params"] == expected_params["rnnencdec_tiny"]
        np.testing.assert_allclose(
            line["time_ratio_vs_compare"],
            line["seconds_per_batch"] / line["compare_seconds_per_batch"],
            rtol=2e-2,
        )


def test_serving_latency_serves_each_export_from_tensorflow_alone():
    """Exports on the current backend; the loader imports TensorFlow only."""
    lines = _run(
        "serving_latency.py",
        "--preset=rnnsearch_tiny",
        "--vocabulary-size=30",
        "--source-length=4",
        "--max-length=3",
        "--batch-sizes",
        "1",
        "2",
        "--beam-sizes",
        "1",
        "2",
        "--warmup=1",
        "--requests=2",
    )
    configurations = [(line["beam_size"], line["batch_size"]) for line in lines]
    assert configurations == [(1, 1), (1, 2), (2, 1), (2, 2)]
    for line in lines:
        assert line["backend"] == keras.backend.backend()
        assert line["imported"] == []  # no keras, no keras_bahdanau, ...
        assert line["statuses"] == {"ok": line["batch_size"]}
        # EOS only at the last of 3 steps: 2 words per translation.
        assert line["translation_words_per_sentence"] == 2
        assert len(line["latency_ms_all"]) == 2
        assert line["latency_ms"] == pytest.approx(
            np.median(line["latency_ms_all"]), abs=1e-3
        )
        np.testing.assert_allclose(
            line["sentences_per_s"],
            line["batch_size"] / (line["latency_ms"] / 1e3),
            rtol=1e-2,
        )
