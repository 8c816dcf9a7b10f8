import keras
import numpy as np
import pytest

from keras_bahdanau.layers import AdditiveAttention
from tests.numpy_reference import alignment
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


@pytest.mark.parametrize("units", [0, -2, 1.5, None])
def test_invalid_units(units):
    with pytest.raises(ValueError, match="units"):
        AdditiveAttention(units)


def test_wrong_inputs_raise_clearly():
    with pytest.raises(ValueError, match="query, value"):
        AdditiveAttention(3)(np.ones((2, 5), "float32"))
