import keras
import numpy as np
import pytest

from keras_bahdanau.layers import AttentionGRUCell
from keras_bahdanau.layers import ProjectedGRUCell
from keras_bahdanau.layers import ProjectedRNN
from tests.numpy_reference import sgd_step_gradients
from tests.numpy_reference import to_numpy


def _sequences():
    rng = np.random.default_rng(0)
    inputs = rng.normal(size=(3, 6, 5)).astype("float32")
    # Right-padded: 6, 4 and 1 real steps.
    mask = np.arange(6)[None, :] < np.array([6, 4, 1])[:, None]
    return inputs, mask


def _pair(reset_after, go_backwards=False, **cell_arguments):
    """`keras.layers.GRU` and a `ProjectedRNN` with the same weights."""
    arguments = {"return_sequences": True, "return_state": True}
    gru = keras.layers.GRU(
        4, reset_after=reset_after, go_backwards=go_backwards,
        **cell_arguments, **arguments,
    )  # fmt: skip
    projected = ProjectedRNN(
        ProjectedGRUCell(4, reset_after=reset_after, **cell_arguments),
        go_backwards=go_backwards,
        **arguments,
    )
    inputs, _ = _sequences()
    gru(inputs)
    projected(inputs)
    rng = np.random.default_rng(1)
    for a, b in zip(gru.weights, projected.weights, strict=True):
        assert a.shape == b.shape  # the same layout: kernel, recurrent, bias
        values = rng.normal(scale=0.5, size=a.shape).astype("float32")
        a.assign(values)
        b.assign(values)
    return gru, projected


@pytest.mark.parametrize("reset_after", [False, True])
@pytest.mark.parametrize("go_backwards", [False, True])
def test_same_function_as_keras_gru(reset_after, go_backwards):
    gru, projected = _pair(reset_after, go_backwards)
    inputs, mask = _sequences()
    expected = gru(inputs, mask=mask)
    got = projected(inputs, mask=mask)
    for a, b in zip(expected, got, strict=True):
        np.testing.assert_allclose(to_numpy(b), to_numpy(a), atol=1e-5)


def test_paper_equations_in_numpy():
    """One step of the paper's form, computed independently (Cho et al.
    2014, eq. 5-8, with Keras's `z`: the share of the old state)."""
    cell = ProjectedGRUCell(4, reset_after=False, bias_initializer="ones")
    cell.build((None, 5))
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2, 5)).astype("float32")
    h = rng.normal(size=(2, 4)).astype("float32")
    W, U, b = (to_numpy(v) for v in (cell.kernel, cell.recurrent_kernel,
                                     cell.bias))  # fmt: skip

    def sigmoid(a):
        return 1 / (1 + np.exp(-a))

    z = sigmoid(x @ W[:, :4] + b[:4] + h @ U[:, :4])
    r = sigmoid(x @ W[:, 4:8] + b[4:8] + h @ U[:, 4:8])
    candidate = np.tanh(x @ W[:, 8:] + b[8:] + (r * h) @ U[:, 8:])
    expected = z * h + (1 - z) * candidate
    state, _ = cell(cell.project_inputs(x), [h])
    np.testing.assert_allclose(to_numpy(state), expected, atol=1e-5)


def test_recurrent_dropout_draws_as_keras_does():
    gru, projected = _pair(False, recurrent_dropout=0.5, seed=3)
    inputs, _ = _sequences()
    expected = gru(inputs, training=True)[0]
    got = projected(inputs, training=True)[0]
    np.testing.assert_allclose(to_numpy(got), to_numpy(expected), atol=1e-5)
    # Dropout in training only.
    assert not np.allclose(to_numpy(got), to_numpy(projected(inputs)[0]))


def test_serialization_in_bidirectional():
    layer = keras.layers.Bidirectional(
        ProjectedRNN(ProjectedGRUCell(4, reset_after=False),
                     return_sequences=True)
    )  # fmt: skip
    inputs, mask = _sequences()
    outputs = layer(inputs, mask=mask)
    assert tuple(outputs.shape) == (3, 6, 8)
    # The backward copy is built from the forward layer's config.
    assert isinstance(layer.backward_layer.cell, ProjectedGRUCell)
    assert layer.backward_layer.go_backwards
    restored = keras.layers.Bidirectional.from_config(layer.get_config())
    restored(inputs, mask=mask)
    restored.set_weights(layer.get_weights())
    np.testing.assert_allclose(
        to_numpy(restored(inputs, mask=mask)), to_numpy(outputs), atol=1e-6
    )


def test_refuses_what_it_cannot_compute():
    with pytest.raises(ValueError, match="dropout=0.2"):
        ProjectedGRUCell(4, dropout=0.2)
    with pytest.raises(ValueError, match="project_inputs"):
        ProjectedRNN(keras.layers.GRUCell(4))


def test_the_decoder_cell_projects_its_inputs_too():
    rnn = ProjectedRNN(AttentionGRUCell(4, context_dim=6))
    assert isinstance(rnn, keras.layers.RNN)


def _gradients(layer, inputs, mask, upstream):
    """`d sum(outputs * upstream) / d weights` of an RNN's sequences."""
    sequences = keras.Input(inputs.shape[1:])
    padding = keras.Input(mask.shape[1:], dtype="bool")
    model = keras.Model([sequences, padding], layer(sequences, mask=padding)[0])
    return sgd_step_gradients(model, layer.weights, [inputs, mask], upstream)[1]


@pytest.mark.parametrize("reset_after", [False, True])
def test_same_gradients_as_keras_gru(reset_after):
    # The recurrent kernel is split by gate once per sequence, outside the
    # loop (`SplitRecurrentKernel`): its gradient must still be the sum of
    # every step's, as `keras.layers.GRU` computes it.
    gru, projected = _pair(reset_after)
    inputs, mask = _sequences()
    upstream = np.random.default_rng(5).normal(size=(3, 6, 4))
    expected = _gradients(gru, inputs, mask, upstream.astype("float32"))
    got = _gradients(projected, inputs, mask, upstream.astype("float32"))
    names = ("kernel", "recurrent", "bias")
    for name, a, b in zip(names, expected, got, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5, err_msg=name)
