"""Greedy search; the rules of a hypothesis are in hypotheses.py."""

from keras import ops

from keras_bahdanau.decoding import hypotheses
from keras_bahdanau.decoding.config import check_max_length
from keras_bahdanau.decoding.hypotheses import SearchResult
from keras_bahdanau.reserved import EOS_ID
from keras_bahdanau.reserved import PAD_ID


@hypotheses.in_decoding_scope
def greedy_search(model, source_ids, max_length, relative_max_length=None):
    """Translates by picking the most probable token at every step.

    Args:
        model: a model following the decoding protocol (`encode`,
            `decode_step`), e.g. `keras_bahdanau.models.RNNSearch`.
        source_ids: int `(batch, Tx)` token ids, 0 = padding.
        max_length: int, the most tokens (EOS included) of a translation;
            also the static output length.
        relative_max_length: None or `(a, b)`, see hypotheses.py.

    Returns:
        A `SearchResult` with `n_best = 1`; `scores` equal `log_probs` (greedy
        search uses no penalties).

    Example:

    ```python
    result = greedy_search(model, source_ids, max_length=60)
    result.token_ids[:, 0]  # (batch, 60), EOS then zeros
    ```
    """
    check_max_length(max_length, relative_max_length)
    source_ids = ops.convert_to_tensor(source_ids, "int32")
    cache = model.encode(source_ids, max_length=max_length)
    batch_size, source_length = ops.shape(source_ids)
    max_lengths = hypotheses.max_lengths(
        cache["source_mask"], max_length, relative_max_length
    )  # (batch,)

    def cond(step, ids, log_probs, lengths, attention, cache):
        return ops.logical_and(
            ops.less(step, max_length), ops.any(ops.equal(lengths, 0))
        )

    def body(step, ids, log_probs, lengths, attention, cache):
        previous_ids = ops.take(ids, step, axis=1)  # (batch,)
        logits, step_attention, cache = model.decode_step(
            cache, previous_ids, step
        )  # (batch, V), (batch, Tx)
        # (batch, V)
        step_log_probs = hypotheses.log_softmax(logits, step, max_lengths)
        tokens = ops.cast(ops.argmax(step_log_probs, axis=-1), "int32")
        is_alive = ops.equal(lengths, 0)  # (batch,)
        tokens = ops.where(is_alive, tokens, PAD_ID)  # (batch,)
        token_log_probs = ops.take_along_axis(
            step_log_probs, tokens[:, None], axis=1
        )[:, 0]  # (batch,)
        log_probs = log_probs + ops.where(is_alive, token_log_probs, 0.0)
        ids = ops.where(
            ops.equal(ops.arange(max_length + 1), step + 1),
            tokens[:, None],
            ids,
        )  # (batch, T + 1)
        attention = ops.where(
            ops.logical_and(
                ops.equal(ops.arange(max_length), step)[None, :, None],
                is_alive[:, None, None],
            ),
            ops.cast(step_attention, "float32")[:, None, :],
            attention,
        )  # (batch, T, Tx)
        lengths = ops.where(
            ops.logical_and(is_alive, ops.equal(tokens, EOS_ID)),
            step + 1,
            lengths,
        )  # (batch,)
        return step + 1, ids, log_probs, lengths, attention, cache

    _, ids, log_probs, lengths, attention, _ = ops.while_loop(
        cond,
        body,
        (
            ops.convert_to_tensor(0, "int32"),
            hypotheses.start_ids((batch_size,), max_length),  # (batch, T+1)
            ops.zeros((batch_size,), "float32"),
            ops.zeros((batch_size,), "int32"),
            ops.zeros((batch_size, max_length, source_length), "float32"),
            cache,
        ),
    )
    return SearchResult(
        token_ids=ids[:, None, 1:],  # (batch, 1, T)
        scores=log_probs[:, None],
        log_probs=log_probs[:, None],
        lengths=lengths[:, None],
        attention=attention[:, None],  # (batch, 1, T, Tx)
    )
