"""`SearchResult` and the rules of a hypothesis, shared by the searches.

Greedy and beam search (greedy_search.py, beam_search.py) run any model
with `encode(source_ids, max_length)` and `decode_step(cache, previous_ids,
step)` (see `TranslationModel`) inside one `ops.while_loop` with fixed
shapes, so they run eagerly on every backend, under `jax.jit`, and inside
a `tf.function` / TF SavedModel. Conventions shared by both:

- A hypothesis `Y` is the emitted tokens up to and including the end of
  sentence (EOS) token; `|Y|` counts them, EOS included. Its log-probability
  `log P(Y|X)` sums the model's float32 log-softmax at every step, EOS
  included.
- Maximum length: sentence `i` emits at most `L_i` tokens (EOS included),
  `L_i = max_length`, or with `relative_max_length=(a, b)`
  `L_i = max(1, min(max_length, floor(a * Tx_i + b)))` where `Tx_i` counts
  the real (non-padding) source tokens. Token number `L_i` can only be EOS
  (its log-probability is kept as is, not renormalized), so every returned
  hypothesis ends with EOS.
"""

import collections
import contextlib
import functools

from keras import ops

from keras_bahdanau.reserved import BOS_ID
from keras_bahdanau.reserved import EOS_ID
from keras_bahdanau.reserved import PAD_ID

SearchResult = collections.namedtuple(
    "SearchResult", ["token_ids", "scores", "log_probs", "lengths", "attention"]
)
SearchResult.__doc__ = """Output of `search`, `greedy_search` and `beam_search`.

Fields:
    token_ids: int32 `(batch, n_best, max_length)`, EOS included, 0 after it.
    scores: float32 `(batch, n_best)`, `s(Y, X)`, sorted best first.
    log_probs: float32 `(batch, n_best)`, `log P(Y|X)` without penalties.
    lengths: int32 `(batch, n_best)`, `|Y|` (EOS included); 0 marks an empty
        n-best slot (fewer than `n_best` hypotheses exist), whose score is
        `-inf`.
    attention: float32 `(batch, n_best, max_length, Tx)`, row `t` is the
        alignment used to emit token `t`; rows after EOS are 0.
"""

NEG_INF = float("-inf")


def in_decoding_scope(search):
    """Runs a search inside its model's `decoding_scope()`, if it has one.

    A model may compute terms that every `decode_step` of one search uses
    once, before the loop (RNNsearch joins its decoder's recurrent
    kernels there); the scope holds them for the search.
    """

    @functools.wraps(search)
    def wrapper(model, *args, **kwargs):
        scope = getattr(model, "decoding_scope", contextlib.nullcontext)
        with scope():
            return search(model, *args, **kwargs)

    return wrapper


def max_lengths(source_mask, max_length, relative_max_length):
    """Per-sentence `L_i` (tokens, EOS included), see the module docstring."""
    batch_size = ops.shape(source_mask)[0]
    if relative_max_length is None:
        return ops.full((batch_size,), max_length, "int32")
    a, b = relative_max_length
    source_lengths = ops.sum(ops.cast(source_mask, "float32"), axis=1)
    lengths = ops.cast(ops.floor(a * source_lengths + b), "int32")
    return ops.clip(lengths, 1, max_length)  # (batch,)


def start_ids(shape, max_length):
    """int32 `(*shape, max_length + 1)`: BOS, then zeros."""
    return ops.concatenate(
        [
            ops.full((*shape, 1), BOS_ID, "int32"),
            ops.zeros((*shape, max_length), "int32"),
        ],
        axis=-1,
    )


def log_softmax(logits, step, max_lengths):
    """float32 log-softmax `(batch, V)`; only EOS at a sentence's last step.

    `[PAD]` and `[BOS]` are never emitted: they are not words. The other
    log-probabilities are kept as the model gives them (not renormalized),
    so scores stay the model's log-probabilities.
    """
    log_probs = ops.log_softmax(ops.cast(logits, "float32"), axis=-1)
    vocabulary = ops.arange(ops.shape(log_probs)[-1])  # (V,)
    is_last = ops.greater_equal(step + 1, max_lengths)  # (batch,)
    banned = ops.logical_or(
        ops.logical_and(is_last[:, None], ops.not_equal(vocabulary, EOS_ID)),
        ops.logical_or(
            ops.equal(vocabulary, PAD_ID), ops.equal(vocabulary, BOS_ID)
        ),
    )  # (batch, V)
    return ops.where(banned, NEG_INF, log_probs)
