import contextlib

import keras
import numpy as np
import pytest

from keras_bahdanau.layers import AttentionDecoder
from keras_bahdanau.layers import AttentionGRUCell
from keras_bahdanau.layers import ProjectedGRUCell
from keras_bahdanau.layers import ProjectedRNN
from tests.numpy_reference import sgd_step_gradients
from tests.numpy_reference import to_numpy


def _inputs():
    rng = np.random.default_rng(0)
    inputs = rng.normal(size=(3, 6, 5)).astype("float32")
    # Right-padded: 6, 4 and 1 real steps.
    mask = np.arange(6)[None, :] < np.array([6, 4, 1])[:, None]
    return inputs, mask


def _both_loops(rnn, inputs, mask, training=False):
    """The eager loop and `keras.layers.RNN`'s generic one, same inputs."""
    rnn(inputs)  # builds
    sequences = rnn.cell.project_inputs(keras.ops.convert_to_tensor(inputs))
    state = rnn.get_initial_state(batch_size=inputs.shape[0])
    rnn._maybe_config_dropout_masks(rnn.cell, sequences[:, 0, :], state)
    mask = None if mask is None else keras.ops.convert_to_tensor(mask)
    eager = rnn._eager_loop(sequences, state, mask, training=training)
    generic = keras.layers.RNN.inner_loop(
        rnn, sequences, state, mask, training=training
    )
    rnn._maybe_reset_dropout_masks(rnn.cell)
    return eager, generic


def _assert_same(eager, generic):
    last, outputs, states = eager
    np.testing.assert_allclose(to_numpy(last), to_numpy(generic[0]), atol=1e-6)
    np.testing.assert_allclose(
        to_numpy(outputs), to_numpy(generic[1]), atol=1e-6
    )
    for a, b in zip(states, generic[2], strict=True):
        np.testing.assert_allclose(to_numpy(a), to_numpy(b), atol=1e-6)


@pytest.mark.parametrize("go_backwards", [False, True])
@pytest.mark.parametrize("zero_output_for_mask", [False, True])
@pytest.mark.parametrize("masked", [False, True])
def test_eager_loop_is_the_keras_loop(
    go_backwards, zero_output_for_mask, masked
):
    # The eager loop serves the torch backend; it is plain `keras.ops`, so
    # it is checked against the generic loop on every backend.
    rnn = ProjectedRNN(
        ProjectedGRUCell(4, reset_after=False),
        return_sequences=True,
        go_backwards=go_backwards,
        zero_output_for_mask=zero_output_for_mask,
    )
    inputs, mask = _inputs()
    _assert_same(*_both_loops(rnn, inputs, mask if masked else None))


def test_eager_loop_without_sequences():
    rnn = ProjectedRNN(ProjectedGRUCell(4), return_sequences=False)
    inputs, mask = _inputs()
    eager, generic = _both_loops(rnn, inputs, mask)
    np.testing.assert_allclose(
        to_numpy(eager[0]), to_numpy(generic[0]), atol=1e-6
    )
    assert tuple(eager[1].shape) == (3, 1, 4)


def test_eager_loop_draws_the_same_recurrent_dropout():
    keras.utils.set_random_seed(3)
    rnn = ProjectedRNN(
        ProjectedGRUCell(4, recurrent_dropout=0.5), return_sequences=True
    )
    inputs, mask = _inputs()
    eager, generic = _both_loops(rnn, inputs, mask, training=True)
    _assert_same(eager, generic)


def test_eager_loop_runs_the_decoder_cell():
    rng = np.random.default_rng(4)
    cell = AttentionGRUCell(4, context_dim=6)
    rnn = ProjectedRNN(cell, return_sequences=True)
    annotations = rng.normal(size=(3, 7, 6)).astype("float32")
    source_mask = np.arange(7)[None, :] < np.array([7, 5, 2])[:, None]
    cell.build((None, 5))
    cell.set_memory(cell.precompute(annotations, source_mask))
    try:
        _assert_same(*_both_loops(rnn, _inputs()[0], None))
    finally:
        cell.clear_memory()


def test_a_call_gives_the_same_as_the_generic_loop():
    # Through `call`, whichever loop the backend takes.
    inputs, mask = _inputs()
    rnn = ProjectedRNN(
        ProjectedGRUCell(4), return_sequences=True, return_state=True
    )
    output, state = rnn(inputs, mask=mask)
    sequences = rnn.cell.project_inputs(keras.ops.convert_to_tensor(inputs))
    _, expected, states = keras.layers.RNN.inner_loop(
        rnn,
        sequences,
        rnn.get_initial_state(batch_size=3),
        keras.ops.convert_to_tensor(mask),
    )
    np.testing.assert_allclose(to_numpy(output), to_numpy(expected), atol=1e-6)
    np.testing.assert_allclose(to_numpy(state), to_numpy(states[0]), atol=1e-6)


def test_the_recurrent_kernel_is_split_once_per_sequence():
    cell = ProjectedGRUCell(4, reset_after=False)
    rnn = ProjectedRNN(cell, return_sequences=True)
    inputs, mask = _inputs()
    rnn(inputs)  # builds
    seen, split = [], cell.recurrent_kernels

    def recurrent_kernels():
        seen.append(cell._split_kernels is not None)
        return split()

    cell.recurrent_kernels = recurrent_kernels
    rnn(inputs, mask=mask)
    # Once by `recurrent_kernels_split_once`, then by the steps (each
    # step eagerly, or the traced loop body once), all given that split.
    assert seen[0] is False and len(seen) > 1 and all(seen[1:])
    assert cell._split_kernels is None  # not kept past the call


def test_the_split_kernels_are_dropped_when_the_loop_fails():
    cell = ProjectedGRUCell(4, reset_after=False)
    cell.build((None, 5))
    with pytest.raises(RuntimeError, match="stop"):
        with cell.recurrent_kernels_split_once():
            kernels = cell.recurrent_kernels()
            assert cell.recurrent_kernels() is kernels  # one split
            raise RuntimeError("stop")
    assert cell._split_kernels is None
    kernel = to_numpy(cell.recurrent_kernel)  # [U_z, U_r | U]
    zr, h = (to_numpy(k) for k in cell.recurrent_kernels())
    np.testing.assert_array_equal(zr, kernel[:, :8])
    np.testing.assert_array_equal(h, kernel[:, 8:])


def test_a_nested_split_keeps_the_outer_one():
    cell = ProjectedGRUCell(4, reset_after=False)
    cell.build((None, 5))
    with cell.recurrent_kernels_split_once():
        outer = cell.recurrent_kernels()
        with cell.recurrent_kernels_split_once():
            assert cell.recurrent_kernels() is outer
        assert cell.recurrent_kernels() is outer  # not dropped by the inner
    assert cell._split_kernels is None


def test_the_decoder_cell_has_the_same_gradients_split_once(monkeypatch):
    # The decoder's recurrent kernel split once per sentence, or at every
    # step as a step called on its own does: the same gradients.
    rng = np.random.default_rng(6)
    inputs = rng.normal(size=(3, 5, 4)).astype("float32")
    annotations = rng.normal(size=(3, 7, 6)).astype("float32")
    source_mask = np.arange(7)[None, :] < np.array([7, 5, 2])[:, None]
    upstream = rng.normal(size=(3, 5, 4 + 6)).astype("float32")
    initial = np.tanh(rng.normal(size=(3, 4))).astype("float32")

    def gradients():
        decoder = AttentionDecoder(4, context_dim=6)
        sources = [keras.Input((5, 4)), keras.Input((7, 6))]
        state = keras.Input((4,))
        padding = keras.Input((7,), dtype="bool")
        model = keras.Model(
            [*sources, state, padding], decoder(*sources, state, padding)
        )
        weights = np.random.default_rng(7)  # v_a starts at 0: not here
        for weight in decoder.weights:
            weight.assign(weights.normal(scale=0.5, size=weight.shape))
        return sgd_step_gradients(
            model,
            decoder.weights,
            [inputs, annotations, initial, source_mask],
            upstream,
        )[1]

    split_once = gradients()
    monkeypatch.setattr(
        AttentionGRUCell,
        "recurrent_kernels_split_once",
        lambda self: contextlib.nullcontext(),
    )
    every_step = gradients()
    assert len(split_once) == 7
    for a, b in zip(every_step, split_once, strict=True):
        assert np.abs(a).max() > 0  # every weight gets a gradient
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
