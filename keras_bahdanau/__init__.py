"""keras_bahdanau: attention-based NMT (Bahdanau et al., 2015) for Keras 3."""

# The one place of the version: pyproject.toml reads it from here. Set
# before the imports, which may read it while the package initializes.
__version__ = "0.1.0"

from keras_bahdanau import layers
from keras_bahdanau import models

# Registers the loss, metric and optimizers that saved models refer to.
from keras_bahdanau import training
from keras_bahdanau.models import RNNEncDec
from keras_bahdanau.models import RNNSearch
