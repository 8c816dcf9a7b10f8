import keras
import numpy as np
import pytest

from keras_bahdanau.layers import MaxoutDense
from tests.numpy_reference import to_numpy


def test_matches_pairwise_max_of_the_paper():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 3, 7)).astype("float32")
    layer = MaxoutDense(5, num_pieces=2, bias_initializer="glorot_uniform")
    y = to_numpy(layer(x))
    W, b = to_numpy(layer.kernel), to_numpy(layer.bias)
    t = x @ W + b  # t~, 2l components
    # t_k = max(t~_{2k-1}, t~_{2k}) in the paper's 1-based indexing.
    expected = np.maximum(t[..., 0::2], t[..., 1::2])
    assert y.shape == (4, 3, 5)
    np.testing.assert_allclose(y, expected, atol=1e-5)


def test_three_pieces():
    x = np.random.rand(2, 4).astype("float32")
    layer = MaxoutDense(2, num_pieces=3, use_bias=False)
    y = to_numpy(layer(x))
    t = x @ to_numpy(layer.kernel)
    np.testing.assert_allclose(y, t.reshape(2, 2, 3).max(-1), atol=1e-6)
    assert layer.bias is None


def test_config_round_trip_and_saving(tmp_path):
    inputs = keras.Input((6,))
    model = keras.Model(inputs, MaxoutDense(3, num_pieces=4)(inputs))
    path = tmp_path / "maxout.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    x = np.random.rand(2, 6).astype("float32")
    np.testing.assert_allclose(
        to_numpy(loaded(x)), to_numpy(model(x)), atol=1e-7
    )
    layer = model.layers[-1]
    assert MaxoutDense.from_config(layer.get_config()).get_config() == (
        layer.get_config()
    )


@pytest.mark.parametrize(
    "kwargs, name",
    [({"units": 0}, "units"), ({"units": 3, "num_pieces": 1}, "num_pieces")],
)
def test_invalid_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        MaxoutDense(**kwargs)
