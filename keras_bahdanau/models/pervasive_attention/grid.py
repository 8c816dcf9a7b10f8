"""The source x target grid of Pervasive Attention."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_bahdanau")
class _Grid(keras.layers.Layer):
    """Pairs every target position with every source position.

    With `channels`, the pairs `[x_i; y_j]` through a 1x1 convolution with
    a bias (kernel `K = [K_s; K_t]`), computed as `K_s^T x_i + (K_t^T y_j
    + b)`: the same map, without the `ds + dt` channel grid.
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
        if self.channels is not None:
            return self.combine(
                self.source_term(source), self.target_term(target)
            )
        # (batch, Tx, ds) -> (batch, Ty, Tx, ds)
        sources = source[:, None] + ops.zeros_like(target[:, :, None, :1])
        # (batch, Ty, dt) -> (batch, Ty, Tx, dt)
        targets = target[:, :, None] + ops.zeros_like(source[:, None, :, :1])
        return ops.concatenate([sources, targets], axis=-1)

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
        channels = self.channels or source_shape[-1] + target_shape[-1]
        return (source_shape[0], target_shape[1], source_shape[1], channels)

    def get_config(self):
        return {**super().get_config(), "channels": self.channels}
