"""The benchmark scripts run, and what they print is what they claim.

Tiny sizes on the current backend, in subprocesses (the scripts are run as
a user runs them). The timings themselves depend on the machine; what the
scripts make of them is checked in-process with a fake clock. FLOP counts
are checked against the matrix products JAX traces for the same model.
"""

import importlib.util
import json
import math
import os
import pathlib
import re
import subprocess
import sys
import time
import types

import keras
import numpy as np
import pytest

from keras_bahdanau.decoding import SearchConfig
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
# The benchmarks compare with a PyTorch reference; torch comes with the
# `all` and `torch` extras, not with `jax` or `tensorflow` alone.
requires_torch = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None,
    reason="the PyTorch reference needs torch, which is not installed "
    "(pip install -e '.[all,dev]' installs it)",
)


def _run(script, *arguments):
    environment = {**os.environ, "KERAS_BACKEND": keras.backend.backend()}
    environment.pop("TF_CPP_MIN_LOG_LEVEL", None)  # as a user runs them
    result = subprocess.run(
        [sys.executable, str(_BENCHMARKS / script), *arguments],
        capture_output=True,
        text=True,
        timeout=600,
        env=environment,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    # No C++ log of TensorFlow's start (oneDNN, CUDA stubs, cuInit).
    for marker in ("I0000", "E0000", "W0000", "absl::InitializeLog"):
        assert marker not in result.stderr, result.stderr[-3000:]
    return [json.loads(line) for line in result.stdout.splitlines()]


def _load(name, monkeypatch=None):
    """benchmarks/NAME.py as a module (the benchmarks are no package)."""
    if monkeypatch is not None:  # for the scripts' own imports (_memory)
        monkeypatch.syspath_prepend(str(_BENCHMARKS))
    spec = importlib.util.spec_from_file_location(
        name, _BENCHMARKS / f"{name}.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_NEEDS_JAX = (
    "FLOPs are counted on JAX, whose traced program lists every matrix "
    "product with the length of the loop it runs in; TensorFlow has no such "
    "count, torch's FlopCounterMode sees one more cell step in Keras's RNN "
    "loop and no matrix-vector products; the formulas do not depend on the "
    "backend"
)


def _matmul_flops(function, *args):
    """FLOPs of the matrix products of `function(*args)`, traced by JAX.

    Counted from the traced program, not from a formula: 2 per
    multiply-add of each `dot_general` and convolution (zero padding
    included), times the length of every `scan` it runs in. Element-wise
    work is not counted, as in the benchmarks' formulas.
    """
    import jax
    from jax.extend import core

    def count(jaxpr):
        total = 0
        for equation in jaxpr.eqns:
            name = equation.primitive.name
            if name in ("dot_general", "conv_general_dilated"):
                outputs = math.prod(equation.outvars[0].aval.shape)
            if name == "dot_general":
                (contracting, _), _ = equation.params["dimension_numbers"]
                lhs = equation.invars[0].aval.shape
                total += 2 * outputs * math.prod(lhs[d] for d in contracting)
            elif name == "conv_general_dilated":
                kernel = equation.invars[1].aval.shape
                # (output features, input features per group, spatial...)
                kernel_spec = equation.params["dimension_numbers"].rhs_spec
                total += (
                    2 * outputs * math.prod(kernel[d] for d in kernel_spec[1:])
                )
            elif name in ("while", "cond"):
                raise ValueError(f"No static count through a `{name}`.")
            inner = sum(
                count(p.jaxpr if isinstance(p, core.ClosedJaxpr) else p)
                for p in equation.params.values()
                if isinstance(p, (core.ClosedJaxpr, core.Jaxpr))
            )
            total += inner * (
                equation.params["length"] if name == "scan" else 1
            )
        return total

    return count(jax.make_jaxpr(function)(*args).jaxpr)


def _search_flop_per_sentence(model, source_ids, beam_size, steps):
    """What the search runs: `encode` once, `decode_step` per step on
    `beam_size` rows per sentence (beam bookkeeping not counted)."""
    batch_size = len(source_ids)
    encoder = _matmul_flops(
        lambda ids: model.encode(ids, max_length=steps), source_ids
    )
    rows = np.repeat(source_ids, beam_size, axis=0)
    cache = model.encode(rows, max_length=steps)
    previous_ids = np.full((len(rows),), EOS_ID, "int32")
    step = _matmul_flops(
        lambda cache, ids: model.decode_step(cache, ids, 0),
        cache,
        previous_ids,
    )
    return (encoder + steps * step) / batch_size


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


@requires_torch
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


@requires_torch
def test_train_throughput_flop_count_is_the_traced_training_step(fit_run):
    if keras.backend.backend() != "jax":
        pytest.skip(_NEEDS_JAX)
    import jax

    line = fit_run
    model = RNNSearch.from_preset(
        "rnnsearch_tiny",
        source_vocabulary_size=_VOCABULARY,
        target_vocabulary_size=_VOCABULARY,
    )
    ids = np.full((3, 4), NUM_RESERVED_IDS, "int32")  # the run's batch

    def loss(trainable, non_trainable):
        inputs = {"source_ids": ids, "target_ids": ids}
        logits, _ = model.stateless_call(trainable, non_trainable, inputs)
        return keras.ops.sum(logits)

    # Forward and backward: the products of the gradient's program.
    counted = _matmul_flops(
        jax.value_and_grad(loss),
        [v.value for v in model.trainable_variables],
        [v.value for v in model.non_trainable_variables],
    )
    # The printed figure is rounded to a whole FLOP.
    np.testing.assert_allclose(
        line["flop_per_token"], counted / line["tokens_per_step"], atol=0.5
    )
    # The traced FLOPs of a step over the median of the step times the
    # line lists (rounded to 0.1 ms; the figure to 1e-4 TFLOP/s).
    step_s = np.median(line["step_times_ms"]) / 1e3
    np.testing.assert_allclose(
        line["achieved_tflops"], counted / step_s / 1e12, rtol=2e-2, atol=5e-5
    )


@requires_torch
def test_train_throughput_pools_the_reference_rounds(fit_run):
    line = fit_run
    n = line["sizes"]["hidden_dim"]
    # torch.nn.GRU's second bias (b_hh): 3n per direction.
    assert line["pytorch_params"] == line["params"] + 6 * n
    assert len(line["pytorch_losses"]) == 3  # the first round's
    assert np.isfinite(line["pytorch_losses"]).all()
    times = line["pytorch_step_times_ms"]
    assert len(times) == 4  # 2 rounds of 2 timed steps
    assert len(line["round_ratios"]) == 2


def test_train_throughput_fields_of_known_step_times(monkeypatch):
    """Step times in, the printed medians, throughputs and ratios out."""
    script = _load("train_throughput", monkeypatch)
    # Ours: two rounds of two steps, in seconds; the reference's in ms.
    round_times = [[0.010, 0.030], [0.020, 0.040]]
    references = [
        {
            **dict.fromkeys(script.REFERENCE_FIELDS),
            "torch_version": "2",
            "step_times_ms": times,
            "peak_memory_mb": memory,
        }
        for times, memory in [([50.0, 70.0], 100.0), ([40.0, 60.0], 120.0)]
    ]
    fields = script.reference_fields(
        references, round_times, 12, 1e9, peak=None
    )
    assert fields["pytorch_step_times_ms"] == [50.0, 70.0, 40.0, 60.0]
    assert fields["pytorch_step_ms"] == 55.0  # median of the four
    assert fields["pytorch_tokens_per_s"] == round(12 / 0.055, 1)
    assert fields["pytorch_peak_memory_mb"] == 120.0
    # The reference's 55 ms a step over our 25 ms (median of 10-40 ms).
    assert fields["ratio_vs_pytorch"] == 2.2
    assert fields["round_ratios"] == [3.0, 1.667]  # 60 / 20, 50 / 30
    ours = script.throughput_fields(
        {
            "times": [0.3, 0.1, 0.2],
            "cpu_times": [0.4, 0.2, 0.1],
            "warmup_s": 5.0,
            "losses": [1.0],
        },
        12,
        1e9,
        types.SimpleNamespace(peak_tflops=0.1),
    )
    assert ours["step_ms"] == 200.0 and ours["step_cpu_ms"] == 200.0
    assert ours["tokens_per_s"] == 60.0  # 12 tokens in 0.2 s
    assert ours["achieved_tflops"] == 0.06  # 1e9 FLOPs a token
    assert ours["utilisation"] == 0.6


@requires_torch
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
    for line in lines:
        # EOS is forced only at the last step: 3 words per sentence.
        assert line["decode_steps"] == 4
        assert line["target_words_per_sentence"] == 3
        assert line["flop_per_word"] > 0
        assert line["peak_memory_mb"] > 0
    if keras.backend.backend() != "jax":
        pytest.skip(_NEEDS_JAX)
    model = RNNSearch.from_preset(
        "rnnsearch_tiny", source_vocabulary_size=40, target_vocabulary_size=40
    )
    source_ids = np.full((2, 5), NUM_RESERVED_IDS, "int32")
    for line in lines:
        counted = _search_flop_per_sentence(
            model, source_ids, line["beam_size"], steps=4
        )
        assert line["flop_per_word"] == pytest.approx(counted / 3, abs=1)


# === The plain-PyTorch reference decoder of decode_throughput.py ===


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


@requires_torch
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
    reference = _load("_torch_decoder").TorchRNNSearchDecoder.from_keras(model)
    assert reference.parameter_count() == model.count_params()
    source_ids = _random_sources()
    max_length = 8
    if beam_size == 1:
        result = greedy_search(model, source_ids, max_length)
        tokens, scores, lengths = reference.greedy_search(
            source_ids, max_length
        )
    else:
        config = SearchConfig(beam_size=beam_size, max_length=max_length)
        result = beam_search(model, source_ids, config)
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


@requires_torch
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
    assert len(line["round_ratios"]) == 2


@requires_torch
def test_decode_throughput_profiles_each_search(monkeypatch, capsys):
    """`--profile`: per search, its op time against its wall time."""
    import torch

    script = _load("decode_throughput", monkeypatch)
    matrix = torch.ones((512, 512))

    def searches_of(products):
        def search(source_ids):
            for _ in range(products):
                torch.mm(matrix, matrix)

        return search

    script.profile(
        {"keras": searches_of(3), "pytorch": searches_of(1)},
        np.zeros((2, 4), "int32"),
        beam_size=5,
        batch_size=2,
    )
    printed = capsys.readouterr().err
    heads = re.findall(
        r"profile: (\w+), beam 5, batch 2: ([\d.]+) ms of op time in "
        r"(\d+) op calls, ([\d.]+) ms of wall time",
        printed,
    )
    assert [name for name, *_ in heads] == ["keras", "pytorch"]
    # Three times the products, three times the op calls (with the ops
    # each product calls inside it).
    calls = [int(calls) for _, _, calls, _ in heads]
    assert calls[0] == 3 * calls[1] > 0
    for _, op_ms, _, wall_ms in heads:
        assert 0 < float(op_ms) and 0 < float(wall_ms)
    assert printed.count("aten::mm") == 2  # each search's table


@requires_torch
def test_decode_throughput_fields_of_known_search_times(monkeypatch):
    """A fake clock that moves only while a search runs: each run of ours,
    of the PyTorch reference and of the comparison model takes a known
    time, and the printed medians, throughputs and ratios must follow."""
    script = _load("decode_throughput", monkeypatch)
    now = [0.0]
    monkeypatch.setattr(
        script, "time", types.SimpleNamespace(perf_counter=lambda: now[0])
    )
    durations = {  # warm-up, then the 3 timed rounds
        "ours": [9.0, 0.2, 0.4, 0.3],
        "reference": [7.0, 0.9, 0.6, 0.3],
        "compare": [5.0, 0.1, 0.1, 0.6],
    }

    def taking(durations, search):
        durations = iter(durations)

        def run(source_ids):
            output = search(source_ids)
            now[0] += next(durations)
            return output

        return run

    args = script.parse_arguments(
        "--preset=rnnsearch_tiny --compare-with=rnnencdec_tiny "
        "--vocabulary-size=40 --source-length=5 --max-length=4 "
        "--batch-sizes 3 --beam-sizes 2 --repeats=3".split()
    )
    model = script.build_model(args, args.preset)
    other = script.build_model(args, args.compare_with)
    keras_search, reference_search = (
        script.keras_search,
        script.reference_search,
    )
    monkeypatch.setattr(
        script,
        "keras_search",
        lambda m, *a: taking(
            durations["ours" if m is model else "compare"], keras_search(m, *a)
        ),
    )
    monkeypatch.setattr(
        script,
        "reference_search",
        lambda *a: taking(durations["reference"], reference_search(*a)),
    )
    reference = script.build_reference(model, args)
    record = script.benchmark(model, args, 2, 3, reference, other)
    # 3 sentences of 3 words each (EOS forced at the 4th step) for all.
    assert record["target_words_per_sentence"] == 3
    assert record["warmup_s"] == 9.0
    assert record["times_s"] == [0.2, 0.4, 0.3]
    assert record["seconds_per_batch"] == 0.3
    assert record["sentences_per_s"] == 10.0
    assert record["target_words_per_s"] == 30.0
    assert record["pytorch_warmup_s"] == 7.0
    assert record["pytorch_seconds_per_batch"] == 0.6
    assert record["pytorch_target_words_per_s"] == 15.0
    assert record["ratio_vs_pytorch"] == 2.0  # ours twice as fast
    assert record["round_ratios"] == [4.5, 1.5, 1.0]  # theirs / ours
    assert record["compare_seconds_per_batch"] == 0.1
    assert record["compare_target_words_per_s"] == 90.0
    assert record["time_ratio_vs_compare"] == 3.0  # ours 3x slower
    assert record["compare_round_ratios"] == [2.0, 4.0, 0.5]


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
        assert line["ratio_vs_pytorch"] is None  # no reference for PA
        assert line["params"] == expected_params["pervasive_attention_small"]
        assert line["compare_params"] == expected_params["rnnencdec_tiny"]
        assert line["time_ratio_vs_compare"] > 0
    if keras.backend.backend() != "jax":
        pytest.skip(_NEEDS_JAX)
    model = PervasiveAttention.from_preset(
        "pervasive_attention_small",
        source_vocabulary_size=40,
        target_vocabulary_size=40,
    )
    source_ids = np.full((2, 5), NUM_RESERVED_IDS, "int32")
    for line in lines:
        counted = _search_flop_per_sentence(
            model, source_ids, line["beam_size"], steps=4
        )
        assert line["flop_per_word"] == pytest.approx(counted / 3, abs=1)


@pytest.mark.parametrize(
    "options",
    [{"tie_embeddings": True}, {"tie_embeddings": True, "input_channels": 16}],
)
def test_pervasive_attention_flop_count_of_tied_and_reduced_models(
    options, monkeypatch
):
    if keras.backend.backend() != "jax":
        pytest.skip(_NEEDS_JAX)
    script = _load("decode_throughput", monkeypatch)
    model = PervasiveAttention.from_preset(
        "pervasive_attention_small",
        source_vocabulary_size=40,
        target_vocabulary_size=40,
        num_layers=2,
        **options,
    )
    source_ids = np.full((2, 5), NUM_RESERVED_IDS, "int32")
    for beam_size in (1, 3):
        counted = _search_flop_per_sentence(
            model, source_ids, beam_size, steps=4
        )
        formula = script.search_flop_per_sentence(model, 5, 4, beam_size)
        assert formula == pytest.approx(counted, abs=1)


def test_serving_latency_serves_each_export_from_tensorflow_alone():
    """Exports on the current backend; the loader imports TensorFlow only."""
    started = time.perf_counter()
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
        # No request answers faster than a TensorFlow call can (50 us).
        assert min(line["latency_ms_all"]) > 0.05
    # Against this process's clock: the timed requests of every line fit
    # in the script's wall time (latencies in ms, not us).
    timed_s = sum(sum(line["latency_ms_all"]) for line in lines) / 1e3
    assert timed_s < time.perf_counter() - started
