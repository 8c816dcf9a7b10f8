"""Presets of `RNNSearch` (and, renamed, of `RNNEncDec`).

`*_50` and `*_30` are the paper's sizes (Bahdanau et al. 2015, section 4.2):
30,000-word shortlists, 620-dimensional embeddings, 1000 hidden units, a
500-unit maxout readout; the suffix is the maximum sentence length used in
training, which the model itself does not fix. The other presets are small
enough to train on a CPU.
"""

_PAPER = {
    "source_vocabulary_size": 30000,
    "target_vocabulary_size": 30000,
    "embedding_dim": 620,
    "hidden_dim": 1000,
    "maxout_dim": 500,
}
_SMALL = {
    "source_vocabulary_size": 8000,
    "target_vocabulary_size": 8000,
    "embedding_dim": 256,
    "hidden_dim": 512,
    "maxout_dim": 256,
}
_TINY = {
    "source_vocabulary_size": 8000,
    "target_vocabulary_size": 8000,
    "embedding_dim": 128,
    "hidden_dim": 256,
    "maxout_dim": 128,
}

RNN_SEARCH_PRESETS = {
    "rnnsearch_50": _PAPER,
    "rnnsearch_30": _PAPER,
    "rnnsearch_small": _SMALL,
    "rnnsearch_tiny": _TINY,
}
