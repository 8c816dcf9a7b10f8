"""RNNencdec (Cho et al., 2014): the paper's model without attention."""

from keras_bahdanau.models.rnn_enc_dec.presets import RNN_ENC_DEC_PRESETS
from keras_bahdanau.models.rnn_enc_dec.rnn_enc_dec import RNNEncDec
