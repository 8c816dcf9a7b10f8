import contextlib
import dataclasses
import functools
import itertools

import numpy as np
import pytest
from keras import ops

from keras_bahdanau.decoding import COVERAGE_FLOOR
from keras_bahdanau.decoding import SearchConfig
from keras_bahdanau.decoding import SearchResult
from keras_bahdanau.decoding import beam_search
from keras_bahdanau.decoding import greedy_search
from keras_bahdanau.decoding import search
from keras_bahdanau.reserved import BOS_ID
from keras_bahdanau.reserved import EOS_ID
from keras_bahdanau.reserved import PAD_ID

HISTORY_SIZE = 7  # The model hashes the whole history into 0..6.
SOURCES = np.array([[4, 6, 8, 3], [7, 5, 0, 0]], "int32")  # Right-padded.


class TableModel:
    """A hand-built protocol model whose outputs come from random tables.

    Logits depend on the step, the previous token, a hash of the whole
    history (carried in the cache, so a wrong cache reorder shows) and the
    source words; attention depends on the step, previous token and
    history. `[PAD]` and `[BOS]` are never emitted (-inf logits), so the
    words are `[UNK]` (1), 4 and 5. `run_numpy_model` below recomputes
    everything independently.
    """

    def __init__(self, seed=0, eos_bias=0.0):
        rng = np.random.default_rng(seed)
        v, steps, source_vocabulary_size, max_source_length = 6, 8, 9, 5
        self.step_logits = rng.normal(size=(steps, v, v)).astype("float32")
        self.history_logits = rng.normal(size=(HISTORY_SIZE, v)).astype(
            "float32"
        )
        self.source_logits = 0.5 * rng.normal(
            size=(source_vocabulary_size, v)
        ).astype("float32")
        self.step_attention = 2 * rng.normal(
            size=(steps, v, max_source_length)
        ).astype("float32")
        self.history_attention = 2 * rng.normal(
            size=(HISTORY_SIZE, max_source_length)
        ).astype("float32")
        self.token_bias = np.zeros(v, "float32")
        self.token_bias[[PAD_ID, BOS_ID]] = -np.inf
        self.token_bias[EOS_ID] = eos_bias

    def encode(self, source_ids, max_length=None):
        source_mask = ops.not_equal(source_ids, PAD_ID)  # (batch, Tx)
        source_logits = ops.take(self.source_logits, source_ids, axis=0)
        return {
            "source_mask": source_mask,
            "source_bias": ops.sum(
                ops.where(source_mask[..., None], source_logits, 0.0), axis=1
            ),  # (batch, V)
            "history": ops.zeros((ops.shape(source_ids)[0],), "int32"),
        }

    def decode_step(self, cache, previous_ids, step):
        history = ops.mod(cache["history"] * 3 + previous_ids, HISTORY_SIZE)
        step_logits = ops.take(self.step_logits, step, axis=0)  # (V, V)
        logits = (
            ops.take(step_logits, previous_ids, axis=0)
            + ops.take(self.history_logits, history, axis=0)
            + cache["source_bias"]
            + self.token_bias
        )  # (batch, V)
        source_mask = cache["source_mask"]
        source_length = ops.shape(source_mask)[1]
        step_attention = ops.take(self.step_attention, step, axis=0)
        scores = (
            ops.take(step_attention, previous_ids, axis=0)
            + ops.take(self.history_attention, history, axis=0)
        )[:, :source_length]  # (batch, Tx)
        attention = ops.softmax(
            ops.where(source_mask, scores, float("-inf")), axis=-1
        )
        return logits, attention, {**cache, "history": history}


def run_numpy_model(model, source, tokens):
    """Log-probs before each token and after the last, attention rows."""
    source = source[source != PAD_ID]
    previous, history = BOS_ID, 0
    log_probs, attention = [], []
    for step, token in enumerate(tuple(tokens) + (None,)):
        history = (history * 3 + previous) % HISTORY_SIZE
        logits = (
            model.step_logits[step, previous].astype("float64")
            + model.history_logits[history]
            + model.source_logits[source].sum(axis=0)
            + model.token_bias
        )
        log_probs.append(logits - np.logaddexp.reduce(logits))
        scores = (
            model.step_attention[step, previous, : len(source)]
            + model.history_attention[history, : len(source)]
        ).astype("float64")
        attention.append(np.exp(scores) / np.exp(scores).sum())
        previous = token
    return log_probs, attention


def numpy_hypothesis(model, source, tokens, alpha=0.0, beta=0.0):
    """(score, log P(Y|X), attention (|Y|, Tx)) from the formulas."""
    log_probs, attention = run_numpy_model(model, source, tokens)
    log_prob = sum(
        lp[token] for lp, token in zip(log_probs, tokens, strict=False)
    )
    attention = np.stack(attention[: len(tokens)])
    length_penalty = (5 + len(tokens)) ** alpha / 6**alpha
    # GNMT's eq. 14, with the package's floor for unattended tokens.
    coverage = np.clip(attention.sum(0), COVERAGE_FLOOR, 1)
    coverage_penalty = beta * np.log(coverage).sum()
    return log_prob / length_penalty + coverage_penalty, log_prob, attention


def exhaustive_ranking(model, source, max_length, alpha=0.0, beta=0.0):
    """Every hypothesis of at most `max_length` tokens, best first."""
    words = [t for t in range(len(model.token_bias)) if t not in (0, 2, 3)]
    hypotheses = []
    for length in range(max_length):
        for prefix in itertools.product(words, repeat=length):
            tokens = prefix + (EOS_ID,)
            hypotheses.append(
                (tokens, *numpy_hypothesis(model, source, tokens, alpha, beta))
            )
    return sorted(hypotheses, key=lambda h: -h[1])


def numpy_beam_search(model, source, beam_size, max_length, alpha, beta):
    """The documented algorithm, step by step, without early stopping."""
    alive, finished = [((), 0.0)], []
    for step in range(max_length):
        candidates = []
        for tokens, log_prob in alive:
            next_log_probs = run_numpy_model(model, source, tokens)[0][-1]
            for token, token_log_prob in enumerate(next_log_probs):
                if np.isfinite(token_log_prob) and (
                    token == EOS_ID or step < max_length - 1
                ):
                    candidates.append(
                        (tokens + (token,), log_prob + token_log_prob)
                    )
        candidates.sort(key=lambda c: -c[1])
        for tokens, _ in candidates[:beam_size]:
            if tokens[-1] == EOS_ID:
                finished.append(
                    (
                        tokens,
                        *numpy_hypothesis(model, source, tokens, alpha, beta),
                    )
                )
        finished = sorted(finished, key=lambda h: -h[1])[:beam_size]
        alive = [c for c in candidates if c[0][-1] != EOS_ID][:beam_size]
    return finished


def to_numpy(result):
    return type(result)(*(ops.convert_to_numpy(x) for x in result))


def assert_matches(result, index, hypotheses, source):
    """`result[index]` holds exactly `hypotheses` (then empty slots)."""
    n_best, max_length = result.token_ids.shape[1:]
    source_length = int((source != PAD_ID).sum())
    for k in range(n_best):
        ids = result.token_ids[index, k]
        attention = result.attention[index, k]
        if k >= len(hypotheses):
            assert result.lengths[index, k] == 0
            assert result.scores[index, k] == -np.inf
            np.testing.assert_array_equal(ids, 0)
            np.testing.assert_array_equal(attention, 0)
            continue
        tokens, score, log_prob, expected_attention = hypotheses[k]
        n = len(tokens)
        assert result.lengths[index, k] == n
        np.testing.assert_array_equal(ids[:n], tokens)
        np.testing.assert_array_equal(ids[n:], 0)  # Nothing after EOS.
        np.testing.assert_allclose(result.scores[index, k], score, rtol=1e-5)
        np.testing.assert_allclose(
            result.log_probs[index, k], log_prob, rtol=1e-5
        )
        np.testing.assert_allclose(
            attention[:n, :source_length], expected_attention, atol=1e-6
        )
        np.testing.assert_array_equal(attention[n:], 0)  # Rows after EOS.
        np.testing.assert_array_equal(attention[:, source_length:], 0)
    assert max_length == result.token_ids.shape[2]


@pytest.mark.parametrize(
    "alpha, beta",
    [(0.0, 0.0), (2.0, 0.0), (0.0, 2.0)],
    ids=["no_penalty", "length_penalty", "coverage_penalty"],
)
def test_wide_beam_finds_exhaustive_n_best_in_a_padded_batch(alpha, beta):
    # 3 words, 5 tokens: 121 hypotheses; 128 beams never prune anything.
    model = TableModel()
    result = to_numpy(
        beam_search(
            model,
            SOURCES,
            SearchConfig(
                beam_size=128,
                max_length=5,
                length_penalty=alpha,
                coverage_penalty=beta,
                n_best=128,
            ),
        )
    )
    rankings = [
        exhaustive_ranking(model, source, 5, alpha, beta) for source in SOURCES
    ]
    for i, (source, ranking) in enumerate(zip(SOURCES, rankings, strict=True)):
        assert len(ranking) == 121
        assert_matches(result, i, ranking, source)
    # Either penalty alone changes the best translation (here).
    best_by_probability = exhaustive_ranking(model, SOURCES[0], 5)[0]
    is_flipped = rankings[0][0][0] != best_by_probability[0]
    assert is_flipped == (alpha != beta)


def test_beam_size_one_equals_greedy():
    model = TableModel(seed=3, eos_bias=-1.0)  # Lengths 6 (forced) and 1.
    greedy = to_numpy(greedy_search(model, SOURCES, max_length=6))
    config = SearchConfig(beam_size=1, max_length=6)
    beam = to_numpy(beam_search(model, SOURCES, config))
    np.testing.assert_array_equal(beam.token_ids, greedy.token_ids)
    np.testing.assert_array_equal(beam.lengths, greedy.lengths)
    np.testing.assert_allclose(beam.log_probs, greedy.log_probs, rtol=1e-6)
    np.testing.assert_allclose(beam.scores, greedy.scores, rtol=1e-6)
    np.testing.assert_allclose(beam.attention, greedy.attention, atol=1e-7)
    for i, source in enumerate(SOURCES):  # Greedy recomputed in NumPy.
        tokens = ()
        while tokens[-1:] != (EOS_ID,):
            log_probs = run_numpy_model(model, source, tokens)[0][-1]
            if len(tokens) == 5:  # The last of 6 steps allows only EOS.
                log_probs[np.arange(len(log_probs)) != EOS_ID] = -np.inf
            tokens += (int(log_probs.argmax()),)
        hypothesis = numpy_hypothesis(model, source, tokens)
        assert_matches(greedy, i, [(tokens, *hypothesis)], source)


def test_small_beam_follows_the_algorithm_and_batch_equals_one_by_one():
    model = TableModel(seed=2, eos_bias=-1.0)
    config = SearchConfig(
        beam_size=3,
        max_length=7,
        relative_max_length=(1.0, 2),
        length_penalty=0.6,
        coverage_penalty=0.4,
        n_best=3,
    )
    batch = to_numpy(beam_search(model, SOURCES, config))
    for i, source in enumerate(SOURCES):
        source_length = int((source != PAD_ID).sum())
        reference = numpy_beam_search(
            model, source, 3, min(7, source_length + 2), 0.6, 0.4
        )
        assert len(reference) == 3
        assert_matches(batch, i, reference, source)
    # The padded sentence alone, unpadded, gives the same result.
    single = to_numpy(beam_search(model, SOURCES[1:, :2], config))
    for field in batch._fields:
        actual = getattr(batch, field)[1:]
        if field == "attention":
            actual = actual[..., :2]
        np.testing.assert_allclose(actual, getattr(single, field), rtol=1e-6)


class FirstTokenModel(TableModel):
    """`TableModel` whose logits also depend on the first emitted token.

    The cache keeps that token (`first`, different for each beam) from
    step 1 on. With `branch=True`, step 1 sets it in a Python branch and
    the later steps return it unchanged, which only an eager loop can
    run: the search must still reorder it with the beams, although the
    step passed it through. With `branch=False` every step computes it.
    """

    def __init__(self, branch, **kwargs):
        super().__init__(**kwargs)
        self.branch = branch
        v = len(self.token_bias)
        rng = np.random.default_rng(7)
        self.first_logits = 3 * rng.normal(size=(v, v)).astype("float32")

    def encode(self, source_ids, max_length=None):
        cache = super().encode(source_ids, max_length)
        return {**cache, "first": ops.zeros_like(cache["history"])}

    def decode_step(self, cache, previous_ids, step):
        logits, attention, new_cache = super().decode_step(
            cache, previous_ids, step
        )
        if not self.branch:
            first = ops.where(ops.equal(step, 1), previous_ids, cache["first"])
        elif int(ops.convert_to_numpy(step)) == 1:
            first = previous_ids
        else:
            first = cache["first"]  # The same tensor: passed through.
        logits = logits + ops.take(self.first_logits, first, axis=0)
        return logits, attention, {**new_cache, "first": first}


def test_beam_reorders_a_cache_entry_that_a_later_step_passes_through(
    backend,
):
    if backend == "jax":
        pytest.skip(
            "jax.lax.while_loop traces the step once, so a Python branch on "
            "the step's value cannot run there."
        )
    config = SearchConfig(beam_size=3, max_length=7, n_best=3)
    branched = to_numpy(
        beam_search(FirstTokenModel(branch=True, seed=3), SOURCES, config)
    )
    computed = to_numpy(
        beam_search(FirstTokenModel(branch=False, seed=3), SOURCES, config)
    )
    plain = to_numpy(beam_search(TableModel(seed=3), SOURCES, config))
    assert not np.array_equal(computed.token_ids, plain.token_ids)
    for field in computed._fields:
        np.testing.assert_allclose(
            getattr(branched, field), getattr(computed, field), rtol=1e-6
        )


def test_relative_max_length_forces_eos_at_each_sentence_limit():
    model = TableModel(eos_bias=-30.0)  # Never stops by itself.
    beam = SearchConfig(beam_size=4, max_length=8, relative_max_length=(0.5, 1))
    for run in (
        functools.partial(
            greedy_search, max_length=8, relative_max_length=(0.5, 1)
        ),
        functools.partial(beam_search, config=beam),
    ):
        result = to_numpy(run(model, SOURCES))
        np.testing.assert_array_equal(result.lengths, [[3], [2]])
        np.testing.assert_array_equal(result.token_ids[:, 0, 3:], 0)
        assert result.token_ids[0, 0, 2] == result.token_ids[1, 0, 1] == EOS_ID


def test_search_compiles(backend):
    model = TableModel()
    config = SearchConfig(
        beam_size=3,
        max_length=5,
        length_penalty=0.6,
        coverage_penalty=0.2,
        n_best=2,
    )

    def run(source_ids):
        return beam_search(model, source_ids, config)._asdict()

    if backend == "jax":
        import jax

        compiled = jax.jit(run)
    elif backend == "tensorflow":
        import tensorflow as tf

        # Unknown batch and source length, as in a SavedModel signature.
        compiled = tf.function(
            run, input_signature=[tf.TensorSpec((None, None), tf.int32)]
        )
    else:
        pytest.skip("torch runs ops.while_loop as a Python loop.")
    result = SearchResult(
        **{k: ops.convert_to_numpy(v) for k, v in compiled(SOURCES).items()}
    )
    for i, source in enumerate(SOURCES):
        reference = numpy_beam_search(model, source, 3, 5, 0.6, 0.2)
        assert_matches(result, i, reference[:2], source)


def test_beam_search_takes_a_search_config():
    # The config's own checks: tests/decoding/config_test.py.
    with pytest.raises(ValueError, match="config=4"):
        beam_search(TableModel(), SOURCES, 4)
    with pytest.raises(TypeError, match="beam_size"):
        beam_search(TableModel(), SOURCES, beam_size=4, max_length=5)
    # Without max_length, `for_source_length` of the 4 columns: 6.
    config = SearchConfig(beam_size=2, relative_max_length=(1.0, 2))
    result = beam_search(TableModel(), SOURCES, config)
    assert result.token_ids.shape == (2, 1, 6)


def test_search_runs_the_search_its_config_asks_for():
    model = TableModel(seed=3, eos_bias=-1.0)
    greedy = SearchConfig(beam_size=1, max_length=6)
    # Without max_length: floor(1.0 * 4 + 2) = 6 for 4 columns.
    beam = SearchConfig(
        beam_size=3, n_best=2, length_penalty=0.6, relative_max_length=(1.0, 2)
    )
    for config, expected in [
        (greedy, greedy_search(model, SOURCES, max_length=6)),
        (beam, beam_search(model, SOURCES, beam)),
        (
            beam,
            beam_search(
                model, SOURCES, dataclasses.replace(beam, max_length=6)
            ),
        ),
    ]:
        result = to_numpy(search(model, SOURCES, config))
        for field, value in to_numpy(expected)._asdict().items():
            np.testing.assert_array_equal(getattr(result, field), value)


@pytest.mark.parametrize("beam_size", [1, 3])
def test_a_search_runs_in_the_models_decoding_scope(beam_size):
    # A protocol model's optional `decoding_scope()` is entered once around
    # the whole search, every `decode_step` inside it, and left after.
    events = []

    class ScopedModel(TableModel):
        @contextlib.contextmanager
        def decoding_scope(self):
            events.append("enter")
            try:
                yield
            finally:
                events.append("exit")

        def decode_step(self, cache, previous_ids, step):
            events.append("step")
            return super().decode_step(cache, previous_ids, step)

    config = SearchConfig(beam_size=beam_size, max_length=4)
    scoped = to_numpy(search(ScopedModel(), SOURCES, config))
    plain = to_numpy(search(TableModel(), SOURCES, config))
    assert events[0] == "enter" and events[-1] == "exit"
    assert events.count("enter") == events.count("exit") == 1
    assert events.count("step") >= 1
    for got, expected in zip(scoped, plain, strict=True):
        np.testing.assert_array_equal(got, expected)


def test_greedy_bad_max_length_raises():
    with pytest.raises(ValueError, match="max_length=2.5"):
        greedy_search(TableModel(), SOURCES, max_length=2.5)


def test_coverage_penalty_of_a_model_without_attention_is_finite():
    """RNNencdec attends to nothing: every source token has coverage 0.

    Without a floor every hypothesis would score -inf and the search
    would finish none; with it each token costs `beta * log(floor)`, the
    same for every hypothesis, so the search finds what it finds without
    the penalty.
    """
    from keras_bahdanau.models import RNNEncDec

    model = RNNEncDec(12, 12, embedding_dim=4, hidden_dim=6, maxout_dim=4,
                      initialization="glorot")  # fmt: skip
    source = np.array([[5, 6, 7, 8], [9, 10, 0, 0]])
    beta = 0.4
    config = SearchConfig(beam_size=3, n_best=2, max_length=6)
    plain = beam_search(model, source, config)
    covered = beam_search(
        model, source, dataclasses.replace(config, coverage_penalty=beta)
    )
    scores = ops.convert_to_numpy(covered.scores)
    assert np.all(np.isfinite(scores))
    np.testing.assert_array_equal(
        ops.convert_to_numpy(covered.token_ids),
        ops.convert_to_numpy(plain.token_ids),
    )
    real_tokens = (source != 0).sum(1)[:, None]  # (batch, 1)
    np.testing.assert_allclose(
        scores,
        ops.convert_to_numpy(plain.scores)
        + beta * real_tokens * np.log(COVERAGE_FLOOR),
        rtol=1e-5,
    )


@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
def test_gather_beams_is_numpy_indexing(index_dtype):
    from keras_bahdanau.decoding.beam_search import _gather_beams

    rng = np.random.default_rng(0)
    tensor = rng.normal(size=(3, 4, 2, 5)).astype("float32")
    beams = rng.integers(0, 4, size=(3, 6)).astype(index_dtype)
    # batch == beam: Keras's TensorFlow `add` once broadcast this wrongly.
    square = np.array([[1, 0], [1, 1]], index_dtype)
    np.testing.assert_array_equal(
        ops.convert_to_numpy(_gather_beams(tensor[:2], square)),
        tensor[:2][np.arange(2)[:, None], square],
    )
    expected = tensor[np.arange(3)[:, None], beams]  # (3, 6, 2, 5)
    got = ops.convert_to_numpy(_gather_beams(tensor, beams))
    np.testing.assert_array_equal(got, expected)
    ids = rng.integers(0, 9, size=(3, 4)).astype("int32")  # (batch, n)
    got_ids = ops.convert_to_numpy(_gather_beams(ids, beams))
    np.testing.assert_array_equal(got_ids, ids[np.arange(3)[:, None], beams])
