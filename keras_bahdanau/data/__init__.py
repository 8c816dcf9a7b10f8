"""Data: parallel corpora, tokenizers and tf.data pipelines."""

from keras_bahdanau.data.corpora import cache_dir
from keras_bahdanau.data.corpora import ding_de_en
from keras_bahdanau.data.corpora import ding_file
from keras_bahdanau.data.corpora import parse_ding
from keras_bahdanau.data.corpora import read_parallel_files
from keras_bahdanau.data.corpora import read_tsv
from keras_bahdanau.data.corpora import split_pairs
from keras_bahdanau.data.pipeline import DatasetReport
from keras_bahdanau.data.pipeline import make_dataset
from keras_bahdanau.data.vocabulary import BOS
from keras_bahdanau.data.vocabulary import BOS_ID
from keras_bahdanau.data.vocabulary import EOS
from keras_bahdanau.data.vocabulary import EOS_ID
from keras_bahdanau.data.vocabulary import PAD
from keras_bahdanau.data.vocabulary import PAD_ID
from keras_bahdanau.data.vocabulary import RESERVED_TOKENS
from keras_bahdanau.data.vocabulary import UNK
from keras_bahdanau.data.vocabulary import UNK_ID
from keras_bahdanau.data.vocabulary import Tokenizer
from keras_bahdanau.data.vocabulary import WordPieceTokenizer
from keras_bahdanau.data.vocabulary import WordTokenizer
from keras_bahdanau.data.vocabulary import build_tokenizer
from keras_bahdanau.data.vocabulary import load_tokenizer
