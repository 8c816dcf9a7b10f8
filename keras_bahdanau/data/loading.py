"""The corpus that the `[data]` section of a train config names."""

from pathlib import Path

from keras_bahdanau.data.bible import bible
from keras_bahdanau.data.corpora import SPLITS
from keras_bahdanau.data.corpora import read_parallel_files
from keras_bahdanau.data.corpora import read_tsv
from keras_bahdanau.data.corpora import split_pairs
from keras_bahdanau.data.ding import ding_de_en
from keras_bahdanau.data.ding import ding_terms
from keras_bahdanau.validation import check_choice

CORPORA = ("ding_de_en", "bible_en_fr", "files", "tsv")


def load_corpus(data_config):
    """The train, dev and test pairs of the corpus a data config names.

    Args:
        data_config: the `data` section of a train config (see
            `keras_bahdanau.config.DEFAULTS`); `"files"` and `"tsv"` are
            split by `split_pairs()` unless dev and test files are given.

    Returns:
        `{"train": pairs, "dev": pairs, "test": pairs}`, lists of
        `(source, target)` string tuples; with `data.dictionary_pairs` the
        train pairs end with that many Ding term pairs (`ding_terms()`).

    Raises:
        FileNotFoundError: a `data.*_file` names no file, or a corpus to
            download cannot be fetched (see `ding_file()`, `bible_file()`).
        ValueError: a file that cannot be read or is not UTF-8 (an
            `InputError`), dev and test files given only in part, or an
            empty split.
    """
    corpus = data_config["corpus"]
    check_choice("data.corpus", corpus, CORPORA)
    if corpus == "ding_de_en":
        splits = {split: ding_de_en(split) for split in SPLITS}
    elif corpus == "bible_en_fr":
        splits = {split: bible(split) for split in SPLITS}
    elif corpus == "files":
        splits = _files(data_config)
    else:
        _check_file(data_config, "tsv_file", corpus)
        splits = split_pairs(read_tsv(data_config["tsv_file"]))
    for name, pairs in splits.items():
        if not pairs:
            raise ValueError(
                f"The {name} split of corpus {corpus!r} is empty: the corpus "
                "is too small to split into train/dev/test."
            )
    if data_config["max_train_pairs"]:
        splits["train"] = splits["train"][: data_config["max_train_pairs"]]
    if data_config["dictionary_pairs"]:
        if corpus != "ding_de_en":
            raise ValueError(
                "data.dictionary_pairs adds pairs of the Ding dictionary's "
                "terms, for corpus 'ding_de_en' only. Received: "
                f"data.corpus={corpus!r}"
            )
        splits["train"] = splits["train"] + ding_terms(
            splits["train"], data_config["dictionary_pairs"]
        )
    return splits


def _files(data_config):
    def keys(split):  # The data_config keys of the split's two files.
        prefix = "" if split == "train" else f"{split}_"
        return f"{prefix}source_file", f"{prefix}target_file"

    given = [s for s in ("dev", "test") if any(map(data_config.get, keys(s)))]
    for key in (key for split in ["train", *given] for key in keys(split)):
        _check_file(data_config, key, "files")
    if given not in ([], ["dev", "test"]):
        raise ValueError(
            "corpus 'files' takes both a dev and a test set "
            "(data.dev_source_file, data.dev_target_file, "
            "data.test_source_file, data.test_target_file) or neither "
            f"(a hash split of source_file/target_file). Received: only "
            f"{given[0]}."
        )
    splits = {
        split: read_parallel_files(*(data_config[key] for key in keys(split)))
        for split in ["train", *given]
    }
    return splits if given else split_pairs(splits["train"])


def _check_file(data_config, key, corpus):
    if not data_config[key] or not Path(data_config[key]).is_file():
        raise FileNotFoundError(
            f"data.{key} must name an existing file for corpus {corpus!r}. "
            f"Received: {data_config[key]!r}"
        )
