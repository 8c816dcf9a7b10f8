"""The corpus that the `[data]` section of a train config names.

`load_corpus` holds every split in memory; `open_corpus` streams the
training pairs of a large `files` or `tsv` corpus from disk instead
(`TextCorpus`, `data.stream.make_stream`) and draws the sample that the
vocabularies are learnt from.
"""

import dataclasses
from pathlib import Path

from keras_bahdanau.data.bible import bible
from keras_bahdanau.data.corpora import SPLITS
from keras_bahdanau.data.corpora import read_parallel_files
from keras_bahdanau.data.ding import ding_de_en
from keras_bahdanau.data.ding import ding_terms
from keras_bahdanau.data.text_corpus import TextCorpus
from keras_bahdanau.data.text_corpus import sample_pairs
from keras_bahdanau.validation import check_choice

CORPORA = ("ding_de_en", "bible_en_fr", "files", "tsv")


STREAM = ("auto", "true", "false")


@dataclasses.dataclass
class Corpus:
    """The splits of a data config's corpus, and its vocabulary sample.

    Attributes:
        splits: `{"train": ..., "dev": pairs, "test": pairs}`: lists of
            `(source, target)` string tuples; the training pairs are a
            `TextCorpus` (or a `stream.PairList`) when they are streamed.
        sample: the training pairs to learn vocabularies from
            (`sample_pairs`), in corpus order.
    """

    splits: dict
    sample: list

    @property
    def streamed(self):
        """Whether the training pairs are streamed (not a list)."""
        return not isinstance(self.splits["train"], list)

    def drop_sample(self):
        """Lets the sample go, once the vocabularies and widths are made."""
        self.sample = []
        if self.streamed:
            self.splits["train"].sample = []


def load_corpus(data_config):
    """The train, dev and test pairs of the corpus a data config names.

    Args:
        data_config: the `data` section of a train config (see
            `keras_bahdanau.config.DEFAULTS`); `"files"` and `"tsv"` are
            split by hash (`split_pairs()`, dev and test each capped at
            `data.max_held_out_pairs`) unless dev and test files are
            given (a dev file is cut to its first `max_held_out_pairs`
            too); their unreadable lines are left out, with a warning
            that names them.

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
    return open_corpus({**data_config, "stream": "false"}).splits


def open_corpus(data_config, sample_sentences=0, seed=0):
    """The corpus of a data config, its training pairs streamed if large.

    `data.stream` decides: `"auto"` streams a `files` or `tsv` corpus
    with more training pairs than `data.shuffle_buffer` (below that the
    buffer would hold them all anyway), `"true"` streams any corpus (a
    built-in one from memory), `"false"` none. The files of `files` and
    `tsv` are read once here (`TextCorpus.scan`); streamed, their
    training pairs stay on disk.

    Args:
        data_config: the `data` section of a train config.
        sample_sentences: int, the training pairs to learn vocabularies
            from, drawn at random (`sample_pairs`); 0: all of them.
        seed: the sample's seed (the run's).

    Returns:
        A `Corpus`.

    Raises:
        As `load_corpus`.
    """
    corpus = data_config["corpus"]
    check_choice("data.corpus", corpus, CORPORA)
    stream = data_config.get("stream", "false")  # Runs before the key.
    check_choice("data.stream", stream, STREAM)
    size = sample_sentences or None
    if corpus in ("files", "tsv"):
        text, splits = _text_corpus(data_config, size, seed)
        streamed = stream == "true" or (
            stream == "auto" and text.num_pairs > data_config["shuffle_buffer"]
        )
        splits["train"] = text if streamed else list(text.pairs())
        sample = text.sample
    else:
        if corpus == "ding_de_en":
            splits = {split: ding_de_en(split) for split in SPLITS}
        else:
            splits = {split: bible(split) for split in SPLITS}
        if data_config["max_train_pairs"]:
            splits["train"] = splits["train"][: data_config["max_train_pairs"]]
    for name, pairs in splits.items():
        if isinstance(pairs, list) and not pairs:  # A scan has pairs.
            raise ValueError(
                f"The {name} split of corpus {corpus!r} is empty: the corpus "
                "is too small to split into train/dev/test."
            )
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
    if corpus not in ("files", "tsv"):
        sample = sample_pairs(splits["train"], size, seed)
        if stream == "true":
            from keras_bahdanau.data.stream import PairList

            splits["train"] = PairList(splits["train"], sample)
    return Corpus(splits, sample)


def _text_corpus(data_config, sample_size, seed):
    """The `TextCorpus` of a `files` or `tsv` corpus, and dev and test."""
    corpus = data_config["corpus"]
    if corpus == "tsv":
        _check_file(data_config, "tsv_file", corpus)
        paths, columns, given = [data_config["tsv_file"]], (0, 1), []
    else:
        paths, columns = _files(data_config), None
        given = [s for s in ("dev", "test") if data_config[f"{s}_source_file"]]
    text = TextCorpus.scan(
        paths,
        columns=columns,
        held_out=not given,
        # A run from before the key held all of 5% in dev and test.
        max_held_out=data_config.get("max_held_out_pairs", 0),
        max_train_pairs=data_config["max_train_pairs"],
        sample_size=sample_size,
        seed=seed,
    )
    splits = {"dev": text.dev, "test": text.test}
    for split in given:
        splits[split] = read_parallel_files(
            *(data_config[key] for key in _keys(split))
        )
    # A dev set is validated every epoch and decoded at the end: its first
    # pairs, as a hash split's. A test set is a benchmark: whole.
    if given:
        cap = data_config.get("max_held_out_pairs", 0) or None
        splits["dev"] = splits["dev"][:cap]
    return text, splits


def _keys(split):
    """The data_config keys of a split's two files."""
    prefix = "" if split == "train" else f"{split}_"
    return f"{prefix}source_file", f"{prefix}target_file"


def _files(data_config):
    """The training files of corpus `files`, after checking every file."""
    given = [s for s in ("dev", "test") if any(map(data_config.get, _keys(s)))]
    for key in (key for split in ["train", *given] for key in _keys(split)):
        _check_file(data_config, key, "files")
    if given not in ([], ["dev", "test"]):
        raise ValueError(
            "corpus 'files' takes both a dev and a test set "
            "(data.dev_source_file, data.dev_target_file, "
            "data.test_source_file, data.test_target_file) or neither "
            f"(a hash split of source_file/target_file). Received: only "
            f"{given[0]}."
        )
    return [data_config[key] for key in _keys("train")]


def _check_file(data_config, key, corpus):
    if not data_config[key] or not Path(data_config[key]).is_file():
        raise FileNotFoundError(
            f"data.{key} must name an existing file for corpus {corpus!r}. "
            f"Received: {data_config[key]!r}"
        )
