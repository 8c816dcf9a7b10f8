from keras_bahdanau.config import resolve_config

FILES = ("source_file", "target_file")


def test_the_paper_config_is_the_paper_recipe_on_user_files(tmp_path):
    overrides = []
    for prefix in ("", "dev_", "test_"):
        for key in FILES:
            path = tmp_path / f"{prefix}{key}"
            path.write_text("Ein Satz.\n")
            overrides.append(f"data.{prefix}{key}={path}")
    config = resolve_config("examples/wmt14_en_fr.toml", overrides)
    assert config["recipe"] == "paper"
    assert config["data"]["corpus"] == "files"
    assert config["data"]["stream"] == "auto"  # 12M pairs: streamed
    assert config["data"]["max_length"] == 50
    assert config["tokenizer"]["kind"] == "word"
    assert config["tokenizer"]["source_vocabulary_size"] == 30000
    assert config["model"]["preset"] == "rnnsearch_50"
    assert config["model"]["initialization"] == "paper"
    assert config["training"]["optimizer"] == "adadelta"
    assert config["training"]["batch_size"] == 80
    assert config["training"]["selection"] == "loss"
