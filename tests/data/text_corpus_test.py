import gzip
import math

import numpy as np
import pytest

from keras_bahdanau.config import DEFAULTS
from keras_bahdanau.data import TextCorpus
from keras_bahdanau.data import held_out_fractions
from keras_bahdanau.data import load_corpus
from keras_bahdanau.data import read_parallel_files
from keras_bahdanau.data import sample_pairs
from keras_bahdanau.data import split_pairs
from keras_bahdanau.data.corpora import hash_position
from keras_bahdanau.data.text_corpus import count_lines
from keras_bahdanau.validation import InputError


def write_parallel(directory, sources, targets, compress=False):
    """Two aligned files of lines (str, or bytes as they are)."""
    paths = []
    for name, lines in (("train.de", sources), ("train.en", targets)):
        data = b"".join(
            (line if isinstance(line, bytes) else line.encode()) + b"\n"
            for line in lines
        )
        path = directory / (name + ".gz" * compress)
        path.write_bytes(gzip.compress(data) if compress else data)
        paths.append(str(path))
    return paths


def numbered_pairs(count):
    return [
        (f"Satz Nummer {i}.", f"Sentence number {i}.") for i in range(count)
    ]


def test_scan_splits_as_split_pairs_and_reads_the_pairs_again(tmp_path):
    pairs = numbered_pairs(3000)
    paths = write_parallel(tmp_path, *zip(*pairs, strict=True))
    corpus = TextCorpus.scan(paths, max_held_out=100)
    fractions = held_out_fractions(3000, 0.05, 0.05, 100)
    assert fractions == (pytest.approx(110 / 3000),) * 2  # 110 pairs each
    expected = split_pairs(pairs, *fractions, max_held_out=100)
    assert (corpus.dev, corpus.test) == (expected["dev"], expected["test"])
    assert len(corpus.dev) == len(corpus.test) == 100  # capped
    assert list(corpus.pairs()) == expected["train"]
    assert corpus.num_pairs == len(expected["train"]) < 3000 - 200
    # The pairs over a cap are in no split: no held-out source trains.
    assert all(hash_position(s) >= sum(fractions) for s, _ in corpus.pairs())
    # `load_corpus` reads a `files` corpus through the same scan.
    data = {
        **DEFAULTS["data"],
        "corpus": "files",
        "source_file": paths[0],
        "target_file": paths[1],
        "max_held_out_pairs": 100,
    }
    splits = load_corpus(data)
    assert splits == {**expected, "train": expected["train"]}
    # The tf.data chunks hold the same pairs, with their line numbers.
    chunks = list(corpus.dataset(chunk_lines=256).as_numpy_iterator())
    numbers, sources, targets = map(np.concatenate, zip(*chunks, strict=True))
    texts = zip(sources, targets, strict=True)
    assert [(s.decode(), t.decode()) for s, t in texts] == expected["train"]
    assert [pairs[n] for n in numbers] == expected["train"]


def test_small_corpora_keep_their_five_percent():
    assert held_out_fractions(60_000, 0.05, 0.05, 3000) == (0.05, 0.05)
    dev, test = held_out_fractions(10_000_000, 0.05, 0.05, 3000)
    assert dev == test == pytest.approx(0.00033)
    assert held_out_fractions(10**7, 0.05, 0.05, 0) == (0.05, 0.05)


@pytest.mark.parametrize("compress", [False, True])
def test_lines_are_read_as_read_parallel_files_reads_them(tmp_path, compress):
    sources = ["\ufeffDas Haus.\r", "  Ein Baum  ", "Zwei\u00a0", "", "Drei"]
    targets = ["The house.", "A tree\r", "Two", "blank", "\u2028Three"]
    paths = write_parallel(tmp_path, sources, targets, compress)
    with pytest.warns(UserWarning, match="1 line.* empty .*line 4"):
        expected = read_parallel_files(*paths)
    with pytest.warns(UserWarning, match="1 line.* empty .*first at line 4"):
        corpus = TextCorpus.scan(paths, held_out=False, sample_size=None)
    assert list(corpus.pairs()) == expected == corpus.sample
    assert corpus.num_empty_lines == 1
    # Unstripped in tf.data (the tokenizers normalise spaces), but with
    # the byte order mark of the first line dropped.
    (chunk,) = corpus.dataset().as_numpy_iterator()
    assert chunk[0].tolist() == [0, 1, 2, 4]
    assert [s.decode().strip() for s in chunk[1]] == [s for s, _ in expected]


def test_a_bad_line_is_named_by_its_number_and_left_out(tmp_path):
    pairs = numbered_pairs(100_000)
    sources = [s.encode() for s, _ in pairs]
    sources[73_250] = b"Satz \xff kaputt."  # line 73,251
    paths = write_parallel(tmp_path, sources, [t for _, t in pairs])
    with pytest.warns(UserWarning) as caught:
        corpus = TextCorpus.scan(paths, held_out=False)
    (warning,) = caught
    assert str(warning.message).startswith(
        "Left out 1 line(s) of "
        f"{paths[0]!r} and {paths[1]!r} that cannot be read (line 73,251: "
        f"not UTF-8 in {paths[0]!r} (invalid start byte at byte 5))."
    )
    assert corpus.bad_lines == [(73_251, corpus.bad_lines[0][1])]
    assert corpus.num_pairs == 99_999
    assert corpus.excluded.tolist() == [73_250]
    left = list(corpus.pairs())
    assert left == pairs[:73_250] + pairs[73_251:]


def test_tsv_lines_with_too_few_fields_are_named(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text("Eins.\tOne.\nZwei.\nDrei.\tThree.\textra\n", "utf-8")
    with pytest.warns(UserWarning, match=r"line 2: 1 tab-separated field"):
        corpus = TextCorpus.scan([path], columns=(0, 1), held_out=False)
    assert list(corpus.pairs()) == [("Eins.", "One."), ("Drei.", "Three.")]
    (chunk,) = corpus.dataset().as_numpy_iterator()
    assert chunk[2].tolist() == [b"One.", b"Three."]
    with pytest.warns(UserWarning, match="line 2"):
        swapped = TextCorpus.scan([path], columns=(1, 0), held_out=False)
    assert next(swapped.pairs()) == ("One.", "Eins.")


def test_unreadable_corpora_raise_naming_the_files(tmp_path):
    paths = write_parallel(tmp_path, ["a", "b", "c"], ["x", "y"])
    with pytest.raises(InputError, match=r"3 lines in .*train.de.* and 2"):
        TextCorpus.scan(paths)
    with pytest.raises(InputError, match="No such file"):
        TextCorpus.scan([tmp_path / "missing", paths[1]])
    (tmp_path / "cut.gz").write_bytes(gzip.compress(b"a\n" * 1000)[:-12])
    with pytest.raises(InputError, match="cut.gz"):
        count_lines(tmp_path / "cut.gz")
    empty = write_parallel(tmp_path, [""], [""])
    with pytest.warns(UserWarning), pytest.raises(ValueError, match="No sent"):
        TextCorpus.scan(empty, held_out=False)
    with pytest.raises(ValueError, match="Received: paths="):
        TextCorpus.scan(paths[:1])


def test_count_lines(tmp_path):
    for data, count in ((b"", 0), (b"a", 1), (b"a\n", 1), (b"a\n\nb", 3)):
        (tmp_path / "f").write_bytes(data)
        (tmp_path / "f.gz").write_bytes(gzip.compress(data))
        assert count_lines(tmp_path / "f") == count_lines(tmp_path / "f.gz")
        assert count_lines(tmp_path / "f") == count


def test_max_train_pairs_keeps_the_first_and_every_held_out_pair(tmp_path):
    pairs = numbered_pairs(500)
    paths = write_parallel(tmp_path, *zip(*pairs, strict=True))
    whole = TextCorpus.scan(paths)
    cut = TextCorpus.scan(paths, max_train_pairs=50, sample_size=None)
    assert list(cut.pairs()) == list(whole.pairs())[:50] == cut.sample
    assert (cut.dev, cut.test) == (whole.dev, whole.test)
    assert cut.end < whole.end and cut.num_pairs == 50
    assert sum(len(c[0]) for c in cut.dataset().as_numpy_iterator()) == 50


def test_the_sample_is_uniform_seeded_and_the_same_from_files(tmp_path):
    pairs = numbered_pairs(2000)
    assert sample_pairs(pairs, 5000) == pairs  # all of a smaller corpus
    assert sample_pairs(pairs, None) == pairs
    sample = sample_pairs(pairs, 300, seed=7)
    assert len(sample) == len(set(sample)) == 300
    assert sample == sorted(sample, key=pairs.index)  # corpus order
    assert sample == sample_pairs(iter(pairs), 300, seed=7)
    assert sample != sample_pairs(pairs, 300, seed=8)
    paths = write_parallel(tmp_path, *zip(*pairs, strict=True))
    corpus = TextCorpus.scan(paths, sample_size=300, seed=7)
    assert corpus.sample == sample_pairs(corpus.pairs(), 300, seed=7)
    # Every pair as likely: 400 draws of 10 of 100 take each 40 times.
    taken = np.zeros(100)
    for seed in range(400):
        for _, number in sample_pairs(enumerate(range(100)), 10, seed):
            taken[number] += 1
    assert taken.sum() == 4000
    # A binomial(400, 0.1): 40 +- 6; 6 standard deviations either way.
    assert 4 < taken.min() and taken.max() < 76
    chi_square = ((taken - 40) ** 2 / 40).sum()
    assert chi_square < 99 + 6 * math.sqrt(2 * 99)


def test_dev_files_are_cut_to_the_cap_and_test_files_kept(tmp_path):
    pairs = numbered_pairs(60)
    data = {**DEFAULTS["data"], "corpus": "files", "max_held_out_pairs": 20}
    for split in ("train", "dev", "test"):
        folder = tmp_path / split
        folder.mkdir()
        paths = write_parallel(folder, *zip(*pairs, strict=True))
        prefix = "" if split == "train" else f"{split}_"
        data[f"{prefix}source_file"], data[f"{prefix}target_file"] = paths
    splits = load_corpus(data)
    assert splits == {"train": pairs, "dev": pairs[:20], "test": pairs}
