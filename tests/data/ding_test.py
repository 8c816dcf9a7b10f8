import pathlib
import random
import shutil

import pytest

from keras_bahdanau.data import ding
from keras_bahdanau.data.corpora import SPLITS
from keras_bahdanau.data.corpora import split_pairs

DING_SAMPLE = pathlib.Path(__file__).parent / "fixtures" / "ding_sample.txt"

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


def test_parse_ding_selects_and_cleans_sentence_pairs():
    lines = DING_SAMPLE.read_text(encoding="utf-8").splitlines()
    # Headwords, misaligned lines, alternatives, placeholders, fragments and
    # the duplicate "Der Apfel ist rot." are all left out.
    assert ding.parse_ding(lines) == DING_SAMPLE_PAIRS


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
    assert ding.parse_ding_terms(lines) == DING_SAMPLE_TERMS


def test_ding_terms_are_chosen_by_the_training_words():
    train = [
        ("Der Apfel ist rot.", "The apple is red."),
        ("Brot ist gut. BROT!", "Bread is good. Bread!"),
        ("Ein Baum und ein Test.", "A tree and a test."),
    ]
    # brot twice (case-insensitive), then apfel, baum, test once each in
    # file order; no other term's words occur in the sources.
    chosen = ding.ding_terms(train, 3, path=DING_SAMPLE)
    assert chosen == [("Brot", "bread"), ("Apfel", "apple"), ("Baum", "tree")]
    everything = ding.ding_terms(train, 100, path=DING_SAMPLE)
    assert everything == chosen + [("Test", "test")]


def test_ding_de_en_splits_a_given_file():
    splits = {s: ding.ding_de_en(s, path=DING_SAMPLE) for s in SPLITS}
    together = [pair for split in splits.values() for pair in split]
    assert sorted(together) == sorted(DING_SAMPLE_PAIRS)
    with pytest.raises(ValueError, match="Received: split='validation'"):
        ding.ding_de_en("validation", path=DING_SAMPLE)


def test_ding_file_explains_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setattr(ding, "DING_INSTALLED_PATH", tmp_path / "absent")
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(FileNotFoundError, match="apt-get install trans-de-en"):
        ding.ding_file(cache=tmp_path)


@pytest.fixture(scope="module")
def ding_path(tmp_path_factory):
    if shutil.which("apt-get") is None:
        if ding.DING_INSTALLED_PATH.is_file():
            return ding.DING_INSTALLED_PATH
        pytest.skip("trans-de-en is not installed and apt-get is missing.")
    # Download into an empty cache even where the package is installed, so
    # that the apt-get/dpkg-deb path is what gets tested.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ding, "DING_INSTALLED_PATH", pathlib.Path("/absent"))
        return ding.ding_file(cache=tmp_path_factory.mktemp("cache"))


def test_ding_de_en_real_package(ding_path):
    splits = {s: ding.ding_de_en(s, path=ding_path) for s in SPLITS}
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
    resplit = split_pairs(random.Random(1).sample(pairs, total))
    assert sorted(resplit["dev"]) == sorted(splits["dev"])
