"""benchmarks/make_corpus.py and corpus_growth.py: the growth benchmark.

The corpus generator draws from given sentences here (`sources=`), so
that nothing is downloaded; the benchmark runs as a user runs it, on a
tiny corpus of that generator and a tiny model, for one measured step.
"""

import gzip
import json

import keras
import pytest

from tests.benchmarks.benchmark_scripts_test import _load
from tests.benchmarks.benchmark_scripts_test import _run

# Sentence i is one word on each side ("d7." and "e7."), so that a line
# shows which sentences it joins, and whether its two sides align.
_SENTENCES = 30
_SOURCES = (
    [f"d{i}." for i in range(_SENTENCES)],
    [f"e{i}." for i in range(_SENTENCES)],
)
# A tiny model and vocabulary (the benchmark's default config is the
# main job's).
_TINY = {
    "model.preset": "",
    "model.embedding_dim": 8,
    "model.hidden_dim": 8,
    "model.maxout_dim": 8,  # = embedding_dim: tied embeddings
    "tokenizer.kind": "word",
    "tokenizer.source_vocabulary_size": 40,
    "tokenizer.target_vocabulary_size": 40,
    "data.max_length": 10,
    "training.batch_size": 8,
}


@pytest.fixture(scope="module")
def make_corpus():
    return _load("make_corpus")


def _lines(path, opener=open):
    with opener(path, "rt", encoding="utf-8") as file:
        return file.read().splitlines()


def test_each_line_joins_one_to_three_aligned_sentences(
    make_corpus, tmp_path, monkeypatch
):
    # Chunks of 7 lines: the last one partial, as a large corpus's is.
    monkeypatch.setattr(make_corpus, "CHUNK", 7)
    source, target = make_corpus.write_corpus(
        tmp_path, 50, seed=3, sources=_SOURCES
    )
    assert (source.name, target.name) == ("train.de", "train.en")
    german, english = _lines(source), _lines(target)
    assert len(german) == len(english) == 50
    joined = set()
    for left, right in zip(german, english, strict=True):
        words = left.split(" ")
        joined.add(len(words))
        assert all(word in _SOURCES[0] for word in words)
        assert right.split(" ") == [f"e{word[1:]}" for word in words]
    assert joined == {1, 2, 3}


def test_the_same_seed_writes_the_same_files(make_corpus, tmp_path):
    written = {}
    for name, seed in (("a", 1), ("b", 1), ("c", 2)):
        paths = make_corpus.write_corpus(
            tmp_path / name, 40, seed=seed, sources=_SOURCES
        )
        written[name] = [path.read_bytes() for path in paths]
    assert written["a"] == written["b"]
    assert written["a"][0] != written["c"][0]


def test_a_gzipped_corpus_holds_the_same_lines(make_corpus, tmp_path):
    from keras_bahdanau.data.text_corpus import TextCorpus
    from keras_bahdanau.data.text_corpus import count_lines

    plain = make_corpus.write_corpus(
        tmp_path / "plain", 40, seed=5, sources=_SOURCES
    )
    packed = make_corpus.write_corpus(
        tmp_path / "packed", 40, seed=5, compress=True, sources=_SOURCES
    )
    assert [path.name for path in packed] == ["train.de.gz", "train.en.gz"]
    for text, compressed in zip(plain, packed, strict=True):
        assert compressed.read_bytes()[:2] == b"\x1f\x8b"
        assert _lines(compressed, gzip.open) == _lines(text)
        assert count_lines(compressed) == 40
    # Training reads it as it reads the plain files.
    corpus = TextCorpus.scan(packed, held_out=False)
    assert list(corpus.pairs()) == list(
        zip(_lines(plain[0]), _lines(plain[1]), strict=True)
    )


def test_the_benchmark_measures_a_stream_and_memory(make_corpus, tmp_path):
    folder = tmp_path / "tiny"
    make_corpus.write_corpus(folder, 300, sources=_SOURCES)
    overrides = []
    for key, value in _TINY.items():
        overrides += ["--set", f"{key}={value}"]
    record = tmp_path / "growth.json"
    rows = _run(
        "corpus_growth.py",
        str(folder),
        "--memory",
        str(folder),
        "--steps",
        "1",
        *overrides,
        "--record",
        str(record),
    )
    assert [row["stream"] for row in rows] == [True, False]
    for row in rows:
        assert row["corpus"] == "tiny"
        assert row["pairs"] == 300  # the lines of the files
        assert row["backend"] == keras.backend.backend()
        assert row["steps"] == 1
        assert row["batch_size"] == 8
        assert row["first_step_s"] > row["scan_s"] + row["vocabulary_s"]
        assert row["scan_s"] >= 0 and row["vocabulary_s"] >= 0
        assert row["steps_per_s"] > 0 and row["step_ms_median"] > 0
        assert row["peak_rss_mb"] > 0
    saved = json.loads(record.read_text())
    assert saved["kind"] == "corpus_growth"
    assert saved["rows"] == rows


def test_corpus_growth_refuses_no_steps(capsys):
    corpus_growth = _load("corpus_growth")
    with pytest.raises(SystemExit):
        corpus_growth.parse_arguments(["corpus", "--steps", "0"])
    assert "--steps must be positive" in capsys.readouterr().err
