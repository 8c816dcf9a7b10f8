import json
import os
import zipfile

import keras
import numpy as np
import pytest
from keras import ops

from keras_bahdanau.decoding import SearchConfig
from keras_bahdanau.decoding import beam_search
from keras_bahdanau.decoding import compile_search
from keras_bahdanau.decoding import greedy_search
from keras_bahdanau.models.pervasive_attention import POOLINGS
from keras_bahdanau.models.pervasive_attention import PervasiveAttention
from keras_bahdanau.models.pervasive_attention import PervasiveDenseLayer
from keras_bahdanau.models.pervasive_attention import SourcePooling
from keras_bahdanau.models.pervasive_attention import _MaskedNormActivation
from keras_bahdanau.models.pervasive_attention.grid import concatenate_grid
from keras_bahdanau.reserved import BOS_ID
from keras_bahdanau.reserved import EOS_ID
from tests.models import pervasive_attention_reference as reference

SOURCE_VOCABULARY = 13
TARGET_VOCABULARY = 11
# One set of shapes for most tests: JAX compiles every eager op once per
# input shape, so shared shapes keep the suite fast.
SOURCE_LENGTHS = [5, 2, 4]
TARGET_LENGTHS = [4, 2, 3]
# The output tied to the target embedding, after a 1x1 convolution of the
# grid's 14 embedding channels to 10.
TIED_REDUCED = dict(tie_embeddings=True, input_channels=10)
FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")


def tiny_model(**overrides):
    config = dict(
        source_vocabulary_size=SOURCE_VOCABULARY,
        target_vocabulary_size=TARGET_VOCABULARY,
        source_embedding_dim=8,
        target_embedding_dim=6,
        growth_rate=4,
        num_layers=3,
        kernel_size=3,
        bottleneck_factor=2,
        dropout=0.0,
    )
    config.update(overrides)
    return PervasiveAttention(**config)


def randomize(model, seed=0):
    """Random weights everywhere, batch-norm statistics included.

    With the initial moving statistics (mean 0, variance 1) and beta 0,
    batch norm maps zeros to zeros, and padding checks would pass even
    without any masking; random statistics make them meaningful.
    """
    rng = np.random.default_rng(seed)
    for weight in model.weights:
        shape = tuple(weight.shape)
        if "moving_variance" in weight.path:
            value = rng.uniform(0.5, 2.0, shape)
        else:
            value = rng.normal(0.0, 0.5, shape)
        weight.assign(value.astype("float32"))


def random_batch(rng, source_lengths, target_lengths):
    """Right-padded source and target ids with the given real lengths."""
    source_width = max(source_lengths)
    target_width = max(target_lengths)
    batch = len(source_lengths)
    source = np.zeros((batch, source_width), "int32")
    target = np.zeros((batch, target_width), "int32")
    for row, (ns, nt) in enumerate(
        zip(source_lengths, target_lengths, strict=True)
    ):
        source[row, :ns] = rng.integers(4, SOURCE_VOCABULARY, ns)
        target[row, 0] = BOS_ID
        target[row, 1:nt] = rng.integers(4, TARGET_VOCABULARY, nt - 1)
    return {"source_ids": source, "target_ids": target}


def pad_batch(inputs, source_extra, target_extra):
    return {
        "source_ids": np.pad(inputs["source_ids"], [(0, 0), (0, source_extra)]),
        "target_ids": np.pad(inputs["target_ids"], [(0, 0), (0, target_extra)]),
    }


def to_numpy(x):
    return ops.convert_to_numpy(x)


@pytest.mark.parametrize(
    "config",
    [dict(pooling="max+attention", activation="glu"), TIED_REDUCED],
    ids=["glu", "tied_reduced"],
)
def test_output_shape_dtype_and_config_round_trip(config):
    model = tiny_model(**config)
    inputs = random_batch(
        np.random.default_rng(0), SOURCE_LENGTHS, TARGET_LENGTHS
    )
    logits = model(inputs)
    assert tuple(logits.shape) == (3, 4, TARGET_VOCABULARY)
    assert keras.backend.standardize_dtype(logits.dtype) == "float32"
    config = model.get_config()
    clone = PervasiveAttention.from_config(config)
    assert clone.get_config() == config
    assert clone.count_params() == model.count_params()


def test_target_causality():
    # GLU here: every other test exercises ReLU.
    model = tiny_model(pooling="max+attention", activation="glu")
    randomize(model)
    rng = np.random.default_rng(1)
    inputs = random_batch(rng, SOURCE_LENGTHS, [4, 4, 4])
    changed = {k: v.copy() for k, v in inputs.items()}
    changed["target_ids"][:, 2:] = rng.integers(4, TARGET_VOCABULARY, (3, 2))
    logits = to_numpy(model(inputs))
    changed_logits = to_numpy(model(changed))
    np.testing.assert_allclose(logits[:, :2], changed_logits[:, :2], atol=1e-5)
    # The change must be visible from position 2 on (the test has teeth).
    assert np.abs(logits[:, 2:] - changed_logits[:, 2:]).max() > 1e-3


@pytest.mark.parametrize("pooling", POOLINGS)
def test_padding_invariance(pooling):
    model = tiny_model(pooling=pooling)
    randomize(model)
    inputs = random_batch(
        np.random.default_rng(2), SOURCE_LENGTHS, TARGET_LENGTHS
    )
    logits = to_numpy(model(inputs))
    padded_logits = to_numpy(model(pad_batch(inputs, 4, 3)))
    np.testing.assert_allclose(logits, padded_logits[:, :4], atol=1e-4)


def test_padding_invariance_in_training_mode():
    # Batch-norm statistics skip padded cells, so with dropout off even
    # training-mode logits ignore padding.
    model = tiny_model(pooling="average+attention")
    randomize(model)
    inputs = random_batch(
        np.random.default_rng(3), SOURCE_LENGTHS, TARGET_LENGTHS
    )
    logits = to_numpy(model(inputs, training=True))
    padded = pad_batch(inputs, 4, 3)
    padded_logits = to_numpy(model(padded, training=True))
    target_mask = inputs["target_ids"] != 0
    np.testing.assert_allclose(
        logits[target_mask], padded_logits[:, :4][target_mask], atol=1e-4
    )


def test_source_padding_rows_pool_to_zero():
    # A source made only of padding (e.g. a padding row of a batch) must
    # give finite logits, not the -1e9 mask fill or NaN.
    model = tiny_model(pooling="max+attention")
    inputs = random_batch(
        np.random.default_rng(4), SOURCE_LENGTHS, TARGET_LENGTHS
    )
    inputs["source_ids"][1] = 0
    assert np.isfinite(to_numpy(model(inputs))).all()


def test_decode_step_matches_teacher_forcing():
    model = tiny_model(pooling="max+attention")
    randomize(model)
    inputs = random_batch(
        np.random.default_rng(5), SOURCE_LENGTHS, TARGET_LENGTHS
    )
    teacher_logits = to_numpy(model(inputs))
    teacher_alignment = to_numpy(model.alignment(inputs))
    cache = model.encode(inputs["source_ids"], max_length=4)
    for step in range(4):
        previous = inputs["target_ids"][:, step]
        logits, attention, new_cache = model.decode_step(
            cache, previous, ops.convert_to_tensor(step, "int32")
        )
        assert set(new_cache) == set(cache)
        for key in cache:
            assert tuple(new_cache[key].shape) == tuple(cache[key].shape)
        cache = new_cache
        np.testing.assert_allclose(
            to_numpy(logits), teacher_logits[:, step], atol=1e-4
        )
        np.testing.assert_allclose(
            to_numpy(attention), teacher_alignment[:, step], atol=1e-5
        )


def test_greedy_search_matches_teacher_forcing():
    # The package's greedy search runs `decode_step` inside
    # `ops.while_loop`; its log-probabilities and attention must equal the
    # teacher-forced ones of the tokens it picked.
    model = tiny_model()
    randomize(model)
    source_ids = random_batch(
        np.random.default_rng(6), SOURCE_LENGTHS, TARGET_LENGTHS
    )["source_ids"]
    result = greedy_search(model, source_ids, max_length=4)
    tokens = to_numpy(result.token_ids)[:, 0]  # (3, 4), 0 after EOS
    lengths = to_numpy(result.lengths)[:, 0]
    decoder_inputs = np.concatenate(
        [np.full((3, 1), BOS_ID, "int32"), tokens[:, :-1]], axis=1
    )
    inputs = {"source_ids": source_ids, "target_ids": decoder_inputs}
    logits = to_numpy(model(inputs)).astype("float64")
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    alignment = to_numpy(model.alignment(inputs))
    attention = to_numpy(result.attention)[:, 0]
    for row in range(3):
        # A hypothesis without EOS runs to max_length (length 0 then).
        steps = lengths[row] or 4
        picked = log_probs[row, np.arange(steps), tokens[row, :steps]]
        np.testing.assert_allclose(
            to_numpy(result.log_probs)[row, 0], picked.sum(), atol=1e-4
        )
        np.testing.assert_allclose(
            attention[row, :steps], alignment[row, :steps], atol=1e-5
        )


def test_beam_search_runs_with_the_protocol():
    model = tiny_model()
    randomize(model)
    source_ids = random_batch(
        np.random.default_rng(11), SOURCE_LENGTHS, TARGET_LENGTHS
    )["source_ids"]
    config = SearchConfig(beam_size=2, max_length=4)
    result = beam_search(model, source_ids, config)
    assert tuple(result.token_ids.shape) == (3, 1, 4)
    attention = to_numpy(result.attention)[:, 0]  # (batch, 4, Tx)
    lengths = to_numpy(result.lengths)[:, 0]
    source_mask = source_ids != 0
    for row in range(3):
        rows = attention[row, : max(lengths[row], 1)]
        np.testing.assert_allclose(rows.sum(-1), 1.0, atol=1e-5)
        assert (rows[:, ~source_mask[row]] == 0).all()


class FullRecomputePervasiveAttention(PervasiveAttention):
    """Decoding by recomputing the whole grid at every step.

    The decoding of `PervasiveAttention` before it became incremental,
    kept as the reference the incremental cache must match: a
    `(batch, max_length)` target-prefix buffer, one position written per
    step, the full `max_length x Tx` grid through every layer, and the
    row of the current step pooled.
    """

    def encode(self, source_ids, max_length=None):
        source_ids = ops.cast(ops.convert_to_tensor(source_ids), "int32")
        batch_size = ops.shape(source_ids)[0]
        return {
            "source_ids": source_ids,
            "source_mask": ops.not_equal(source_ids, 0),
            "target_ids": ops.zeros((batch_size, max_length), "int32"),
        }

    def decode_step(self, cache, previous_ids, step):
        buffer = cache["target_ids"]  # (batch, max_length)
        positions = ops.arange(ops.shape(buffer)[1], dtype="int32")
        at_step = ops.equal(positions, ops.cast(step, "int32"))[None, :]
        buffer = ops.where(
            at_step, ops.cast(previous_ids, "int32")[:, None], buffer
        )
        features, source_mask = self._features(
            self, cache["source_ids"], buffer, training=False
        )
        # (batch, max_length, Tx, C) -> (batch, 1, Tx, C)
        step_index = ops.reshape(ops.cast(step, "int32"), (1,))
        features = ops.take(features, step_index, axis=1)
        logits = self._logits(self, features, source_mask, training=False)
        attention = self.pooling.alignment(features, source_mask)
        return logits[:, 0], attention[:, 0], {**cache, "target_ids": buffer}


def full_recompute_copy(model):
    """The same model (same weights) with the full-recompute decoding."""
    copy = FullRecomputePervasiveAttention.from_config(model.get_config())
    copy.set_weights(model.get_weights())
    return copy


# Several layers, both activations, kernel sizes 1 (no cache), 3 and 5.
DECODING_CONFIGS = {
    "relu_k5_4_layers": dict(num_layers=4, kernel_size=5),
    "glu_k3": dict(activation="glu", pooling="average+attention"),
    "k1": dict(num_layers=2, kernel_size=1, pooling="attention"),
    # ReLU through the whole-row path: the reduction mixes the channels.
    "relu_tied_reduced": dict(pooling="max+attention", **TIED_REDUCED),
}


@pytest.mark.parametrize("config", DECODING_CONFIGS)
def test_incremental_decoding_matches_teacher_forcing(config):
    # Teacher-forced `__call__` is the full recomputation: the logits and
    # alignment of every prefix at its last position.
    model = tiny_model(**DECODING_CONFIGS[config])
    randomize(model, seed=12)
    rng = np.random.default_rng(12)
    inputs = random_batch(rng, SOURCE_LENGTHS, [5, 5, 5])
    teacher_logits = to_numpy(model(inputs))  # (3, 5, V)
    teacher_alignment = to_numpy(model.alignment(inputs))  # (3, 5, Tx)
    cache = model.encode(inputs["source_ids"], max_length=5)
    for key, value in cache.items():
        assert value.shape[0] == 3, key  # batch-major, for beam search
    scale = np.abs(teacher_logits).max()
    for step in range(5):
        previous = inputs["target_ids"][:, step]
        logits, attention, new_cache = model.decode_step(
            cache, previous, ops.convert_to_tensor(step, "int32")
        )
        for key in cache:
            assert tuple(new_cache[key].shape) == tuple(cache[key].shape)
        if step == 2:
            # Reordering the cache along axis 0 (what beam search does)
            # reorders the predictions the same way.
            order = np.array([2, 0, 1])
            reordered = {
                k: ops.take(v, order, axis=0) for k, v in cache.items()
            }
            reordered_logits, _, _ = model.decode_step(
                reordered, previous[order], step
            )
            np.testing.assert_allclose(
                to_numpy(reordered_logits), to_numpy(logits)[order], atol=1e-6
            )
        cache = new_cache
        np.testing.assert_allclose(
            to_numpy(logits), teacher_logits[:, step], atol=1e-5 * scale
        )
        np.testing.assert_allclose(
            to_numpy(attention), teacher_alignment[:, step], atol=1e-5
        )


def assert_same_search_results(result, expected):
    np.testing.assert_array_equal(
        to_numpy(result.token_ids), to_numpy(expected.token_ids)
    )
    np.testing.assert_array_equal(
        to_numpy(result.lengths), to_numpy(expected.lengths)
    )
    for field in ("scores", "log_probs", "attention"):
        np.testing.assert_allclose(
            to_numpy(getattr(result, field)),
            to_numpy(getattr(expected, field)),
            atol=1e-5,
            err_msg=field,
        )


@pytest.mark.parametrize("config", ["relu_k5_4_layers", "relu_tied_reduced"])
def test_searches_match_full_recompute(config):
    # The deepest config, and the tied output after a reduction; the
    # step-level test above covers the others.
    model = tiny_model(**DECODING_CONFIGS[config])
    randomize(model, seed=13)
    full = full_recompute_copy(model)
    source_ids = random_batch(
        np.random.default_rng(13), SOURCE_LENGTHS, TARGET_LENGTHS
    )["source_ids"]
    assert_same_search_results(
        greedy_search(model, source_ids, max_length=6),
        greedy_search(full, source_ids, max_length=6),
    )
    settings = SearchConfig(
        beam_size=3,
        max_length=6,
        n_best=2,
        length_penalty=0.6,
        coverage_penalty=0.2,
    )
    result = beam_search(model, source_ids, settings)
    expected = beam_search(full, source_ids, settings)
    assert_same_search_results(result, expected)
    # The beams really were reordered: hypotheses of a sentence differ.
    tokens = to_numpy(result.token_ids)
    assert (tokens[:, 0] != tokens[:, 1]).any()


def test_compiled_search_matches_full_recompute():
    # The search `Translator` runs (jax.jit on JAX, tf.function on
    # TensorFlow, eager on torch), and on TensorFlow a graph with unknown
    # batch and source length, as in the exported SavedModel: the cache
    # must keep its shapes through `tf.while_loop`.
    model = tiny_model(num_layers=2, kernel_size=5, pooling="max+attention")
    randomize(model, seed=14)
    source_ids = random_batch(
        np.random.default_rng(14), SOURCE_LENGTHS, TARGET_LENGTHS
    )["source_ids"]
    config = SearchConfig(beam_size=2, n_best=1, max_length=5)
    expected = beam_search(full_recompute_copy(model), source_ids, config)
    search = compile_search(model, config)
    assert_same_search_results(search(source_ids), expected)
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        @tf.function(input_signature=[tf.TensorSpec((None, None), tf.int32)])
        def graph_search(ids):
            return beam_search(model, ids, config)

        assert_same_search_results(graph_search(source_ids), expected)


def randomize_layer(layer, rng):
    for weight in layer.weights:
        shape = tuple(weight.shape)
        if "moving_variance" in weight.path:
            value = rng.uniform(0.5, 2.0, shape)
        else:
            value = rng.normal(0.0, 0.5, shape)
        weight.assign(value.astype("float32"))


def batch_norm_weights(norm):
    batch_norm = norm.norm
    return {
        "gamma": to_numpy(batch_norm.gamma),
        "beta": to_numpy(batch_norm.beta),
        "mean": to_numpy(batch_norm.moving_mean),
        "variance": to_numpy(batch_norm.moving_variance),
    }


def reference_weights(layer, rng):
    """A `PervasiveDenseLayer`'s weights in the reference's layout."""
    # The layer stores only the kernel rows up to the centre (target
    # offsets -k // 2 .. 0); the reference takes a full k x k kernel and
    # masks its future rows itself, so give them random values.
    causal_kernel = to_numpy(layer.conv2.kernel)  # (k // 2 + 1, k, c, g)
    half = layer.kernel_size // 2
    future_rows = rng.normal(size=(half, *causal_kernel.shape[1:]))
    return {
        "norm1": batch_norm_weights(layer.norm1),
        "conv1": to_numpy(layer.conv1.kernel),
        "norm2": batch_norm_weights(layer.norm2),
        "conv2": np.concatenate([causal_kernel, future_rows], axis=0),
    }


@pytest.mark.parametrize("activation, kernel_size", [("relu", 3), ("glu", 5)])
def test_dense_layer_matches_numpy_reference(activation, kernel_size):
    rng = np.random.default_rng(15)
    layer = PervasiveDenseLayer(
        growth_rate=4,
        kernel_size=kernel_size,
        bottleneck_factor=2,
        activation=activation,
    )
    grid = rng.normal(size=(2, 4, 5, 6)).astype("float32")
    source_mask = np.array([[1, 1, 1, 1, 0], [1, 1, 0, 0, 0]], bool)
    target_mask = np.ones((2, 4), bool)
    layer(grid, source_mask, target_mask)
    randomize_layer(layer, rng)
    outputs = to_numpy(layer(grid, source_mask, target_mask, training=False))
    weights = reference_weights(layer, rng)
    expected = reference.dense_layer(grid, source_mask, weights, activation)
    assert outputs.shape == expected.shape == (2, 4, 5, 10)
    np.testing.assert_allclose(outputs, expected, atol=1e-5)


def test_masked_convolution_reads_the_current_row_and_k_half_before():
    # The new features of a layer at target row t depend on its input
    # rows t - k // 2, ..., t: on row t itself (so the current row is not
    # masked), on no later row, and on no row before t - k // 2 (the rows
    # the decoding cache keeps). At model level the DenseNet's identity
    # path would hide a masked current row; this checks the convolution.
    kernel_size, growth_rate, channels = 5, 4, 6
    half = kernel_size // 2
    rng = np.random.default_rng(16)
    layer = PervasiveDenseLayer(
        growth_rate=growth_rate, kernel_size=kernel_size, bottleneck_factor=2
    )
    grid = rng.normal(size=(2, 6, 4, channels)).astype("float32")
    source_mask = np.array([[1, 1, 1, 1], [1, 1, 1, 0]], bool)
    target_mask = np.ones((2, 6), bool)
    layer(grid, source_mask, target_mask)
    randomize_layer(layer, rng)

    def new_features(x):
        outputs = layer(x, source_mask, target_mask, training=False)
        return to_numpy(outputs)[..., channels:]  # (2, 6, 4, g)

    features = new_features(grid)
    for t in range(6):
        changed = grid.copy()
        changed[:, t] += rng.normal(size=changed[:, t].shape)
        # (2, 6): how much each row of new features moved.
        moved = np.abs(new_features(changed) - features).max(axis=(2, 3))
        reach = slice(t, min(t + half + 1, 6))
        assert (moved[:, :t] < 1e-6).all(), (t, moved)
        assert (moved[:, reach] > 1e-3).all(), (t, moved)
        assert (moved[:, t + half + 1 :] < 1e-6).all(), (t, moved)


# A grid of 2 sentences, 4 target rows, 5 source positions and 6 channels;
# the first sentence has one padded source cell.
BLOCK_SOURCE_MASK = np.array([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]], bool)
BLOCK_TARGET_MASK = np.ones((2, 4), bool)


def random_dense_block(kernel_size, num_layers=3, seed=17):
    """Randomized layers of a DenseNet block, a grid, the reference output.

    Returns:
        `(layers, grid, expected)`: `grid` float32 `(2, 4, 5, 6)`,
        `expected` the NumPy reference of the layers applied in turn,
        `(2, 4, 5, 6 + 4 num_layers)`.
    """
    rng = np.random.default_rng(seed)
    grid = rng.normal(size=(2, 4, 5, 6)).astype("float32")
    layers, expected = [], grid
    for _ in range(num_layers):
        layer = PervasiveDenseLayer(
            growth_rate=4, kernel_size=kernel_size, bottleneck_factor=2
        )
        layer.build(expected.shape)
        randomize_layer(layer, rng)
        weights = reference_weights(layer, rng)
        expected = reference.dense_layer(expected, BLOCK_SOURCE_MASK, weights)
        layers.append(layer)
    return layers, grid, expected


@pytest.mark.parametrize("kernel_size", [3, 5])
def test_dense_block_matches_numpy_reference(kernel_size):
    # Layers in sequence: layer l reads the channels [block input, new
    # features of layers 0 .. l - 1], in that order, through its own
    # batch norm and 1x1 kernel, and the zero new features of padded
    # cells are part of the next layer's input.
    layers, grid, expected = random_dense_block(kernel_size)
    outputs = grid
    for layer in layers:
        outputs = layer(
            outputs, BLOCK_SOURCE_MASK, BLOCK_TARGET_MASK, training=False
        )
    assert expected.shape == (2, 4, 5, 18)
    np.testing.assert_allclose(
        to_numpy(outputs), expected, rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize("factored", [False, True])
@pytest.mark.parametrize("kernel_size", [3, 5])
def test_dense_block_steps_match_numpy_reference_row_by_row(
    kernel_size, factored
):
    # Incremental decoding, one target row at a time: each layer's step
    # reads its k // 2 cached rows (zeros from `initial_rows`, then the
    # shift register it returns) and the new row. Factored, as
    # `decode_step` runs it with ReLU: the 1x1 convolution's share of the
    # block input's channels comes as two terms, channels 0:2 (the source
    # embedding's, once per sentence) and 2:6 (the target token's), and
    # each layer gets only the channels after them.
    layers, grid, expected = random_dense_block(kernel_size)
    rows = [layer.initial_rows(2, 5) for layer in layers]
    for t in range(4):
        row = grid[:, t : t + 1]  # (2, 1, 5, 6)
        outputs = None if factored else row
        for index, layer in enumerate(layers):
            factored_arguments = {}
            if factored:
                partial = layer.bottleneck_term(row[..., :2], 0)
                partial += layer.bottleneck_term(row[..., 2:], 2)
                factored_arguments = dict(start=6, partial=partial)
            outputs, rows[index] = layer.step(
                outputs,
                rows[index],
                BLOCK_SOURCE_MASK,
                BLOCK_TARGET_MASK[:, t : t + 1],
                **factored_arguments,
            )
        if factored:
            # (2, 1, 5, 12): the layers' features alone.
            outputs = np.concatenate([row, to_numpy(outputs)], axis=-1)
        np.testing.assert_allclose(
            to_numpy(outputs)[:, 0],
            expected[:, t],
            rtol=1e-5,
            atol=1e-5,
            err_msg=t,
        )


# Padding on both axes: sentence 0 has one padded source position and one
# padded target row, sentence 1 two padded target rows.
TRAINING_SOURCE_MASK = np.array([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]], bool)
TRAINING_TARGET_MASK = np.array([[1, 1, 1, 0], [1, 1, 0, 0]], bool)


def random_embeddings(rng):
    """A source `(2, 5, 2)` and a target `(2, 4, 4)`: a 6-channel grid."""
    source = rng.normal(size=(2, 5, 2)).astype("float32")
    target = rng.normal(size=(2, 4, 4)).astype("float32")
    return source, target


@pytest.mark.parametrize("factored", [False, True])
def test_dense_block_in_training_mode_matches_numpy_reference(factored):
    # Batch statistics over the real cells only, on the whole grid and
    # on the factored one (the embeddings as two parts, then the new
    # features), for the outputs and the running statistics.
    rng = np.random.default_rng(23)
    source, target = random_embeddings(rng)
    grid = to_numpy(concatenate_grid(source, target))  # (2, 4, 5, 6)
    outputs = (source, target) if factored else grid
    expected = grid
    for _ in range(3):
        layer = PervasiveDenseLayer(
            growth_rate=4, kernel_size=3, bottleneck_factor=2
        )
        layer.build(expected.shape)
        randomize_layer(layer, rng)
        weights = reference_weights(layer, rng)
        expected, statistics = reference.dense_layer_training(
            expected, TRAINING_SOURCE_MASK, TRAINING_TARGET_MASK, weights
        )
        outputs = layer(
            outputs, TRAINING_SOURCE_MASK, TRAINING_TARGET_MASK, training=True
        )
        assert isinstance(outputs, tuple) == factored
        for name in ("norm1", "norm2"):
            norm = getattr(layer, name).norm
            np.testing.assert_allclose(
                to_numpy(norm.moving_mean), statistics[name][0], atol=1e-5
            )
            np.testing.assert_allclose(
                to_numpy(norm.moving_variance), statistics[name][1], atol=1e-5
            )
    if factored:
        outputs = concatenate_grid(*outputs)
    assert expected.shape == (2, 4, 5, 18)
    np.testing.assert_allclose(to_numpy(outputs), expected, atol=1e-4)


def test_masked_norm_trains_like_keras_batch_normalization():
    # The moments `_MaskedNormActivation` computes itself are those of
    # `BatchNormalization` with the real cells as its mask (the previous
    # release called it), whole or factored.
    rng = np.random.default_rng(24)
    source, target = random_embeddings(rng)
    features = rng.normal(size=(2, 4, 5, 3)).astype("float32")
    grid = to_numpy(concatenate_grid(source, target, features))
    cells = TRAINING_TARGET_MASK[:, :, None] & TRAINING_SOURCE_MASK[:, None]
    keras_norm = keras.layers.BatchNormalization(momentum=0.9, epsilon=1e-5)
    keras_norm.build(grid.shape)
    randomize_layer(keras_norm, rng)
    expected = to_numpy(ops.relu(keras_norm(grid, training=True, mask=cells)))
    for inputs in (grid, (source, target, features)):
        norm = _MaskedNormActivation()
        norm.build(grid.shape)
        for weight in ("gamma", "beta", "moving_mean", "moving_variance"):
            value = getattr(keras_norm, weight)
            getattr(norm.norm, weight).assign(value)
        # The running statistics were updated once: move them back.
        mean, variance = reference.masked_moments(
            grid, TRAINING_SOURCE_MASK, TRAINING_TARGET_MASK
        )
        norm.norm.moving_mean.assign(
            (to_numpy(keras_norm.moving_mean) - 0.1 * mean) / 0.9
        )
        norm.norm.moving_variance.assign(
            (to_numpy(keras_norm.moving_variance) - 0.1 * variance) / 0.9
        )
        outputs = norm(
            inputs, TRAINING_SOURCE_MASK, TRAINING_TARGET_MASK, training=True
        )
        if isinstance(inputs, tuple):
            outputs = concatenate_grid(*outputs)
        np.testing.assert_allclose(to_numpy(outputs), expected, atol=1e-5)
        for weight in ("moving_mean", "moving_variance"):
            np.testing.assert_allclose(
                to_numpy(getattr(norm.norm, weight)),
                to_numpy(getattr(keras_norm, weight)),
                atol=1e-5,
            )
    with pytest.raises(ValueError, match="GLU mixes channels"):
        _MaskedNormActivation("glu")(
            (source, target), TRAINING_SOURCE_MASK, TRAINING_TARGET_MASK
        )


def dense_block_model(factored):
    """A 2-layer DenseNet block over the grid of two embeddings.

    Inputs: a source `(batch, 5, 2)`, a target `(batch, 4, 4)` and their
    masks; output: the whole grid after the block, `(batch, 4, 5, 14)`.
    The grid goes through the block factored or whole.
    """
    source = keras.Input((5, 2))
    target = keras.Input((4, 4))
    source_mask = keras.Input((5,), dtype="bool")
    target_mask = keras.Input((4,), dtype="bool")
    grid = (source, target)
    if not factored:
        grid = concatenate_grid(*grid)
    for index in range(2):
        layer = PervasiveDenseLayer(
            growth_rate=4,
            kernel_size=3,
            bottleneck_factor=2,
            name=f"dense_layer_{index}",
        )
        grid = layer(grid, source_mask, target_mask)
    if factored:
        grid = concatenate_grid(*grid)
    return keras.Model([source, target, source_mask, target_mask], grid)


def test_factored_grid_trains_like_the_whole_grid():
    # One SGD step from the same weights moves every weight (gradients
    # and running statistics) the same way, factored or not.
    rng = np.random.default_rng(25)
    source, target = random_embeddings(rng)
    inputs = [source, target, TRAINING_SOURCE_MASK, TRAINING_TARGET_MASK]
    labels = rng.normal(size=(2, 4, 5, 14)).astype("float32")
    trained = []
    for factored in (False, True):
        model = dense_block_model(factored)
        randomize(model, seed=25)
        model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
        model.train_on_batch(inputs, labels)
        trained.append([to_numpy(weight) for weight in model.weights])
    whole, factored = trained
    assert [w.shape for w in whole] == [w.shape for w in factored]
    moved = [np.abs(w - f).max() for w, f in zip(whole, factored, strict=True)]
    assert max(moved) < 1e-5, moved


@pytest.mark.parametrize("config_name", ["relu", "glu"])
def test_a_training_step_matches_the_previous_release(config_name):
    # Saved by the release before the factored grid (af741ae), JAX: a
    # `tiny_model(**CONFIGS[config_name])` randomized with seed 21, its
    # training-mode logits on a batch padded on both axes (which also
    # move the running statistics), then the weights after one step of
    # SGD(0.1) on `SparseCategoricalCrossentropy(from_logits=True,
    # ignore_class=0)` with the next target ids as labels, flattened in
    # `model.weights` order.
    configs = {
        "relu": {},
        "glu": dict(activation="glu", pooling="max+attention"),
    }
    saved = np.load(os.path.join(FIXTURES, "pervasive_attention_step.npz"))
    model = tiny_model(**configs[config_name])
    randomize(model, seed=21)
    inputs = {
        name: saved[f"{config_name}_{name}"]
        for name in ("source_ids", "target_ids")
    }
    logits = to_numpy(model(inputs, training=True))
    np.testing.assert_allclose(
        logits, saved[f"{config_name}_logits"], atol=1e-5
    )
    model.compile(
        optimizer=keras.optimizers.SGD(0.1),
        loss=keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, ignore_class=0
        ),
    )
    labels = np.roll(inputs["target_ids"], -1, axis=1)
    model.train_on_batch(inputs, labels)
    weights = np.concatenate([to_numpy(w).ravel() for w in model.weights])
    np.testing.assert_allclose(
        weights, saved[f"{config_name}_trained"], atol=1e-5
    )


def test_bottleneck_terms_sum_to_the_bottleneck_and_need_relu():
    rng = np.random.default_rng(18)
    inputs = rng.normal(size=(2, 3, 5, 10)).astype("float32")
    layer = PervasiveDenseLayer(growth_rate=4, kernel_size=3)
    layer.build(inputs.shape)
    randomize_layer(layer, rng)
    source_mask, target_mask = np.ones((2, 5), bool), np.ones((2, 3), bool)
    normed = layer.norm1(inputs, source_mask, target_mask, training=False)
    whole = layer.conv1(normed)  # (2, 3, 5, c)
    parts = sum(
        layer.bottleneck_term(inputs[..., a:b], a)
        for a, b in [(0, 3), (3, 4), (4, 10)]
    )
    np.testing.assert_allclose(
        to_numpy(parts), to_numpy(whole), rtol=1e-5, atol=1e-5
    )
    glu = PervasiveDenseLayer(growth_rate=4, kernel_size=3, activation="glu")
    glu.build(inputs.shape)
    with pytest.raises(ValueError, match="GLU mixes channels"):
        glu.bottleneck_term(inputs[..., :4], 0)


@pytest.mark.parametrize("kernel_row", [0, 1, 2])
def test_each_kernel_row_reads_its_target_offset(kernel_row):
    # Only row `kernel_row` of the 5 x 5 kernel kept: the new features of
    # target row j are that row applied to row j + kernel_row - 2 alone.
    # The centre row (2) must read the current row (a kernel masking it
    # would give zero new features), rows 0 and 1 the 2 rows before it.
    rng = np.random.default_rng(18)
    [layer], grid, _ = random_dense_block(5, num_layers=1)
    kernel = to_numpy(layer.conv2.kernel)  # (3, 5, c, g)
    probe = np.zeros_like(kernel)
    probe[kernel_row] = kernel[kernel_row]
    layer.conv2.kernel.assign(probe)
    outputs = layer(grid, BLOCK_SOURCE_MASK, BLOCK_TARGET_MASK, training=False)
    weights = reference_weights(layer, rng)
    expected = reference.dense_layer(grid, BLOCK_SOURCE_MASK, weights)
    # The probe has teeth: its new features are not all zero.
    assert np.abs(expected[..., 6:]).max() > 0.1
    np.testing.assert_allclose(to_numpy(outputs), expected, atol=1e-5)


def numpy_alignment(features, source_mask):
    """The paper's alignment view, computed independently in NumPy."""
    batch, target_length, source_length, channels = features.shape
    alignment = np.zeros((batch, target_length, source_length))
    for b in range(batch):
        real = np.flatnonzero(source_mask[b])
        for j in range(target_length):
            for c in range(channels):
                column = features[b, j, real, c]
                # Ties: within a relative 1e-5 plus 1e-6 of the maximum.
                top = column.max()
                winners = real[column >= top - (1e-5 * abs(top) + 1e-6)]
                alignment[b, j, winners] += 1.0 / len(winners) / channels
    return alignment


def test_alignment_is_the_max_pooling_view():
    model = tiny_model()
    randomize(model)
    inputs = random_batch(
        np.random.default_rng(7), SOURCE_LENGTHS, TARGET_LENGTHS
    )
    alignment = to_numpy(model.alignment(inputs))
    source_mask = inputs["source_ids"] != 0
    assert alignment.shape == (3, 4, 5)
    np.testing.assert_allclose(alignment.sum(-1), 1.0, atol=1e-5)
    padding = np.broadcast_to(~source_mask[:, None], alignment.shape)
    assert (alignment[padding] == 0).all()
    features, _ = model._features(
        model, inputs["source_ids"], inputs["target_ids"], training=False
    )
    expected = numpy_alignment(to_numpy(features), source_mask)
    np.testing.assert_allclose(alignment, expected, atol=1e-5)


def test_alignment_shares_a_channel_between_near_ties_only():
    # Channel 0: positions 0 and 2 tie within rounding, 1 is 1e-3 below;
    # channel 1: position 1 alone; position 3 is padding and larger.
    top = np.float32(0.7)
    column = [top, top - np.float32(1e-3), np.nextafter(top, np.float32(0))]
    features = np.array(
        [[[[column[0], 0.1], [column[1], 0.9], [column[2], 0.2], [5.0, 5.0]]]],
        "float32",
    )  # (1, 1, 4, 2)
    source_mask = np.array([[True, True, True, False]])
    alignment = to_numpy(SourcePooling("max").alignment(features, source_mask))
    np.testing.assert_allclose(alignment, [[[0.25, 0.5, 0.25, 0.0]]])
    np.testing.assert_allclose(
        alignment, numpy_alignment(features, source_mask), atol=1e-7
    )


@pytest.mark.parametrize("pooling", POOLINGS)
def test_source_pooling_matches_numpy(pooling):
    rng = np.random.default_rng(8)
    features = rng.normal(size=(2, 3, 4, 5)).astype("float32")
    source_mask = np.array([[1, 1, 1, 0], [1, 1, 0, 0]], bool)
    layer = SourcePooling(pooling)
    pooled = to_numpy(layer(features, source_mask))
    expected = []
    for b in range(2):
        real = features[b][:, source_mask[b]]  # (Ty, n, C)
        n = real.shape[1]
        parts = []
        if "max" in pooling:
            parts.append(real.max(axis=1))
        if "average" in pooling:
            parts.append(real.sum(axis=1) / np.sqrt(n))
        if "attention" in pooling:
            w = to_numpy(layer.attention_score.kernel)[:, 0]
            scores = real @ w  # (Ty, n)
            rho = np.exp(scores - scores.max(axis=1, keepdims=True))
            rho /= rho.sum(axis=1, keepdims=True)
            parts.append(np.sqrt(n) * np.einsum("jn,jnc->jc", rho, real))
        expected.append(np.concatenate(parts, axis=-1))
    np.testing.assert_allclose(pooled, np.stack(expected), atol=1e-5)


def make_reversal_data(rng, size, vocabulary=10, max_length=5):
    """Source: 2-5 tokens + EOS; target: the tokens reversed + EOS."""
    width = max_length + 1
    source = np.zeros((size, width), "int32")
    decoder_inputs = np.zeros((size, width), "int32")
    labels = np.zeros((size, width), "int32")
    for row in range(size):
        length = rng.integers(2, max_length + 1)
        tokens = rng.integers(4, vocabulary, length)
        source[row, :length] = tokens
        source[row, length] = EOS_ID
        reversed_tokens = np.append(tokens[::-1], EOS_ID)
        labels[row, : length + 1] = reversed_tokens
        decoder_inputs[row, 0] = BOS_ID
        decoder_inputs[row, 1 : length + 1] = reversed_tokens[:-1]
    inputs = {"source_ids": source, "target_ids": decoder_inputs}
    return inputs, labels


def test_learns_to_reverse():
    rng = np.random.default_rng(9)
    inputs, labels = make_reversal_data(rng, 1024)
    test_inputs, test_labels = make_reversal_data(rng, 256)
    model = PervasiveAttention(
        10,
        10,
        source_embedding_dim=16,
        target_embedding_dim=16,
        growth_rate=8,
        num_layers=3,
        kernel_size=5,
        dropout=0.0,
    )
    model.compile(
        optimizer=keras.optimizers.Adam(5e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, ignore_class=0
        ),
    )
    model.fit(inputs, labels, batch_size=32, epochs=3, verbose=0)
    predictions = to_numpy(model.predict_on_batch(test_inputs)).argmax(-1)
    real = test_labels != 0
    accuracy = (predictions == test_labels)[real].mean()
    assert accuracy >= 0.9, accuracy
    # Free-running: the package's greedy search through `decode_step`.
    result = greedy_search(model, test_inputs["source_ids"][:64], max_length=6)
    decoded = to_numpy(result.token_ids)[:, 0]  # (64, 6)
    decoded_accuracy = (decoded == test_labels[:64])[real[:64]].mean()
    assert decoded_accuracy >= 0.9, decoded_accuracy


@pytest.mark.parametrize("config", [{}, TIED_REDUCED], ids=["untied", "tied"])
def test_saving_round_trip(tmp_path, config):
    model = tiny_model(pooling="max+attention", **config)
    randomize(model)
    inputs = random_batch(
        np.random.default_rng(10), SOURCE_LENGTHS, TARGET_LENGTHS
    )
    path = os.path.join(tmp_path, "pervasive_attention.keras")
    model.save(path)
    restored = keras.saving.load_model(path)
    assert isinstance(restored, PervasiveAttention)
    assert restored.get_config() == model.get_config()
    np.testing.assert_allclose(
        to_numpy(restored(inputs)), to_numpy(model(inputs)), atol=1e-6
    )


def test_from_preset():
    # Tiny overrides keep the test fast; the rest comes from the preset.
    model = PervasiveAttention.from_preset(
        "pervasive_attention_small",
        source_vocabulary_size=20,
        source_embedding_dim=8,
        target_embedding_dim=6,
        growth_rate=4,
        num_layers=1,
        bottleneck_factor=2,
    )
    assert model.source_vocabulary_size == 20
    assert model.target_vocabulary_size == 8000
    assert model.kernel_size == 3
    assert model.dropout == 0.1
    with pytest.raises(ValueError, match="pervasive_attention_paper"):
        PervasiveAttention.from_preset("nope")


@pytest.mark.parametrize(
    "argument, value",
    [
        ("source_vocabulary_size", 3),
        ("target_vocabulary_size", 2.5),
        ("source_embedding_dim", 0),
        ("growth_rate", -1),
        ("num_layers", 0),
        ("kernel_size", 4),
        ("bottleneck_factor", True),
        ("activation", "tanh"),
        ("pooling", "min"),
        ("dropout", 1.0),
        ("input_channels", 0),
        ("tie_embeddings", 1),
    ],
)
def test_bad_arguments(argument, value):
    with pytest.raises(ValueError, match=f"{argument}={value!r}"):
        tiny_model(**{argument: value})


def test_glu_needs_even_channels():
    with pytest.raises(ValueError, match="growth_rate=3"):
        tiny_model(activation="glu", growth_rate=3)
    with pytest.raises(ValueError, match="input_channels=7"):
        tiny_model(activation="glu", input_channels=7)


def test_encode_needs_max_length():
    model = tiny_model()
    with pytest.raises(ValueError, match="max_length"):
        model.encode(np.ones((1, 3), "int32"))


def test_a_mixed_precision_model_keeps_its_policy_through_a_save(tmp_path):
    model = tiny_model(dtype="mixed_bfloat16")
    assert model.get_config()["dtype"]["config"]["name"] == "mixed_bfloat16"
    model.save(tmp_path / "model.keras")
    loaded = keras.saving.load_model(tmp_path / "model.keras", compile=False)
    assert loaded.grid.dtype_policy.name == "mixed_bfloat16"
    assert loaded.get_config() == model.get_config()


def numpy_tied_logits(model, inputs, rng):
    """A tied, max-pooled ReLU model's logits, all in NumPy (float64)."""
    source_ids, target_ids = inputs["source_ids"], inputs["target_ids"]
    source_mask = source_ids != 0
    embeddings = to_numpy(model.target_embedding.embeddings)  # (V, dt)
    reduction = {}
    if model.input_channels is not None:
        reduction = dict(
            kernel=to_numpy(model.grid.kernel), bias=to_numpy(model.grid.bias)
        )
    grid = reference.input_grid(
        to_numpy(model.source_embedding.embeddings)[source_ids],
        embeddings[target_ids],
        **reduction,
    )
    for layer in model.dense_layers:
        weights = reference_weights(layer, rng)
        grid = reference.dense_layer(grid, source_mask, weights)
    norm = batch_norm_weights(model.output_norm)
    features = reference.activation(reference.batch_norm(grid, **norm), "relu")
    projection = model.prediction_projection
    return reference.tied_logits(
        reference.max_pooling(features, source_mask),
        to_numpy(projection.kernel),
        to_numpy(projection.bias),
        embeddings,
        to_numpy(model.target_embedding.reverse_bias),
    )


@pytest.mark.parametrize("input_channels", [None, 10])
def test_tied_output_is_the_target_embedding(input_channels):
    model = tiny_model(tie_embeddings=True, input_channels=input_channels)
    # Fresh initializers: the two embeddings do not start equal.
    target_embedding = model.target_embedding.embeddings
    source_part = to_numpy(model.source_embedding.embeddings)[:11, :6]
    assert np.abs(source_part - to_numpy(target_embedding)).max() > 1e-3
    randomize(model, seed=19)
    # One V x dt matrix, E, and no kernel onto the vocabulary: the only
    # weight of size V on its last axis is the bias b.
    matrices = [
        weight
        for weight in model.weights
        if tuple(weight.shape) == (TARGET_VOCABULARY, 6)
    ]
    assert len(matrices) == 1 and matrices[0] is target_embedding
    last_axes = [weight.shape[-1] for weight in model.weights]
    assert last_axes.count(TARGET_VOCABULARY) == 1
    assert model.target_embedding.reverse_bias.shape == (TARGET_VOCABULARY,)
    assert model.output_projection is None
    rng = np.random.default_rng(19)
    inputs = random_batch(rng, SOURCE_LENGTHS, TARGET_LENGTHS)
    logits = to_numpy(model(inputs))
    expected = numpy_tied_logits(model, inputs, rng)
    scale = np.abs(expected).max()
    np.testing.assert_allclose(logits, expected, atol=1e-5 * scale)
    # The output layer reads that variable: change E, and the logits
    # follow the NumPy formula with the new E.
    noise = rng.normal(0.0, 0.5, target_embedding.shape)
    target_embedding.assign(to_numpy(target_embedding) + noise)
    changed = to_numpy(model(inputs))
    assert np.abs(changed - logits).max() > 1e-2 * scale
    expected = numpy_tied_logits(model, inputs, rng)
    np.testing.assert_allclose(changed, expected, atol=1e-5 * scale)


def test_parameter_counts_from_first_principles():
    preset = PervasiveAttention.presets["pervasive_attention_small"]
    assert preset["pooling"] == "max"  # no attention-score weights
    vs = preset["source_vocabulary_size"]
    vt = preset["target_vocabulary_size"]
    ds, dt = preset["source_embedding_dim"], preset["target_embedding_dim"]
    g, k = preset["growth_rate"], preset["kernel_size"]
    c = preset["bottleneck_factor"] * g

    def count(tie_embeddings, input_channels):
        # Batch norm: gamma, beta and the two moving statistics.
        f0 = input_channels or ds + dt
        total = vs * ds + vt * dt
        if input_channels:
            total += (ds + dt) * f0 + f0  # 1x1 convolution with a bias
        for index in range(preset["num_layers"]):
            f = f0 + index * g
            # BN, 1x1 conv, BN, the causal (k // 2 + 1) x k kernel
            total += 4 * f + f * c + 4 * c + (k // 2 + 1) * k * c * g
        channels = f0 + preset["num_layers"] * g
        total += 4 * channels  # the final BN
        if tie_embeddings:
            return total + channels * dt + dt + vt  # C -> dt, bias b
        return total + channels * vt + vt

    for tie_embeddings, input_channels in [
        (False, None),
        (True, None),
        (True, 64),
    ]:
        model = PervasiveAttention.from_preset(
            "pervasive_attention_small",
            tie_embeddings=tie_embeddings,
            input_channels=input_channels,
        )
        expected = count(tie_embeddings, input_channels)
        assert model.count_params() == expected, (
            tie_embeddings,
            input_channels,
        )


def test_a_file_of_the_previous_release_still_loads():
    # Saved by the release before `tie_embeddings` and `input_channels`
    # (an untied `output_projection`, a config without the two keys):
    # `PervasiveAttention(13, 11, source_embedding_dim=4,
    # target_embedding_dim=4, growth_rate=2, num_layers=1, kernel_size=3,
    # bottleneck_factor=2, dropout=0.0)` with normal(0, 0.5) weights
    # (moving variances uniform(0.5, 2)); its zip entries recompressed
    # (deflate) to keep it small. The .npz holds inputs and the logits
    # that release computed for them.
    path = os.path.join(FIXTURES, "pervasive_attention_untied.keras")
    with zipfile.ZipFile(path) as archive:
        config = json.loads(archive.read("config.json"))["config"]
    assert not {"tie_embeddings", "input_channels"} & set(config)
    saved = np.load(
        os.path.join(FIXTURES, "pervasive_attention_untied_logits.npz")
    )
    inputs = {
        "source_ids": saved["source_ids"],
        "target_ids": saved["target_ids"],
    }
    model = keras.saving.load_model(path, compile=False)
    assert (model.tie_embeddings, model.input_channels) == (False, None)
    np.testing.assert_allclose(
        to_numpy(model(inputs)), saved["logits"], atol=1e-5
    )
    # The saved weights are what give these logits (the check has teeth).
    fresh = PervasiveAttention.from_config(model.get_config())
    assert np.abs(to_numpy(fresh(inputs)) - saved["logits"]).max() > 1e-2
