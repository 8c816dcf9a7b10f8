"""The source x target grid of Pervasive Attention."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_bahdanau")
class _Grid(keras.layers.Layer):
    """Pairs every target position with every source position.

    Without `channels`, cell `(j, i)` is `[x_i; y_j]`, and the grid is
    returned factored (`is_factored`): the tuple `(source, target)`, which
    the DenseNet reads part by part and `concatenate_grid` builds. With
    `channels`, the pairs `[x_i; y_j]` through a 1x1 convolution with a
    bias (kernel `K = [K_s; K_t]`), computed as `K_s^T x_i + (K_t^T y_j +
    b)`: the same map, without the `ds + dt` channel grid.
    """

    def __init__(self, channels=None, **kwargs):
        super().__init__(**kwargs)
        self.channels = channels

    def build(self, source_shape, target_shape):
        if self.channels is None:
            return
        self.kernel = self.add_weight(
            name="kernel",
            shape=(source_shape[-1] + target_shape[-1], self.channels),
            initializer="glorot_uniform",
        )
        self.bias = self.add_weight(
            name="bias", shape=(self.channels,), initializer="zeros"
        )

    def call(self, source, target):
        if self.channels is None:
            return source, target
        return self.combine(self.source_term(source), self.target_term(target))

    def source_term(self, source):
        """`(batch, Tx, ds) -> (batch, Tx, N)`: `K_s^T x_i`."""
        kernel = self.kernel[: source.shape[-1]]
        return ops.matmul(source, ops.cast(kernel, source.dtype))

    def target_term(self, target):
        """`(batch, Ty, dt) -> (batch, Ty, N)`: `K_t^T y_j + b`."""
        kernel = self.kernel[self.kernel.shape[0] - target.shape[-1] :]
        term = ops.matmul(target, ops.cast(kernel, target.dtype))
        return term + ops.cast(self.bias, target.dtype)

    @staticmethod
    def combine(source_term, target_term):
        """`(batch, Tx, N), (batch, Ty, N) -> (batch, Ty, Tx, N)`."""
        return source_term[:, None] + target_term[:, :, None]

    def compute_output_shape(self, source_shape, target_shape):
        if self.channels is None:
            return tuple(source_shape), tuple(target_shape)
        return (
            source_shape[0],
            target_shape[1],
            source_shape[1],
            self.channels,
        )

    def get_config(self):
        return {**super().get_config(), "channels": self.channels}


def concatenate_grid(source, target, *features):
    """Builds a factored grid: cell `(j, i)` is `[x_i; y_j; features_ji]`.

    Example:

    >>> source = np.zeros((2, 5, 3), "float32")
    >>> target = np.ones((2, 4, 1), "float32")
    >>> tuple(concatenate_grid(source, target).shape)
    (2, 4, 5, 4)

    Args:
        source: `(batch, Tx, ds)`.
        target: `(batch, Ty, dt)`.
        *features: none, or `(batch, Ty, Tx, n)`.

    Returns:
        `(batch, Ty, Tx, ds + dt + n)`.
    """
    # (batch, Tx, ds) -> (batch, Ty, Tx, ds)
    sources = ops.add(source[:, None], ops.zeros_like(target[:, :, None, :1]))
    # (batch, Ty, dt) -> (batch, Ty, Tx, dt)
    targets = ops.add(
        target[:, :, None], ops.zeros_like(source[:, None, :, :1])
    )
    return ops.concatenate([sources, targets, *features], axis=-1)


def is_factored(grid):
    """Whether a grid, or a grid's shape, is factored: a tuple of parts.

    A factored grid is `(source, target, *features)`: `(batch, Tx, ds)`,
    `(batch, Ty, dt)` and none or one `(batch, Ty, Tx, n)`; its cell
    `(j, i)` is `[source_i; target_j; features_ji]`.
    """
    # A shape is a tuple too, of ints and None.
    return isinstance(grid, (tuple, list)) and not isinstance(
        grid[0], (int, type(None))
    )


def grid_shape(shape):
    """The whole grid's shape of a grid's shape, factored or not."""
    if not is_factored(shape):
        return tuple(shape)
    source_shape, target_shape, *features_shape = shape
    channels = source_shape[-1] + target_shape[-1]
    channels += sum(part[-1] for part in features_shape)
    return (*target_shape[:2], source_shape[1], channels)
