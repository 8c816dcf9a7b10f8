"""benchmarks/profile_step.py: the profile of a training and a search step.

The script runs as a user runs it, on a made-up `files` corpus and a tiny
model; what it makes of a profile (self times of nested events, families,
layers) is checked in-process on events whose answer is known.
"""

import json
import math

import keras
import numpy as np
import pytest

from tests.benchmarks.benchmark_scripts_test import _load
from tests.benchmarks.benchmark_scripts_test import _run


@pytest.fixture(scope="module")
def profile_step():
    return _load("profile_step")


def write_corpus(folder, pairs, prefix=""):
    """Two parallel files of `pairs`; the `data.` overrides naming them."""
    overrides = []
    for side, key in ((0, "source_file"), (1, "target_file")):
        path = folder / f"{prefix}{key}.txt"
        path.write_text("".join(pair[side] + "\n" for pair in pairs))
        overrides += ["--set", f"data.{prefix}{key}={path}"]
    return overrides


def made_up_pairs(rng, count):
    words = [f"w{i}" for i in range(40)]
    pairs = []
    for _ in range(count):
        length = int(rng.integers(3, 12))
        sentence = " ".join(rng.choice(words, size=length))
        pairs.append((sentence, sentence.upper()))
    return pairs


def test_profiles_a_training_and_a_search_step(tmp_path):
    rng = np.random.default_rng(0)
    overrides = write_corpus(tmp_path, made_up_pairs(rng, 120))
    for split in ("dev_", "test_"):
        overrides += write_corpus(tmp_path, made_up_pairs(rng, 70), split)
    settings = {
        "data.corpus": "files",
        "data.buckets": 2,
        "tokenizer.kind": "word",
        "tokenizer.source_vocabulary_size": 50,
        "tokenizer.target_vocabulary_size": 50,
        "training.batch_size": 8,
        "evaluation.beam_size": 2,
    }
    for key, value in settings.items():
        overrides += ["--set", f"{key}={value}"]
    record = tmp_path / "profile.json"
    lines = _run(
        "profile_step.py",
        "--steps",
        "3",
        "--search-batches",
        "1",
        *overrides,
        "--record",
        str(record),
    )
    training, search = lines
    assert training["phase"] == "training"
    assert search["phase"] == "beam_search"
    assert training["backend"] == keras.backend.backend()
    assert len(training["steps_ms"]) == training["steps"] == 3
    assert search["beam_size"] == 2 and search["source_widths"] == [16]
    assert search["decode_steps"] > 0
    for phase in lines:
        assert phase["op_s"] > 0
        families = phase["families_s"]
        assert sorted(families) == sorted(
            ["matmul", "elementwise", "gather_copy", "loop", "other"]
        )
        assert math.isclose(sum(families.values()), phase["op_s"], rel_tol=0.01)
        assert families["matmul"] > 0  # a GRU step is matrix products
        shares = phase["families_share"].values()
        assert math.isclose(sum(shares), 1.0, abs_tol=0.01)
        assert 0 <= phase["outside_ops_share"] < 1
        assert 0 < len(phase["top_ops"]) <= 25
    saved = json.loads(record.read_text())
    assert saved["kind"] == "profile_step"
    assert saved["rows"] == lines


@pytest.mark.parametrize(
    "name", ["BlockUntilReady", "ExecutorDoneCallback", "ThunkExecutor"]
)
def test_waits_and_wrappers_are_not_ops(profile_step, name):
    assert profile_step._NOT_OPS.search(name)


def test_self_times_of_nested_events(profile_step):
    # A loop of 10 holding two ops, then an op on its own: the loop keeps
    # only its own control (10 - 3 - 4), whatever the order of the events.
    events = [(0, 10, "while"), (1, 4, "dot"), (5, 9, "add"), (12, 14, "dot")]
    totals = profile_step._self_times(events[::-1])
    assert totals == {"while": 3, "dot": 5, "add": 4}


@pytest.mark.parametrize(
    "name, family",
    [
        ("dot.12", "matmul"),
        ("ynn_fusion.3", "matmul"),
        ("aten::addmm", "matmul"),
        ("MatMul", "matmul"),
        ("while.4", "loop"),
        ("dynamic-slice.7", "gather_copy"),
        ("aten::cat", "gather_copy"),
        ("ConcatV2", "gather_copy"),
        ("loop_add_fusion", "elementwise"),
        ("tanh_bitcast_fusion", "elementwise"),
        ("transpose_bitcast_fusion", "gather_copy"),
        ("aten::tanh", "elementwise"),
        ("Sigmoid", "elementwise"),
        ("custom-call", "other"),
    ],
)
def test_op_families(profile_step, name, family):
    assert profile_step.family_of(name) == family


@pytest.mark.parametrize(
    "scope, layer",
    [
        ("jit(train_step)/jvp(decoder)/rnn/while", "decoder"),
        ("jit(train_step)/transpose(jvp(encoder))/dot", "encoder (backward)"),
        ("rnn_search/decoder/MatMul", "decoder"),
        ("gradient_tape/rnn_search/encoder/MatMul", "encoder (backward)"),
        ("", "other"),
    ],
)
def test_layers_of_name_scopes(profile_step, scope, layer):
    assert profile_step.layer_of(scope) == layer
