"""The text side of translation, written once for `Translator` and export.

`read_sources`: text to source ids, with each sentence's status (the
length policy). `decode_hypotheses`: a search result to text, tokens and
scores (detokenization, n-best slots, what an unsearched sentence gets).
"""

import tensorflow as tf

# The status of a sentence, as `read_sources` gives it.
STATUS_OK = "ok"
STATUS_EMPTY = "empty"  # No token: empty, only spaces or control characters.
STATUS_TOO_LONG = "too_long"  # More than `max_source_tokens` tokens.
STATUSES = (STATUS_OK, STATUS_EMPTY, STATUS_TOO_LONG)


def read_sources(tokenizer, text, max_source_tokens=None):
    """Tokenizes a batch of sentences and gives each one its status.

    Invalid UTF-8 bytes become U+FFFD (a Python str has none). What
    becomes of a sentence that is not `STATUS_OK` is the caller's.

    Args:
        tokenizer: the source `Tokenizer`.
        text: string `(batch,)`, a list of str or a string tensor.
        max_source_tokens: int or None, the most tokens of a sentence
            that is `STATUS_OK`.

    Returns:
        A dict: `ids` int32 and `tokens` string `tf.RaggedTensor`s
        `(batch, None)` (see `Tokenizer.tokens`), `length` int32
        `(batch,)` and `status` string `(batch,)`, one of `STATUSES`.
    """
    # Invalid UTF-8 would fail the tokenizer's Unicode ops.
    text = tf.strings.unicode_transcode(
        tf.convert_to_tensor(text, tf.string), "UTF-8", "UTF-8", "replace"
    )
    ids = tokenizer.tokenize(text)
    length = tf.cast(ids.row_lengths(), tf.int32)  # (batch,)
    limit = tf.int32.max if max_source_tokens is None else max_source_tokens
    status = tf.where(
        length > limit,
        STATUS_TOO_LONG,
        tf.where(tf.equal(length, 0), STATUS_EMPTY, STATUS_OK),
    )  # (batch,)
    tokens = tokenizer.tokens(text)
    return {"ids": ids, "tokens": tokens, "length": length, "status": status}


def decode_hypotheses(target_tokenizer, result, searched, n_best=None):
    """The text of a search result, and what an unsearched sentence gets.

    A sentence not searched (empty, or too long to serve) has one
    hypothesis, `""` scored 0. Its other slots are empty, like those a
    search leaves when it finds fewer hypotheses: `""`, score `-inf`,
    length 0.

    Args:
        target_tokenizer: the target `Tokenizer`.
        result: a `decoding.SearchResult` (arrays or tensors).
        searched: bool `(batch,)`; the rows of `result` where it is False
            are ignored.
        n_best: int, scalar int32 tensor or None (all): the slots kept.

    Returns:
        A dict of `(batch, n_best)` tensors: `text`, `score`, `log_prob`,
        `length` (tokens with `[EOS]`, 0: no hypothesis) and
        `is_hypothesis`; and `tokens`, string `(batch, n_best, T)`, `""`
        after each hypothesis.
    """
    token_ids, scores, log_probs, lengths = (
        tf.convert_to_tensor(field)[:, :n_best] for field in result[:4]
    )
    shape = tf.shape(token_ids)  # (batch, n_best, T)
    text = tf.reshape(
        target_tokenizer.detokenize(
            tf.reshape(token_ids, [shape[0] * shape[1], shape[2]])
        ),
        shape[:2],
    )  # (batch * n_best, T) -> (batch, n_best)
    searched = tf.convert_to_tensor(searched, tf.bool)[:, None]  # (batch, 1)
    first = tf.equal(tf.range(shape[1]), 0)[None, :]  # (1, n_best)
    empty_score = tf.where(first, 0.0, float("-inf"))  # (1, n_best)
    lengths = tf.where(searched, lengths, 0)  # (batch, n_best)
    vocabulary = tf.constant(target_tokenizer.get_vocabulary())
    return {
        "text": tf.where(searched, text, ""),
        "tokens": tf.where(
            tf.range(shape[2]) < lengths[:, :, None],
            tf.gather(vocabulary, token_ids),
            "",
        ),  # (batch, n_best, T)
        "score": tf.where(searched, scores, empty_score),
        "log_prob": tf.where(searched, log_probs, empty_score),
        "length": lengths,
        "is_hypothesis": tf.where(searched, lengths > 0, first),
    }
