import os

import keras
import numpy as np
import pytest
from keras import ops

from keras_bahdanau.layers.bidirectional_rnn import BidirectionalRNN

# Right-padded batch: lengths 5, 3 and 1.
MASK = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]], dtype=bool)


def to_numpy(x):
    return ops.convert_to_numpy(x)


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def numpy_brnn(x, length, weights, sigma):
    """The seed's definition, written out for one unpadded sequence.

    `weights` holds W^f, U^f, b^f, W^b, U^b, b^b as (m, m), (m, n), (m,)
    arrays and V^f, V^b, c as (p, m), (p, m), (p,): the matrix-vector
    orientation of the equations, not Keras's storage.
    """
    x = x[:length]
    m = weights["Wf"].shape[0]
    forward = np.zeros((length, m))
    h = np.zeros(m)  # h^f_0 = 0
    for t in range(length):
        h = sigma(weights["Wf"] @ h + weights["Uf"] @ x[t] + weights["bf"])
        forward[t] = h
    backward = np.zeros((length, m))
    h = np.zeros(m)  # h^b_{T+1} = 0
    for t in reversed(range(length)):
        h = sigma(weights["Wb"] @ h + weights["Ub"] @ x[t] + weights["bb"])
        backward[t] = h
    return forward @ weights["Vf"].T + backward @ weights["Vb"].T + weights["c"]


def layer_weights(layer):
    """Reads the layer's weights in the orientation of the equations."""
    f, b = layer.forward_cell, layer.backward_cell
    return {
        "Wf": to_numpy(f.recurrent_kernel).T,
        "Uf": to_numpy(f.kernel).T,
        "bf": to_numpy(f.bias),
        "Wb": to_numpy(b.recurrent_kernel).T,
        "Ub": to_numpy(b.kernel).T,
        "bb": to_numpy(b.bias),
        "Vf": to_numpy(layer.forward_kernel).T,
        "Vb": to_numpy(layer.backward_kernel).T,
        "c": to_numpy(layer.bias),
    }


@pytest.mark.parametrize(
    "activation, sigma", [("tanh", np.tanh), ("sigmoid", sigmoid)]
)
def test_matches_the_equations_with_masks(activation, sigma):
    layer = BidirectionalRNN(
        keras.layers.SimpleRNNCell(
            4, activation=activation, bias_initializer="random_normal"
        ),
        output_units=3,
        bias_initializer="random_normal",
    )
    x = np.random.default_rng(0).normal(size=(3, 5, 2)).astype("float32")
    outputs = to_numpy(layer(x, mask=MASK))
    weights = layer_weights(layer)
    # Two directions with their own weights (not shared, not equal).
    assert not np.allclose(weights["Uf"], weights["Ub"])
    for row, length in enumerate(MASK.sum(axis=1)):
        expected = numpy_brnn(x[row], length, weights, sigma)
        np.testing.assert_allclose(outputs[row, :length], expected, atol=1e-5)
        np.testing.assert_array_equal(outputs[row, length:], 0.0)


def test_without_mask_matches_the_equations():
    layer = BidirectionalRNN(keras.layers.SimpleRNNCell(3), output_units=2)
    x = np.random.default_rng(1).normal(size=(2, 4, 3)).astype("float32")
    outputs = to_numpy(layer(x))
    weights = layer_weights(layer)
    for row in range(2):
        expected = numpy_brnn(x[row], 4, weights, np.tanh)
        np.testing.assert_allclose(outputs[row], expected, atol=1e-5)


@pytest.mark.parametrize(
    "cell",
    [
        keras.layers.GRUCell(4, reset_after=False),
        keras.layers.LSTMCell(4),
    ],
    ids=["gru", "lstm"],
)
def test_other_cells_ignore_padding(cell):
    layer = BidirectionalRNN(cell, output_units=3)
    rng = np.random.default_rng(2)
    x = rng.normal(size=(3, 5, 2)).astype("float32")
    outputs = to_numpy(layer(x, mask=MASK))
    assert isinstance(layer.backward_cell, type(cell))
    assert layer.backward_cell is not layer.forward_cell
    # Other values in the padded steps must not change the real outputs:
    # the backward pass starts at the last real token.
    other = np.where(MASK[..., None], x, rng.normal(size=x.shape) * 10)
    other_outputs = to_numpy(layer(other.astype("float32"), mask=MASK))
    np.testing.assert_allclose(outputs, other_outputs, atol=1e-5)
    np.testing.assert_array_equal(outputs[~MASK], 0.0)


def test_config_round_trip_and_cell_config_argument():
    layer = BidirectionalRNN(
        keras.layers.serialize(keras.layers.GRUCell(5)),
        output_units=2,
        activation="softmax",
        use_bias=False,
    )
    layer.build((None, None, 3))
    config = layer.get_config()
    clone = BidirectionalRNN.from_config(config)
    clone.build((None, None, 3))
    assert clone.get_config() == config
    assert isinstance(clone.forward_cell, keras.layers.GRUCell)
    assert clone.bias is None
    assert len(clone.weights) == len(layer.weights)


def test_saving_round_trip_with_embedding_mask(tmp_path):
    inputs = keras.Input(shape=(None,), dtype="int32")
    x = keras.layers.Embedding(10, 4, mask_zero=True)(inputs)
    x = BidirectionalRNN(keras.layers.GRUCell(6), output_units=3)(x)
    model = keras.Model(inputs, x)
    ids = np.array([[3, 4, 5, 0], [6, 7, 0, 0]], "int32")
    path = os.path.join(tmp_path, "brnn.keras")
    model.save(path)
    restored = keras.saving.load_model(path)
    outputs = to_numpy(model(ids))
    np.testing.assert_allclose(to_numpy(restored(ids)), outputs, atol=1e-6)
    np.testing.assert_array_equal(outputs[ids == 0], 0.0)


def test_trains_and_propagates_mask():
    inputs = keras.Input(shape=(None,), dtype="int32")
    x = keras.layers.Embedding(6, 4, mask_zero=True)(inputs)
    x = BidirectionalRNN(keras.layers.SimpleRNNCell(8), output_units=2)(x)
    # A downstream RNN would fail or misbehave without the mask.
    assert x._keras_mask is not None
    model = keras.Model(inputs, x)
    model.compile(
        optimizer=keras.optimizers.Adam(0.05),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    rng = np.random.default_rng(3)
    ids = rng.integers(1, 6, (64, 5)).astype("int32")
    # The label of a token is whether its right neighbour is larger: the
    # forward direction alone cannot know it.
    labels = np.zeros_like(ids)
    labels[:, :-1] = ids[:, 1:] > ids[:, :-1]
    history = model.fit(ids, labels, epochs=15, batch_size=64, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < 0.5 * losses[0]


def test_bad_arguments():
    cell = keras.layers.SimpleRNNCell(3)
    with pytest.raises(ValueError, match="output_units=0"):
        BidirectionalRNN(cell, output_units=0)
    with pytest.raises(ValueError, match="not a recurrent layer"):
        BidirectionalRNN(keras.layers.GRU(3), output_units=2)
    with pytest.raises(ValueError, match="must be a Keras RNN cell"):
        BidirectionalRNN(keras.layers.Dense(3), output_units=2)
    with pytest.raises(ValueError, match="different cell object"):
        BidirectionalRNN(cell, output_units=2, backward_cell=cell)


def test_output_projections_start_independent():
    # V^f and V^b have the same shape: drawn from one initializer stream
    # they used to start equal.
    layer = BidirectionalRNN(keras.layers.SimpleRNNCell(8), output_units=8)
    layer.build((None, 5, 4))
    forward = keras.ops.convert_to_numpy(layer.forward_kernel).ravel()
    backward = keras.ops.convert_to_numpy(layer.backward_kernel).ravel()
    assert abs(np.corrcoef(forward, backward)[0, 1]) < 0.9
    seeded = BidirectionalRNN(
        keras.layers.SimpleRNNCell(8),
        output_units=8,
        kernel_initializer=keras.initializers.GlorotUniform(seed=3),
    )
    seeded.build((None, 5, 4))
    assert not np.allclose(
        keras.ops.convert_to_numpy(seeded.forward_kernel),
        keras.ops.convert_to_numpy(seeded.backward_kernel),
    )
