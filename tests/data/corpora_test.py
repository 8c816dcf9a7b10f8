import gzip
import io
import pathlib
import random
import shutil
import sys
import types

import pytest

from keras_bahdanau.data import corpora
from keras_bahdanau.validation import InputError

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
DING_SAMPLE = FIXTURES / "ding_sample.txt"

# What parse_ding() must extract from ding_sample.txt, in file order.
DING_SAMPLE_PAIRS = [
    ("Der Apfel ist rot.", "The apple is red."),
    ("Sie isst gern Äpfel.", "She likes eating apples."),
    ("Der Baum ist alt.", "The tree is old."),
    ("Wie geht es dir?", "How are you?"),
    ("Gib es mir!", "Give it to me!"),
    ("Er sagte: „Ich komme morgen.“", "He said: “I'll come tomorrow.”"),
    ("100 Leute kamen zum Fest.", "100 people came to the party."),
    ("Das Brot ist frisch.", "The bread is fresh."),
    ("Das Fahrrad ist neu.", "The bicycle is new."),
]
PARALLEL_PAIRS = [
    ("Der Apfel ist rot.", "The apple is red."),
    ("Das Haus ist groß.", "The house is big."),
    ("Wie geht es dir?", "How are you?"),
]


def test_parse_ding_selects_and_cleans_sentence_pairs():
    lines = DING_SAMPLE.read_text(encoding="utf-8").splitlines()
    # Headwords, misaligned lines, alternatives, placeholders, fragments and
    # the duplicate "Der Apfel ist rot." are all left out.
    assert corpora.parse_ding(lines) == DING_SAMPLE_PAIRS


# What parse_ding_terms() must extract from ding_sample.txt, in file order.
DING_SAMPLE_TERMS = [
    ("Apfel", "apple"),
    ("Äpfel", "apples"),
    ("Baum", "tree"),
    ("Bäume", "trees"),
    ("schnell", "fast"),
    ("Zitat", "quotation"),
    ("Obst", "fruit"),
    ("Märchen", "fairy tale"),
    ("Hundert", "hundred"),
    ("Brot", "bread"),
    ("Fahrrad", "bicycle"),
    ("Hilfe", "help"),
    ("Test", "test"),
]


def test_parse_ding_terms_keeps_terms_not_sentences():
    lines = DING_SAMPLE.read_text(encoding="utf-8").splitlines()
    # Sentences, fragments ending in ".", "!" or "?", placeholders,
    # misaligned lines and a second sense of "Apfel" are left out; the
    # first synonym is taken with its annotations removed.
    assert corpora.parse_ding_terms(lines) == DING_SAMPLE_TERMS


def test_ding_terms_are_chosen_by_the_training_words():
    train = [
        ("Der Apfel ist rot.", "The apple is red."),
        ("Brot ist gut. BROT!", "Bread is good. Bread!"),
        ("Ein Baum und ein Test.", "A tree and a test."),
    ]
    # brot twice (case-insensitive), then apfel, baum, test once each in
    # file order; no other term's words occur in the sources.
    chosen = corpora.ding_terms(train, 3, path=DING_SAMPLE)
    assert chosen == [("Brot", "bread"), ("Apfel", "apple"), ("Baum", "tree")]
    everything = corpora.ding_terms(train, 100, path=DING_SAMPLE)
    assert everything == chosen + [("Test", "test")]


def test_ding_de_en_splits_a_given_file():
    splits = {
        s: corpora.ding_de_en(s, path=DING_SAMPLE) for s in corpora.SPLITS
    }
    together = [pair for split in splits.values() for pair in split]
    assert sorted(together) == sorted(DING_SAMPLE_PAIRS)
    with pytest.raises(ValueError, match="Received: split='validation'"):
        corpora.ding_de_en("validation", path=DING_SAMPLE)


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


def test_ding_file_explains_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setattr(corpora, "DING_INSTALLED_PATH", tmp_path / "absent")
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(FileNotFoundError, match="apt-get install trans-de-en"):
        corpora.ding_file(cache=tmp_path)


@pytest.fixture(scope="module")
def ding_path(tmp_path_factory):
    if shutil.which("apt-get") is None:
        if corpora.DING_INSTALLED_PATH.is_file():
            return corpora.DING_INSTALLED_PATH
        pytest.skip("trans-de-en is not installed and apt-get is missing.")
    # Download into an empty cache even where the package is installed, so
    # that the apt-get/dpkg-deb path is what gets tested.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(corpora, "DING_INSTALLED_PATH", pathlib.Path("/absent"))
        return corpora.ding_file(cache=tmp_path_factory.mktemp("cache"))


def test_ding_de_en_real_package(ding_path):
    splits = {s: corpora.ding_de_en(s, path=ding_path) for s in corpora.SPLITS}
    sizes = {name: len(split) for name, split in splits.items()}
    total = sum(sizes.values())
    assert total >= 15000, sizes
    for name in ("dev", "test"):
        assert 0.04 * total < sizes[name] < 0.06 * total, sizes
    pairs = [pair for split in splits.values() for pair in split]
    assert len(set(pairs)) == total  # Deduplicated.
    for source, target in random.Random(0).sample(pairs, 200):
        for text in (source, target):
            assert text[-1] in ".!?\"“”'" and len(text.split()) >= 2
            assert not set("{}[]<>()/;…") & set(text), text
    # Deterministic: splitting again, in another order, gives the same.
    resplit = corpora.split_pairs(random.Random(1).sample(pairs, total))
    assert sorted(resplit["dev"]) == sorted(splits["dev"])


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
