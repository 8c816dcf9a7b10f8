import keras

from keras_bahdanau.layers.attention_gru_cell import AttentionGRUCell
from keras_bahdanau.layers.projected_rnn import ProjectedRNN


@keras.saving.register_keras_serializable(package="keras_bahdanau")
class AttentionDecoder(keras.layers.Layer):
    """Runs `AttentionGRUCell` over a target sequence with `keras.layers.RNN`.

    Computes the keys `U_a h_j` (A.1.2) and the context terms `C h_j` once
    per sentence (`AttentionGRUCell.precompute`), then runs the recurrence
    over the steps starting from `s_0` in a `ProjectedRNN`, which computes
    the input terms `W E y_{i-1}` of all steps in one product.

    The loop runs without a target mask: padded target positions come after
    every real one, so they cannot change a real position's output, and the
    loss ignores them. This spares a per-step `where` over the state.

    Args:
        units: int, decoder state size `n`.
        context_dim: int, annotation size (`2n` in the paper).
        attention_units: int, alignment model hidden size (default `units`).
        **kwargs: passed to `AttentionGRUCell` initializer arguments
            (`kernel_initializer`, `recurrent_initializer`,
            `attention_kernel_initializer`) or to the base layer.

    Call arguments:
        inputs: `(batch, Ty, m)`, embedded decoder inputs.
        annotations: `(batch, Tx, context_dim)`, encoder annotations `h_j`.
        initial_state: `(batch, units)`, `s_0`.
        source_mask: bool `(batch, Tx)`, False on source padding.

    Returns:
        `(batch, Ty, units + context_dim)`: `[s_i; c_i]` for every step.

    Example:

    >>> decoder = AttentionDecoder(16, context_dim=12)
    >>> outputs = decoder(
    ...     np.zeros((2, 4, 8), "float32"), np.ones((2, 5, 12), "float32"),
    ...     np.zeros((2, 16), "float32"), np.ones((2, 5), bool))
    >>> tuple(outputs.shape)
    (2, 4, 28)

    Reference:
        Bahdanau et al. 2015, appendix A.2.2.
    """

    _CELL_ARGS = (
        "kernel_initializer",
        "recurrent_initializer",
        "attention_kernel_initializer",
    )

    def __init__(self, units, context_dim, attention_units=None, **kwargs):
        cell_kwargs = {k: kwargs.pop(k) for k in self._CELL_ARGS if k in kwargs}
        super().__init__(**kwargs)
        self.units = units
        self.context_dim = context_dim
        self.attention_units = attention_units
        self.cell = AttentionGRUCell(
            units,
            context_dim,
            attention_units=attention_units,
            dtype=self.dtype_policy,
            name="cell",
            **cell_kwargs,
        )
        self.rnn = ProjectedRNN(
            self.cell,
            return_sequences=True,
            dtype=self.dtype_policy,
            name="rnn",
        )

    def build(self, inputs_shape, *args, **kwargs):
        self.cell.build(inputs_shape[:1] + inputs_shape[2:])

    def call(self, inputs, annotations, initial_state, source_mask):
        self.cell.set_memory(self.cell.precompute(annotations, source_mask))
        try:
            outputs = self.rnn(inputs, initial_state=[initial_state])
        finally:
            self.cell.clear_memory()
        return outputs

    def compute_output_shape(self, inputs_shape, *args, **kwargs):
        return tuple(inputs_shape[:2]) + (self.units + self.context_dim,)

    def get_config(self):
        config = {
            **super().get_config(),
            "units": self.units,
            "context_dim": self.context_dim,
            "attention_units": self.attention_units,
        }
        cell_config = self.cell.get_config()
        config.update({k: cell_config[k] for k in self._CELL_ARGS})
        return config
