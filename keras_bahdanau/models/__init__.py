"""The translation models; importing this registers them with Keras."""

# Registers the loss, metric and optimizers that compiled `.keras` files
# name, so that `keras.saving.load_model` finds them too.
from keras_bahdanau import training
from keras_bahdanau.models.factory import build_model
from keras_bahdanau.models.pervasive_attention import PervasiveAttention
from keras_bahdanau.models.rnn_enc_dec import RNNEncDec
from keras_bahdanau.models.rnn_search import RNNSearch
from keras_bahdanau.models.translation_model import TranslationModel
