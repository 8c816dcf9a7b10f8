"""Bidirectional recurrent neural network (Schuster & Paliwal, 1997)."""

import keras
from keras import ops

from keras_bahdanau.initializers import independent


@keras.saving.register_keras_serializable(package="keras_bahdanau")
class BidirectionalRNN(keras.layers.Layer):
    """Bidirectional RNN with separate output projections per direction.

    Runs one recurrence over the sequence from left to right and an
    independent one (same cell type, its own weights) from right to left,
    both starting from zero states, and combines them per time step:

    ```
    h^f_t = sigma(W^f h^f_{t-1} + U^f x_t + b^f),   h^f_0     = 0
    h^b_t = sigma(W^b h^b_{t+1} + U^b x_t + b^b),   h^b_{T+1} = 0
    y_t   = V^f h^f_t + V^b h^b_t + c
    ```

    With `keras.layers.SimpleRNNCell` these are exactly the equations
    above (`U` is the cell's `kernel`, `W` its `recurrent_kernel`, `b` its
    `bias`). Any other Keras recurrent cell (`GRUCell`, `LSTMCell`, ...)
    replaces the two recurrences; the output stays the sum of the two
    projections. `keras.layers.Bidirectional` instead concatenates (or
    sums) the raw hidden states; here `V^f` and `V^b` are separate
    learned projections, as in the definition.

    Padding: sequences are right-padded and the mask is `True` on real
    tokens. The backward recurrence starts at the last real token of each
    sequence (from a zero state), so `h^b_t` never sees padding, and the
    outputs at padded steps are zero.

    Args:
        cell: the forward recurrent cell: a Keras RNN cell instance (e.g.
            `keras.layers.SimpleRNNCell(64)`) or its serialized config
            (`keras.layers.serialize(cell)`). Its `output_size` is the
            hidden size `m`.
        output_units: int, the output size `p` (rows of `V^f`, `V^b`).
        backward_cell: optional cell (or config) for the backward
            direction. Defaults to a fresh copy of `cell`'s config: same
            type and sizes, separately initialized weights.
        activation: optional activation applied to `y_t` (e.g. "softmax"
            for per-token classification). Defaults to `None` (the linear
            output of the definition).
        use_bias: bool, whether to add the output bias `c`.
        kernel_initializer: initializer for `V^f` and `V^b`.
        bias_initializer: initializer for `c`.
        **kwargs: base layer keyword arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: float tensor of shape `(batch, T, n)`.
        mask: optional boolean tensor of shape `(batch, T)`, `True` on real
            (right-padded) time steps. Propagated from an upstream
            `Embedding(mask_zero=True)` or `Masking` layer.
        training: bool, passed to the cells (recurrent dropout).

    Returns:
        Float tensor of shape `(batch, T, output_units)`, zero at padded
        steps. The input mask is propagated unchanged.

    Example:

    >>> layer = BidirectionalRNN(
    ...     keras.layers.SimpleRNNCell(8), output_units=3
    ... )
    >>> x = np.random.rand(2, 5, 4).astype("float32")
    >>> mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], dtype=bool)
    >>> tuple(layer(x, mask=mask).shape)
    (2, 5, 3)

    Reference:
        M. Schuster and K. K. Paliwal, "Bidirectional Recurrent Neural
        Networks", IEEE Trans. Signal Processing 45(11), 1997, §3.
    """

    def __init__(
        self,
        cell,
        output_units,
        backward_cell=None,
        activation=None,
        use_bias=True,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if not isinstance(output_units, int) or output_units <= 0:
            raise ValueError(
                "`output_units` must be a positive int. "
                f"Received: output_units={output_units}"
            )
        forward_cell = _as_cell(cell, "cell")
        if backward_cell is None:
            # A fresh cell built from the same config: same type and sizes,
            # independent weights (W^b, U^b, b^b are not W^f, U^f, b^f).
            config = forward_cell.get_config()
            config["name"] = f"backward_{config['name']}"
            backward_cell = forward_cell.__class__.from_config(config)
        else:
            backward_cell = _as_cell(backward_cell, "backward_cell")
            if backward_cell is forward_cell:
                raise ValueError(
                    "`backward_cell` must be a different cell object from "
                    "`cell`: the two directions have separate weights. "
                    "Leave `backward_cell=None` to clone `cell`."
                )
        self.output_units = output_units
        self.activation = keras.activations.get(activation)
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.supports_masking = True

        # `zero_output_for_mask` matters for the backward pass: it reads the
        # reversed (left-padded) sequence, and the padded steps must leave
        # the state at zero and emit zeros rather than copy a stale output.
        self.forward_rnn = keras.layers.RNN(
            forward_cell,
            return_sequences=True,
            zero_output_for_mask=True,
            dtype=self.dtype_policy,
            name="forward_rnn",
        )
        self.backward_rnn = keras.layers.RNN(
            backward_cell,
            return_sequences=True,
            go_backwards=True,
            zero_output_for_mask=True,
            dtype=self.dtype_policy,
            name="backward_rnn",
        )

    @property
    def forward_cell(self):
        return self.forward_rnn.cell

    @property
    def backward_cell(self):
        return self.backward_rnn.cell

    def build(self, input_shape):
        self.forward_rnn.build(input_shape)
        self.backward_rnn.build(input_shape)
        # V^f, V^b stored as (m, p) so that y = h @ V (Keras convention).
        self.forward_kernel = self.add_weight(
            name="forward_kernel",
            shape=(self.forward_cell.output_size, self.output_units),
            initializer=independent(self.kernel_initializer, 0),
        )
        self.backward_kernel = self.add_weight(
            name="backward_kernel",
            shape=(self.backward_cell.output_size, self.output_units),
            initializer=independent(self.kernel_initializer, 1),
        )
        self.bias = None
        if self.use_bias:
            self.bias = self.add_weight(
                name="bias",
                shape=(self.output_units,),
                initializer=self.bias_initializer,
            )

    def call(self, inputs, mask=None, training=None):
        # (batch, T, n) -> (batch, T, m): h^f_1 .. h^f_T
        forward_states = self.forward_rnn(inputs, mask=mask, training=training)
        # (batch, T, n) -> (batch, T, m): h^b_T .. h^b_1 (processing order)
        backward_states = self.backward_rnn(
            inputs, mask=mask, training=training
        )
        # Back to time order: h^b_1 .. h^b_T.
        backward_states = ops.flip(backward_states, axis=1)
        outputs = ops.matmul(forward_states, self.forward_kernel)
        outputs = outputs + ops.matmul(backward_states, self.backward_kernel)
        if self.bias is not None:
            outputs = outputs + self.bias
        outputs = self.activation(outputs)
        if mask is not None:
            # The bias c would otherwise make padded outputs non-zero.
            # (batch, T) -> (batch, T, 1)
            outputs = outputs * ops.cast(mask, outputs.dtype)[:, :, None]
        return outputs

    def compute_mask(self, inputs, mask=None):
        return mask

    def compute_output_shape(self, input_shape):
        return (*input_shape[:-1], self.output_units)

    def get_config(self):
        return {
            **super().get_config(),
            "cell": keras.layers.serialize(self.forward_cell),
            "output_units": self.output_units,
            "backward_cell": keras.layers.serialize(self.backward_cell),
            "activation": keras.activations.serialize(self.activation),
            "use_bias": self.use_bias,
            "kernel_initializer": keras.initializers.serialize(
                self.kernel_initializer
            ),
            "bias_initializer": keras.initializers.serialize(
                self.bias_initializer
            ),
        }


def _as_cell(cell, argument):
    """Returns a cell from a cell instance or its serialized config."""
    if isinstance(cell, dict):
        cell = keras.layers.deserialize(cell)
    if isinstance(cell, keras.layers.RNN):
        raise ValueError(
            f"`{argument}` must be a recurrent cell, not a recurrent layer. "
            f"Received: {argument}={cell!r}. Pass its cell instead, e.g. "
            "`keras.layers.GRUCell(units)` or `layer.cell`."
        )
    if not (
        isinstance(cell, keras.layers.Layer)
        and hasattr(cell, "state_size")
        and isinstance(getattr(cell, "output_size", None), int)
    ):
        raise ValueError(
            f"`{argument}` must be a Keras RNN cell with an integer "
            "`state_size`/`output_size` (e.g. keras.layers.SimpleRNNCell, "
            f"GRUCell, LSTMCell) or its config dict. Received: "
            f"{argument}={cell!r}"
        )
    return cell
