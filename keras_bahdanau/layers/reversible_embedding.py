import keras
from keras import ops

from keras_bahdanau.validation import check_int


@keras.saving.register_keras_serializable(package="keras_bahdanau")
class ReversibleEmbedding(keras.layers.Layer):
    """An embedding whose matrix is also the output projection.

    `call(ids)` embeds as `keras.layers.Embedding` does; `call(x,
    reverse=True)` computes the logits `x E^T + b` with the same matrix
    `E` and a bias of its own: the tied target embedding and output
    projection of Press & Wolf (2017) and Inan et al. (2017), which
    Sennrich & Zhang (2019) count among the techniques that pay on small
    data. In RNNsearch `x` is the maxout readout `t_i`, so its size must
    equal the embedding size.

    Args:
        input_dim: int, the vocabulary size.
        output_dim: int, the embedding size.
        embeddings_initializer: initializer of `E`.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: int ids `(...)`, or with `reverse=True` float features
            `(..., output_dim)`.
        reverse: bool, whether to project features onto the vocabulary.

    Returns:
        `(..., output_dim)` embeddings, or float32 logits `(..., input_dim)`
        with `reverse=True`.

    Example:

    >>> layer = ReversibleEmbedding(10, 4)
    >>> embedded = layer(np.array([[1, 2]]))  # (1, 2, 4)
    >>> tuple(layer(embedded, reverse=True).shape)
    (1, 2, 10)

    Not `keras.layers.ReversibleEmbedding` (Keras 3.15): its tied reverse
    call has no bias, and `x E^T + b` with its own `b` is the output layer
    of both RNNsearch (`W_o`'s bias) and the Pervasive Attention authors'
    code.

    Reference:
        O. Press and L. Wolf. Using the Output Embedding to Improve Language
        Models. EACL 2017 (arXiv:1608.05859).
    """

    def __init__(
        self,
        input_dim,
        output_dim,
        embeddings_initializer="uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_int("input_dim", input_dim)
        check_int("output_dim", output_dim)
        self.input_dim = input_dim
        self.output_dim = output_dim
        self.embeddings_initializer = keras.initializers.get(
            embeddings_initializer
        )

    def build(self, input_shape=None):
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.input_dim, self.output_dim),
            initializer=self.embeddings_initializer,
        )
        self.reverse_bias = self.add_weight(
            name="reverse_bias", shape=(self.input_dim,), initializer="zeros"
        )

    def call(self, inputs, reverse=False):
        if not reverse:
            # (...) -> (..., m)
            return ops.take(self.embeddings, ops.cast(inputs, "int32"), axis=0)
        # (..., m) x (V, m)^T -> (..., V), in float32 like the logits of
        # every model of the package.
        kernel = ops.cast(self.embeddings, "float32")
        logits = ops.matmul(ops.cast(inputs, "float32"), ops.transpose(kernel))
        return logits + ops.cast(self.reverse_bias, "float32")

    def compute_output_shape(self, input_shape, reverse=False):
        if reverse:
            return tuple(input_shape[:-1]) + (self.input_dim,)
        return tuple(input_shape) + (self.output_dim,)

    def compute_output_spec(self, inputs, reverse=False):
        shape = self.compute_output_shape(inputs.shape, reverse)
        dtype = "float32" if reverse else self.compute_dtype
        return keras.KerasTensor(shape, dtype=dtype)

    def get_config(self):
        return {
            **super().get_config(),
            "input_dim": self.input_dim,
            "output_dim": self.output_dim,
            "embeddings_initializer": keras.initializers.serialize(
                self.embeddings_initializer
            ),
        }
