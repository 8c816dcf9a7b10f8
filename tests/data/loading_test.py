import pytest

from keras_bahdanau.config import DEFAULTS
from keras_bahdanau.data import load_corpus


def _write(path, lines):
    path.write_text("".join(f"{line}\n" for line in lines), "utf-8")
    return str(path)


def test_tsv_corpus_is_split_by_hash_and_shortened(tmp_path):
    pairs = [(f"Satz {i}.", f"Sentence {i}.") for i in range(400)]
    tsv = _write(tmp_path / "pairs.tsv", [f"{s}\t{t}" for s, t in pairs])
    data = {**DEFAULTS["data"], "corpus": "tsv", "tsv_file": tsv}
    splits = load_corpus(data)
    assert sorted(pair for split in splits.values() for pair in split) == (
        sorted(pairs)
    )
    shortened = load_corpus({**data, "max_train_pairs": 7})
    assert shortened["train"] == splits["train"][:7]
    assert shortened["test"] == splits["test"]


def test_errors_name_the_data_key(tmp_path):
    data = {**DEFAULTS["data"], "corpus": "tsv"}
    with pytest.raises(FileNotFoundError, match="data.tsv_file must name"):
        load_corpus(data)
    tiny = _write(tmp_path / "tiny.tsv", ["Eins.\tOne."])
    with pytest.raises(ValueError, match="split of corpus 'tsv' is empty"):
        load_corpus({**data, "tsv_file": tiny})
    with pytest.raises(ValueError, match="Received: data.corpus='wmt'"):
        load_corpus({**data, "corpus": "wmt"})
