import keras
from keras import ops

from keras_bahdanau.layers.conditional_gru_cell import ConditionalGRUCell


@keras.saving.register_keras_serializable(package="keras_bahdanau")
class ContextGRUCell(ConditionalGRUCell):
    """The GRU step of RNNencdec's decoder, conditioned on a fixed `c`.

    Cho et al. (2014), appendix A.2: the summary `c` of the source enters
    both gates and, through `C c`, the candidate state inside the reset
    gate, next to the recurrent term:

    ```
    z'_t  = sigmoid(W'_z e(y_{t-1}) + U'_z h'_{t-1} + C_z c)
    r'_t  = sigmoid(W'_r e(y_{t-1}) + U'_r h'_{t-1} + C_r c)
    h~'_t = tanh(W' e(y_{t-1}) + r'_t * (U' h'_{t-1} + C c))
    h'_t  = z'_t * h'_{t-1} + (1 - z'_t) * h~'_t
    ```

    Unlike RNNsearch's `AttentionGRUCell` (Bahdanau et al. 2015, A.2.2),
    where `C c_i` is added outside the reset gate and the gate is applied
    before the recurrent product, here the reset gate scales the sum
    `U' h'_{t-1} + C c`. The update gate follows Cho et al. (and
    `keras.layers.GRUCell`): `z'` keeps the old state. The paper omits
    biases; the gates and the candidate have one, outside the reset gate.

    The terms that do not change from step to step are computed outside
    the recurrence: `precompute(c)` gives `[C_z; C_r; C] c` once per
    sentence and `project_inputs(e(y_{t-1}))` `[W'_z; W'_r; W'] e(y_{t-1})
    + b`; `step` then makes one matrix product, `h'_{t-1} [U'_z, U'_r,
    U']` (the reset gate comes after it).

    Inside `keras.layers.RNN` (which has no `constants=` argument in
    Keras 3) `c` rides along as a second state that the cell returns
    unchanged: pass `initial_state=[h'_0, c]`.

    Args:
        units: int, size `n` of the decoder state `h'`.
        context_dim: int, size of the context `c`.
        kernel_initializer: initializer of `W'`, `W'_z`, `W'_r` and of
            `C`, `C_z`, `C_r` (each kernel draws its own values).
        recurrent_initializer: initializer of `U'`, `U'_z`, `U'_r`; by
            default each is a random orthogonal matrix.
        **kwargs: base layer arguments.

    Call arguments (inside `keras.layers.RNN`):
        inputs: `(batch, input_dim)`, the embedded previous word
            `e(y_{t-1})`.
        states: `[h'_{t-1}, c]`, `(batch, units)` and
            `(batch, context_dim)`.

    Returns:
        `(h'_t, [h'_t, c])`, `h'_t` having shape `(batch, units)`.

    Example:

    >>> cell = ContextGRUCell(16, context_dim=12)
    >>> rnn = keras.layers.RNN(cell, return_sequences=True)
    >>> states = rnn(np.zeros((2, 4, 8), "float32"), initial_state=[
    ...     np.zeros((2, 16), "float32"), np.ones((2, 12), "float32")])
    >>> tuple(states.shape)
    (2, 4, 16)
    >>> state = cell.step(
    ...     cell.project_inputs(np.zeros((2, 8), "float32")),
    ...     np.zeros((2, 16), "float32"),
    ...     cell.precompute(np.ones((2, 12), "float32")))
    >>> tuple(state.shape)
    (2, 16)

    Reference:
        Cho, van Merrienboer, Gulcehre, Bahdanau, Bougares, Schwenk,
        Bengio. Learning Phrase Representations using RNN Encoder-Decoder
        for Statistical Machine Translation. EMNLP 2014, arXiv:1406.1078,
        appendix A.2 (decoder).
    """

    def __init__(self, units, context_dim, **kwargs):
        super().__init__(units, context_dim, **kwargs)
        self.state_size = [units, context_dim]
        self.output_size = units

    def precompute(self, context):
        """`[C_z; C_r; C] c`: `(batch, context_dim) -> (batch, 3n)`.

        The context terms of every step of one sentence, computed once.
        """
        context = ops.convert_to_tensor(context, self.compute_dtype)
        return ops.matmul(context, self._weight(self.context_kernel))

    def step(self, projected_inputs, state, context_terms):
        """One decoder step; pure, for search and tests.

        Args:
            projected_inputs: `(batch, 3n)`, `project_inputs(e(y_{t-1}))`.
            state: `(batch, units)`, `h'_{t-1}`.
            context_terms: `(batch, 3n)`, `precompute(c)`.

        Returns:
            `h'_t`, `(batch, units)`.
        """
        n = self.units
        state = ops.convert_to_tensor(state, self.compute_dtype)
        # (batch, 3n): [U'_z h', U'_r h', U' h'], the reset gate comes after.
        recurrent = ops.matmul(state, self._weight(self.recurrent_kernel))
        gates = projected_inputs[:, : 2 * n] + recurrent[:, : 2 * n]
        gates = ops.sigmoid(gates + context_terms[:, : 2 * n])
        z, r = gates[:, :n], gates[:, n:]
        candidate = ops.tanh(
            projected_inputs[:, 2 * n :]
            + r * (recurrent[:, 2 * n :] + context_terms[:, 2 * n :])
        )
        return z * state + (1.0 - z) * candidate

    def call(self, inputs, states, training=None):
        state, context = states
        new_state = self.step(
            self.project_inputs(inputs), state, self.precompute(context)
        )
        return new_state, [new_state, context]

    def get_initial_state(self, batch_size=None):
        raise ValueError(
            "ContextGRUCell has no context to condition on. Call the RNN "
            "with `initial_state=[h'_0, c]`: the decoder's first state "
            f"(batch, {self.units}) and the context (batch, "
            f"{self.context_dim}). Received: initial_state=None"
        )
