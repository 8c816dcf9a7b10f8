import math

import keras
from keras import ops

from keras_bahdanau.initializers import independent


def alignment_scores(projected_query, keys, score_vector):
    """The energies `e_ij = v_a^T tanh(W_a q_i + U_a h_j)` (A.1.2).

    Args:
        projected_query: `(batch, Tq, units)`, `W_a q_i`.
        keys: `(batch, Tv, units)`, `U_a h_j`.
        score_vector: `(units,)`, `v_a`.

    Returns:
        `(batch, Tq, Tv)`.
    """
    # (b, Tq, 1, n) + (b, 1, Tv, n) -> (b, Tq, Tv, n)
    hidden = ops.tanh(
        ops.expand_dims(projected_query, 2) + ops.expand_dims(keys, 1)
    )
    return ops.matmul(hidden, score_vector)


# In training, the backward pass can recompute the (b, Tq, Tv, n) tanh
# from its small inputs instead of keeping it: a decoder loop otherwise
# stores one such tensor per target step (B x Ty x Tx x n floats in all).
# The recomputation costs time (on torch a checkpoint per step, which made
# the main job's training step slower, docs/profile.md), so it is done only
# where that tensor is large, or of a size unknown when traced.
REMAT_MIN_ELEMENTS = 2**24  # 64 MB of float32 per step
_rematerialized_alignment_scores = keras.remat(alignment_scores)


def _worth_rematerializing(projected_query, keys):
    dims = (*projected_query.shape[:2], *keys.shape[1:])
    if any(dim is None for dim in dims):
        return True
    return math.prod(dims) >= REMAT_MIN_ELEMENTS


@keras.saving.register_keras_serializable(package="keras_bahdanau")
class AdditiveAttention(keras.layers.Layer):
    """Bahdanau's alignment model (additive attention).

    Scores every value (annotation) `h_j` against a query (the previous
    decoder state `s_{i-1}`) with a one-hidden-layer perceptron and returns
    the expected value under the resulting distribution:

    ```
    e_ij     = v_a^T tanh(W_a q_i + U_a h_j)
    alpha_ij = exp(e_ij) / sum_k exp(e_ik)       (over unmasked k only)
    c_i      = sum_j alpha_ij h_j
    ```

    `U_a h_j` does not depend on `i`, so it can be computed once per sentence
    with `compute_keys(value)` and passed as a third input; a decoder then
    pays only for `W_a q_i` at each step (A.1.2). Like the paper's appendix,
    the projections have no bias terms.

    Unlike `keras.layers.AdditiveAttention` (`reduce_sum(tanh(query +
    key))`, no learned projections), this layer learns `W_a`, `U_a` and
    `v_a`, so the query and the values can differ in size, as `s_{i-1}`
    (n) and `h_j` (2n) do in the paper.

    Args:
        units: int, the size `n'` of the hidden layer of the alignment model
            (the paper uses `n'` = n = 1000).
        kernel_initializer: initializer for `W_a` and `U_a`. The paper draws
            them from N(0, 0.001^2).
        score_initializer: initializer for `v_a`. Zeros (the paper's choice)
            makes the first alignments uniform.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: list `[query, value]` or `[query, value, keys]`.
            `query`: `(batch, dq)` for one decoder step or `(batch, Tq, dq)`.
            `value`: `(batch, Tv, dv)`, the annotations `h_j`.
            `keys`: optional `(batch, Tv, units)`, `compute_keys(value)`
            computed beforehand.
        mask: optional list `[query_mask, value_mask]`; `value_mask` is a
            boolean `(batch, Tv)`, False on padding. `query_mask` is ignored.
        return_attention_scores: bool, also return the alignment weights.
        training: bool; when True (as inside `fit`) and the
            `(batch, Tq, Tv, units)` hidden tensor is large (at least
            `REMAT_MIN_ELEMENTS`) or of unknown size, the scores are
            rematerialized in the backward pass rather than stored (same
            values).

    Returns:
        `context` with shape `(batch, dv)` or `(batch, Tq, dv)`, and, when
        `return_attention_scores=True`, the weights `alpha` with shape
        `(batch, Tv)` or `(batch, Tq, Tv)`. The weights sum to 1 over unmasked
        positions and are 0 on masked ones; a fully masked row gives zero
        weights and a zero context, never NaN.

    Example:

    >>> layer = AdditiveAttention(8)
    >>> query = np.random.rand(2, 5).astype("float32")
    >>> value = np.random.rand(2, 7, 6).astype("float32")
    >>> context, alpha = layer([query, value], return_attention_scores=True)
    >>> tuple(context.shape), tuple(alpha.shape)
    ((2, 6), (2, 7))

    Reference:
        Bahdanau, Cho, Bengio. Neural Machine Translation by Jointly Learning
        to Align and Translate. ICLR 2015. Eq. (6) and appendix A.1.2.
    """

    def __init__(
        self,
        units,
        kernel_initializer="glorot_uniform",
        score_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if not isinstance(units, int) or units <= 0:
            raise ValueError(
                f"`units` must be a positive integer. Received: units={units}"
            )
        self.units = units
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.score_initializer = keras.initializers.get(score_initializer)
        self.supports_masking = True

    def build(self, input_shape):
        if (
            not isinstance(input_shape, (list, tuple))
            or len(input_shape) not in (2, 3)
            or not all(isinstance(s, (list, tuple)) for s in input_shape)
        ):
            raise ValueError(
                "AdditiveAttention expects inputs `[query, value]` or "
                f"`[query, value, keys]`. Received shapes: {input_shape}"
            )
        query_shape, value_shape = input_shape[0], input_shape[1]
        self.query_kernel = self.add_weight(
            name="query_kernel",  # W_a
            shape=(query_shape[-1], self.units),
            initializer=independent(self.kernel_initializer, 0),
        )
        self.key_kernel = self.add_weight(
            name="key_kernel",  # U_a
            shape=(value_shape[-1], self.units),
            initializer=independent(self.kernel_initializer, 1),
        )
        self.score_vector = self.add_weight(
            name="score_vector",  # v_a
            shape=(self.units,),
            initializer=self.score_initializer,
        )

    def compute_keys(self, value):
        """`U_a h_j` for all positions: `(batch, Tv, dv) -> (batch, Tv, units)`.

        Compute once per sentence and pass as the third input.
        """
        # Also called outside `__call__` (no autocast): the compute dtype.
        return ops.matmul(value, ops.cast(self.key_kernel, self.compute_dtype))

    def call(
        self, inputs, mask=None, return_attention_scores=False, training=None
    ):
        query, value = inputs[0], inputs[1]
        keys = inputs[2] if len(inputs) > 2 else self.compute_keys(value)
        value_mask = mask[1] if isinstance(mask, (list, tuple)) else None
        # The weights in the compute dtype: a decoder step calls these
        # methods directly, outside `__call__`'s autocasting.
        projected_query = ops.matmul(
            query, ops.cast(self.query_kernel, self.compute_dtype)
        )  # (b, [Tq,] n)
        context, alpha = self.attend(
            projected_query, value, keys, value_mask, training=training
        )
        if return_attention_scores:
            return context, alpha
        return context

    def attend(
        self, projected_query, value, keys, value_mask=None, training=None
    ):
        """Alignment weights and context from an already projected query.

        `call` without the query's product `W_a q_i`, for a decoder step
        that multiplies `s_{i-1}` by `W_a` together with its other
        recurrent kernels (`AttentionGRUCell`).

        Args:
            projected_query: `(batch, units)` or `(batch, Tq, units)`,
                `W_a q_i`.
            value: `(batch, Tv, dv)`.
            keys: `(batch, Tv, units)`, `compute_keys(value)`, or the keys
                of other values (the context is linear in the values).
            value_mask: optional bool `(batch, Tv)`, False on padding.
            training: as in `call`.

        Returns:
            `(context, alpha)`, shaped as `call`'s.
        """
        single_step = len(projected_query.shape) == 2
        if single_step:  # (batch, n) -> (batch, 1, n)
            projected_query = ops.expand_dims(projected_query, 1)
        score = alignment_scores
        if training and _worth_rematerializing(projected_query, keys):
            score = _rematerialized_alignment_scores
        scores = score(  # (b, Tq, Tv)
            projected_query,
            keys,
            ops.cast(self.score_vector, self.compute_dtype),
        )
        # The softmax runs in float32 even under mixed precision.
        scores = ops.cast(scores, "float32")
        if value_mask is not None:
            value_mask = ops.expand_dims(ops.cast(value_mask, "bool"), 1)
            scores = ops.where(value_mask, scores, -1e9)
            alpha = ops.softmax(scores, axis=-1)
            # A fully masked row is uniform after the softmax: zero it.
            alpha = alpha * ops.cast(value_mask, "float32")
        else:
            alpha = ops.softmax(scores, axis=-1)
        context = ops.matmul(ops.cast(alpha, value.dtype), value)  # (b,Tq,dv)
        if single_step:
            context = ops.squeeze(context, 1)  # (b, 1, dv) -> (b, dv)
            alpha = ops.squeeze(alpha, 1)  # (b, 1, Tv) -> (b, Tv)
        return context, alpha

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_shape(self, input_shape):
        query_shape, value_shape = input_shape[0], input_shape[1]
        return tuple(query_shape[:-1]) + (value_shape[-1],)

    def get_config(self):
        return {
            **super().get_config(),
            "units": self.units,
            "kernel_initializer": keras.initializers.serialize(
                self.kernel_initializer
            ),
            "score_initializer": keras.initializers.serialize(
                self.score_initializer
            ),
        }
