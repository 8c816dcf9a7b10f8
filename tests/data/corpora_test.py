import gzip
import io
import pathlib
import random
import sys
import types

import pytest

from keras_bahdanau.data import corpora
from keras_bahdanau.validation import InputError

FIXTURES = pathlib.Path(__file__).parent / "fixtures"

PARALLEL_PAIRS = [
    ("Der Apfel ist rot.", "The apple is red."),
    ("Das Haus ist groß.", "The house is big."),
    ("Wie geht es dir?", "How are you?"),
]


def test_split_pairs_is_stable_and_keeps_sources_together():
    pairs = [
        (f"Satz Nummer {i}.", f"Sentence number {i}.") for i in range(2000)
    ]
    pairs += [("Satz Nummer 7.", "Sentence seven.")]  # A repeated source.
    splits = corpora.split_pairs(pairs, dev_fraction=0.1, test_fraction=0.1)
    shuffled = random.Random(0).sample(pairs, len(pairs))
    reshuffled = corpora.split_pairs(shuffled, 0.1, 0.1)
    for name in corpora.SPLITS:
        assert sorted(splits[name]) == sorted(reshuffled[name])
    assert 150 < len(splits["dev"]) < 250 and 150 < len(splits["test"]) < 250
    sources = {name: {s for s, _ in split} for name, split in splits.items()}
    assert not sources["train"] & sources["dev"]
    assert not sources["train"] & sources["test"]
    assert not sources["dev"] & sources["test"]
    # Pinned: the split depends on the MD5 of the source and nothing else,
    # so these must never change.
    pinned = [("Satz Nummer 12.", "x"), ("Satz Nummer 110.", "y")]
    assert corpora.split_pairs(pinned) == {
        "train": [],
        "dev": [("Satz Nummer 110.", "y")],
        "test": [("Satz Nummer 12.", "x")],
    }
    with pytest.raises(ValueError, match="dev_fraction=0.6"):
        corpora.split_pairs(pairs, dev_fraction=0.6, test_fraction=0.5)


@pytest.mark.parametrize("target_file", ["parallel.en", "parallel.en.gz"])
def test_read_parallel_files(target_file):
    pairs = corpora.read_parallel_files(
        FIXTURES / "parallel.de", FIXTURES / target_file
    )
    assert pairs == PARALLEL_PAIRS


def test_read_parallel_files_line_count_mismatch():
    with pytest.raises(
        ValueError, match=r"3 lines in .*parallel\.de.* 2 lines"
    ):
        corpora.read_parallel_files(
            FIXTURES / "parallel.de", FIXTURES / "short.en"
        )


def test_invalid_utf8_names_file_and_line():
    with pytest.raises(ValueError, match=r"invalid_utf8\.en', line 2"):
        corpora.read_parallel_files(
            FIXTURES / "parallel.de", FIXTURES / "invalid_utf8.en"
        )
    pairs = corpora.read_parallel_files(
        FIXTURES / "parallel.de", FIXTURES / "invalid_utf8.en", "replace"
    )
    assert pairs[1][1] == "The house is \ufffd big."


def test_empty_corpus_and_empty_lines(tmp_path):
    empty = FIXTURES / "empty.txt"
    with pytest.raises(ValueError, match="No sentence pairs"):
        corpora.read_parallel_files(empty, empty)
    with pytest.raises(ValueError, match="No sentence pairs"):
        corpora.read_tsv(empty)
    # Windows line ends, a byte order mark and an empty line.
    (tmp_path / "a.de").write_bytes(b"\xef\xbb\xbfEins.\r\n\r\nDrei.\r\n")
    (tmp_path / "a.en").write_bytes(b"One.\r\nTwo.\r\nThree.\r\n")
    with pytest.warns(UserWarning, match="Skipped 1 line.*line 2"):
        pairs = corpora.read_parallel_files(
            tmp_path / "a.de", tmp_path / "a.en"
        )
    assert pairs == [("Eins.", "One."), ("Drei.", "Three.")]


def test_read_tsv():
    pairs = corpora.read_tsv(FIXTURES / "pairs.tsv", columns=(1, 2))
    assert pairs == PARALLEL_PAIRS
    reversed_pairs = corpora.read_tsv(FIXTURES / "pairs.tsv", columns=(2, 1))
    assert reversed_pairs[0] == ("The apple is red.", "Der Apfel ist rot.")
    with pytest.raises(ValueError, match=r"line 1: expected at least 4"):
        corpora.read_tsv(FIXTURES / "pairs.tsv", columns=(1, 3))


def test_read_dictionary(tmp_path):
    path = tmp_path / "words.tsv"
    path.write_text("Haus\thouse\nrot\tred\n", encoding="utf-8")
    assert corpora.read_dictionary(path) == {"Haus": "house", "rot": "red"}
    path.write_text("Haus\thouse\nrot red\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"line 2: expected `source<TAB>"):
        corpora.read_dictionary(path)


def test_read_lines_of_files_and_stdin(tmp_path, monkeypatch):
    # A BOM, CRLF, an empty line, U+2028 inside a line, no final line end.
    data = "\ufeffEins.\r\n\nZwei\u2028drei.\r\nVier.".encode()
    (tmp_path / "a.txt").write_bytes(data)
    (tmp_path / "a.gz").write_bytes(gzip.compress(data))
    expected = ["Eins.", "", "Zwei\u2028drei.", "Vier."]
    assert corpora.read_lines(tmp_path / "a.txt") == expected
    assert corpora.read_lines(tmp_path / "a.gz") == expected
    stdin = types.SimpleNamespace(buffer=io.BytesIO(b"x\n\xff\n"))
    monkeypatch.setattr(sys, "stdin", stdin)
    assert corpora.read_lines(None, errors="replace") == ["x", "\ufffd"]
    assert corpora.read_lines(FIXTURES / "empty.txt") == []


def test_read_lines_errors_are_input_errors(tmp_path):
    (tmp_path / "bad.txt").write_bytes(b"gut\n\xffHaus\n")
    with pytest.raises(InputError) as caught:
        corpora.read_lines(tmp_path / "bad.txt")
    assert str(caught.value) == (
        f"{str(tmp_path / 'bad.txt')!r}, line 2: invalid UTF-8 (invalid "
        "start byte at byte 0 of the line). Fix the input, or pass --errors "
        "replace to read undecodable bytes as U+FFFD."
    )
    with pytest.raises(InputError, match=r"absent\.txt': No such file"):
        corpora.read_lines(tmp_path / "absent.txt")
    with pytest.raises(ValueError, match="Received: errors='ignore'"):
        corpora.read_lines(tmp_path / "bad.txt", errors="ignore")
