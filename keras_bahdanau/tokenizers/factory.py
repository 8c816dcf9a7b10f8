"""Building a tokenizer by kind, and loading any saved one."""

from keras_bahdanau.tokenizers.sentence_piece_tokenizer import (
    SentencePieceTokenizer,
)
from keras_bahdanau.tokenizers.tokenizer import Tokenizer
from keras_bahdanau.tokenizers.word_piece_tokenizer import WordPieceTokenizer
from keras_bahdanau.tokenizers.word_tokenizer import WordTokenizer
from keras_bahdanau.validation import check_int

TOKENIZERS = {
    "word": WordTokenizer,
    "wordpiece": WordPieceTokenizer,
    "unigram": SentencePieceTokenizer,
    "bpe": SentencePieceTokenizer,
}


def build_tokenizer(
    kind, texts, max_vocabulary_size, lowercase=False, threads=1
):
    """Builds a tokenizer of the given kind from training texts.

    To learn from a large corpus, pass a sample of its sentences
    (`data.sample_pairs`, what `keras-bahdanau train` does with
    `tokenizer.sample_sentences`).

    Args:
        kind: `"word"` (frequency shortlist), `"wordpiece"`, or the
            SentencePiece subwords `"unigram"` and `"bpe"`.
        texts: list of strings in one language.
        max_vocabulary_size: the most tokens, reserved ones included; the
            paper uses 30,000 words.
        lowercase: whether to lowercase text before tokenizing.
        threads: int >= 1, the threads to learn with: SentencePiece's
            trainer, whose result depends on the number (the same
            number, the same vocabulary); the word counts of `"word"`,
            whose result does not. `"wordpiece"` (keras-hub's learner,
            pure Python) uses one.

    Returns:
        A `Tokenizer` of the class `TOKENIZERS[kind]`.

    Example:

    >>> pairs = ding_de_en("train")
    >>> source_tokenizer = build_tokenizer(
    ...     "word", [source for source, _ in pairs], 30000
    ... )
    """
    if kind not in TOKENIZERS:
        raise ValueError(
            f"`kind` must be one of {sorted(TOKENIZERS)}. Received: "
            f"kind={kind!r}"
        )
    texts = list(texts)
    if not texts:
        raise ValueError("`texts` is empty: a vocabulary needs some text.")
    check_int("threads", threads)
    cls = TOKENIZERS[kind]
    options = {}
    if cls is SentencePieceTokenizer:
        options = {"model_type": kind, "threads": threads}
    elif cls is WordTokenizer:
        options = {"threads": threads}
    return cls.from_texts(texts, max_vocabulary_size, lowercase, **options)


def load_tokenizer(path):
    """Loads any tokenizer saved with `Tokenizer.save(path)`.

    Args:
        path: the folder holding `vocabulary.txt` and `tokenizer.json`.

    Returns:
        A `WordTokenizer`, `WordPieceTokenizer` or `SentencePieceTokenizer`.
    """
    return Tokenizer.load(path)
