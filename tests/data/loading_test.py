import pytest

from keras_bahdanau.config import DEFAULTS
from keras_bahdanau.data import ding
from keras_bahdanau.data import load_corpus
from keras_bahdanau.data import loading
from tests.data.ding_test import DING_SAMPLE
from tests.data.ding_test import DING_SAMPLE_PAIRS
from tests.data.ding_test import DING_SAMPLE_TERMS


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


def test_dictionary_pairs_extend_the_training_split_only(monkeypatch):
    sentences = {  # The sample's sentences are too few to split by hash.
        "train": DING_SAMPLE_PAIRS[:5],
        "dev": DING_SAMPLE_PAIRS[5:7],
        "test": DING_SAMPLE_PAIRS[7:],
    }
    monkeypatch.setattr(loading, "ding_de_en", lambda split: sentences[split])
    monkeypatch.setattr(ding, "ding_file", lambda cache=None: DING_SAMPLE)
    data = {**DEFAULTS["data"], "corpus": "ding_de_en"}
    plain = load_corpus(data)
    extended = load_corpus({**data, "dictionary_pairs": 2})
    added = extended["train"][len(plain["train"]) :]
    assert extended["train"][: len(plain["train"])] == plain["train"]
    # The train sources name Apfel, Äpfel and Baum once each (file order).
    assert added == DING_SAMPLE_TERMS[:2]
    assert extended["dev"] == plain["dev"] and extended["test"] == plain["test"]


def test_dictionary_pairs_need_the_ding_corpus(tmp_path):
    tsv = _write(
        tmp_path / "pairs.tsv", [f"Satz {i}.\tS {i}." for i in range(99)]
    )
    data = {**DEFAULTS["data"], "corpus": "tsv", "tsv_file": tsv}
    with pytest.raises(ValueError, match="for corpus 'ding_de_en' only"):
        load_corpus({**data, "dictionary_pairs": 10})
