"""Decoding: `SearchConfig` (config.py), `search` (search.py), greedy and
beam search (greedy_search.py, beam_search.py) and what they share
(hypotheses.py), `compile_search` and its cache (compiled.py).
"""

from keras_bahdanau.decoding.beam_search import COVERAGE_FLOOR
from keras_bahdanau.decoding.beam_search import beam_search
from keras_bahdanau.decoding.compiled import compile_search
from keras_bahdanau.decoding.config import DEFAULT_RELATIVE_MAX_LENGTH
from keras_bahdanau.decoding.config import SearchConfig
from keras_bahdanau.decoding.config import as_search_config
from keras_bahdanau.decoding.config import check_max_length
from keras_bahdanau.decoding.greedy_search import greedy_search
from keras_bahdanau.decoding.hypotheses import SearchResult
from keras_bahdanau.decoding.search import search
