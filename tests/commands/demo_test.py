from keras_bahdanau.commands.demo import demo_config
from keras_bahdanau.config import CONFIGS
from keras_bahdanau.config import resolve_config


def test_demo_runs_the_built_in_config_with_the_overrides():
    assert CONFIGS["ding_de_en"].parent.name == "configs"
    config = demo_config(["training.epochs=2"])
    assert config["training"]["epochs"] == 2
    config["training"]["epochs"] = resolve_config(CONFIGS["ding_de_en"])[
        "training"
    ]["epochs"]
    assert config == demo_config()
