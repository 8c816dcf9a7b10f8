import keras
from keras import ops

from keras_bahdanau.layers.additive_attention import AdditiveAttention
from keras_bahdanau.layers.conditional_gru_cell import ConditionalGRUCell
from keras_bahdanau.layers.projected_rnn import SplitRecurrentKernel


@keras.saving.register_keras_serializable(package="keras_bahdanau")
class AttentionGRUCell(SplitRecurrentKernel, ConditionalGRUCell):
    """The conditional GRU step of RNNsearch's decoder (A.2.2).

    One step attends with the previous state, then updates the state with the
    previous target word and the new context:

    ```
    c_i  = sum_j alpha_ij h_j,  alpha_i = softmax_j(v_a^T tanh(W_a s_{i-1}
                                                      + U_a h_j))
    z_i  = sigmoid(W_z E y_{i-1} + U_z s_{i-1} + C_z c_i)
    r_i  = sigmoid(W_r E y_{i-1} + U_r s_{i-1} + C_r c_i)
    s~_i = tanh(W E y_{i-1} + U [r_i * s_{i-1}] + C c_i)
    s_i  = (1 - z_i) * s_{i-1} + z_i * s~_i
    ```

    Note the gate convention: the paper (and this cell) keeps `1 - z` of the
    old state, while `keras.layers.GRUCell` keeps `z` of it. The gates have a
    bias (the paper omits biases "to make the equations less cluttered").

    Computed once, outside the recurrence: `precompute` gives per
    sentence the keys `U_a h_j` (A.1.2) and the values `[h_j; C h_j]`
    (`C = [C_z; C_r; C]`), so that one weighted sum gives `c_i` and the
    gates' context terms `C c_i = sum_j alpha_ij (C h_j)` (by linearity);
    `project_inputs` gives `[W_z; W_r; W] E y_{i-1} + b` for all target
    steps. Inside the loop only the products with `s_{i-1}` remain, and
    `W_a`, `U_z`, `U_r` are one of them.

    `AttentionDecoder` runs the cell in `keras.layers.RNN` (which has no
    `constants=` argument in Keras 3), handing it the memory with
    `set_memory`. Decoding calls `step`, a pure function that also returns
    the alignment weights.

    Args:
        units: int, size `n` of the decoder state.
        context_dim: int, size of an annotation `h_j` (`2n` for the paper's
            bidirectional encoder).
        attention_units: int, hidden size of the alignment model; defaults to
            `units`.
        kernel_initializer: initializer of `W`, `W_z`, `W_r` and `C`, `C_z`,
            `C_r`.
        recurrent_initializer: initializer of `U`, `U_z`, `U_r`; by default
            each is a random orthogonal matrix, as in the paper.
        attention_kernel_initializer: initializer of `W_a`, `U_a`.
        **kwargs: base layer arguments.

    Call arguments (inside `keras.layers.RNN`):
        inputs: `(batch, 3 * units)`, `project_inputs(E y_{i-1})`.
        states: list with one `(batch, units)` tensor, `s_{i-1}`.

    Returns:
        `(output, [s_i])`, `output` being `[s_i; c_i]` with shape
        `(batch, units + context_dim)`: the readout needs `c_i` and the
        states (`s_{i-1}` is the previous step's `s_i`).

    Example:

    >>> cell = AttentionGRUCell(16, context_dim=12)
    >>> cell.build((None, 8))
    >>> annotations = np.random.rand(2, 5, 12).astype("float32")
    >>> memory = cell.precompute(annotations)
    >>> state, context, alpha = cell.step(
    ...     cell.project_inputs(np.zeros((2, 8), "float32")),
    ...     np.zeros((2, 16), "float32"), memory)
    >>> tuple(state.shape), tuple(context.shape), tuple(alpha.shape)
    ((2, 16), (2, 12), (2, 5))

    Reference:
        Bahdanau et al. 2015, appendix A.2.2 (decoder) and A.1.2 (alignment).
    """

    def __init__(
        self,
        units,
        context_dim,
        attention_units=None,
        kernel_initializer="glorot_uniform",
        recurrent_initializer="block_orthogonal",
        attention_kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(
            units,
            context_dim,
            kernel_initializer=kernel_initializer,
            recurrent_initializer=recurrent_initializer,
            **kwargs,
        )
        self.attention_units = attention_units or units
        self.attention_kernel_initializer = keras.initializers.get(
            attention_kernel_initializer
        )
        self.attention = AdditiveAttention(
            self.attention_units,
            kernel_initializer=self.attention_kernel_initializer,
            dtype=self.dtype_policy,
            name="attention",
        )
        self.state_size = units
        self.output_size = units + context_dim
        self._memory = None

    def build(self, input_shape):
        super().build(input_shape)
        n = self.units
        self.attention.build([(None, n), (None, None, self.context_dim)])

    def precompute(self, annotations, source_mask=None):
        """The per-sentence terms of every step, computed once.

        Args:
            annotations: `(batch, Tx, context_dim)`, `h_j`.
            source_mask: optional bool `(batch, Tx)`, False on padding.

        Returns:
            The memory `step` attends to: a dict with `keys` `U_a h_j`
            `(batch, Tx, attention_units)`, `values` `[h_j; C_z h_j; C_r
            h_j; C h_j]` `(batch, Tx, context_dim + 3n)` and
            `source_mask`. One weighted sum of `values` gives both `c_i`
            and the gates' context terms.
        """
        projected = ops.matmul(annotations, self._weight(self.context_kernel))
        return {
            "keys": self.attention.compute_keys(annotations),
            "values": ops.concatenate([annotations, projected], axis=-1),
            "source_mask": source_mask,
        }

    def compute_recurrent_kernels(self):
        """`([W_a, U_z, U_r], U)`: shapes `(n, n' + 2n)` and `(n, n)`.

        `W_a` (the alignment model's, A.1.2) joins the gates' kernels:
        every product with `s_{i-1}` but `U [r_i * s_{i-1}]` is one.
        """
        kernel_zr, kernel_h = super().compute_recurrent_kernels()
        query_kernel = self._weight(self.attention.query_kernel)
        return ops.concatenate([query_kernel, kernel_zr], axis=1), kernel_h

    def set_memory(self, memory):
        """Hands one batch's `precompute` output to the cell for an `RNN`."""
        self._memory = memory

    def clear_memory(self):
        self._memory = None

    def step(self, projected_inputs, state, memory, training=None):
        """One decoder step; pure, for search and tests.

        Args:
            projected_inputs: `(batch, 3n)`, `project_inputs(E y_{i-1})`.
            state: `(batch, units)`, `s_{i-1}`.
            memory: dict from `precompute`.
            training: bool; in training, large alignment-score tensors
                are recomputed in the backward pass (`AdditiveAttention`).

        Returns:
            `(s_i, c_i, alpha_i)` with shapes `(batch, units)`,
            `(batch, context_dim)` and `(batch, Tx)`.
        """
        state = ops.convert_to_tensor(state, self.compute_dtype)
        # W_a s_{i-1}, U_z s_{i-1} and U_r s_{i-1} in one product (the
        # kernels joined by `compute_recurrent_kernels`, once per sequence).
        kernel_state, kernel_h = self.recurrent_kernels()
        a, n = self.attention_units, self.units
        projected_query, recurrent_z, recurrent_r = ops.split(
            ops.matmul(state, kernel_state), [a, a + n], axis=-1
        )
        # [c_i; C_z c_i; C_r c_i; C c_i] = sum_j alpha_ij [h_j; C h_j]: the
        # context terms of the gates by linearity, in the same product.
        values, alpha = self.attention.attend(
            projected_query,
            memory["values"],
            memory["keys"],
            memory["source_mask"],
            training=training,
        )
        context, context_terms = ops.split(values, [self.context_dim], axis=-1)
        # (batch, n) each: input, context and bias terms of the three gates.
        x_z, x_r, x_h = ops.split(projected_inputs + context_terms, 3, axis=-1)
        z = ops.sigmoid(x_z + recurrent_z)
        r = ops.sigmoid(x_r + recurrent_r)
        candidate = ops.tanh(x_h + ops.matmul(r * state, kernel_h))
        new_state = (1.0 - z) * state + z * candidate
        return new_state, context, alpha

    def call(self, inputs, states, training=None):
        if self._memory is None:
            raise RuntimeError(
                "AttentionGRUCell has no annotations to attend to. Run it "
                "through `AttentionDecoder`, or call "
                "`set_memory(cell.precompute(annotations, source_mask))` "
                "inside the same call as `RNN(...)`."
            )
        state = states[0] if isinstance(states, (list, tuple)) else states
        new_state, context, _ = self.step(
            inputs, state, self._memory, training=training
        )
        return ops.concatenate([new_state, context], axis=-1), [new_state]

    def get_config(self):
        return {
            **super().get_config(),
            "attention_units": self.attention_units,
            "attention_kernel_initializer": keras.initializers.serialize(
                self.attention_kernel_initializer
            ),
        }
