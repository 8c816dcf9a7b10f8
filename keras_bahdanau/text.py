"""Translations as text: results, sentence statuses, unknown words.

`Translation`: one hypothesis, as `Translator.translate` returns it. The
statuses are what `TranslationPreprocessor.generate_preprocess` says of each
source sentence (the length policy of `Translator` and the SavedModel).
`replace_unknown_words`: `[UNK]` outputs from the attended source word.
"""

import dataclasses

import numpy as np
from keras import ops

from keras_bahdanau.reserved import UNK

# The status of a sentence, as `generate_preprocess` gives it.
STATUS_OK = "ok"
STATUS_EMPTY = "empty"  # No token: empty, only spaces or control characters.
STATUS_TOO_LONG = "too_long"  # More than `max_source_tokens` tokens.
STATUSES = (STATUS_OK, STATUS_EMPTY, STATUS_TOO_LONG)


@dataclasses.dataclass(frozen=True, eq=False)
class Translation:
    """One hypothesis for one source sentence.

    Attributes:
        text: the detokenized translation.
        score: `s(Y, X)`, the search score: `log P(Y|X)` with the length
            and coverage penalties applied (see `decoding.beam_search`).
        log_prob: `log P(Y|X)`, the sum of the model's log-probabilities of
            the tokens of `target_tokens` (EOS included), no penalties.
        source_tokens: list of str, the source tokens the model read (from
            `tokenizer.tokens()`, after truncation; no BOS/EOS).
        target_tokens: list of str, the emitted tokens, ending with
            `[EOS]` (after unknown-word replacement when asked).
        attention: float32 NumPy array `(len(target_tokens),
            len(source_tokens))`, row `t` the alignment used to emit token
            `t`; None unless `return_attention=True`.
    """

    text: str
    score: float
    log_prob: float
    source_tokens: list
    target_tokens: list
    attention: np.ndarray | None = None

    def __str__(self):
        return self.text


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
