"""`WordTokenizer`: words with a frequency shortlist (the paper's)."""

import collections

import tensorflow as tf

from keras_bahdanau.reserved import RESERVED_TOKENS
from keras_bahdanau.reserved import UNK_ID
from keras_bahdanau.tokenizers.tokenizer import Tokenizer
from keras_bahdanau.tokenizers.tokenizer import _check_vocabulary_size
from keras_bahdanau.tokenizers.words import join_words
from keras_bahdanau.tokenizers.words import split_words


class WordTokenizer(Tokenizer):
    """Word-level tokenizer with a frequency shortlist.

    Words outside the vocabulary map to `[UNK]`, as in the paper's 30,000
    word shortlists (Bahdanau et al., 2015, section 4.1).

    Args:
        vocabulary: list of tokens or path of a file with one per line,
            starting with `RESERVED_TOKENS`.
        lowercase: whether to lowercase text before tokenizing.

    Example:

    >>> tokenizer = WordTokenizer.from_texts(
    ...     ["Das ist gut.", "Das ist schlecht."], max_vocabulary_size=30000
    ... )
    >>> tokenizer.tokenize("Das ist neu.")
    <tf.Tensor: shape=(4,), dtype=int32, numpy=array([5, 6, 1, 4], ...)>
    >>> tokenizer.detokenize([5, 6, 1, 4, 3, 0])
    <tf.Tensor: shape=(), dtype=string, numpy=b'Das ist [UNK].'>
    """

    def __init__(self, vocabulary, lowercase=False):
        super().__init__(vocabulary, lowercase)
        self.lookup_table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                self._vocabulary_tensor,
                tf.range(self.vocabulary_size, dtype="int32"),
            ),
            default_value=UNK_ID,
        )

    @classmethod
    def from_texts(
        cls, texts, max_vocabulary_size=30000, lowercase=False, threads=1
    ):
        """Builds the vocabulary of the most frequent words of `texts`.

        Args:
            texts: list of strings (e.g. the training sentences of one
                language).
            max_vocabulary_size: the most tokens, reserved ones included.
                Ties in frequency are broken alphabetically, so the
                vocabulary is deterministic.
            lowercase: whether to lowercase text before tokenizing.
            threads: int, the threads that split the texts into words
                (a count does not depend on their number).

        Returns:
            A `WordTokenizer`.
        """
        _check_vocabulary_size(max_vocabulary_size)
        counts = collections.Counter()
        # Batches bound the memory of the ragged tensor of all words.
        words = (
            tf.data.Dataset.from_tensor_slices(tf.constant(texts))
            .batch(20_000)
            .map(
                lambda text: split_words(text, lowercase).flat_values,
                num_parallel_calls=threads,
            )
        )
        for batch in words.as_numpy_iterator():
            counts.update(batch.tolist())
        ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
        shortlist = [
            word.decode("utf-8")
            for word, _ in ranked[: max_vocabulary_size - len(RESERVED_TOKENS)]
        ]
        return cls(list(RESERVED_TOKENS) + shortlist, lowercase)

    def _tokenize_words(self, words):
        return tf.ragged.map_flat_values(self.lookup_table.lookup, words)

    def _tokens_ops(self, strings):
        return split_words(strings, self.lowercase)

    def _join_tokens(self, tokens):
        return join_words(tf.strings.reduce_join(tokens, -1, separator=" "))
