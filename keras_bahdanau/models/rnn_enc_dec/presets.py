"""Presets of `RNNEncDec`: the sizes of `RNNSearch`'s, which it is compared
with in the paper (`rnnencdec_50` has the sizes of `rnnsearch_50`, ...)."""

from keras_bahdanau.models.rnn_search.presets import RNN_SEARCH_PRESETS

RNN_ENC_DEC_PRESETS = {
    name.replace("rnnsearch", "rnnencdec"): sizes
    for name, sizes in RNN_SEARCH_PRESETS.items()
}
