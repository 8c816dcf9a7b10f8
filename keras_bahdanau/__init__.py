"""keras_bahdanau: attention-based NMT (Bahdanau et al., 2015) for Keras 3.

The subpackages load on first use (PEP 562): `import keras_bahdanau` alone
imports neither Keras nor TensorFlow, so that the command line checks its
arguments and config before they load (seconds). Importing
`keras_bahdanau.models` (or `keras_bahdanau.RNNSearch`, ...) registers the
model, layer, loss and optimizer classes that `.keras` files name.
"""

import importlib

# The one place of the version: pyproject.toml reads it from here.
__version__ = "0.2.0"

# Name -> (module, attribute of it; None: the module itself).
_LAZY = {
    "layers": ("keras_bahdanau.layers", None),
    "models": ("keras_bahdanau.models", None),
    "training": ("keras_bahdanau.training", None),
    "RNNSearch": ("keras_bahdanau.models", "RNNSearch"),
    "RNNEncDec": ("keras_bahdanau.models", "RNNEncDec"),
    "PervasiveAttention": ("keras_bahdanau.models", "PervasiveAttention"),
    "Translator": ("keras_bahdanau.translator", "Translator"),
    "TranslationPreprocessor": (
        "keras_bahdanau.preprocessor",
        "TranslationPreprocessor",
    ),
    "SearchConfig": ("keras_bahdanau.decoding", "SearchConfig"),
    "train": ("keras_bahdanau.trainer", "train"),
    "resolve_config": ("keras_bahdanau.config", "resolve_config"),
}


def __getattr__(name):
    if name not in _LAZY:
        raise AttributeError(
            f"module 'keras_bahdanau' has no attribute {name!r}"
        )
    module_name, attribute = _LAZY[name]
    module = importlib.import_module(module_name)
    return module if attribute is None else getattr(module, attribute)


def __dir__():
    return sorted([*globals(), *_LAZY])
