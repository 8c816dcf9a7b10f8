"""Pervasive Attention: one 2D CNN over the source x target grid.

Elbayad, Besacier and Verbeek, "Pervasive Attention: 2D Convolutional
Neural Networks for Sequence-to-Sequence Prediction", CoNLL 2018
(arXiv:1808.03867).
"""

import types

import keras
from keras import ops

from keras_bahdanau.layers.reversible_embedding import ReversibleEmbedding
from keras_bahdanau.models.pervasive_attention.grid import _Grid
from keras_bahdanau.models.pervasive_attention.grid import concatenate_grid
from keras_bahdanau.models.pervasive_attention.grid import is_factored
from keras_bahdanau.models.pervasive_attention.masked_norm_activation import (
    ACTIVATIONS,
)
from keras_bahdanau.models.pervasive_attention.masked_norm_activation import (
    _MaskedNormActivation,
)
from keras_bahdanau.models.pervasive_attention.padding_mask import _PaddingMask
from keras_bahdanau.models.pervasive_attention.pervasive_dense_layer import (
    PervasiveDenseLayer,
)
from keras_bahdanau.models.pervasive_attention.presets import (
    PERVASIVE_ATTENTION_PRESETS,
)
from keras_bahdanau.models.pervasive_attention.source_pooling import POOLINGS
from keras_bahdanau.models.pervasive_attention.source_pooling import (
    SourcePooling,
)
from keras_bahdanau.models.translation_model import TranslationModel
from keras_bahdanau.models.translation_model import check_rate
from keras_bahdanau.models.translation_model import check_vocabulary_size
from keras_bahdanau.validation import check_choice
from keras_bahdanau.validation import check_int


@keras.saving.register_keras_serializable(package="keras_bahdanau")
class PervasiveAttention(TranslationModel):
    """Pervasive Attention: a DenseNet over the (target, source) grid.

    There is no encoder and no decoder: grid cell `(j, i)` holds `[x_i;
    y_j]`, the embeddings of source position `i` and of the decoder input
    at `j` (the previous token). A DenseNet of 2D convolutions re-encodes
    the source for every target prefix, and pooling over the source axis
    gives one vector per target position, projected to the target
    vocabulary (Sec. 3):

    1. Grid: `(batch, Ty, Tx, ds + dt)`, target-major as in the authors'
       code, so that pooling over the source (axis 2) leaves
       `(batch, Ty, channels)`. With `input_channels=N`, a 1x1
       convolution with a bias maps the `ds + dt` channels to `N` (the
       2018 code's `half_inputs`, `N = (ds + dt) / 2`), computed as
       `K_s^T x_i + K_t^T y_j + b` without the concatenated grid.
    2. DenseNet: layer `l` of `num_layers` maps its `f_0 + l g` channels
       (`f_0 = ds + dt`, or `N`; `g = growth_rate`) through `BN -> act ->
       1x1 conv (bottleneck_factor * g) -> BN -> act -> k x k conv (g) ->
       dropout` and appends the `g` new channels to its input. As in the
       authors' `MaskedConvolution`, the `k x k` kernel is masked so that
       target position `j` sees target positions `<= j` and all source
       positions; only its causal `(k // 2 + 1) x k` rows are stored
       (`kernel_size=5` is the "5 x 3" kernel of the slides). A final
       `BN -> act` follows the last layer (the authors' code). With ReLU
       and no `input_channels`, the grid's embedding channels are never
       copied to every cell: the layers read the grid factored,
       `(source, target, features)` (`PervasiveDenseLayer`), and the
       1x1 convolutions take the embeddings' share per source and per
       target position; the final `BN -> act` builds the whole grid for
       pooling. The same function, with fewer products.
    3. Pooling over the real source positions: `"max"`; `"average"`, the
       sum divided by `sqrt(|s|)`; `"attention"`, `sqrt(|s|) sum_i rho_ji
       H_ji` with `rho_j = softmax_i(w^T H_ji)`; or max or average
       concatenated with attention (`"max+attention"`,
       `"average+attention"`).
    4. Prediction (float32 logits): dropout and a linear layer to the
       target vocabulary; or, with `tie_embeddings=True`, as both versions
       of the authors' code tie it: a linear layer with a bias to `dt`
       channels `h`, dropout, then `h E^T + b` with the target embedding
       `E` (`V x dt`, one variable) and a vocabulary bias `b`.

    Padding: ids equal to 0. Padded source cells are zeroed before and
    after every `k x k` convolution (the only layer that mixes positions)
    and excluded from pooling and from the batch-norm statistics, so that
    in inference mode source padding leaves the logits unchanged. Target
    padding is harmless by causality (and also excluded from the
    statistics).

    `activation="glu"` replaces each ReLU by a gated linear unit over the
    channel axis (`a * sigmoid(b)` for the two halves), which halves the
    channels it receives.

    Decoding (`encode` / `decode_step`) is incremental, as in the authors'
    `MaskedConvolution`: only the masked convolutions mix target
    positions, each reading the current row of its input and the `k // 2`
    before it, which the cache keeps per layer. A step computes one new
    grid row through every layer (batch norm in inference mode is a
    per-channel affine map), so decoding `T` tokens costs `O(T Tx)` cell
    updates per layer instead of `O(T^2 Tx)`, with the teacher-forced
    logits of `__call__` to float rounding. With ReLU, `BN -> ReLU -> 1x1
    conv` acts on each input channel alone before the sum, so the share of
    the embedding channels `[x_i; y_j]` is a per-source-position term
    (computed once by `encode`) plus a per-token term: a step runs the
    products only over the features the layers added. After an
    `input_channels` reduction every channel mixes both embeddings, so a
    step runs whole rows through the layers (as with GLU); the reduction
    itself is still a per-source term plus a per-token one.

    Args:
        source_vocabulary_size: int, source vocabulary size (ids 0-3 are
            `[PAD]`, `[UNK]`, `[BOS]`, `[EOS]`).
        target_vocabulary_size: int, target vocabulary size.
        source_embedding_dim: int, `ds`.
        target_embedding_dim: int, `dt`.
        growth_rate: int, `g`, channels added by each DenseNet layer.
        num_layers: int, `L`, the DenseNet depth.
        kernel_size: odd int, `k`: the masked `k x k` kernel covers `k`
            source positions and the `k // 2 + 1` latest target positions.
        bottleneck_factor: int, the 1x1 convolution outputs
            `bottleneck_factor * growth_rate` channels (4 in the paper).
        activation: `"relu"` or `"glu"`.
        pooling: one of `"max"`, `"average"`, `"attention"`,
            `"max+attention"`, `"average+attention"`.
        dropout: float in `[0, 1)`, applied to the embeddings, to the new
            features of every layer and before the output projection (tied:
            after the projection to `dt`).
        input_channels: None (the DenseNet reads the `ds + dt` embedding
            channels), or an int `N`: the grid's channels after a 1x1
            convolution (with a bias), before the DenseNet.
        tie_embeddings: bool, whether the target embedding is also the
            output layer (step 4): `C' (V - dt) - dt` fewer parameters,
            `C'` the pooled size.
        dtype: optional dtype policy for the layers; the logits are
            float32 whatever it is.
        **kwargs: `keras.Model` keyword arguments (`name`, `trainable`).

    Call arguments:
        inputs: dict with `"source_ids"`, int32 `(batch, Tx)`, and
            `"target_ids"`, int32 `(batch, Ty)`, the decoder inputs
            `(BOS, y_1, ..., y_{Ty-1})`. Both right-padded with 0.

    Returns:
        Float32 logits of shape `(batch, Ty, target_vocabulary_size)`.

    Example:

    >>> model = PervasiveAttention.from_preset(
    ...     "pervasive_attention_small",
    ...     source_vocabulary_size=100,
    ...     target_vocabulary_size=120,
    ... )
    >>> inputs = {
    ...     "source_ids": np.array([[5, 6, 7, 3, 0]], "int32"),
    ...     "target_ids": np.array([[2, 8, 9, 10]], "int32"),
    ... }
    >>> tuple(model(inputs).shape)
    (1, 4, 120)
    >>> tuple(model.alignment(inputs).shape)  # (batch, Ty, Tx)
    (1, 4, 5)

    Reference:
        M. Elbayad, L. Besacier, J. Verbeek, "Pervasive Attention: 2D
        Convolutional Neural Networks for Sequence-to-Sequence
        Prediction", CoNLL 2018: Sec. 3 (input grid, masked DenseNet,
        pooling, prediction) and the implicit-alignment visualisation of
        the experiments (Sec. 4); code: github.com/elbayadm/attn2d (2018:
        `nmt/models/pervasive.py`, the `Aggregator`'s `lin` then
        `prediction` with the weight of `trg_embedding` when
        `tie_target_weights`, and `DenseNet`'s `half_inputs`; 2021:
        `examples/pervasive/models/pervasive_attention.py`, `projection`
        then `prediction` sharing `embed_tokens.weight`).
    """

    presets = PERVASIVE_ATTENTION_PRESETS

    def __init__(
        self,
        source_vocabulary_size,
        target_vocabulary_size,
        source_embedding_dim=128,
        target_embedding_dim=128,
        growth_rate=32,
        num_layers=24,
        kernel_size=5,
        bottleneck_factor=4,
        activation="relu",
        pooling="max",
        dropout=0.2,
        input_channels=None,
        tie_embeddings=False,
        dtype=None,
        **kwargs,
    ):
        check_vocabulary_size("source_vocabulary_size", source_vocabulary_size)
        check_vocabulary_size("target_vocabulary_size", target_vocabulary_size)
        check_int("source_embedding_dim", source_embedding_dim)
        check_int("target_embedding_dim", target_embedding_dim)
        check_int("growth_rate", growth_rate)
        check_int("num_layers", num_layers)
        check_int("kernel_size", kernel_size)
        check_int("bottleneck_factor", bottleneck_factor)
        if kernel_size % 2 == 0:
            raise ValueError(
                "`kernel_size` must be odd so that the kernel is centred on "
                f"each source position. Received: kernel_size={kernel_size}"
            )
        check_choice("activation", activation, ACTIVATIONS)
        check_choice("pooling", pooling, POOLINGS)
        check_rate("dropout", dropout)
        check_int("input_channels", input_channels, allow_none=True)
        if not isinstance(tie_embeddings, bool):
            raise ValueError(
                "`tie_embeddings` must be True or False. Received: "
                f"tie_embeddings={tie_embeddings!r}"
            )
        channels = input_channels or source_embedding_dim + target_embedding_dim
        if activation == "glu" and (channels % 2 or growth_rate % 2):
            # A GLU halves the channels, so every activation input
            # (f_0 + l g channels, and the bottleneck) must be even.
            raise ValueError(
                "`activation='glu'` needs an even input_channels (default "
                "source_embedding_dim + target_embedding_dim) and an even "
                f"growth_rate. Received: input_channels={input_channels}, "
                f"source_embedding_dim={source_embedding_dim}, "
                f"target_embedding_dim={target_embedding_dim}, "
                f"growth_rate={growth_rate}"
            )

        # === Layers ===
        # Attached to `self` after `super().__init__()`, which the torch
        # backend requires; the helpers below take this namespace or `self`.
        layers = types.SimpleNamespace()
        layers.padding_mask = _PaddingMask(dtype=dtype, name="padding_mask")
        layers.source_embedding = keras.layers.Embedding(
            source_vocabulary_size,
            source_embedding_dim,
            dtype=dtype,
            name="source_embedding",
        )
        # Tied, `E` is also the output layer: one variable.
        target_embedding = (
            ReversibleEmbedding if tie_embeddings else keras.layers.Embedding
        )
        layers.target_embedding = target_embedding(
            target_vocabulary_size,
            target_embedding_dim,
            dtype=dtype,
            name="target_embedding",
        )
        layers.embedding_dropout = keras.layers.Dropout(
            dropout, dtype=dtype, name="embedding_dropout"
        )
        layers.grid = _Grid(input_channels, dtype=dtype, name="grid")
        layers.dense_layers = [
            PervasiveDenseLayer(
                growth_rate=growth_rate,
                kernel_size=kernel_size,
                bottleneck_factor=bottleneck_factor,
                activation=activation,
                dropout=dropout,
                dtype=dtype,
                name=f"dense_layer_{index}",
            )
            for index in range(num_layers)
        ]
        layers.output_norm = _MaskedNormActivation(
            activation, dtype=dtype, name="output_norm"
        )
        layers.pooling = SourcePooling(pooling, dtype=dtype, name="pooling")
        layers.prediction_dropout = keras.layers.Dropout(
            dropout, dtype=dtype, name="prediction_dropout"
        )
        # Float32, like the logits. Tied: pooled -> dt, and `E^T`.
        layers.prediction_projection = None
        layers.output_projection = None
        if tie_embeddings:
            layers.prediction_projection = keras.layers.Dense(
                target_embedding_dim,
                dtype="float32",
                name="prediction_projection",
            )
        else:
            layers.output_projection = keras.layers.Dense(
                target_vocabulary_size,
                dtype="float32",
                name="output_projection",
            )

        # === Functional Model ===
        inputs = self._inputs()
        features, source_mask = self._features(
            layers, inputs["source_ids"], inputs["target_ids"]
        )
        logits = self._logits(layers, features, source_mask)
        super().__init__(inputs=inputs, outputs=logits, dtype=dtype, **kwargs)
        for name, layer in vars(layers).items():
            setattr(self, name, layer)

        # === Config ===
        self.source_vocabulary_size = source_vocabulary_size
        self.target_vocabulary_size = target_vocabulary_size
        self.source_embedding_dim = source_embedding_dim
        self.target_embedding_dim = target_embedding_dim
        self.growth_rate = growth_rate
        self.num_layers = num_layers
        self.kernel_size = kernel_size
        self.bottleneck_factor = bottleneck_factor
        self.activation = activation
        self.pooling_mode = pooling
        self.dropout = dropout
        self.input_channels = input_channels
        self.tie_embeddings = tie_embeddings

    @staticmethod
    def _features(layers, source_ids, target_ids, training=None):
        """The DenseNet: ids -> final grid features and source mask."""
        source_mask = layers.padding_mask(source_ids)  # (batch, Tx)
        target_mask = layers.padding_mask(target_ids)  # (batch, Ty)
        source = layers.source_embedding(source_ids)  # (batch, Tx, ds)
        source = layers.embedding_dropout(source, training=training)
        target = layers.target_embedding(target_ids)  # (batch, Ty, dt)
        target = layers.embedding_dropout(target, training=training)
        # (batch, Ty, Tx, f_0), or factored: (source, target).
        grid = layers.grid(source, target)
        for layer in layers.dense_layers:
            # (batch, Ty, Tx, f_l) -> (batch, Ty, Tx, f_l + g)
            grid = layer(grid, source_mask, target_mask, training=training)
        features = layers.output_norm(
            grid, source_mask, target_mask, training=training
        )
        if is_factored(features):
            features = concatenate_grid(*features)  # (batch, Ty, Tx, C)
        return features, source_mask

    @staticmethod
    def _logits(layers, features, source_mask, training=None):
        """Pooling and the output projection: float32 logits."""
        pooled = layers.pooling(features, source_mask)  # (batch, Ty, C)
        if layers.output_projection is not None:
            pooled = layers.prediction_dropout(pooled, training=training)
            return layers.output_projection(pooled)  # (batch, Ty, V)
        # Tied, as the authors: project, dropout, then h E^T + b.
        hidden = layers.prediction_projection(pooled)  # (batch, Ty, dt)
        hidden = layers.prediction_dropout(hidden, training=training)
        return layers.target_embedding(hidden, reverse=True)  # (.., V)

    def alignment(self, inputs):
        """The paper's alignment view: which source positions the max keeps.

        For target position `j` and source position `i`, the share of the
        final feature channels (in inference mode, whatever the `pooling`)
        whose maximum over the real source positions is at `i` (Sec. 4).

        Args:
            inputs: the model inputs dict (`"source_ids"`, `"target_ids"`).

        Returns:
            Float32 tensor `(batch, Ty, Tx)`; each row sums to 1 over the
            real source positions and is 0 on padded ones.
        """
        self._check_inputs(inputs)
        features, source_mask = self._features(
            self, inputs["source_ids"], inputs["target_ids"], training=False
        )
        return self.pooling.alignment(features, source_mask)

    def encode(self, source_ids, max_length=None):
        """Builds the decoding cache: what `decode_step` needs of the past.

        Args:
            source_ids: int32 `(batch, Tx)`, right-padded with 0.
            max_length: int, the most target steps decoding will run
                (required by the protocol; the cache does not grow with it).

        Returns:
            Dict of batch-major tensors: `"source_mask"` bool `(batch, Tx)`,
            `"source_embedding"` `(batch, Tx, ds)` (with `input_channels`,
            `"source_term"` `(batch, Tx, N)`, its share of the reduction)
            and, when `kernel_size > 1`, for every DenseNet layer `l`
            `"dense_layer_{l}_rows"` `(batch, k // 2, Tx, c)` (see
            `PervasiveDenseLayer.step`), zeros before the first step, and
            with ReLU and no reduction `"dense_layer_{l}_source"` `(batch,
            Tx, c)`, the source embedding's share of its 1x1 convolution
            (`PervasiveDenseLayer.bottleneck_term`).
        """
        if max_length is None or isinstance(max_length, bool):
            raise ValueError(
                "PervasiveAttention.encode needs `max_length`, the most "
                "steps decoding will run (the decoding protocol). "
                f"Received: max_length={max_length!r}"
            )
        if isinstance(max_length, int) and max_length < 1:
            raise ValueError(
                f"`max_length` must be >= 1. Received: max_length={max_length}"
            )
        source_ids = ops.cast(ops.convert_to_tensor(source_ids), "int32")
        batch_size, source_length = ops.shape(source_ids)
        # Embedding dropout is the identity in inference mode.
        source = self.source_embedding(source_ids)  # (batch, Tx, ds)
        cache = {"source_mask": self.padding_mask(source_ids)}
        if self.input_channels is None:
            cache["source_embedding"] = source
        else:
            cache["source_term"] = self.grid.source_term(source)
        for index, layer in enumerate(self.dense_layers):
            if layer.kernel_size > 1:
                # (batch, k // 2, Tx, c)
                cache[f"dense_layer_{index}_rows"] = layer.initial_rows(
                    batch_size, source_length
                )
            if self._factored:
                # The source embedding's share of the 1x1 convolution: the
                # same for every target row. (batch, Tx, ds) -> (.., c)
                cache[f"dense_layer_{index}_source"] = layer.bottleneck_term(
                    source, 0
                )
        return cache

    @property
    def _factored(self):
        """Whether each 1x1 convolution's share of the embeddings is a
        per-source term plus a per-token one (ReLU, no reduction)."""
        return self.activation == "relu" and self.input_channels is None

    def decode_step(self, cache, previous_ids, step=None):
        """Predicts the next target position from the cached rows.

        Runs the grid row of `previous_ids` through every DenseNet layer
        in inference mode, then pools and projects it. Shapes are fixed,
        so this runs inside `ops.while_loop` and a `tf.function` graph.

        Args:
            cache: dict from `encode` or the previous `decode_step`; steps
                must come in order `0, 1, ...` (as in the searches).
            previous_ids: int32 `(batch,)`, the token emitted at the
                previous step (`[BOS]` at step 0).
            step: unused: the cached rows carry the position.

        Returns:
            `(logits, attention, new_cache)`: float32 logits
            `(batch, target_vocabulary_size)`, the `alignment` of the new
            row, float32 `(batch, Tx)`, and the cache one row on.

        Reference:
            Elbayad et al. (2018), Sec. 3; incremental decoding as in the
            authors' code (`MaskedConvolution`, attn2d v2).
        """
        source_mask = cache["source_mask"]  # (batch, Tx)
        # (batch,) -> (batch, 1): the new target row.
        previous_ids = ops.cast(previous_ids, "int32")[:, None]
        target_mask = self.padding_mask(previous_ids)  # (batch, 1)
        target = self.target_embedding(previous_ids)  # (batch, 1, dt)
        if self.input_channels is None:
            # (batch, 1, Tx, ds + dt)
            row = concatenate_grid(cache["source_embedding"], target)
        else:
            # The reduction is linear: the cached source term plus the
            # token's. (batch, 1, Tx, N)
            target_term = self.grid.target_term(target)
            row = self.grid.combine(cache["source_term"], target_term)
        new_cache = dict(cache)
        # With ReLU, the 1x1 convolutions see the embeddings' channels
        # through the sum of a per-sentence term (cached by `encode`) and
        # a per-token one (no Tx axis), so the grid row carries only the
        # new features (`pervasive_attention_paper`: 40% fewer 1x1 products,
        # 20% fewer in the whole step).
        factored = self._factored
        start = self.source_embedding_dim + self.target_embedding_dim
        features = None if factored else row
        for index, layer in enumerate(self.dense_layers):
            key = f"dense_layer_{index}_rows"
            partial = None
            if factored:
                source_term = cache[f"dense_layer_{index}_source"]
                target_term = layer.bottleneck_term(
                    target, self.source_embedding_dim
                )
                # (batch, 1, Tx, c) + (batch, 1, 1, c)
                partial = source_term[:, None] + target_term[:, :, None]
            # (batch, 1, Tx, f_l) -> (batch, 1, Tx, f_l + g); factored,
            # only the channels after the embeddings'.
            features, rows = layer.step(
                features,
                cache.get(key),
                source_mask,
                target_mask,
                start=start if factored else 0,
                partial=partial,
            )
            if rows is not None:
                new_cache[key] = rows  # (batch, k // 2, Tx, c)
        if factored:
            row = ops.concatenate([row, features], axis=-1)
        else:
            row = features
        features = self.output_norm(
            row, source_mask, target_mask, training=False
        )  # (batch, 1, Tx, C)
        logits = self._logits(self, features, source_mask, training=False)
        attention = self.pooling.alignment(features, source_mask)
        # (batch, 1, V) -> (batch, V); (batch, 1, Tx) -> (batch, Tx)
        return logits[:, 0], attention[:, 0], new_cache

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            # The layers' policy: a functional model's own is float32
            # whatever `dtype` it was given.
            "dtype": keras.dtype_policies.serialize(self.grid.dtype_policy),
            "source_vocabulary_size": self.source_vocabulary_size,
            "target_vocabulary_size": self.target_vocabulary_size,
            "source_embedding_dim": self.source_embedding_dim,
            "target_embedding_dim": self.target_embedding_dim,
            "growth_rate": self.growth_rate,
            "num_layers": self.num_layers,
            "kernel_size": self.kernel_size,
            "bottleneck_factor": self.bottleneck_factor,
            "activation": self.activation,
            "pooling": self.pooling_mode,
            "dropout": self.dropout,
            "input_channels": self.input_channels,
            "tie_embeddings": self.tie_embeddings,
        }
