import keras
from keras import ops

from keras_bahdanau.initializers import BlockOrthogonal
from keras_bahdanau.initializers import independent
from keras_bahdanau.validation import check_int


class ConditionalGRUCell(keras.layers.Layer):
    """Weights and input projection of a GRU step conditioned on a context.

    The base of the decoders' cells, `AttentionGRUCell` (RNNsearch, where
    the context `c_i` changes each step) and `ContextGRUCell` (RNNencdec,
    one `c` per sentence). Both have, packed as `[z, r, candidate]` so that
    each product is one matrix product, a `kernel` `[W_z, W_r, W]` for the
    previous word, a `recurrent_kernel` `[U_z, U_r, U]` for the previous
    state, a `context_kernel` `[C_z, C_r, C]` for the context and a `bias`;
    they differ in where the context enters and how the update gate reads.
    Subclasses define `precompute`, `step` and `call`.

    Args:
        units: int, size `n` of the decoder state.
        context_dim: int, size of the context (an annotation `h_j`, or `c`).
        kernel_initializer: initializer of `W`, `W_z`, `W_r` and of `C`,
            `C_z`, `C_r` (each kernel draws its own values).
        recurrent_initializer: initializer of `U`, `U_z`, `U_r`; by default
            each is a random orthogonal matrix, as in the paper.
        **kwargs: base layer arguments.
    """

    def __init__(
        self,
        units,
        context_dim,
        kernel_initializer="glorot_uniform",
        recurrent_initializer="block_orthogonal",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_int("units", units)
        check_int("context_dim", context_dim)
        self.units = units
        self.context_dim = context_dim
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        if recurrent_initializer == "block_orthogonal":
            recurrent_initializer = BlockOrthogonal()
        self.recurrent_initializer = keras.initializers.get(
            recurrent_initializer
        )

    def build(self, input_shape):
        n = self.units
        self.kernel = self.add_weight(
            name="kernel",  # [W_z, W_r, W]
            shape=(input_shape[-1], 3 * n),
            initializer=independent(self.kernel_initializer, 0),
        )
        self.recurrent_kernel = self.add_weight(
            name="recurrent_kernel",  # [U_z, U_r, U]
            shape=(n, 3 * n),
            initializer=self.recurrent_initializer,
        )
        self.context_kernel = self.add_weight(
            name="context_kernel",  # [C_z, C_r, C]
            shape=(self.context_dim, 3 * n),
            initializer=independent(self.kernel_initializer, 1),
        )
        self.bias = self.add_weight(
            name="bias", shape=(3 * n,), initializer="zeros"
        )

    def project_inputs(self, inputs):
        """`[W_z; W_r; W] E y_{i-1} + b`: `(..., m) -> (..., 3n)`.

        Takes one step's inputs or all steps' at once.
        """
        inputs = ops.convert_to_tensor(inputs, self.compute_dtype)
        kernel, bias = self._weight(self.kernel), self._weight(self.bias)
        return ops.matmul(inputs, kernel) + bias

    def _weight(self, variable):
        """`variable` in the compute dtype.

        Inside `__call__` Keras already casts variables so (autocast);
        `precompute`, `project_inputs` and `step` are also called directly
        by the searches, where float32 variables would meet bfloat16
        activations under a mixed policy.
        """
        return ops.cast(variable, self.compute_dtype)

    def get_config(self):
        return {
            **super().get_config(),
            "units": self.units,
            "context_dim": self.context_dim,
            "kernel_initializer": keras.initializers.serialize(
                self.kernel_initializer
            ),
            "recurrent_initializer": keras.initializers.serialize(
                self.recurrent_initializer
            ),
        }
