"""Batch norm over the real cells of the grid, then ReLU or GLU."""

import keras
from keras import ops

ACTIVATIONS = ("relu", "glu")


@keras.saving.register_keras_serializable(package="keras_bahdanau")
class _MaskedNormActivation(keras.layers.Layer):
    """Batch norm over the real grid cells, then ReLU or GLU."""

    def __init__(self, activation="relu", **kwargs):
        super().__init__(**kwargs)
        self.activation = activation
        # PyTorch's BatchNorm2d defaults (the authors' code): Keras's
        # momentum=0.99 lags far behind the batch statistics early in
        # training, so inference-mode logits disagree with training ones.
        self.norm = keras.layers.BatchNormalization(
            momentum=0.9,
            epsilon=1e-5,
            dtype=self.dtype_policy,
            name="batch_norm",
        )

    def build(self, input_shape):
        self.norm.build(input_shape)

    def call(self, inputs, source_mask, target_mask, training=None):
        # (batch, Ty, Tx): the real cells, whose statistics BN may use.
        cells = ops.logical_and(target_mask[:, :, None], source_mask[:, None])
        x = self.norm(inputs, training=training, mask=cells)
        if self.activation == "glu":
            # (batch, Ty, Tx, 2n) -> (batch, Ty, Tx, n)
            values, gates = ops.split(x, 2, axis=-1)
            return values * ops.sigmoid(gates)
        return ops.relu(x)

    def channel_slice(self, inputs, start):
        """`call` in inference mode on the input channels `start:start + n`.

        Batch norm in inference mode and ReLU act on each channel alone,
        so on a concatenation this is the concatenation of the parts. Not
        so for a GLU, which pairs channel `i` with channel `i + C / 2`.

        Args:
            inputs: float `(..., n)`, channels `start:start + n` of the
                layer's input.
            start: int, the first channel.

        Returns:
            `(..., n)` in the compute dtype.
        """
        if self.activation != "relu":
            raise ValueError(
                "A GLU mixes channels, so it has no per-channel slice. "
                f"Received: activation={self.activation!r}"
            )
        norm = self.norm
        part = slice(start, start + inputs.shape[-1])
        # As in BatchNormalization.call: float32 at least.
        inputs = ops.cast(
            inputs, keras.backend.result_type(inputs.dtype, "float32")
        )
        x = ops.batch_normalization(
            inputs,
            mean=ops.cast(norm.moving_mean[part], inputs.dtype),
            variance=ops.cast(norm.moving_variance[part], inputs.dtype),
            axis=-1,
            offset=ops.cast(norm.beta[part], inputs.dtype),
            scale=ops.cast(norm.gamma[part], inputs.dtype),
            epsilon=norm.epsilon,
        )
        return ops.relu(ops.cast(x, self.compute_dtype))

    def compute_output_shape(self, input_shape):
        channels = input_shape[-1]
        if self.activation == "glu" and channels is not None:
            channels //= 2
        return (*input_shape[:-1], channels)

    def get_config(self):
        return {**super().get_config(), "activation": self.activation}
