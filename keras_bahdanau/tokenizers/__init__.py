"""Tokenizers: words with a frequency shortlist, or subwords.

Subwords are WordPiece or SentencePiece (unigram or BPE); one class per
file, `Tokenizer` their base. `build_tokenizer(kind, texts, size)` learns
one from text, `load_tokenizer(path)` reads any saved one.
"""

from keras_bahdanau.tokenizers.factory import TOKENIZERS
from keras_bahdanau.tokenizers.factory import build_tokenizer
from keras_bahdanau.tokenizers.factory import load_tokenizer
from keras_bahdanau.tokenizers.sentence_piece_tokenizer import (
    SentencePieceTokenizer,
)
from keras_bahdanau.tokenizers.tokenizer import CONFIG_FILE
from keras_bahdanau.tokenizers.tokenizer import VOCABULARY_FILE
from keras_bahdanau.tokenizers.tokenizer import Tokenizer
from keras_bahdanau.tokenizers.word_piece_tokenizer import WordPieceTokenizer
from keras_bahdanau.tokenizers.word_tokenizer import WordTokenizer
from keras_bahdanau.tokenizers.words import join_words
from keras_bahdanau.tokenizers.words import normalise_text
from keras_bahdanau.tokenizers.words import split_words
