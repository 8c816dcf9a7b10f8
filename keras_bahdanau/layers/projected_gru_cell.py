import keras
from keras import ops

from keras_bahdanau.layers.projected_rnn import SplitRecurrentKernel


@keras.saving.register_keras_serializable(package="keras_bahdanau")
class ProjectedGRUCell(SplitRecurrentKernel, keras.layers.GRUCell):
    """`keras.layers.GRUCell` whose input products are computed beforehand.

    The same weights (`kernel` `[W_z, W_r, W]`, `recurrent_kernel`, `bias`)
    and the same function as `keras.layers.GRUCell`, in both its
    `reset_after` forms and with recurrent dropout, but a step reads
    `project_inputs(x_t) = x_t [W_z, W_r, W] + b` instead of `x_t`. The
    input products do not depend on the state, so `ProjectedRNN` computes
    them for every step in one matrix product before the loop (as cuDNN
    does), and the loop is left with the products of the state:

    ```
    z_t  = sigmoid(x_z + U_z h_{t-1})
    r_t  = sigmoid(x_r + U_r h_{t-1})
    h~_t = tanh(x_h + U (r_t * h_{t-1}))       (reset_after=False)
    h_t  = z_t * h_{t-1} + (1 - z_t) * h~_t
    ```

    With `reset_after=False` this is the paper's encoder GRU (Bahdanau et
    al. 2015, A.2.1) with `z = 1 - z_paper`, Keras's convention. Input
    `dropout` is not supported (it would need a mask per gate on `x_t`):
    apply a `Dropout` layer to the sequence instead.

    Args:
        units: int, the state size `n`.
        **kwargs: the other arguments of `keras.layers.GRUCell`.

    Call arguments (inside `ProjectedRNN`):
        inputs: `(batch, 3 * units)`, `project_inputs(x_t)`.
        states: list with one `(batch, units)` tensor, `h_{t-1}`.
        training: bool, whether recurrent dropout is active.

    Returns:
        `(h_t, [h_t])`.

    Example:

    >>> cell = ProjectedGRUCell(8, reset_after=False)
    >>> cell.build((None, 5))
    >>> projected = cell.project_inputs(np.ones((2, 5), "float32"))
    >>> state, _ = cell(projected, [np.zeros((2, 8), "float32")])
    >>> tuple(state.shape)
    (2, 8)

    Reference:
        Cho et al. 2014, arXiv:1406.1078, eq. (5)-(8); Bahdanau et al.
        2015, appendix A.2.1.
    """

    def __init__(self, units, **kwargs):
        super().__init__(units, **kwargs)
        if self.dropout:
            raise ValueError(
                "ProjectedGRUCell takes no input `dropout` (its inputs are "
                "projected before the loop); put a `Dropout` layer before "
                f"the RNN instead. Received: dropout={self.dropout}"
            )

    def _biases(self):
        """`(input bias, recurrent bias or None)` in the compute dtype."""
        if not self.use_bias:
            return None, None
        bias = ops.cast(self.bias, self.compute_dtype)
        if self.reset_after:  # (2, 3n): input and recurrent biases
            return bias[0], bias[1]
        return bias, None

    def project_inputs(self, inputs):
        """`x [W_z, W_r, W] + b`: `(..., input_dim) -> (..., 3 * units)`.

        Takes one step's inputs or all steps' at once.
        """
        inputs = ops.convert_to_tensor(inputs, self.compute_dtype)
        projected = ops.matmul(
            inputs, ops.cast(self.kernel, self.compute_dtype)
        )
        input_bias, _ = self._biases()
        return projected if input_bias is None else projected + input_bias

    def call(self, inputs, states, training=False):
        h_tm1 = states[0] if keras.tree.is_nested(states) else states
        n = self.units
        x_z, x_r, x_h = ops.split(inputs, 3, axis=-1)  # (batch, n) each
        _, recurrent_bias = self._biases()
        # [U_z, U_r]: (n, 2n) and U: (n, n), split once per sequence.
        kernel_zr, kernel_h = self.recurrent_kernels()
        recurrent_h = None
        if training and 0.0 < self.recurrent_dropout < 1.0:
            # One mask per gate, as `keras.layers.GRUCell` draws them.
            mask_z, mask_r, mask_h = self.get_recurrent_dropout_mask(h_tm1)
            recurrent_z = ops.matmul(h_tm1 * mask_z, kernel_zr[:, :n])
            recurrent_r = ops.matmul(h_tm1 * mask_r, kernel_zr[:, n:])
            h_tm1_h = h_tm1 * mask_h
        elif self.reset_after:  # All three products at once.
            recurrent_z, recurrent_r, recurrent_h = ops.split(
                ops.matmul(h_tm1, self.recurrent_kernel), 3, axis=-1
            )
            h_tm1_h = h_tm1
        else:
            recurrent_z, recurrent_r = ops.split(
                ops.matmul(h_tm1, kernel_zr), 2, axis=-1
            )
            h_tm1_h = h_tm1
        if recurrent_bias is not None:  # (Not `+=`: torch's split views.)
            recurrent_z = recurrent_z + recurrent_bias[:n]
            recurrent_r = recurrent_r + recurrent_bias[n : 2 * n]
        z = self.recurrent_activation(x_z + recurrent_z)
        r = self.recurrent_activation(x_r + recurrent_r)
        if self.reset_after:  # r * (U h + b_h): the cuDNN form
            if recurrent_h is None:
                recurrent_h = ops.matmul(h_tm1_h, kernel_h)
            if recurrent_bias is not None:
                recurrent_h = recurrent_h + recurrent_bias[2 * n :]
            recurrent_h = r * recurrent_h
        else:  # U (r * h): the paper's form
            recurrent_h = ops.matmul(r * h_tm1_h, kernel_h)
        candidate = self.activation(x_h + recurrent_h)
        h = z * h_tm1 + (1 - z) * candidate
        return h, ([h] if keras.tree.is_nested(states) else h)
