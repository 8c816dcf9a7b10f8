"""Batch norm over the real cells of the grid, then ReLU or GLU."""

import keras
from keras import ops

from keras_bahdanau.models.pervasive_attention.grid import grid_shape
from keras_bahdanau.models.pervasive_attention.grid import is_factored

ACTIVATIONS = ("relu", "glu")


@keras.saving.register_keras_serializable(package="keras_bahdanau")
class _MaskedNormActivation(keras.layers.Layer):
    """Batch norm over the real grid cells, then ReLU or GLU.

    The grid is a tensor `(batch, Ty, Tx, C)` or, with ReLU, factored
    (`grid.is_factored`): `(source, target, *features)`, cell `(j, i)`
    being `[source_i; target_j; features_ji]`. Batch norm and ReLU act
    on each channel alone, so each part is normalized on its own axes,
    the embeddings without their copies along the other axis; the
    result is the same parts, as if normalized on the whole grid.

    In training mode the moments are those of `BatchNormalization` over
    the real cells (real target row and real source position): each
    entry of a part weighs as many real cells as it stands in, so a
    source position counts once per real target row. The layer computes
    them itself rather than calling `BatchNormalization`, whose
    variables (`norm`) it uses and updates the same way.
    """

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
        self.norm.build(grid_shape(input_shape))

    def call(self, inputs, source_mask, target_mask, training=None):
        factored = is_factored(inputs)
        if factored and self.activation != "relu":
            raise ValueError(
                "A GLU mixes channels, so it cannot read a factored grid. "
                f"Received: activation={self.activation!r}"
            )
        norm = self.norm
        parts = list(inputs) if factored else [inputs]
        # As BatchNormalization: float32 at least.
        dtype = keras.backend.result_type(parts[0].dtype, "float32")
        parts = [ops.cast(part, dtype) for part in parts]
        if training and norm.trainable:
            mean, variance = _masked_moments(
                parts, factored, source_mask, target_mask
            )
            norm.moving_mean.assign(
                ops.cast(norm.moving_mean, dtype) * norm.momentum
                + mean * (1.0 - norm.momentum)
            )
            norm.moving_variance.assign(
                ops.cast(norm.moving_variance, dtype) * norm.momentum
                + variance * (1.0 - norm.momentum)
            )
        else:
            mean = ops.cast(norm.moving_mean, dtype)
            variance = ops.cast(norm.moving_variance, dtype)
        outputs = []
        start = 0
        for part in parts:
            channels = slice(start, start + part.shape[-1])
            start += part.shape[-1]
            x = ops.batch_normalization(
                part,
                mean=mean[channels],
                variance=variance[channels],
                axis=-1,
                offset=ops.cast(norm.beta[channels], dtype),
                scale=ops.cast(norm.gamma[channels], dtype),
                epsilon=norm.epsilon,
            )
            outputs.append(ops.cast(x, self.compute_dtype))
        if factored:
            return tuple(ops.relu(x) for x in outputs)
        (x,) = outputs
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
        if is_factored(input_shape):
            return tuple(tuple(shape) for shape in input_shape)
        channels = input_shape[-1]
        if self.activation == "glu" and channels is not None:
            channels //= 2
        return (*input_shape[:-1], channels)

    def get_config(self):
        return {**super().get_config(), "activation": self.activation}


def _masked_moments(parts, factored, source_mask, target_mask):
    """Per-channel mean and variance over the real cells of a grid.

    The moments of `BatchNormalization` with the real cells as its mask,
    denominators included (`cells + epsilon`).

    Args:
        parts: float tensors, `[grid]` `(batch, Ty, Tx, C)`, or factored
            `[source, target, *features]`.
        factored: bool, which of the two `parts` is.
        source_mask: bool `(batch, Tx)`.
        target_mask: bool `(batch, Ty)`.

    Returns:
        `(mean, variance)`, each `(C,)`, `C` all the parts' channels.
    """
    dtype = parts[0].dtype
    source_mask = ops.cast(source_mask, dtype)
    target_mask = ops.cast(target_mask, dtype)
    # (batch, Ty, Tx): 1 on the real cells.
    cells = target_mask[:, :, None] * source_mask[:, None]
    weights = [cells] * len(parts)
    if factored:
        # (batch, 1): how many real cells hold a source position (one per
        # real target row) and a target position (one per real source).
        rows = ops.sum(target_mask, axis=1, keepdims=True)
        columns = ops.sum(source_mask, axis=1, keepdims=True)
        weights[:2] = [source_mask * rows, target_mask * columns]
    total = ops.sum(cells) + keras.config.epsilon()
    means, variances = [], []
    for part, weight in zip(parts, weights, strict=True):
        weight = weight[..., None]  # (batch, ..., 1)
        axes = tuple(range(len(part.shape) - 1))
        mean = ops.sum(weight * part, axis=axes) / total
        squares = weight * ops.square(part - mean)
        means.append(mean)
        variances.append(ops.sum(squares, axis=axes) / total)
    return ops.concatenate(means, axis=0), ops.concatenate(variances, axis=0)
