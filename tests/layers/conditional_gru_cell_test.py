import keras
import numpy as np
import pytest

from keras_bahdanau.layers import AttentionGRUCell
from keras_bahdanau.layers import ContextGRUCell


@pytest.mark.parametrize("cell_class", [AttentionGRUCell, ContextGRUCell])
def test_shared_weights_and_input_projection(cell_class):
    cell = cell_class(4, context_dim=6, kernel_initializer="glorot_uniform")
    cell.build((None, 5))
    # The packed [z, r, candidate] layout of the base, in creation order.
    shapes = {w.path.split("/")[-1]: tuple(w.shape) for w in cell.weights[:4]}
    assert shapes == {
        "kernel": (5, 12),
        "recurrent_kernel": (4, 12),
        "context_kernel": (6, 12),
        "bias": (12,),
    }
    rng = np.random.default_rng(0)
    cell.bias.assign(rng.normal(size=12).astype("float32"))
    inputs = rng.normal(size=(2, 3, 5)).astype("float32")
    kernel = keras.ops.convert_to_numpy(cell.kernel)
    bias = keras.ops.convert_to_numpy(cell.bias)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(cell.project_inputs(inputs)),
        inputs @ kernel + bias,
        rtol=1e-5,
        atol=1e-6,
    )
    # Each kernel draws its own values (W and C are not one stream).
    context = keras.ops.convert_to_numpy(cell.context_kernel)
    assert not np.allclose(kernel[:5, :], context[:5, :])
    config = cell.get_config()
    assert (config["units"], config["context_dim"]) == (4, 6)
    assert cell_class.from_config(config).get_config() == config
