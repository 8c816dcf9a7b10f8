import contextlib

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_bahdanau")
class ProjectedRNN(keras.layers.RNN):
    """`keras.layers.RNN` that multiplies the inputs of all steps at once.

    A recurrent step multiplies its input `x_t` by the cell's input
    kernel; that product does not depend on the state, so for a whole
    sequence it is one matrix product `(batch * T, m) x (m, k)` before the
    loop instead of `T` small ones inside it (as cuDNN's RNNs do). The
    cell provides `project_inputs(inputs)`, which maps `(..., m)` to
    `(..., k)`, and a `call` whose inputs are the projected ones
    (`ProjectedGRUCell`, `AttentionGRUCell`). A cell with
    `SplitRecurrentKernel` also gets its recurrent kernel split by gate
    once per sequence rather than at every step. Everything else is
    `keras.layers.RNN`: masks, `go_backwards`, initial states, recurrent
    dropout, and it fits in `keras.layers.Bidirectional`. On the torch
    backend, which runs the recurrence eagerly, the loop over time calls
    the cell's `call` directly (`_eager_loop`, the same function as
    Keras's loop without its per-step layer call).

    Args:
        cell: a cell with `project_inputs`, built for the raw inputs.
        **kwargs: the other arguments of `keras.layers.RNN`.

    Call arguments:
        sequences: `(batch, T, m)`, the raw inputs.
        initial_state, mask, training: as `keras.layers.RNN`.

    Returns:
        As `keras.layers.RNN`.

    Example:

    >>> rnn = ProjectedRNN(ProjectedGRUCell(8), return_sequences=True)
    >>> tuple(rnn(np.ones((2, 5, 3), "float32")).shape)
    (2, 5, 8)
    """

    def __init__(self, cell, **kwargs):
        super().__init__(cell, **kwargs)
        if not callable(getattr(self.cell, "project_inputs", None)):
            raise ValueError(
                "ProjectedRNN needs a cell with a `project_inputs` method, "
                f"such as ProjectedGRUCell. Received: cell={self.cell!r}"
            )

    def call(self, sequences, initial_state=None, mask=None, training=False):
        split_once = getattr(
            self.cell, "recurrent_kernels_split_once", contextlib.nullcontext
        )
        with split_once():
            # (batch, T, m) -> (batch, T, k), for every step in one product.
            return super().call(
                self.cell.project_inputs(sequences),
                initial_state=initial_state,
                mask=mask,
                training=training,
            )

    def inner_loop(self, sequences, initial_state, mask, training=False):
        if keras.config.backend() == "torch" and not self.stateful:
            return self._eager_loop(sequences, initial_state, mask, training)
        return super().inner_loop(sequences, initial_state, mask, training)

    def _eager_loop(self, sequences, initial_state, mask, training=False):
        """The recurrence as a Python loop over `self.cell.call`.

        What `keras.layers.RNN` computes, for an eager backend: the
        generic loop calls the cell through `Layer.__call__` at every
        step, keeps the time counter as a tensor and runs the first step
        twice (once for the output's shape), costs that dominate a torch
        step at small batches (docs/profile.md).
        """
        kwargs = {}
        if self.cell._call_has_training_arg:
            kwargs["training"] = training
        steps = ops.unstack(sequences, axis=1)
        masks = None
        if mask is not None:
            masks = ops.unstack(ops.cast(mask, "bool")[..., None], axis=1)
        order = range(len(steps))
        if self.go_backwards:
            order = reversed(order)
        states = list(initial_state)
        output, outputs, zeros = None, [], None
        for t in order:
            new_output, new_states = self.cell.call(steps[t], states, **kwargs)
            if not keras.tree.is_nested(new_states):
                new_states = [new_states]
            if masks is not None:
                if zeros is None:  # Once: the output's shape is fixed.
                    zeros = ops.zeros_like(new_output)
                kept = output
                if self.zero_output_for_mask or output is None:
                    kept = zeros
                new_output = ops.where(masks[t], new_output, kept)
                new_states = [
                    ops.where(masks[t], new, old)
                    for new, old in zip(new_states, states, strict=True)
                ]
            output, states = new_output, new_states
            if self.return_sequences:
                outputs.append(output)
        outputs = ops.stack(outputs, axis=1) if outputs else output[:, None]
        return output, outputs, states


class SplitRecurrentKernel:
    """Mixin for GRU cells: the recurrent kernel split by gate, once.

    A GRU step multiplies the state by `[U_z, U_r]` and `(r * state)` by
    `U`, the two parts of its `(n, 3n)` `recurrent_kernel`. Sliced inside
    the step, the slices' gradient is a kernel-sized tensor, zero but for
    the slice, at every step: on TensorFlow without XLA the costliest op
    after the matrix products (docs/profile.md). `ProjectedRNN` enters
    `recurrent_kernels_split_once()` around its loop, so the split (and
    its gradient) happens once per sequence; the searches enter it too
    (`RNNSearch.decoding_scope`), and a step called outside it splits the
    kernel itself. Entered again inside itself, the outer split holds.

    The cell has `units` and a `recurrent_kernel` of shape `(n, 3n)`. A
    cell that arranges its kernels otherwise overrides
    `compute_recurrent_kernels`.
    """

    _split_kernels = None

    def recurrent_kernels(self):
        """`compute_recurrent_kernels()`, once within the scope below."""
        if self._split_kernels is not None:
            return self._split_kernels
        return self.compute_recurrent_kernels()

    def compute_recurrent_kernels(self):
        """`(U_zr, U)`: shapes `(n, 2n)` and `(n, n)`, compute dtype."""
        kernel = ops.cast(self.recurrent_kernel, self.compute_dtype)
        return tuple(ops.split(kernel, [2 * self.units], axis=1))

    @contextlib.contextmanager
    def recurrent_kernels_split_once(self):
        """Within it, `recurrent_kernels()` returns one split."""
        if self._split_kernels is not None:  # Nested: the outer one holds.
            yield
            return
        self._split_kernels = self.recurrent_kernels()
        try:
            yield
        finally:
            self._split_kernels = None
