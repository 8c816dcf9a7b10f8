import keras
import numpy as np
import pytest

from keras_bahdanau.layers import AdditiveAttention
from keras_bahdanau.layers import additive_attention
from tests.numpy_reference import alignment
from tests.numpy_reference import alignment_weight_gradients
from tests.numpy_reference import sgd_step_gradients
from tests.numpy_reference import to_numpy


def _weights(layer):
    return (
        to_numpy(layer.query_kernel),
        to_numpy(layer.key_kernel),
        to_numpy(layer.score_vector),
    )


def _layer(units=6):
    # A nonzero v_a: with the paper's zeros every alignment is uniform.
    return AdditiveAttention(units, score_initializer="glorot_uniform")


def test_matches_equations_with_mask():
    rng = np.random.default_rng(0)
    query = rng.normal(size=(3, 5)).astype("float32")
    value = rng.normal(size=(3, 7, 4)).astype("float32")
    mask = np.arange(7)[None, :] < np.array([[7], [4], [1]])
    layer = _layer()
    context, alpha = layer(
        [query, value], mask=[None, mask], return_attention_scores=True
    )
    expected_context, expected_alpha = alignment(
        query, value, *_weights(layer), mask
    )
    np.testing.assert_allclose(to_numpy(alpha), expected_alpha, atol=1e-6)
    np.testing.assert_allclose(to_numpy(context), expected_context, atol=1e-5)
    np.testing.assert_allclose(to_numpy(alpha).sum(-1), 1.0, atol=1e-6)
    assert np.all(to_numpy(alpha)[~mask] == 0.0)


def test_precomputed_keys_give_the_same_result():
    rng = np.random.default_rng(1)
    query = rng.normal(size=(2, 5)).astype("float32")
    value = rng.normal(size=(2, 6, 4)).astype("float32")
    layer = _layer()
    direct = layer([query, value])
    keys = layer.compute_keys(value)
    assert tuple(keys.shape) == (2, 6, 6)
    cached = layer([query, value, keys])
    np.testing.assert_allclose(to_numpy(cached), to_numpy(direct), atol=1e-6)


@pytest.mark.parametrize("query_shape", [(3, 5), (3, 2, 5)])
def test_attend_takes_the_projected_query(query_shape):
    # `attend(W_a q, ...)` against the equations (A.1.2), with keys of the
    # values and values of another width, as the decoder cell passes them.
    rng = np.random.default_rng(5)
    query = rng.normal(size=query_shape).astype("float32")
    value = rng.normal(size=(3, 7, 4)).astype("float32")
    wider = rng.normal(size=(3, 7, 9)).astype("float32")
    mask = np.arange(7)[None, :] < np.array([[7], [4], [1]])
    layer = _layer()
    layer.build([query.shape, value.shape])
    W_a, U_a, v_a = _weights(layer)
    context, alpha = layer.attend(
        query @ W_a, wider, layer.compute_keys(value), mask
    )
    single = len(query_shape) == 2
    queries = query[:, None] if single else query
    for i in range(queries.shape[1]):
        _, expected_alpha = alignment(queries[:, i], value, W_a, U_a, v_a, mask)
        got_alpha = to_numpy(alpha) if single else to_numpy(alpha)[:, i]
        got_context = to_numpy(context) if single else to_numpy(context)[:, i]
        np.testing.assert_allclose(got_alpha, expected_alpha, atol=1e-6)
        np.testing.assert_allclose(
            got_context,
            np.einsum("bj,bjd->bd", expected_alpha, wider),
            atol=1e-5,
        )


def test_sequence_of_queries_equals_one_step_at_a_time():
    rng = np.random.default_rng(2)
    queries = rng.normal(size=(2, 3, 5)).astype("float32")
    value = rng.normal(size=(2, 6, 4)).astype("float32")
    mask = np.arange(6)[None, :] < np.array([[6], [2]])
    layer = _layer()
    context, alpha = layer(
        [queries, value], mask=[None, mask], return_attention_scores=True
    )
    assert tuple(context.shape) == (2, 3, 4)
    assert tuple(alpha.shape) == (2, 3, 6)
    for i in range(3):
        step_context, step_alpha = layer(
            [queries[:, i], value],
            mask=[None, mask],
            return_attention_scores=True,
        )
        np.testing.assert_allclose(
            to_numpy(context)[:, i], to_numpy(step_context), atol=1e-6
        )
        np.testing.assert_allclose(
            to_numpy(alpha)[:, i], to_numpy(step_alpha), atol=1e-6
        )


def test_fully_masked_row_gives_zeros_not_nan():
    value = np.ones((2, 4, 3), "float32")
    mask = np.array([[True, True, False, False], [False] * 4])
    context, alpha = _layer()(
        [np.ones((2, 5), "float32"), value],
        mask=[None, mask],
        return_attention_scores=True,
    )
    context, alpha = to_numpy(context), to_numpy(alpha)
    assert np.all(np.isfinite(context)) and np.all(np.isfinite(alpha))
    np.testing.assert_array_equal(alpha[1], 0.0)
    np.testing.assert_array_equal(context[1], 0.0)
    np.testing.assert_allclose(alpha[0].sum(), 1.0, atol=1e-6)


def test_paper_initialization_gives_uniform_first_alignment():
    layer = AdditiveAttention(4)  # v_a = 0
    _, alpha = layer(
        [np.ones((1, 3), "float32"), np.random.rand(1, 5, 2)],
        return_attention_scores=True,
    )
    np.testing.assert_allclose(to_numpy(alpha), 0.2, atol=1e-7)


def test_get_config_round_trip_and_gradients():
    layer = AdditiveAttention(3, kernel_initializer="ones", name="attn")
    clone = AdditiveAttention.from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()
    query = keras.Input((5,))
    value = keras.Input((None, 4))
    model = keras.Model([query, value], _layer(3)([query, value]))
    model.compile("sgd", "mse")
    history = model.fit(
        [np.random.rand(8, 5), np.random.rand(8, 6, 4)],
        np.random.rand(8, 4),
        epochs=2,
        verbose=0,
    )
    assert np.isfinite(history.history["loss"]).all()
    assert len(model.trainable_weights) == 3


@pytest.mark.parametrize("rematerialized", [False, True])
def test_training_gradients_match_equations(rematerialized, monkeypatch):
    # In training, large score tensors are rematerialized (keras.remat) in
    # the backward pass; the gradients must be those of A.1.2 either way.
    # One SGD step with learning rate 1 on the loss sum(c * upstream)
    # moves each weight by minus its gradient.
    if rematerialized:
        monkeypatch.setattr(additive_attention, "REMAT_MIN_ELEMENTS", 0)
    rng = np.random.default_rng(3)
    query = rng.normal(size=(2, 5)).astype("float32")
    value = rng.normal(size=(2, 6, 4)).astype("float32")
    upstream = rng.normal(size=(2, 4)).astype("float32")
    query_input = keras.Input((5,))
    value_input = keras.Input((6, 4))
    layer = _layer(3)
    model = keras.Model(
        [query_input, value_input], layer([query_input, value_input])
    )
    weights = [layer.query_kernel, layer.key_kernel, layer.score_vector]
    before, steps = sgd_step_gradients(model, weights, [query, value], upstream)
    expected = alignment_weight_gradients(query, value, *before, upstream)
    for name, step, gradient in zip(
        ("W_a", "U_a", "v_a"), steps, expected, strict=True
    ):
        np.testing.assert_allclose(
            step, gradient, rtol=1e-4, atol=1e-5, err_msg=name
        )


def test_rematerializes_only_large_or_unknown_scores():
    # Only the shapes are read: symbolic tensors, no memory.
    small = (keras.KerasTensor((32, 1, 256)), keras.KerasTensor((32, 20, 256)))
    large = (
        keras.KerasTensor((2048, 1, 8)),
        keras.KerasTensor((2048, 50, 1000)),
    )
    assert not additive_attention._worth_rematerializing(*small)
    assert additive_attention._worth_rematerializing(*large)
    unknown = (keras.KerasTensor((None, 1, 8)), keras.KerasTensor((4, 6, 8)))
    assert additive_attention._worth_rematerializing(*unknown)


def test_mixed_precision_training_step(monkeypatch):
    # bfloat16 compute, float32 weights and softmax; the rematerialized
    # scores run in training.
    monkeypatch.setattr(additive_attention, "REMAT_MIN_ELEMENTS", 0)
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        layer = _layer(3)
        context, alpha = layer(
            [np.ones((2, 5)), np.ones((2, 6, 4))], return_attention_scores=True
        )
        assert keras.backend.standardize_dtype(context.dtype) == "bfloat16"
        assert keras.backend.standardize_dtype(alpha.dtype) == "float32"
        query = keras.Input((5,))
        value = keras.Input((6, 4))
        model = keras.Model([query, value], layer([query, value]))
        model.compile("sgd", "mse")
        before = _weights(layer)
        history = model.fit(
            [np.random.rand(4, 5), np.random.rand(4, 6, 4)],
            np.random.rand(4, 4),
            verbose=0,
        )
        assert np.isfinite(history.history["loss"]).all()
        assert all(w.dtype == "float32" for w in layer.weights)
        assert not np.allclose(_weights(layer)[2], before[2])  # v_a learnt
    finally:
        keras.mixed_precision.set_global_policy("float32")


@pytest.mark.parametrize("units", [0, -2, 1.5, None])
def test_invalid_units(units):
    with pytest.raises(ValueError, match="units"):
        AdditiveAttention(units)


def test_wrong_inputs_raise_clearly():
    with pytest.raises(ValueError, match="query, value"):
        AdditiveAttention(3)(np.ones((2, 5), "float32"))
