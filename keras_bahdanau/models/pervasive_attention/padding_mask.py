"""The real (non-padding) positions of a batch of token ids."""

import keras
from keras import ops

from keras_bahdanau.reserved import PAD_ID


@keras.saving.register_keras_serializable(package="keras_bahdanau")
class _PaddingMask(keras.layers.Layer):
    """`ids != 0`: the real (non-padding) positions."""

    def call(self, ids):
        return ops.not_equal(ids, PAD_ID)
