"""Pervasive Attention's pooling over the real source positions."""

import keras
from keras import ops

from keras_bahdanau.validation import check_choice

POOLINGS = ("max", "average", "attention", "max+attention", "average+attention")
# Finite stand-in for -inf in masked max / softmax: -inf would turn an
# all-padding row into NaN (inf - inf) instead of a harmless constant.
_MASK_VALUE = -1e9
# `alignment`: values this close to a channel's maximum tie with it. XLA
# may compute the features once for the maximum and again for the
# comparison (in two fusions, each compiled on its own), and the two can
# differ in the last bits: bitwise equality then finds no winner at all.
_TIE_RTOL = 1e-5
_TIE_ATOL = 1e-6


@keras.saving.register_keras_serializable(package="keras_bahdanau")
class SourcePooling(keras.layers.Layer):
    """Pools the grid over real source positions (Elbayad et al., Sec. 3).

    Args:
        pooling: `"max"`, `"average"` (sum / `sqrt(|s|)`), `"attention"`
            (`sqrt(|s|) sum_i rho_i H_i`, `rho = softmax(w^T H)`), or
            `"max+attention"` / `"average+attention"` (concatenated).

    Call arguments:
        inputs: float `(batch, Ty, Tx, C)`.
        source_mask: bool `(batch, Tx)`.

    Returns:
        Float `(batch, Ty, C)`, or `(batch, Ty, 2 C)` for the
        concatenations. Rows whose source is all padding are 0.

    Example:

    >>> pooling = SourcePooling("max+attention")
    >>> features = np.random.rand(2, 3, 5, 8).astype("float32")
    >>> source_mask = np.array([[1, 1, 1, 1, 0], [1, 1, 0, 0, 0]], bool)
    >>> tuple(pooling(features, source_mask).shape)
    (2, 3, 16)
    >>> tuple(pooling.alignment(features, source_mask).shape)
    (2, 3, 5)

    Reference:
        Elbayad et al. (2018), Sec. 3 (target sequence prediction).
    """

    def __init__(self, pooling="max", **kwargs):
        super().__init__(**kwargs)
        check_choice("pooling", pooling, POOLINGS)
        self.pooling = pooling
        self.attention_score = None
        if "attention" in pooling:
            # The bias would cancel in the softmax over source positions.
            self.attention_score = keras.layers.Dense(
                1, use_bias=False, dtype=self.dtype_policy, name="score"
            )

    def build(self, input_shape):
        if self.attention_score is not None:
            self.attention_score.build(input_shape)

    def call(self, inputs, source_mask):
        # Pooling runs in float32: the masked max and softmax need a large
        # negative fill that float16 cannot hold.
        features = ops.cast(inputs, "float32")
        # (batch, Tx) -> (batch, 1, Tx, 1)
        mask = source_mask[:, None, :, None]
        # (batch, 1, Tx, 1) -> (batch, 1, 1)
        length = ops.sum(ops.cast(mask, "float32"), axis=2)
        scale = ops.sqrt(ops.maximum(length, 1.0))
        pooled = []
        if "max" in self.pooling:
            masked = ops.where(mask, features, _MASK_VALUE)
            pooled.append(ops.max(masked, axis=2))  # (batch, Ty, C)
        if "average" in self.pooling:
            summed = ops.sum(ops.where(mask, features, 0.0), axis=2)
            pooled.append(summed / scale)
        if "attention" in self.pooling:
            # (batch, Ty, Tx, C) -> (batch, Ty, Tx, 1)
            scores = ops.cast(self.attention_score(inputs), "float32")
            scores = ops.where(mask, scores, _MASK_VALUE)
            weights = ops.softmax(scores, axis=2)
            weights = weights * ops.cast(mask, "float32")
            context = ops.sum(weights * features, axis=2)  # (batch, Ty, C)
            pooled.append(context * scale)
        # (batch, Ty, C) or (batch, Ty, 2 C)
        pooled = ops.concatenate(pooled, axis=-1)
        # An all-padding source (e.g. a padding row in a batch) pools to 0
        # rather than to the -1e9 fill.
        pooled = ops.where(length > 0, pooled, 0.0)
        return ops.cast(pooled, self.compute_dtype)

    def alignment(self, inputs, source_mask):
        """Share of channels whose max over source positions is at `i`.

        A channel whose maximum is reached at several positions (to a
        relative 1e-5 plus 1e-6: more than the rounding by which two
        compilations of the same features differ) gives each of them an
        equal share of its unit of credit.

        Args:
            inputs: float `(batch, Ty, Tx, C)` final grid features.
            source_mask: bool `(batch, Tx)`.

        Returns:
            Float32 `(batch, Ty, Tx)`, rows summing to 1 over real source
            positions (0 everywhere for an all-padding source).
        """
        features = ops.cast(inputs, "float32")
        mask = source_mask[:, None, :, None]  # (batch, 1, Tx, 1)
        masked = ops.where(mask, features, _MASK_VALUE)
        # (batch, Ty, 1, C)
        maximum = ops.max(masked, axis=2, keepdims=True)
        # Near enough to the maximum is a winner (`_TIE_RTOL`).
        tolerance = _TIE_RTOL * ops.abs(maximum) + _TIE_ATOL
        winners = ops.logical_and(
            ops.greater_equal(masked, maximum - tolerance), mask
        )
        winners = ops.cast(winners, "float32")  # (batch, Ty, Tx, C)
        # Ties share the channel's unit of credit.
        ties = ops.maximum(ops.sum(winners, axis=2, keepdims=True), 1.0)
        # (batch, Ty, Tx, C) -> (batch, Ty, Tx)
        return ops.mean(winners / ties, axis=-1)

    def compute_output_shape(self, inputs_shape, source_mask_shape):
        channels = inputs_shape[-1]
        if "+" in self.pooling and channels is not None:
            channels *= 2
        return (inputs_shape[0], inputs_shape[1], channels)

    def get_config(self):
        return {**super().get_config(), "pooling": self.pooling}
