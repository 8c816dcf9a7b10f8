"""The `keras-bahdanau` commands: one module per command."""

# Re-exported: the commands call it before they import Keras.
from keras_bahdanau.startup import start_tensorflow
