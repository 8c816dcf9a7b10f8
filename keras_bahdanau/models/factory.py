"""Builds a model from the `[model]` section of a train config."""

from keras_bahdanau.config import check_model_keys
from keras_bahdanau.models.pervasive_attention import PervasiveAttention
from keras_bahdanau.models.rnn_enc_dec import RNNEncDec
from keras_bahdanau.models.rnn_search import RNNSearch
from keras_bahdanau.validation import check_choice

ARCHITECTURES = {
    "rnnsearch": RNNSearch,
    "rnnencdec": RNNEncDec,
    "pervasive_attention": PervasiveAttention,
}


# Size keys: 0 keeps the preset's value.
_SIZES = (
    "embedding_dim",
    "hidden_dim",
    "maxout_dim",
    "num_layers",
    "growth_rate",
    "kernel_size",
)


def build_model(model_config, source_vocabulary_size, target_vocabulary_size):
    """The model a resolved train config's `[model]` section describes.

    Args:
        model_config: the `[model]` dict of `config.resolve_config`: the
            `architecture` (a key of `ARCHITECTURES`), the `preset` (a
            preset name, or "" for the constructor's defaults) and the
            constructor arguments of `config.MODEL_KEYS[architecture]`;
            None leaves an argument to the preset, and so does 0 for the
            sizes. `embedding_dim` is both embedding sizes of Pervasive
            Attention.
        source_vocabulary_size: int, the source vocabulary's size.
        target_vocabulary_size: int, the target vocabulary's size.

    Returns:
        A `TranslationModel`.

    Raises:
        ValueError: an unknown architecture or preset, a key the
            architecture does not take set to a value, or a value the
            model refuses (its own message).

    Example:

    >>> from keras_bahdanau.config import resolve_config
    >>> config = resolve_config(None, ["model.hidden_dim=64"])
    >>> model = build_model(config["model"], 100, 120)
    >>> model.hidden_dim, model.embedding_dim
    (64, 128)
    """
    architecture = model_config["architecture"]
    check_choice("architecture", architecture, ARCHITECTURES)
    arguments = {
        key: value
        for key, value in model_config.items()
        if key not in ("architecture", "preset")
        and value is not None
        and not (key in _SIZES and value == 0)
    }
    check_model_keys(architecture, arguments)
    if architecture == "pervasive_attention":
        if "embedding_dim" in arguments:
            size = arguments.pop("embedding_dim")
            arguments.update(
                source_embedding_dim=size, target_embedding_dim=size
            )
        channels = arguments.pop("reduction_channels", 0)
        if channels:  # 0: no reduction
            arguments["input_channels"] = channels
    cls = ARCHITECTURES[architecture]
    sizes = dict(
        source_vocabulary_size=source_vocabulary_size,
        target_vocabulary_size=target_vocabulary_size,
    )
    if model_config["preset"]:
        return cls.from_preset(model_config["preset"], **sizes, **arguments)
    return cls(**sizes, **arguments)
