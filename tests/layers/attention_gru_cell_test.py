import keras
import numpy as np
import pytest

from keras_bahdanau.layers import AttentionDecoder
from keras_bahdanau.layers import AttentionGRUCell
from tests.numpy_reference import decoder_step
from tests.numpy_reference import to_numpy


def _randomize(layer, seed=0):
    """Nonzero weights everywhere (v_a starts at zero in the paper)."""
    rng = np.random.default_rng(seed)
    for weight in layer.weights:
        weight.assign(rng.normal(0, 0.5, weight.shape).astype("float32"))


def _inputs(seed=1, batch=3, steps=4, source_len=5, m=6, context=8):
    rng = np.random.default_rng(seed)
    return (
        rng.normal(size=(batch, steps, m)).astype("float32"),
        rng.normal(size=(batch, source_len, context)).astype("float32"),
        np.arange(source_len)[None, :] < np.array([[5], [3], [1]])[:batch],
    )


@pytest.mark.parametrize("attention_units", [None, 5])
def test_step_matches_equations(attention_units):
    # n' = n (the paper's choice) and n' != n, where the joined product
    # [W_a, U_z, U_r] s_{i-1} is split at other places.
    embedded, annotations, mask = _inputs()
    cell = AttentionGRUCell(7, context_dim=8, attention_units=attention_units)
    cell.build((None, 6))
    _randomize(cell)
    state = np.random.default_rng(2).normal(size=(3, 7)).astype("float32")
    new_state, context, alpha = cell.step(
        cell.project_inputs(embedded[:, 0]),
        state,
        cell.precompute(annotations, mask),
    )
    expected = decoder_step(cell, embedded[:, 0], state, annotations, mask)
    np.testing.assert_allclose(to_numpy(new_state), expected[0], atol=1e-5)
    np.testing.assert_allclose(to_numpy(context), expected[1], atol=1e-5)
    np.testing.assert_allclose(to_numpy(alpha), expected[2], atol=1e-6)


def test_decoder_runs_the_cell_inside_keras_rnn():
    embedded, annotations, mask = _inputs()
    decoder = AttentionDecoder(7, context_dim=8)
    s0 = np.random.default_rng(3).normal(size=(3, 7)).astype("float32")
    outputs = decoder(embedded, annotations, s0, mask)
    _randomize(decoder)
    outputs = to_numpy(decoder(embedded, annotations, s0, mask))
    assert outputs.shape == (3, 4, 7 + 8)
    state = s0
    for i in range(4):
        state, context, _ = decoder_step(
            decoder.cell, embedded[:, i], state, annotations, mask
        )
        np.testing.assert_allclose(outputs[:, i, :7], state, atol=1e-4)
        np.testing.assert_allclose(outputs[:, i, 7:], context, atol=1e-4)


def test_decoder_trains_under_fit_and_round_trips(tmp_path):
    target = keras.Input((None, 6))
    annotations = keras.Input((None, 8))
    s0 = keras.Input((7,))
    mask = keras.Input((None,), dtype="bool")
    outputs = AttentionDecoder(7, context_dim=8)(target, annotations, s0, mask)
    model = keras.Model([target, annotations, s0, mask], outputs)
    model.compile("adam", "mse")
    embedded, memory, source_mask = _inputs()
    x = [embedded, memory, np.zeros((3, 7), "float32"), source_mask]
    history = model.fit(x, np.zeros((3, 4, 15)), epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    path = tmp_path / "decoder.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_allclose(
        to_numpy(loaded(x)), to_numpy(model(x)), atol=1e-6
    )


def test_cell_config_round_trip():
    cell = AttentionGRUCell(5, context_dim=4, attention_units=3)
    clone = AttentionGRUCell.from_config(cell.get_config())
    assert clone.get_config() == cell.get_config()
    assert clone.output_size == 9 and clone.state_size == 5


def test_cell_without_memory_explains_itself():
    cell = AttentionGRUCell(5, context_dim=4)
    rnn = keras.layers.RNN(cell)
    with pytest.raises(RuntimeError, match="AttentionDecoder"):
        rnn(np.zeros((1, 2, 3), "float32"))


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"units": 0, "context_dim": 4}, "units"),
        ({"units": 4, "context_dim": -1}, "context_dim"),
    ],
)
def test_invalid_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        AttentionGRUCell(**kwargs)
