"""The text side of translation, written once for `Translator` and export.

`read_sources`: text to source ids, with each sentence's status (the
length policy). `decode_hypotheses`: a search result to text, tokens and
scores (detokenization, n-best slots, what an unsearched sentence gets).
`replace_unknown_words`: `[UNK]` outputs from the attended source word.
"""

import tensorflow as tf
from keras import ops

from keras_bahdanau.reserved import UNK

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


def replace_unknown_words(
    target_tokens, source_tokens, attention, dictionary=None, unk=UNK
):
    """Replaces each unknown target word by its most attended source word.

    For word-level vocabularies: an `unk` in the output is replaced by the
    source word with the highest attention weight at that target step,
    mapped through `dictionary` when the word is in it (Jean et al., 2015,
    "On Using Very Large Target Vocabulary for NMT", §3.3; Luong et al.,
    2015, "Addressing the Rare Word Problem in NMT").

    Args:
        target_tokens: list of str, the translation (without padding).
        source_tokens: list of str, the source sentence (without padding).
        attention: array-like `(>= len(target_tokens), >= len(source_tokens))`,
            e.g. `result.attention[i, k]`; extra rows/columns (EOS, padding)
            are ignored.
        dictionary: optional dict `source word -> target word`.
        unk: the unknown-word token.

    Returns:
        A new list of str.

    Example:

    >>> replace_unknown_words(
    ...     ["le", "[UNK]"], ["the", "Zurich"], [[0.9, 0.1], [0.2, 0.8]],
    ...     dictionary={"Zurich": "Zurich"})
    ['le', 'Zurich']
    """
    attention = ops.convert_to_numpy(attention)
    if (
        attention.ndim != 2
        or attention.shape[0] < len(target_tokens)
        or attention.shape[1] < len(source_tokens)
    ):
        raise ValueError(
            "`attention` must have shape (>= len(target_tokens), "
            ">= len(source_tokens)) = "
            f"(>= {len(target_tokens)}, >= {len(source_tokens)}). "
            f"Received: attention.shape={attention.shape}"
        )
    dictionary = dictionary or {}
    replaced = []
    for i, token in enumerate(target_tokens):
        if token == unk and source_tokens:
            word = source_tokens[
                int(attention[i, : len(source_tokens)].argmax())
            ]
            token = dictionary.get(word, word)
        replaced.append(token)
    return replaced
