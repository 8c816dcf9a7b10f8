from keras_bahdanau.commands.demo import demo_config
from keras_bahdanau.config import resolve_config


def test_demo_uses_the_example_config():
    assert demo_config() == resolve_config("examples/ding_de_en.toml")
