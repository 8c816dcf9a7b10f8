import pytest

from keras_bahdanau.config import DEFAULTS
from keras_bahdanau.config import resolve_config
from keras_bahdanau.models import PervasiveAttention
from keras_bahdanau.models import RNNEncDec
from keras_bahdanau.models import RNNSearch
from keras_bahdanau.models import build_model
from keras_bahdanau.models.translation_model import REGULARIZATION


def model_config(**overrides):
    """A resolved `[model]` section: tiny sizes, so that builds are fast."""
    return {
        "architecture": "rnnsearch",
        "preset": "",
        "embedding_dim": 8,
        "hidden_dim": 6,
        "maxout_dim": 8,
        **REGULARIZATION,
        "initialization": "paper",
        **{key: None for key in ("num_layers", "growth_rate", "kernel_size")},
        "reduction_channels": None,
        **overrides,
    }


@pytest.mark.parametrize(
    "architecture, cls", [("rnnsearch", RNNSearch), ("rnnencdec", RNNEncDec)]
)
def test_rnn_models_get_sizes_regularization_and_initialization(
    architecture, cls
):
    config = model_config(
        architecture=architecture,
        dropout=0.2,
        word_dropout=0.1,
        tie_embeddings=True,
        initialization="glorot",
    )
    model = build_model(config, 20, 30)
    assert type(model) is cls
    got = model.get_config()
    expected = dict(
        source_vocabulary_size=20,
        target_vocabulary_size=30,
        embedding_dim=8,
        hidden_dim=6,
        maxout_dim=8,
        dropout=0.2,
        word_dropout=0.1,
        tie_embeddings=True,
        initialization="glorot",
    )
    assert {key: got[key] for key in expected} == expected


def test_a_preset_gives_the_sizes_a_config_leaves_at_zero():
    config = model_config(
        preset="rnnsearch_tiny", embedding_dim=0, hidden_dim=16, maxout_dim=0
    )
    model = build_model(config, 20, 30)
    # The vocabulary sizes are the data's, not the preset's placeholders.
    assert (model.source_vocabulary_size, model.target_vocabulary_size) == (
        20,
        30,
    )
    assert (model.embedding_dim, model.hidden_dim, model.maxout_dim) == (
        128,
        16,
        128,
    )


def test_pervasive_attention_takes_its_keys_and_the_preset_the_rest():
    config = resolve_config(
        None,
        [
            "model.architecture=pervasive_attention",
            "model.preset=pervasive_attention_small",
            "model.embedding_dim=8",
            "model.num_layers=2",
            "model.tie_embeddings=true",
        ],
    )
    model = build_model(config["model"], 20, 30)
    assert isinstance(model, PervasiveAttention)
    assert model.source_embedding_dim == model.target_embedding_dim == 8
    assert model.num_layers == 2
    assert model.tie_embeddings is True
    # Keys the config leaves alone are the preset's, not the RNN defaults
    # of the config schema (dropout 0.2).
    preset = PervasiveAttention.presets["pervasive_attention_small"]
    assert model.dropout == preset["dropout"] != DEFAULTS["model"]["dropout"]
    assert model.growth_rate == preset["growth_rate"]
    assert model.target_vocabulary_size == 30
    explicit = resolve_config(
        None,
        [
            "model.architecture=pervasive_attention",
            "model.preset=pervasive_attention_small",
            "model.num_layers=1",
            "model.dropout=0.3",
        ],
    )
    assert build_model(explicit["model"], 20, 30).dropout == 0.3


@pytest.mark.parametrize(
    "architecture, key",
    [
        ("pervasive_attention", "hidden_dim"),
        ("pervasive_attention", "word_dropout"),
        ("pervasive_attention", "initialization"),
        ("rnnsearch", "num_layers"),
        ("rnnencdec", "reduction_channels"),
    ],
)
def test_a_key_the_architecture_does_not_take_is_refused(architecture, key):
    value = "glorot" if key == "initialization" else 4
    config = {key: None for key in model_config()}
    config.update(architecture=architecture, preset="", **{key: value})
    with pytest.raises(ValueError, match=f"model.{key} does not apply"):
        build_model(config, 20, 30)


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"maxout_dim": 5, "tie_embeddings": True}, "maxout_dim` must equal"),
        ({"dropout": 1.5}, "dropout=1.5"),
        ({"initialization": "xavier"}, "initialization='xavier'"),
        ({"preset": "rnnsearch_100"}, "Unknown preset"),
        ({"architecture": "transformer"}, "architecture='transformer'"),
    ],
)
def test_values_the_model_refuses_raise_its_value_error(overrides, message):
    with pytest.raises(ValueError, match=message):
        build_model(model_config(**overrides), 20, 30)


def test_a_vocabulary_without_real_words_is_refused():
    with pytest.raises(ValueError, match="target_vocabulary_size=4"):
        build_model(model_config(), 20, 4)
