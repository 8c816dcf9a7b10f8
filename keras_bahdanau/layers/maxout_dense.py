import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_bahdanau")
class MaxoutDense(keras.layers.Layer):
    """A maxout hidden layer: an affine map, then the max over each group.

    ```
    t~ = W x + b                      (units * num_pieces values)
    t_k = max(t~_{p*k}, ..., t~_{p*k + p - 1})      k = 0 .. units - 1
    ```

    With `num_pieces=2` this is the readout of the paper's decoder, which
    keeps the larger of each pair `(t~_{i,2k-1}, t~_{i,2k})` of neighbouring
    components.

    Args:
        units: int, number of outputs `l` (the paper uses l = 500).
        num_pieces: int >= 2, size of each group the max is taken over.
        use_bias: bool, whether the affine map has a bias.
        kernel_initializer: initializer of the kernel.
        bias_initializer: initializer of the bias.
        **kwargs: base layer arguments.

    Input shape:
        `(..., input_dim)`.

    Output shape:
        `(..., units)`.

    Example:

    >>> layer = MaxoutDense(4, num_pieces=2)
    >>> layer(np.ones((3, 10), "float32")).shape
    (3, 4)

    Reference:
        Goodfellow et al. Maxout Networks. ICML 2013. Bahdanau et al. 2015,
        appendix A.2.2 (the readout `t_i`).
    """

    def __init__(
        self,
        units,
        num_pieces=2,
        use_bias=True,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if not isinstance(units, int) or units <= 0:
            raise ValueError(
                f"`units` must be a positive integer. Received: units={units}"
            )
        if not isinstance(num_pieces, int) or num_pieces < 2:
            raise ValueError(
                "`num_pieces` must be an integer >= 2. "
                f"Received: num_pieces={num_pieces}"
            )
        self.units = units
        self.num_pieces = num_pieces
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)

    def build(self, input_shape):
        self.kernel = self.add_weight(
            name="kernel",
            shape=(input_shape[-1], self.units * self.num_pieces),
            initializer=self.kernel_initializer,
        )
        self.bias = None
        if self.use_bias:
            self.bias = self.add_weight(
                name="bias",
                shape=(self.units * self.num_pieces,),
                initializer=self.bias_initializer,
            )

    def call(self, inputs):
        pre_activation = ops.matmul(inputs, self.kernel)
        if self.bias is not None:
            pre_activation = pre_activation + self.bias
        # (..., units * pieces) -> (..., units, pieces): neighbours grouped.
        grouped = ops.reshape(
            pre_activation,
            (*ops.shape(pre_activation)[:-1], self.units, self.num_pieces),
        )
        return ops.max(grouped, axis=-1)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.units,)

    def get_config(self):
        return {
            **super().get_config(),
            "units": self.units,
            "num_pieces": self.num_pieces,
            "use_bias": self.use_bias,
            "kernel_initializer": keras.initializers.serialize(
                self.kernel_initializer
            ),
            "bias_initializer": keras.initializers.serialize(
                self.bias_initializer
            ),
        }
