import keras


@keras.saving.register_keras_serializable(package="keras_bahdanau")
class ProjectedRNN(keras.layers.RNN):
    """`keras.layers.RNN` that multiplies the inputs of all steps at once.

    A recurrent step multiplies its input `x_t` by the cell's input
    kernel; that product does not depend on the state, so for a whole
    sequence it is one matrix product `(batch * T, m) x (m, k)` before the
    loop instead of `T` small ones inside it (as cuDNN's RNNs do). The
    cell provides `project_inputs(inputs)`, which maps `(..., m)` to
    `(..., k)`, and a `call` whose inputs are the projected ones
    (`ProjectedGRUCell`, `AttentionGRUCell`). Everything else is
    `keras.layers.RNN`: masks, `go_backwards`, initial states, recurrent
    dropout, and it fits in `keras.layers.Bidirectional`.

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
        # (batch, T, m) -> (batch, T, k), for every step in one product.
        return super().call(
            self.cell.project_inputs(sequences),
            initial_state=initial_state,
            mask=mask,
            training=training,
        )
