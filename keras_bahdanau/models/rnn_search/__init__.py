"""RNNsearch (Bahdanau et al., 2015): the attention model of the paper."""

from keras_bahdanau.models.rnn_search.presets import RNN_SEARCH_PRESETS
from keras_bahdanau.models.rnn_search.rnn_search import RNNSearch
