import keras
import numpy as np
import pytest

from keras_bahdanau.layers import ContextGRUCell
from tests.numpy_reference import sigmoid
from tests.numpy_reference import to_numpy

N, M, K = 7, 6, 5  # units, embedding size, context size


def cho_decoder_step(cell, e_prev, h_prev, c):
    """Cho et al. (2014), appendix A.2, one step, from the paper.

    The packed kernels are split into the paper's matrices, columns
    `[z', r', candidate]`; each equation is then written as printed.
    """
    n = cell.units
    W, U, C = (
        to_numpy(w)
        for w in (cell.kernel, cell.recurrent_kernel, cell.context_kernel)
    )
    b = to_numpy(cell.bias)
    W_z, W_r, W_h = W[:, :n], W[:, n : 2 * n], W[:, 2 * n :]
    U_z, U_r, U_h = U[:, :n], U[:, n : 2 * n], U[:, 2 * n :]
    C_z, C_r, C_h = C[:, :n], C[:, n : 2 * n], C[:, 2 * n :]
    b_z, b_r, b_h = b[:n], b[n : 2 * n], b[2 * n :]
    z = sigmoid(e_prev @ W_z + h_prev @ U_z + c @ C_z + b_z)
    r = sigmoid(e_prev @ W_r + h_prev @ U_r + c @ C_r + b_r)
    candidate = np.tanh(e_prev @ W_h + b_h + r * (h_prev @ U_h + c @ C_h))
    return z * h_prev + (1 - z) * candidate


def _cell(**kwargs):
    cell = ContextGRUCell(N, context_dim=K, **kwargs)
    cell.build((None, M))
    rng = np.random.default_rng(0)
    for weight in cell.weights:
        weight.assign(rng.normal(0, 0.5, weight.shape).astype("float32"))
    return cell


def _data(batch=3, steps=4, seed=1):
    rng = np.random.default_rng(seed)
    return (
        rng.normal(size=(batch, steps, M)).astype("float32"),  # e(y_{t-1})
        rng.normal(size=(batch, N)).astype("float32"),  # h'_0
        rng.normal(size=(batch, K)).astype("float32"),  # c
    )


def test_step_matches_equations():
    cell = _cell()
    embedded, h0, c = _data()
    state = cell.step(
        cell.project_inputs(embedded[:, 0]), h0, cell.precompute(c)
    )
    expected = cho_decoder_step(cell, embedded[:, 0], h0, c)
    np.testing.assert_allclose(to_numpy(state), expected, atol=1e-5)


def test_reset_gate_scales_the_context_term_of_the_candidate():
    # r' -> 0 (a very negative reset bias): the candidate is
    # tanh(W' e + b), so the candidate's C must not matter; outside the
    # reset gate, as in RNNsearch's cell, it would.
    cell = _cell()
    bias = to_numpy(cell.bias)
    bias[N : 2 * N] = -1e4
    cell.bias.assign(bias)
    embedded, h0, c = _data()
    inputs = cell.project_inputs(embedded[:, 0])
    before = to_numpy(cell.step(inputs, h0, cell.precompute(c)))
    kernel = to_numpy(cell.context_kernel)
    kernel[:, 2 * N :] *= 10.0
    cell.context_kernel.assign(kernel)
    after = to_numpy(cell.step(inputs, h0, cell.precompute(c)))
    np.testing.assert_allclose(after, before, atol=1e-6)


def test_runs_inside_keras_rnn():
    cell = _cell()
    embedded, h0, c = _data()
    rnn = keras.layers.RNN(cell, return_sequences=True, return_state=True)
    states, last_state, last_context = rnn(embedded, initial_state=[h0, c])
    assert tuple(states.shape) == (3, 4, N)
    state = h0
    for t in range(4):
        state = cho_decoder_step(cell, embedded[:, t], state, c)
        np.testing.assert_allclose(to_numpy(states[:, t]), state, atol=1e-4)
    np.testing.assert_allclose(to_numpy(last_state), state, atol=1e-4)
    np.testing.assert_allclose(to_numpy(last_context), c, atol=1e-6)


def test_rnn_without_context_explains_itself():
    rnn = keras.layers.RNN(ContextGRUCell(N, context_dim=K))
    with pytest.raises(ValueError, match="initial_state"):
        rnn(np.zeros((1, 2, M), "float32"))


def _functional_decoder():
    embedded = keras.Input((None, M))
    h0 = keras.Input((N,))
    c = keras.Input((K,))
    rnn = keras.layers.RNN(ContextGRUCell(N, context_dim=K), True)
    return keras.Model([embedded, h0, c], rnn(embedded, initial_state=[h0, c]))


def test_trains_under_fit_and_round_trips(tmp_path):
    model = _functional_decoder()
    model.compile(keras.optimizers.SGD(0.1), "mse")
    x = list(_data())
    cell = model.layers[-1].cell
    context_kernel = to_numpy(cell.context_kernel)
    history = model.fit(x, np.ones((3, 4, N)), epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    # The gradient reaches C through the state that carries c.
    assert not np.allclose(to_numpy(cell.context_kernel), context_kernel)
    path = tmp_path / "decoder.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded.layers[-1].cell, ContextGRUCell)
    np.testing.assert_allclose(
        to_numpy(loaded(x)), to_numpy(model(x)), atol=1e-6
    )


def test_config_round_trip_and_sizes():
    cell = ContextGRUCell(5, context_dim=4, kernel_initializer="zeros")
    clone = ContextGRUCell.from_config(cell.get_config())
    assert clone.get_config() == cell.get_config()
    assert clone.state_size == [5, 4] and clone.output_size == 5
    clone.build((None, 3))
    shapes = {w.name: tuple(w.shape) for w in clone.weights}
    assert shapes == {
        "kernel": (3, 15),
        "recurrent_kernel": (5, 15),
        "context_kernel": (4, 15),
        "bias": (15,),
    }


def test_kernels_start_independent():
    # W' and C come from one initializer argument: each draws its own.
    cell = ContextGRUCell(8, context_dim=8, kernel_initializer="he_normal")
    cell.build((None, 8))
    a = to_numpy(cell.kernel).ravel()
    b = to_numpy(cell.context_kernel).ravel()
    assert abs(np.corrcoef(a, b)[0, 1]) < 0.9


def test_step_under_mixed_bfloat16():
    cell = ContextGRUCell(N, context_dim=K, dtype="mixed_bfloat16")
    cell.build((None, M))
    embedded, h0, c = _data()
    state = cell.step(
        cell.project_inputs(embedded[:, 0]), h0, cell.precompute(c)
    )
    assert keras.backend.standardize_dtype(state.dtype) == "bfloat16"
    np.testing.assert_allclose(
        to_numpy(state).astype("float32"),
        cho_decoder_step(cell, embedded[:, 0], h0, c),
        atol=0.05,
    )


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"units": 0, "context_dim": 4}, "units=0"),
        ({"units": 4, "context_dim": -1}, "context_dim=-1"),
        ({"units": 4.0, "context_dim": 4}, "units=4.0"),
        ({"units": 4, "context_dim": True}, "context_dim=True"),
    ],
)
def test_invalid_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ContextGRUCell(**kwargs)
