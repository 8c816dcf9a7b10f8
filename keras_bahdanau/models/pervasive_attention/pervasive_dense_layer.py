"""One DenseNet layer of Pervasive Attention, masked on the grid."""

import keras
from keras import ops

from keras_bahdanau.models.pervasive_attention.grid import concatenate_grid
from keras_bahdanau.models.pervasive_attention.grid import grid_shape
from keras_bahdanau.models.pervasive_attention.grid import is_factored
from keras_bahdanau.models.pervasive_attention.masked_norm_activation import (
    _MaskedNormActivation,
)


@keras.saving.register_keras_serializable(package="keras_bahdanau")
class PervasiveDenseLayer(keras.layers.Layer):
    """One DenseNet layer of Pervasive Attention, masked on the grid.

    `BN -> act -> 1x1 conv -> BN -> act -> masked k x k conv -> dropout`,
    returning its input with the `growth_rate` new channels appended
    (see `PervasiveAttention` for the masking and the padding). `step`
    computes one new target row for incremental decoding.

    With ReLU the input may be factored (`grid.is_factored`): `(source,
    target)` or `(source, target, features)`, cell `(j, i)` being
    `[source_i; target_j; features_ji]`. Batch norm and ReLU act on each
    channel alone and the 1x1 convolution is a sum over its input
    channels, so the embeddings' share of it is two small products, one
    per source position and one per target position, broadcast over the
    grid: the same function, without the `ds + dt` embedding channels of
    every cell. The output is then factored too, its new channels
    appended to `features`. A GLU layer builds the grid of a factored
    input (`concatenate_grid`).

    Args:
        growth_rate: int, `g`, the channels added.
        kernel_size: odd int, `k`.
        bottleneck_factor: int, the 1x1 conv has
            `bottleneck_factor * growth_rate` output channels.
        activation: `"relu"` or `"glu"`.
        dropout: float, dropout on the new channels.

    Call arguments:
        inputs: float `(batch, Ty, Tx, f)`, or with ReLU a factored grid
            of `f` channels in all: `(batch, Tx, ds)`, `(batch, Ty, dt)`
            and none or one `(batch, Ty, Tx, n)`.
        source_mask: bool `(batch, Tx)`, `True` on real source tokens.
        target_mask: bool `(batch, Ty)`, `True` on real target tokens.
        training: bool.

    Returns:
        Float `(batch, Ty, Tx, f + growth_rate)`; factored: `(source,
        target, features)`, `features` `(batch, Ty, Tx, n + growth_rate)`.

    Example:

    >>> layer = PervasiveDenseLayer(growth_rate=4, kernel_size=3)
    >>> grid = np.random.rand(2, 3, 5, 8).astype("float32")
    >>> source_mask = np.array([[1, 1, 1, 1, 0], [1, 1, 0, 0, 0]], bool)
    >>> target_mask = np.ones((2, 3), bool)
    >>> tuple(layer(grid, source_mask, target_mask).shape)
    (2, 3, 5, 12)
    >>> source, target = grid[:, 0, :, :6], grid[:, :, 0, 6:]
    >>> _, _, features = layer((source, target), source_mask, target_mask)
    >>> tuple(features.shape)
    (2, 3, 5, 4)

    Reference:
        Elbayad et al. (2018), Sec. 3 (convolutional layers).
    """

    def __init__(
        self,
        growth_rate,
        kernel_size,
        bottleneck_factor=4,
        activation="relu",
        dropout=0.0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.growth_rate = growth_rate
        self.kernel_size = kernel_size
        self.bottleneck_factor = bottleneck_factor
        self.activation = activation
        self.dropout = dropout
        self.norm1 = _MaskedNormActivation(
            activation, dtype=self.dtype_policy, name="norm1"
        )
        # A 1x1 convolution is a Dense layer on the channel axis.
        self.conv1 = keras.layers.Dense(
            bottleneck_factor * growth_rate,
            use_bias=False,
            dtype=self.dtype_policy,
            name="conv1",
        )
        self.norm2 = _MaskedNormActivation(
            activation, dtype=self.dtype_policy, name="norm2"
        )
        # Only the causal rows of the masked k x k kernel: the current
        # target row and the k // 2 before it.
        self.conv2 = keras.layers.Conv2D(
            growth_rate,
            (kernel_size // 2 + 1, kernel_size),
            padding="valid",
            use_bias=False,
            dtype=self.dtype_policy,
            name="conv2",
        )
        self.feature_dropout = keras.layers.Dropout(
            dropout, dtype=self.dtype_policy, name="feature_dropout"
        )

    @property
    def convolution_channels(self):
        """Input channels of the masked `k x k` convolution."""
        bottleneck = self.bottleneck_factor * self.growth_rate
        return bottleneck // 2 if self.activation == "glu" else bottleneck

    def build(self, input_shape):
        input_shape = grid_shape(input_shape)
        self.norm1.build(input_shape)
        conv1_input_shape = self.norm1.compute_output_shape(input_shape)
        self.conv1.build(conv1_input_shape)
        self.norm2.build(self.conv1.compute_output_shape(conv1_input_shape))
        # It convolves the zero-padded rows, so its spatial shape is not
        # the input's (a fixed one could be shorter than the kernel).
        self.conv2.build(
            (input_shape[0], None, None, self.convolution_channels)
        )

    def call(self, inputs, source_mask, target_mask, training=None):
        if is_factored(inputs) and self.activation != "relu":
            # A GLU mixes channels: it needs the whole grid.
            inputs = concatenate_grid(*inputs)
        # (batch, Ty, Tx, f) -> (batch, Ty, Tx, c)
        x = self._bottleneck(inputs, source_mask, target_mask, training)
        # (batch, Ty, Tx, c) -> (batch, Ty, Tx, g)
        x = self._new_features(
            self._causal_convolution(x), source_mask, training
        )
        if is_factored(inputs):
            return (*inputs, x)  # one part more
        # (batch, Ty, Tx, f) -> (batch, Ty, Tx, f + g)
        return ops.concatenate([inputs, x], axis=-1)

    def initial_rows(self, batch_size, source_length):
        """The decoding cache before the first target row: zeros.

        Args:
            batch_size: int or scalar int tensor.
            source_length: int or scalar int tensor, `Tx`.

        Returns:
            The causal zero padding `(batch, k // 2, Tx, c)`, `c` =
            `convolution_channels`, in the compute dtype.
        """
        shape = (
            batch_size,
            self.kernel_size // 2,
            source_length,
            self.convolution_channels,
        )
        return ops.zeros(shape, dtype=self.compute_dtype)

    def step(
        self, inputs, rows, source_mask, target_mask, start=0, partial=None
    ):
        """The layer on one new target row, in inference mode.

        Equals the row `j` of `call` on the whole grid (with
        `training=False`) when `rows` holds the rows `j - k // 2, ...,
        j - 1` of the masked convolution's input (zeros before row 0).

        With `partial`, `inputs` are only the channels `start:` of the
        layer's input and `partial` is the 1x1 convolution's share of the
        channels before them (`bottleneck_term`, ReLU only):
        `PervasiveAttention.decode_step` computes that share of the
        embedding channels once per sentence and once per token.

        Args:
            inputs: float `(batch, 1, Tx, f)`, the layer input at row `j`
                (its channels `start:` with `partial`; None when there are
                none).
            rows: float `(batch, k // 2, Tx, c)` from `initial_rows` or
                the previous step, or None when `kernel_size == 1`.
            source_mask: bool `(batch, Tx)`.
            target_mask: bool `(batch, 1)`.
            start: int, the first input channel of `inputs`.
            partial: None, or float `(batch, 1, Tx, c)`: the sum of
                `bottleneck_term` over the input channels `:start`.

        Returns:
            `(outputs, new_rows)`: `inputs` with the `g` new channels
            appended, float `(batch, 1, Tx, f + g)`, and the rows
            `j - k // 2 + 1, ..., j`, same shape as `rows` (None when
            `rows` is None).
        """
        if partial is None:
            # (batch, 1, Tx, f) -> (batch, 1, Tx, c)
            x = self._bottleneck(inputs, source_mask, target_mask, False)
        else:
            x = partial
            if inputs is not None:
                x = x + self.bottleneck_term(inputs, start)
            x = self._bottleneck_output(x, source_mask, target_mask, False)
        if rows is not None:
            # (batch, k // 2 + 1, Tx, c): the kernel's causal window.
            x = ops.concatenate([rows, x], axis=1)
        # (batch, k // 2 + 1, Tx, c) -> (batch, 1, Tx, g)
        new_features = self._new_features(
            self._window_convolution(x), source_mask, False
        )
        if inputs is None:
            outputs = new_features
        else:
            outputs = ops.concatenate([inputs, new_features], axis=-1)
        # A shift register: drop the oldest row, keep the new one.
        new_rows = None if rows is None else x[:, 1:]
        return outputs, new_rows

    def bottleneck_term(self, inputs, start):
        """The 1x1 convolution of input channels `start:start + n` alone.

        With ReLU, `BN -> ReLU -> 1x1 conv` in inference mode is a sum
        over any split of the input channels of this term, so a part that
        does not change from step to step can be computed once.

        Args:
            inputs: float `(..., n)`, channels `start:start + n` of the
                layer input.
            start: int.

        Returns:
            `(..., c)`, `c = bottleneck_factor * growth_rate`.
        """
        x = self.norm1.channel_slice(inputs, start)
        kernel = self.conv1.kernel[start : start + inputs.shape[-1]]
        return ops.matmul(x, ops.cast(kernel, x.dtype))

    def _bottleneck(self, inputs, source_mask, target_mask, training):
        """`BN -> act -> 1x1 conv -> BN -> act`, padded source cells 0."""
        x = self.norm1(inputs, source_mask, target_mask, training=training)
        if is_factored(x):
            # The 1x1 convolution of `[source_i; target_j; features_ji]`:
            # one product per part, the embeddings' without the grid.
            source, target, *features = x
            kernel = ops.cast(self.conv1.kernel, source.dtype)
            ds, dt = source.shape[-1], target.shape[-1]
            # (batch, Tx, ds) -> (batch, 1, Tx, c)
            x = ops.matmul(source, kernel[:ds])[:, None]
            # (batch, Ty, dt) -> (batch, Ty, 1, c)
            x = x + ops.matmul(target, kernel[ds : ds + dt])[:, :, None]
            if features:
                # (batch, Ty, Tx, n) -> (batch, Ty, Tx, c)
                features = ops.concatenate(features, axis=-1)
                x = x + ops.matmul(features, kernel[ds + dt :])
        else:
            x = self.conv1(x)  # (batch, T, Tx, bottleneck)
        return self._bottleneck_output(x, source_mask, target_mask, training)

    def _bottleneck_output(self, x, source_mask, target_mask, training):
        """The bottleneck's `BN -> act` after the 1x1 convolution."""
        x = self.norm2(x, source_mask, target_mask, training=training)
        # BN shifts the padded cells away from 0; zero them so that the
        # convolution sees the same zeros as beyond the sequence ends.
        # (batch, Tx) -> (batch, 1, Tx, 1)
        return x * ops.cast(source_mask, x.dtype)[:, None, :, None]

    def _causal_convolution(self, x):
        """The causal `k x k` convolution of whole target rows.

        `(batch, T, Tx, c) -> (batch, T, Tx, g)`: output row `t` reads
        input rows `t - k // 2, ..., t` (zeros before row 0), "same" on
        the source axis. Computed as one `1 x k` convolution whose output
        channels hold the `k // 2 + 1` kernel rows, each row's products
        then shifted down to the output row that reads them: no padded
        copy of the input, and with XLA a faster forward and backward pass
        than the `(k // 2 + 1) x k` convolution of the padded grid (whose
        kernel gradient XLA computes as a slow convolution with a `T x Tx`
        window; docs/profile.md).
        """
        half = self.kernel_size // 2
        kernel = ops.cast(self.conv2.kernel, x.dtype)
        rows, width, channels, growth = kernel.shape
        # (k // 2 + 1, k, c, g) -> (1, k, c, (k // 2 + 1) g): row p is
        # output block p.
        kernel = ops.transpose(kernel, (1, 2, 0, 3))
        kernel = ops.reshape(kernel, (1, width, channels, rows * growth))
        # (batch, T, Tx, c) -> (batch, T, Tx, (k // 2 + 1) g)
        products = ops.conv(x, kernel, padding="same")
        # Output row t takes kernel row p's products of input row
        # t - (k // 2 - p): block p shifted down k // 2 - p rows, zeros
        # (the products of the zero rows before the first) above.
        outputs = products[..., half * growth :]  # p = k // 2: row t
        for p in range(half):
            block = products[..., p * growth : (p + 1) * growth]
            shift = half - p
            # (batch, T, Tx, g), k // 2 - p rows down.
            shifted = [ops.zeros_like(block[:, :shift]), block[:, :-shift]]
            outputs = outputs + ops.concatenate(shifted, axis=1)
        return outputs

    def _window_convolution(self, rows):
        """The causal `k x k` convolution of a window of target rows.

        `(batch, k // 2 + T, Tx, c) -> (batch, T, Tx, g)`: output row `t`
        reads input rows `t, ..., t + k // 2` (the kernel's rows up to its
        centre), "same" on the source axis (`step`, one row at a time).
        """
        half = self.kernel_size // 2
        # (batch, R, Tx, c) -> (batch, R, Tx + 2 (k // 2), c)
        x = ops.pad(rows, [[0, 0], [0, 0], [half, half], [0, 0]])
        return self.conv2(x)  # (batch, R - k // 2, Tx, g)

    def _new_features(self, x, source_mask, training):
        """Padded source cells to exactly zero, then dropout."""
        x = x * ops.cast(source_mask, x.dtype)[:, None, :, None]
        return self.feature_dropout(x, training=training)

    def compute_output_shape(self, input_shape):
        shape = grid_shape(input_shape)
        if is_factored(input_shape) and self.activation == "relu":
            # One part more: (batch, Ty, Tx, g).
            parts = tuple(tuple(part) for part in input_shape)
            return (*parts, (*shape[:3], self.growth_rate))
        channels = shape[-1]
        if channels is not None:
            channels += self.growth_rate
        return (*shape[:-1], channels)

    def get_config(self):
        return {
            **super().get_config(),
            "growth_rate": self.growth_rate,
            "kernel_size": self.kernel_size,
            "bottleneck_factor": self.bottleneck_factor,
            "activation": self.activation,
            "dropout": self.dropout,
        }
