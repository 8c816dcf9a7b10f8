"""Beam search; the rules of a hypothesis are in hypotheses.py."""

import collections

import keras
from keras import ops

from keras_bahdanau.decoding import hypotheses
from keras_bahdanau.decoding.config import SearchConfig
from keras_bahdanau.decoding.hypotheses import NEG_INF
from keras_bahdanau.decoding.hypotheses import SearchResult
from keras_bahdanau.reserved import EOS_ID

# The beam-search loop state. `alive_*` are the `beam_size` best unfinished
# hypotheses, `finished_*` the `beam_size` best complete ones (a separate
# pool, as in T5/Flax). Ids keep BOS at position 0, so step `t` reads its
# previous token at `t` and writes its new one at `t + 1`.
BeamState = collections.namedtuple(
    "BeamState",
    [
        "step",  # () int32
        "alive_ids",  # (batch, beam, T + 1) int32
        "alive_log_probs",  # (batch, beam) float32, -inf = no hypothesis
        "alive_attention",  # (batch, beam, T, Tx) float32
        "cache",  # dict of (batch * beam, ...)
        "finished_ids",  # (batch, beam, T + 1) int32
        "finished_scores",  # (batch, beam) float32, -inf = empty slot
        "finished_log_probs",  # (batch, beam) float32
        "finished_lengths",  # (batch, beam) int32, 0 = empty slot
        "finished_attention",  # (batch, beam, T, Tx) float32
    ],
)


def _length_penalty(length, alpha):
    """GNMT `lp(Y) = (5 + |Y|)^alpha / (5 + 1)^alpha`, `|Y|` with EOS."""
    return ops.power(5.0 + ops.cast(length, "float32"), alpha) / ops.power(
        6.0, alpha
    )


# The least coverage the penalty counts: log(1e-6) = -13.8 per source token.
COVERAGE_FLOOR = 1e-6


def _coverage_penalty(attention, source_mask, beta):
    """GNMT `cp(X; Y) = beta * sum_j log(min(max(sum_i p_ij, f), 1))`.

    `p_ij`: attention of target step `i` (EOS included) on real source
    token `j`. GNMT's formula (Wu et al., 2016, arXiv:1609.08144, eq. 14)
    has no floor `f`: a source token never attended to (RNNencdec's
    attention is all zeros, Pervasive Attention's can be exactly 0) would
    score every hypothesis `-inf`, and the search would finish none. With
    `f = COVERAGE_FLOOR` it costs `beta * log f` to every hypothesis of the
    sentence alike, so the ranking is that of the other terms.
    """
    coverage = ops.sum(attention, axis=2)  # (batch, beam, T, Tx) -> (.., Tx)
    coverage = ops.clip(coverage, COVERAGE_FLOOR, 1.0)
    log_coverage = ops.where(
        source_mask[:, None, :], ops.log(coverage), 0.0
    )  # (batch, beam, Tx)
    return beta * ops.sum(log_coverage, axis=-1)  # (batch, beam)


@hypotheses.in_decoding_scope
def beam_search(model, source_ids, config):
    """Translates with beam search, scoring with GNMT's penalties.

    Every step expands each of the `beam_size` alive hypotheses by every
    token and ranks the candidates by `log P(Y|X)`. The EOS candidates among
    the `beam_size` best become complete: they are scored with

        s(Y, X) = log P(Y|X) / lp(Y) + cp(X; Y)
        lp(Y) = (5 + |Y|)^length_penalty / 6^length_penalty
        cp(X; Y) = coverage_penalty * sum_j log(min(sum_i p_ij, 1))

    (`|Y|` counts tokens including EOS; `p_ij` is the attention of target
    step `i` on real source token `j`) and enter a separate pool that keeps
    the `beam_size` best by `s`. The `beam_size` best non-EOS candidates stay
    alive. A sentence stops once no alive hypothesis can still beat its
    worst pooled one (`log P / lp(L_i)` is an upper bound because
    `log P <= 0` only decreases, `lp` grows with length and `cp <= 0`), or at
    its maximum length `L_i`. The encoder runs once per sentence; its cache
    is tiled `beam_size` times and reordered with the beams.

    With `beam_size=1` and no penalties this is exactly `greedy_search`.

    Args:
        model: a model following the decoding protocol (`encode`,
            `decode_step`), e.g. `keras_bahdanau.models.RNNSearch`.
        source_ids: int `(batch, Tx)` token ids, 0 = padding.
        config: a `SearchConfig`, whatever its `is_greedy`. Without
            `max_length`, the static width `Tx` gives it (see
            `SearchConfig.for_source_length`); `max_length` is also the
            static output length. Its `length_penalty` may be a scalar
            float tensor (e.g. a serving input, which its caller checks).

    Returns:
        A `SearchResult`: `(batch, n_best, ...)` fields sorted by `scores`.

    Example:

    ```python
    config = SearchConfig(beam_size=12, n_best=3, length_penalty=0.6)
    result = beam_search(model, source_ids, config)
    best = result.token_ids[:, 0]  # (batch, max_length)
    ```

    References:
        - Bahdanau et al., 2015, "Neural Machine Translation by Jointly
          Learning to Align and Translate", §3 (beam search).
        - Wu et al., 2016, "Google's Neural Machine Translation System", §7
          (length normalization and coverage penalty).
    """
    if not isinstance(config, SearchConfig):
        raise ValueError(
            "`config` must be a keras_bahdanau.decoding.SearchConfig. "
            f"Received: config={config!r}"
        )
    source_ids = ops.convert_to_tensor(source_ids, "int32")
    config = config.for_source_length(ops.shape(source_ids)[1])
    beam_size, max_length = config.beam_size, config.max_length
    cache = model.encode(source_ids, max_length=max_length)
    source_mask = cache["source_mask"]  # (batch, Tx)
    max_lengths = hypotheses.max_lengths(
        source_mask, max_length, config.relative_max_length
    )  # (batch,)
    batch_size, source_length = ops.shape(source_ids)
    # A scalar tensor alpha lets a serving signature take it per request.
    alpha = ops.cast(config.length_penalty, "float32")
    beta = float(config.coverage_penalty)
    max_length_penalty = _length_penalty(max_lengths, alpha)  # (batch,)

    def score(log_probs, attention, length):
        scores = log_probs / _length_penalty(length, alpha)  # (batch, beam)
        if beta:  # Skipped when 0: `0 * -inf` would be nan.
            scores += _coverage_penalty(attention, source_mask, beta)
        return scores  # (batch, beam)

    def extend(state, step_attention, beams, tokens):
        """Parent histories at `beams` (batch, beam) + `tokens` at `step`."""
        ids = _gather_beams(state.alive_ids, beams)  # (batch, beam, T + 1)
        ids = ops.where(
            ops.equal(ops.arange(max_length + 1), state.step + 1),
            tokens[:, :, None],
            ids,
        )  # (batch, beam, T + 1)
        attention = ops.where(
            ops.equal(ops.arange(max_length), state.step)[:, None],
            _gather_beams(step_attention, beams)[:, :, None, :],
            _gather_beams(state.alive_attention, beams),
        )  # (batch, beam, T, Tx)
        return ids, attention

    # Cache entries that `decode_step` returns unchanged (the encoder's
    # annotations and keys) hold the same values for every beam of a
    # sentence (they were tiled), so reordering them is a no-op and is
    # skipped: at beam 5 they are most of the cache. `varying` keeps the
    # entries any step has changed (an eager loop calls `body` every step).
    varying = set()

    def reorder(cache, previous, indices):
        leaves = keras.tree.flatten(cache)
        for position, (new, old) in enumerate(
            zip(leaves, keras.tree.flatten(previous), strict=True)
        ):
            if new is not old:
                varying.add(position)
        return keras.tree.pack_sequence_as(
            cache,
            [
                ops.take(x, indices, axis=0) if position in varying else x
                for position, x in enumerate(leaves)
            ],
        )

    def cond(state):
        return ops.logical_and(
            ops.less(state.step, max_length),
            ops.any(ops.greater(state.alive_log_probs, NEG_INF)),
        )

    def body(state):
        previous_ids = ops.take(state.alive_ids, state.step, axis=2)
        logits, step_attention, cache = model.decode_step(
            state.cache, ops.reshape(previous_ids, (-1,)), state.step
        )  # (batch * beam, V), (batch * beam, Tx)
        log_probs = hypotheses.log_softmax(
            logits, state.step, ops.repeat(max_lengths, beam_size, axis=0)
        )  # (batch * beam, V)
        # (batch * beam, 1) + (batch * beam, V)
        log_probs = ops.reshape(state.alive_log_probs, (-1, 1)) + log_probs
        # The 2 * beam best of beam * V candidates, in two stages: XLA turns
        # one top_k over (batch, beam * V) into a full sort (15x slower).
        # At most `beam` of the 2 * beam are EOS, so `beam` others remain.
        per_row = min(2 * beam_size, ops.shape(log_probs)[-1])
        row_log_probs, row_tokens = ops.top_k(
            log_probs, per_row
        )  # (batch * beam, V) -> (batch * beam, per_row)
        top_log_probs, top_positions = ops.top_k(
            ops.reshape(row_log_probs, (batch_size, -1)), 2 * beam_size
        )  # (batch, beam * per_row) -> (batch, 2 * beam)
        top_positions = ops.cast(top_positions, "int32")  # int64 on torch
        top_beams = top_positions // per_row  # (batch, 2 * beam)
        top_tokens = ops.take_along_axis(
            ops.reshape(ops.cast(row_tokens, "int32"), (batch_size, -1)),
            top_positions,
            axis=1,
        )  # (batch, 2 * beam)
        step_attention = ops.reshape(
            ops.cast(step_attention, "float32"),
            (batch_size, beam_size, -1),
        )  # (batch * beam, Tx) -> (batch, beam, Tx)

        # Complete hypotheses: EOS among the `beam` best candidates.
        new_ids, new_attention = extend(
            state,
            step_attention,
            top_beams[:, :beam_size],
            top_tokens[:, :beam_size],
        )  # (batch, beam, T + 1), (batch, beam, T, Tx)
        new_log_probs = top_log_probs[:, :beam_size]  # (batch, beam)
        is_new = ops.logical_and(
            ops.equal(top_tokens[:, :beam_size], EOS_ID),
            ops.greater(new_log_probs, NEG_INF),
        )  # (batch, beam)
        # Non-EOS candidates are blanked, so empty pool slots stay all 0.
        new_ids = ops.where(is_new[:, :, None], new_ids, 0)
        new_attention = ops.where(is_new[:, :, None, None], new_attention, 0.0)
        new_lengths = ops.where(is_new, state.step + 1, 0)  # (batch, beam)
        new_scores = ops.where(
            is_new,
            score(new_log_probs, new_attention, state.step + 1),
            NEG_INF,
        )  # (batch, beam)
        finished_scores, keep = ops.top_k(
            ops.concatenate([state.finished_scores, new_scores], axis=1),
            beam_size,
        )  # (batch, 2 * beam) -> (batch, beam)

        def merge(finished, new):
            pool = ops.concatenate([finished, new], axis=1)
            return _gather_beams(pool, keep)  # (batch, beam, ...)

        # Alive hypotheses: the `beam` best non-EOS candidates.
        alive_log_probs, keep_alive = ops.top_k(
            ops.where(ops.equal(top_tokens, EOS_ID), NEG_INF, top_log_probs),
            beam_size,
        )  # (batch, 2 * beam) -> (batch, beam)
        alive_beams = ops.take_along_axis(top_beams, keep_alive, axis=1)
        alive_tokens = ops.take_along_axis(top_tokens, keep_alive, axis=1)
        alive_ids, alive_attention = extend(
            state, step_attention, alive_beams, alive_tokens
        )  # (batch, beam, T + 1), (batch, beam, T, Tx)
        cache = reorder(
            cache, state.cache, _beam_rows(alive_beams, beam_size)
        )  # (batch * beam, ...)

        # Stop (kill the alive beams of) sentences that cannot improve.
        # (batch,): the best score an alive hypothesis can still reach.
        best_possible = ops.max(alive_log_probs, axis=1) / max_length_penalty
        is_done = ops.less_equal(
            best_possible, ops.min(finished_scores, axis=1)
        )  # (batch,)
        # (batch, beam)
        alive_log_probs = ops.where(is_done[:, None], NEG_INF, alive_log_probs)
        state = BeamState(
            step=state.step + 1,
            alive_ids=alive_ids,
            alive_log_probs=alive_log_probs,
            alive_attention=alive_attention,
            cache=cache,
            finished_ids=merge(state.finished_ids, new_ids),
            finished_scores=finished_scores,
            finished_log_probs=merge(state.finished_log_probs, new_log_probs),
            finished_lengths=merge(state.finished_lengths, new_lengths),
            finished_attention=merge(state.finished_attention, new_attention),
        )
        return (state,)

    # (batch, beam, T + 1)
    ids = hypotheses.start_ids((batch_size, beam_size), max_length)
    empty_scores = ops.full((batch_size, beam_size), NEG_INF, "float32")
    attention = ops.zeros(
        (batch_size, beam_size, max_length, source_length), "float32"
    )  # (batch, beam, T, Tx)
    initial_state = BeamState(
        step=ops.convert_to_tensor(0, "int32"),
        alive_ids=ids,
        # Only beam 0 starts alive, so the first step has no duplicates.
        alive_log_probs=ops.where(
            ops.equal(ops.arange(beam_size), 0)[None, :], 0.0, empty_scores
        ),  # (batch, beam)
        alive_attention=attention,
        cache=keras.tree.map_structure(
            lambda x: ops.repeat(x, beam_size, axis=0), cache
        ),  # (batch * beam, ...)
        finished_ids=ids,
        finished_scores=empty_scores,
        finished_log_probs=empty_scores,
        finished_lengths=ops.zeros((batch_size, beam_size), "int32"),
        finished_attention=attention,
    )
    (state,) = ops.while_loop(cond, body, (initial_state,))
    n_best = config.n_best
    return SearchResult(
        token_ids=state.finished_ids[:, :n_best, 1:],  # (batch, n_best, T)
        scores=state.finished_scores[:, :n_best],
        log_probs=state.finished_log_probs[:, :n_best],
        lengths=state.finished_lengths[:, :n_best],
        attention=state.finished_attention[:, :n_best],
    )


def _beam_rows(beams, n):
    """The rows `beams` (batch, beam) picks in a flattened (batch * n, ...)
    tensor: `b * n + beams[b, k]`, as a (batch * beam,) vector."""
    starts = ops.arange(ops.shape(beams)[0], dtype="int32") * n  # (batch,)
    # (batch, 1) + (batch, beam), in this order: Keras's TensorFlow `add`
    # takes a (batch, 1) second operand for a bias of the last axis when
    # batch == beam (keras 3.15), and would add the starts across the beams.
    return ops.reshape(ops.add(ops.expand_dims(starts, 1), beams), (-1,))


def _gather_beams(tensor, beams):
    """`tensor[b, beams[b, k]]`: (batch, n, ...) -> (batch, beam, ...)."""
    # Whole rows of the flattened (batch * n, ...) tensor: a take_along_axis
    # would broadcast the indices to the tensor's full shape (on torch a
    # `remainder` over all of it, 14% of a beam step's op time).
    batch_size, n, *rest = ops.shape(tensor)  # dynamic where unknown
    gathered = ops.take(
        ops.reshape(tensor, (-1, *rest)), _beam_rows(beams, n), axis=0
    )
    beam = beams.shape[1] if beams.shape[1] is not None else -1
    return ops.reshape(gathered, (batch_size, beam, *rest))
