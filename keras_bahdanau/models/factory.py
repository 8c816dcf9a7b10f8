"""Builds a model from the `[model]` section of a train config."""

from keras_bahdanau.models.pervasive_attention import PervasiveAttention
from keras_bahdanau.models.rnn_enc_dec import RNNEncDec
from keras_bahdanau.models.rnn_search import RNNSearch
from keras_bahdanau.models.translation_model import REGULARIZATION
from keras_bahdanau.validation import check_choice

ARCHITECTURES = {
    "rnnsearch": RNNSearch,
    "rnnencdec": RNNEncDec,
    "pervasive_attention": PervasiveAttention,
}


def build_model(model_config, source_vocabulary_size, target_vocabulary_size):
    """The model a train config's `[model]` section describes.

    Args:
        model_config: dict with the keys `architecture` (a key of
            `ARCHITECTURES`), `preset` (a preset name, or "" for the
            constructor defaults), `embedding_dim`, `hidden_dim` and
            `maxout_dim` (0 keeps the preset's value), the keys of
            `REGULARIZATION` and `initialization` (the RNN models take them
            all; `PervasiveAttention` takes `dropout` only).
        source_vocabulary_size: int, the source vocabulary's size.
        target_vocabulary_size: int, the target vocabulary's size.

    Returns:
        A `TranslationModel`.

    Raises:
        ValueError: for `pervasive_attention` with `hidden_dim` or
            `maxout_dim`, an unknown architecture or preset, or a value the
            model refuses (its own message); `TypeError` for an argument
            the model does not take.

    Example:

    >>> model = build_model(
    ...     {"architecture": "rnnsearch", "preset": "rnnsearch_tiny",
    ...      "embedding_dim": 0, "hidden_dim": 64, "maxout_dim": 0,
    ...      **REGULARIZATION, "initialization": "glorot"}, 100, 120)
    >>> model.hidden_dim, model.embedding_dim
    (64, 128)
    """
    architecture = model_config["architecture"]
    check_choice("architecture", architecture, ARCHITECTURES)
    sizes = {
        key: model_config[key]
        for key in ("embedding_dim", "hidden_dim", "maxout_dim")
        if model_config[key]
    }
    kwargs = dict(
        source_vocabulary_size=source_vocabulary_size,
        target_vocabulary_size=target_vocabulary_size,
    )
    if architecture == "pervasive_attention":
        if set(sizes) - {"embedding_dim"}:
            raise ValueError(
                "pervasive_attention has no hidden_dim or maxout_dim; set "
                "model.preset (or model.embedding_dim) instead."
            )
        if "embedding_dim" in sizes:
            kwargs.update(
                source_embedding_dim=sizes["embedding_dim"],
                target_embedding_dim=sizes["embedding_dim"],
            )
        kwargs["dropout"] = model_config["dropout"]
    else:
        kwargs.update(
            sizes,
            **{key: model_config[key] for key in REGULARIZATION},
            initialization=model_config["initialization"],
        )
    cls = ARCHITECTURES[architecture]
    if model_config["preset"]:
        return cls.from_preset(model_config["preset"], **kwargs)
    return cls(**kwargs)
