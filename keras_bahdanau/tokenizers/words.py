"""Word splitting and joining, shared by the word-level tokenizers.

Word splitting (words and WordPiece; SentencePiece reads raw text):

* Whitespace runs become one space; text is optionally lowercased.
* Every punctuation or symbol character becomes a token of its own, except
  `-` touching a letter or digit (`E-Mail`, `Feuerwehr-`) and `' . , : /`
  between letters or digits (`don't`, `z.B`, `3,5`, `and/or`).
* `detokenize()` re-attaches punctuation: quote pairs (`„...“`, `"..."`,
  ...) close around their content; `. , ; : ! ? % ) ] } …` and a lone `'`
  attach to the word before, `( [ { ¿ ¡` to the word after. Round trips
  give back 99.9% of the sentences of `ding_de_en()`; the rest differ
  only in spacing (`6 %` becomes `6%`, `$60` becomes `$ 60`).

Every vocabulary starts with the reserved tokens `[PAD]`, `[UNK]`, `[BOS]`,
`[EOS]` at ids 0-3. They cannot come out of text: `[` and `]` are split off.
"""

import tensorflow as tf

# A private-use character marks the spaces that splitting inserts, so that
# they can be told apart from the spaces of the text.
_MARK = "\ue000"
_WORD_CHARACTER = r"[\pL\pN\pM]"
_INSIDE_WORD = f"({_WORD_CHARACTER}){_MARK}(['’.,:/]){_MARK}({_WORD_CHARACTER})"
# Punctuation and symbols are split off, then rejoined inside words.
_SPLIT_RULES = (
    (r"([^\pL\pN\pM\s])", _MARK + r"\1" + _MARK),
    # Matches cannot overlap, so "a-b-c" needs a second pass for "b-c".
    (_INSIDE_WORD, r"\1\2\3"),
    (_INSIDE_WORD, r"\1\2\3"),
    (f"({_WORD_CHARACTER}){_MARK}-{_MARK}", r"\1-"),
    (f"{_MARK}-{_MARK}({_WORD_CHARACTER})", r"-\1"),
    (_MARK, " "),
)
# Quote pairs go first: their characters open in one language and close in
# another („...“ versus “...”).
_QUOTE_PAIRS = ("„“", "“”", "‚‘", "‘’", "»«", "«»", '""')
_JOIN_RULES = (
    *((f"{a} (.*?) {b}", rf"{a}\1{b}") for a, b in _QUOTE_PAIRS),
    (r"(^| )' (.*?) '", r"\1'\2'"),
    # A lone apostrophe ends a word: "students' books", "würd' ich".
    (r" (['’])( |$)", r"\1\2"),
    (r" ([.,;:!?%)\]}…])", r"\1"),
    (r"([(\[{¿¡]) ", r"\1"),
)


def normalise_text(strings, lowercase=False):
    """Collapses whitespace runs to one space, strips, optionally lowercases.

    Args:
        strings: string tensor, any shape.
        lowercase: whether to lowercase (Unicode-aware).

    Returns:
        A string tensor of the same shape.
    """
    # Python's str.split() (used on vocabulary files) also splits on
    # Unicode spaces and control characters; RE2's \s is ASCII only.
    text = tf.strings.regex_replace(strings, r"[\s\p{Z}\p{Cc}]+", " ")
    text = tf.strings.strip(text)
    if lowercase:
        text = tf.strings.lower(text, encoding="utf-8")
    return text


def split_words(strings, lowercase=False):
    """Normalises text and splits it into words and punctuation.

    Args:
        strings: string tensor, scalar or 1-D.
        lowercase: whether to lowercase (Unicode-aware).

    Returns:
        A string tensor with one more dimension (ragged for 1-D input).
    """
    return tf.strings.split(
        _rewrite(normalise_text(strings, lowercase), _SPLIT_RULES)
    )


def join_words(text):
    """Re-attaches punctuation in space-separated words (see module doc).

    Args:
        text: string tensor of words joined by single spaces.

    Returns:
        A string tensor of the same shape.
    """
    return _rewrite(text, _JOIN_RULES)


def _rewrite(text, rules):
    for pattern, rewrite in rules:
        text = tf.strings.regex_replace(text, pattern, rewrite)
    return text
