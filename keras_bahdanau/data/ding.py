"""`ding_de_en()`, `ding_terms()`: the Ding dictionary (Debian package
`trans-de-en`, GPL-2+), fetched with `apt-get download`, never shipped.
"""

import collections
import functools
import os
import pathlib
import re
import shutil
import subprocess
import tempfile

from keras_bahdanau.data.corpora import SPLITS
from keras_bahdanau.data.corpora import cache_dir
from keras_bahdanau.data.corpora import read_lines
from keras_bahdanau.data.corpora import split_pairs
from keras_bahdanau.validation import check_choice

# The dictionary file inside the package; installed at "/" + this.
_DING_PACKAGE_FILE = "usr/share/trans/de-en"
DING_INSTALLED_PATH = pathlib.Path("/") / _DING_PACKAGE_FILE
DING_DEV_FRACTION = 0.05
DING_TEST_FRACTION = 0.05

_INSTALL_HINT = (
    "Install the Debian/Ubuntu package with `sudo apt-get install "
    "trans-de-en`, or pass `path=` pointing to a copy of its file "
    "`/usr/share/trans/de-en`."
)
# Ding annotations: {m} gender/part of speech, [ugs.] register or region,
# <...> alternative spellings, (...) optional or explanatory text.
_ANNOTATION = re.compile(r"\s*(\{[^{}]*\}|\[[^\[\]]*\]|<[^<>]*>|\([^()]*\))")
_MAYBE_SENTENCE = re.compile(r"[.!?][\"“”'’]?(\s|$)")
_SENTENCE_END = re.compile(r"[.!?][\"“”']?$")
# Alternatives ("/", ";") and placeholders ("…", "etw.", "sb.") mark
# dictionary phrase patterns, not sentences someone would write.
_NOT_A_SENTENCE = re.compile(r"…|\.\.\.|/|;|\b(etw|jd|jdm|jdn|jds|sb|sth)\.")
_OPENING_CHARACTERS = "„“\"'‚‘(¿¡"


def ding_file(cache=None):
    """Returns the path of the Ding dictionary file, fetching it if needed.

    Looks for `/usr/share/trans/de-en`, then for a copy in `cache`; else
    runs `apt-get download trans-de-en` (no root needed) and unpacks the
    package into `cache`.

    Args:
        cache: folder for the unpacked package. Defaults to `cache_dir()`.

    Returns:
        A `pathlib.Path` to the dictionary file.

    Raises:
        FileNotFoundError: when the file is absent and `apt-get` or
            `dpkg-deb` is missing; the message says how to install it.
        RuntimeError: when the download fails; the message holds apt's
            output.
    """
    if DING_INSTALLED_PATH.is_file():
        return DING_INSTALLED_PATH
    cache = pathlib.Path(cache) if cache is not None else cache_dir()
    unpacked = cache / "trans-de-en"
    path = unpacked / _DING_PACKAGE_FILE
    if path.is_file():
        return path
    if not (shutil.which("apt-get") and shutil.which("dpkg-deb")):
        raise FileNotFoundError(
            f"The Ding dictionary is not at {DING_INSTALLED_PATH} or "
            f"{path}, and apt-get/dpkg-deb are not available to fetch it. "
            + _INSTALL_HINT
        )
    cache.mkdir(parents=True, exist_ok=True)
    # Unpack into a temporary folder and rename it into place, so that an
    # interrupted or concurrent download never leaves a half-written copy.
    with tempfile.TemporaryDirectory(dir=cache) as temporary:
        _run(["apt-get", "download", "trans-de-en"], cwd=temporary)
        (package,) = pathlib.Path(temporary).glob("trans-de-en_*.deb")
        _run(["dpkg-deb", "-x", package.name, "unpacked"], cwd=temporary)
        try:
            os.rename(pathlib.Path(temporary) / "unpacked", unpacked)
        except OSError:
            if not path.is_file():  # Not a concurrent download that won.
                raise
    return path


def _run(command, cwd):
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(
            f"`{' '.join(command)}` failed with exit status "
            f"{result.returncode}:\n{result.stderr.strip()}\n"
            "If apt cannot locate the package, run `apt-get update` first. "
            + _INSTALL_HINT
        )


def parse_ding(lines):
    """Extracts sentence pairs from lines of the Ding dictionary.

    A line reads `German :: English`; each side holds sub-entries separated
    by ` | `, aligned by position. Many entries end with human-written
    example sentences, which this function keeps:

    1. Comments (`#`) and lines whose sides have different numbers of
       sub-entries are skipped.
    2. Annotations (`{m}`, `[ugs.]`, `<...>`, `(...)`) and extra spaces are
       removed; `’` becomes `'` (the file mixes both).
    3. A pair of sub-entries is kept when both sides are sentences: they
       start with an uppercase letter or a digit (after opening quotes or
       brackets), end with `.`, `!` or `?` (and maybe a closing quote),
       have at least two words, and hold no alternatives (`/`, `;`) and
       no placeholders (`…`, `etw.`, `jdm.`, `sb.`, `sth.`, ...).
    4. Exact duplicate pairs are dropped, keeping the first.

    Args:
        lines: iterable of `str`, the lines of the dictionary file.

    Returns:
        A list of `(german, english)` string tuples, in file order.
    """
    pairs = {}
    # Cheap test first: most lines hold only headwords and phrases.
    for source, target in _sub_entries(lines, _MAYBE_SENTENCE.search):
        if not _MAYBE_SENTENCE.search(source):
            continue
        source, target = _strip_annotations(source), _strip_annotations(target)
        if _is_sentence(source) and _is_sentence(target):
            pairs.setdefault((source, target), None)
    return list(pairs)


def _sub_entries(lines, german_test=None):
    """The aligned sub-entries of lines whose German side passes the test."""
    for line in lines:
        if line.startswith("#") or " :: " not in line:
            continue
        german, english = line.rstrip("\n").split(" :: ", 1)
        if german_test is not None and not german_test(german):
            continue
        german, english = german.split(" | "), english.split(" | ")
        if len(german) == len(english):
            yield from zip(german, english, strict=True)


def _strip_annotations(text):
    # Repeat for nested annotations such as "(see [Br.])".
    previous = None
    while previous != text:
        previous, text = text, _ANNOTATION.sub("", text)
    return " ".join(text.replace("’", "'").split())


def _is_sentence(text):
    start = text.lstrip(_OPENING_CHARACTERS)
    return (
        bool(start)
        and (start[0].isupper() or start[0].isdigit())
        and _SENTENCE_END.search(text) is not None
        and len(text.split()) >= 2
        and _NOT_A_SENTENCE.search(text) is None
    )


def parse_ding_terms(lines):
    """Extracts term and phrase pairs from lines of the Ding dictionary.

    What `parse_ding()` leaves out: headwords and short phrases
    (`Abendessen {n} :: supper`). Of each pair of sub-entries (read as
    there) the first synonym of each side is taken, without annotations,
    and the pair kept when both sides have 1 to 5 words, do not end like a
    sentence (`.`, `!`, `?`) and hold no alternatives, placeholders or
    brackets. One pair per German term: the first, the main sense.

    Args:
        lines: iterable of `str`, the lines of the dictionary file.

    Returns:
        A list of `(german, english)` string tuples, in file order.
    """
    pairs = {}
    for source, target in _sub_entries(lines):
        source, target = (
            _strip_annotations(side).split(";")[0].strip()
            for side in (source, target)
        )
        if _is_term(source) and _is_term(target):
            pairs.setdefault(source, target)
    return list(pairs.items())


def _is_term(text):
    return (
        0 < len(text.split()) <= 5
        and _SENTENCE_END.search(text) is None
        and _NOT_A_SENTENCE.search(text) is None
        and not set(text) & set("()[]{}<>")
    )


def _words(text):
    return re.findall(r"\w[\w'-]*", text.lower())


def ding_terms(train_pairs, limit, path=None, cache=None):
    """Up to `limit` Ding term pairs for the German words of `train_pairs`.

    Extra training data: the pairs of `parse_ding_terms()` whose German
    words all occur in the sources of `train_pairs` (case-insensitive),
    ranked by the count of their rarest word, then in file order. Only
    training text chooses them, so no dev or test sentence does.

    Args:
        train_pairs: list of `(german, english)` training pairs.
        limit: int >= 1, the most pairs returned.
        path: optional path to a copy of the dictionary file. Defaults to
            `ding_file(cache)`.
        cache: folder for a downloaded copy. Defaults to `cache_dir()`.

    Returns:
        A list of `(german, english)` string tuples, best ranked first.
    """
    counts = collections.Counter(
        word for source, _ in train_pairs for word in _words(source)
    )
    path = pathlib.Path(path) if path is not None else ding_file(cache)
    ranked = []
    for index, pair in enumerate(parse_ding_terms(read_lines(path))):
        rarest = min((counts[word] for word in _words(pair[0])), default=0)
        if rarest:
            ranked.append((-rarest, index, pair))
    return [pair for _, _, pair in sorted(ranked)[:limit]]


@functools.lru_cache(maxsize=4)
def _ding_splits(path):
    splits = split_pairs(
        parse_ding(read_lines(path)), DING_DEV_FRACTION, DING_TEST_FRACTION
    )
    return {name: tuple(split) for name, split in splits.items()}


def ding_de_en(split="train", path=None, cache=None):
    """German-English sentence pairs from the Ding dictionary.

    The example sentences of the Ding dictionary (Frank Richter, TU
    Chemnitz; GPL-2+, so fetched by `ding_file()` and never bundled with
    this package), selected by `parse_ding()`: 16,463 pairs of about 8
    words from Debian's `trans-de-en` 1.9-6 (2023-01-30), split by
    `split_pairs()` with 5% dev and 5% test into 14,791 train, 839 dev and
    833 test pairs.

    Args:
        split: `"train"`, `"dev"` or `"test"`.
        path: optional path to a copy of the dictionary file. Defaults to
            `ding_file(cache)`.
        cache: folder for a downloaded copy. Defaults to `cache_dir()`.

    Returns:
        A list of `(german, english)` string tuples.

    Example:

    >>> train = ding_de_en("train")
    >>> train[0]
    ('Ich habe am ursprünglichen Entwurf ein paar Änderungen vorgenommen.',
     "I've made one or two modifications to the original design.")
    """
    check_choice("split", split, SPLITS)
    path = pathlib.Path(path) if path is not None else ding_file(cache)
    return list(_ding_splits(path.resolve())[split])
