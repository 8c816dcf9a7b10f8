"""`WordPieceTokenizer`: keras-hub's WordPiece on top of word splitting."""

import tensorflow as tf

from keras_bahdanau.reserved import RESERVED_TOKENS
from keras_bahdanau.reserved import UNK
from keras_bahdanau.tokenizers.tokenizer import Tokenizer
from keras_bahdanau.tokenizers.tokenizer import _check_vocabulary_size
from keras_bahdanau.tokenizers.words import join_words
from keras_bahdanau.tokenizers.words import split_words


class WordPieceTokenizer(Tokenizer):
    """Subword tokenizer: keras-hub's WordPiece on top of `split_words()`.

    Each word of `WordTokenizer` becomes pieces (`"##"` marks a piece that
    continues a word), or a single `[UNK]` if the pieces cannot spell it.
    A SavedModel needs the TensorFlow Text ops (`import tensorflow_text`;
    stock TF Serving links them).

    Args:
        vocabulary: list of tokens or path of a file with one per line,
            starting with `RESERVED_TOKENS`.
        lowercase: whether to lowercase text before tokenizing.

    Example:

    >>> texts = ["Das Fahrrad ist neu.", "Die Fahrräder sind neu."]
    >>> tokenizer = WordPieceTokenizer.from_texts(
    ...     (texts + ["Das Rad ist alt."]) * 10, max_vocabulary_size=100
    ... )
    >>> tokenizer.tokens("Die Räder sind alt.")
    <tf.Tensor: shape=(9,), dtype=string, numpy=array([b'Die', b'R',
        b'##\xc3\xa4', b'##d', b'##e', b'##r', b'sind', b'alt', b'.'], ...)>
    """

    def __init__(self, vocabulary, lowercase=False):
        import keras_hub

        super().__init__(vocabulary, lowercase)
        # A bound method, not the layer: tf.Module would track a keras
        # layer that is never built.
        self._piece_ids = keras_hub.tokenizers.WordPieceTokenizer(
            vocabulary=self._vocabulary,
            lowercase=False,  # Done by split_words().
            strip_accents=False,
            split=False,
            oov_token=UNK,
            dtype="int32",
        ).tokenize

    @classmethod
    def from_texts(cls, texts, max_vocabulary_size=8000, lowercase=False):
        """Learns a WordPiece vocabulary from `texts`.

        keras-hub's learner is pure Python and skips pieces seen fewer than
        10 times: on the German side of `ding_de_en("train")` it takes about
        3 minutes (2 CPU cores) and returns 2,686 tokens, whatever the
        maximum above that.

        Args:
            texts: list of strings.
            max_vocabulary_size: the most tokens, reserved ones included.
            lowercase: whether to lowercase text before tokenizing.

        Returns:
            A `WordPieceTokenizer`.
        """
        import keras_hub

        _check_vocabulary_size(max_vocabulary_size)
        words = (
            tf.data.Dataset.from_tensor_slices(tf.constant(texts))
            .batch(1024)
            .map(lambda text: split_words(text, lowercase))
        )
        vocabulary = keras_hub.tokenizers.compute_word_piece_vocabulary(
            words,
            max_vocabulary_size,
            split=False,
            reserved_tokens=list(RESERVED_TOKENS),
        )
        return cls(vocabulary, lowercase)

    def _tokenize_words(self, words):
        return self._piece_ids(words)

    def _join_tokens(self, tokens):
        text = tf.strings.reduce_join(tokens, -1, separator=" ")
        return join_words(tf.strings.regex_replace(text, " ##", ""))
