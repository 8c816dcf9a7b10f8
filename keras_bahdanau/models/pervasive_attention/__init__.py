"""Pervasive Attention (Elbayad et al., 2018): the model and its layers."""

from keras_bahdanau.models.pervasive_attention.grid import _Grid
from keras_bahdanau.models.pervasive_attention.masked_norm_activation import (
    ACTIVATIONS,
)
from keras_bahdanau.models.pervasive_attention.masked_norm_activation import (
    _MaskedNormActivation,
)
from keras_bahdanau.models.pervasive_attention.padding_mask import _PaddingMask
from keras_bahdanau.models.pervasive_attention.pervasive_attention import (
    PervasiveAttention,
)
from keras_bahdanau.models.pervasive_attention.pervasive_dense_layer import (
    PervasiveDenseLayer,
)
from keras_bahdanau.models.pervasive_attention.presets import (
    PERVASIVE_ATTENTION_PRESETS,
)
from keras_bahdanau.models.pervasive_attention.source_pooling import POOLINGS
from keras_bahdanau.models.pervasive_attention.source_pooling import (
    SourcePooling,
)
