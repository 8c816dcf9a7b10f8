"""Decoding: `SearchConfig` (config.py), the greedy and beam search loops
and `search` (search.py), `compile_search` and its cache (compiled.py).
"""

from keras_bahdanau.decoding.compiled import compile_search
from keras_bahdanau.decoding.config import DEFAULT_RELATIVE_MAX_LENGTH
from keras_bahdanau.decoding.config import SearchConfig
from keras_bahdanau.decoding.config import as_search_config
from keras_bahdanau.decoding.config import check_search_arguments
from keras_bahdanau.decoding.search import COVERAGE_FLOOR
from keras_bahdanau.decoding.search import SearchResult
from keras_bahdanau.decoding.search import beam_search
from keras_bahdanau.decoding.search import greedy_search
from keras_bahdanau.decoding.search import search
