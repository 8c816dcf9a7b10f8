import pytest

from keras_bahdanau.config import CHOICES
from keras_bahdanau.config import DEFAULT_PRESETS
from keras_bahdanau.config import DEFAULTS
from keras_bahdanau.config import LENGTH_PENALTIES
from keras_bahdanau.config import MODEL_KEYS
from keras_bahdanau.config import RECIPES
from keras_bahdanau.config import ConfigError
from keras_bahdanau.config import config_errors
from keras_bahdanau.config import resolve_config
from keras_bahdanau.data.loading import CORPORA
from keras_bahdanau.distribution import STRATEGIES
from keras_bahdanau.models.factory import ARCHITECTURES
from keras_bahdanau.models.translation_model import REGULARIZATION
from keras_bahdanau.tokenizers import TOKENIZERS
from keras_bahdanau.training import JIT_COMPILE
from keras_bahdanau.training import OPTIMIZERS


def test_config_defaults_and_overrides():
    config = resolve_config(None, ["training.epochs=3", "data.lowercase=true"])
    assert config["training"]["epochs"] == 3
    assert config["data"]["lowercase"] is True
    assert config["model"]["architecture"] == "rnnsearch"


def test_example_config_is_valid():
    config = resolve_config("examples/ding_de_en.toml")
    assert config["data"]["corpus"] == "ding_de_en"


@pytest.mark.parametrize(
    "override, message",
    [
        ("training.epoch=3", "Unknown config key 'training.epoch'"),
        ("trainer.epochs=3", "Unknown config key 'trainer'"),
        ("training.epochs=many", "training.epochs must be a int"),
        ("training.epochs=0", "training.epochs must be positive"),
        ("data.dictionary_pairs=-1", r"must be 0 \(off\) or positive"),
        ("data.max_train_pairs=-5", r"must be 0 \(all\) or positive"),
        ("training.average_last=1", r"average_last must be 0 \(off\) or >= 2"),
        ("training.optimizer=sgd", "training.optimizer must be one of"),
        ("epochs", "section.key=value"),
    ],
)
def test_bad_config_is_rejected_before_training(override, message):
    with pytest.raises(ConfigError, match=message):
        resolve_config(None, [override])


def test_missing_config_file():
    with pytest.raises(ConfigError, match="Config file not found"):
        resolve_config("no/such/config.toml")


def test_recipes():
    small = resolve_config(None, [])
    assert small["recipe"] == "small_data"
    assert small["tokenizer"]["kind"] == "unigram"
    assert small["training"]["selection"] == "bleu"
    assert small["model"]["tie_embeddings"] is True
    paper = resolve_config(None, ["recipe=paper"])
    assert paper["training"]["optimizer"] == "adadelta"
    assert paper["model"]["initialization"] == "paper"
    assert paper["tokenizer"] == {
        "kind": "word",
        "source_vocabulary_size": 30000,
        "target_vocabulary_size": 30000,
        "joint": False,
        "sample_sentences": DEFAULTS["tokenizer"]["sample_sentences"],
        "threads": 1,
    }
    assert not any(
        paper["model"][key]
        for key in ("dropout", "word_dropout", "tie_embeddings")
    )
    # The user's keys win over the recipe's.
    mixed = resolve_config(None, ["recipe=paper", "training.optimizer=adam"])
    assert mixed["training"]["optimizer"] == "adam"
    with pytest.raises(ConfigError, match="recipe must be one of"):
        resolve_config(None, ["recipe=fast"])
    with pytest.raises(ConfigError, match="label_smoothing must be in"):
        resolve_config(None, ["training.label_smoothing=1.5"])


def test_config_errors_name_the_section():
    with pytest.raises(ConfigError, match=r"^\[data\] No pairs\.$") as caught:
        with config_errors("[data]", OSError, ValueError):
            raise FileNotFoundError("No pairs.")
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    with pytest.raises(ConfigError, match="^training.epochs must be"):
        with config_errors("[data]", ValueError):  # Not wrapped twice.
            resolve_config(None, ["training.epochs=0"])
    with pytest.raises(KeyError):  # Not one of the errors: not wrapped.
        with config_errors("[data]", ValueError):
            raise KeyError("x")


def test_the_choices_are_the_packages_own():
    # Written out in config_schema.py, which imports nothing (see its
    # docstring).
    assert CHOICES["data.corpus"] == tuple(CORPORA)
    assert CHOICES["tokenizer.kind"] == tuple(TOKENIZERS)
    assert CHOICES["model.architecture"] == tuple(ARCHITECTURES)
    assert CHOICES["training.optimizer"] == tuple(OPTIMIZERS)
    assert CHOICES["distribution.strategy"] == tuple(STRATEGIES)
    assert CHOICES["training.jit_compile"] == tuple(JIT_COMPILE)
    paper = RECIPES["paper"]["model"]
    assert {key: paper[key] for key in REGULARIZATION} == REGULARIZATION
    assert set(REGULARIZATION) <= set(DEFAULTS["model"])
    for architecture, keys in MODEL_KEYS.items():
        assert set(keys) < set(DEFAULTS["model"]), architecture
        assert (
            DEFAULT_PRESETS[architecture] in ARCHITECTURES[architecture].presets
        )


def test_example_configs_start_from_the_built_in_main_job():
    main = resolve_config("ding_de_en")
    assert resolve_config("examples/ding_de_en.toml") == main
    long = resolve_config("examples/ding_de_en_long.toml")
    for section in ("data", "tokenizer", "evaluation"):
        assert long[section] == main[section], section
    assert long["model"] == {**main["model"], "word_dropout": 0.1}
    differ = {
        k
        for k in main["training"]
        if long["training"][k] != main["training"][k]
    }
    assert differ == {
        "epochs",
        "max_minutes",
        "patience",
        "average_last",
        "batch_size",
    }


def test_a_base_config_is_changed_key_by_key(tmp_path):
    base = tmp_path / "base.toml"
    base.write_text(
        'run_dir = "a"\n[training]\nepochs = 3\nbatch_size = 8\n'
        "[model]\nword_dropout = 0.3\n"
    )
    child = tmp_path / "child.toml"
    child.write_text('base = "base.toml"\n[training]\nepochs = 5\n')
    config = resolve_config(child, ["training.seed=7"])
    assert config["run_dir"] == "a"
    assert config["training"]["epochs"] == 5
    assert config["training"]["batch_size"] == 8
    assert config["training"]["seed"] == 7
    assert config["model"]["word_dropout"] == 0.3
    # Another architecture starts its [model] table afresh: the base's
    # RNN keys would not apply to it.
    other = tmp_path / "other.toml"
    other.write_text(
        'base = "base.toml"\n[model]\narchitecture = "pervasive_attention"\n'
    )
    assert resolve_config(other)["model"]["word_dropout"] is None
    loop = tmp_path / "loop.toml"
    loop.write_text('base = "loop.toml"\n')
    with pytest.raises(ConfigError, match="form a cycle"):
        resolve_config(loop)
    missing = tmp_path / "missing.toml"
    missing.write_text('base = "nowhere"\n')
    with pytest.raises(ConfigError, match="nor a built-in config"):
        resolve_config(missing)


def test_model_keys_per_architecture():
    pervasive = resolve_config(
        None, ["model.architecture=pervasive_attention", "model.dropout=0.3"]
    )["model"]
    assert pervasive["preset"] == DEFAULT_PRESETS["pervasive_attention"]
    assert pervasive["dropout"] == 0.3
    # Left to the preset, or not taken by the architecture: None.
    assert pervasive["tie_embeddings"] is None
    assert pervasive["hidden_dim"] is None
    rnn = resolve_config(None, ["model.architecture=rnnencdec"])["model"]
    assert rnn["preset"] == DEFAULT_PRESETS["rnnencdec"]
    assert rnn["dropout"] == DEFAULTS["model"]["dropout"]
    assert rnn["num_layers"] is None
    # The paper recipe's regularisation applies to the keys it takes.
    paper = resolve_config(
        None, ["recipe=paper", "model.architecture=pervasive_attention"]
    )["model"]
    assert paper["dropout"] == 0.0 and paper["tie_embeddings"] is False
    assert paper["initialization"] is None
    for architecture, key in (
        ("pervasive_attention", "word_dropout"),
        ("pervasive_attention", "maxout_dim"),
        ("rnnsearch", "growth_rate"),
    ):
        with pytest.raises(ConfigError, match=f"model.{key} does not apply"):
            resolve_config(
                None, [f"model.architecture={architecture}", f"model.{key}=1"]
            )


def test_length_penalty_defaults_per_architecture():
    for architecture, alpha in LENGTH_PENALTIES.items():
        config = resolve_config(None, [f"model.architecture={architecture}"])
        assert config["evaluation"]["length_penalty"] == alpha
    config = resolve_config(
        None,
        [
            "model.architecture=pervasive_attention",
            "evaluation.length_penalty=0.25",
        ],
    )
    assert config["evaluation"]["length_penalty"] == 0.25
    with pytest.raises(ConfigError, match="length_penalty must be"):
        resolve_config(None, ["evaluation.length_penalty=-1"])
    with pytest.raises(ConfigError, match="bucket_width must be positive"):
        resolve_config(None, ["data.bucket_width=0"])
