"""Parallel corpora as lists of `(source, target)` sentence pairs.

* `ding_de_en()`, `ding_terms()`: the Ding dictionary (Debian package
  `trans-de-en`, GPL-2+), fetched with `apt-get download`, never shipped.
* `read_parallel_files()`, `read_tsv()`: parallel text as users have it.
* `split_pairs()`: a deterministic train/dev/test split of any corpus.
* `read_lines()`: the package's one reader of text lines, stdin included.
"""

import collections
import functools
import gzip
import hashlib
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import warnings

from keras_bahdanau.validation import InputError
from keras_bahdanau.validation import check_choice

# The dictionary file inside the package; installed at "/" + this.
_DING_PACKAGE_FILE = "usr/share/trans/de-en"
DING_INSTALLED_PATH = pathlib.Path("/") / _DING_PACKAGE_FILE
DING_DEV_FRACTION = 0.05
DING_TEST_FRACTION = 0.05
SPLITS = ("train", "dev", "test")
INPUT_ERRORS = ("strict", "replace")

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


def cache_dir():
    """The folder where downloaded corpora are kept.

    `$KERAS_BAHDANAU_CACHE` if set, else `~/.cache/keras_bahdanau`.
    """
    folder = os.environ.get("KERAS_BAHDANAU_CACHE")
    if folder:
        return pathlib.Path(folder)
    return pathlib.Path.home() / ".cache" / "keras_bahdanau"


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


def split_pairs(pairs, dev_fraction=0.05, test_fraction=0.05):
    """Splits sentence pairs into train/dev/test by a hash of the source.

    The MD5 hash of its source sentence places each pair, so the split
    depends on nothing else (order, other pairs, run, Python version), and
    a source sentence that occurs twice never ends up in two splits.

    Args:
        pairs: list of `(source, target)` string tuples.
        dev_fraction: expected fraction of pairs in the dev split.
        test_fraction: expected fraction of pairs in the test split.

    Returns:
        A dict `{"train": [...], "dev": [...], "test": [...]}` of lists of
        pairs, each in the order of `pairs`.
    """
    if not (
        0 <= dev_fraction
        and 0 <= test_fraction
        and dev_fraction + test_fraction < 1
    ):
        raise ValueError(
            "`dev_fraction` and `test_fraction` must be non-negative and sum "
            f"to less than 1. Received: dev_fraction={dev_fraction}, "
            f"test_fraction={test_fraction}"
        )
    splits = {name: [] for name in SPLITS}
    for pair in pairs:
        digest = hashlib.md5(pair[0].encode("utf-8")).digest()
        position = int.from_bytes(digest[:8], "big") / 2**64  # in [0, 1)
        if position < dev_fraction:
            splits["dev"].append(pair)
        elif position < dev_fraction + test_fraction:
            splits["test"].append(pair)
        else:
            splits["train"].append(pair)
    return splits


def read_parallel_files(source_path, target_path, errors="strict"):
    """Reads two aligned files, one sentence per line, into pairs.

    Files may be gzipped. Each line is stripped of surrounding whitespace.

    Args:
        source_path: path of the source-language file.
        target_path: path of the target-language file.
        errors: `"strict"` or `"replace"`, as for `read_lines()`.

    Returns:
        A list of `(source, target)` string tuples. Line pairs where either
        side is empty are skipped with a warning that counts them.

    Raises:
        ValueError: if the files have different numbers of lines, a file
            cannot be read or is not UTF-8 (`InputError`), or no pair is left.

    Example:

    >>> pairs = read_parallel_files("train.de.gz", "train.en.gz")
    """
    sources = read_lines(source_path, errors)
    targets = read_lines(target_path, errors)
    if len(sources) != len(targets):
        raise ValueError(
            "Parallel files must have the same number of lines. Received: "
            f"{len(sources)} lines in {str(source_path)!r} and "
            f"{len(targets)} lines in {str(target_path)!r}"
        )
    return _pairs_from_lines(
        zip(sources, targets, strict=True),
        f"{source_path!s} and {target_path!s}",
    )


def read_tsv(path, columns=(0, 1), errors="strict"):
    """Reads a tab-separated file of sentence pairs, one pair per line.

    Fields are split on tabs only, without quoting (as in Tatoeba exports
    and most parallel-corpus dumps), and stripped. The file may be gzipped.

    Args:
        path: path of the file.
        columns: the `(source, target)` column indices.
        errors: `"strict"` or `"replace"`, as for `read_lines()`.

    Returns:
        A list of `(source, target)` string tuples. Lines where either
        field is empty are skipped with a warning that counts them.

    Raises:
        ValueError: if a line has too few fields, the file cannot be read
            or is not UTF-8 (`InputError`), or no pair is left.

    Example:

    >>> pairs = read_tsv("deu.txt", columns=(1, 0))
    """
    source_column, target_column = columns
    needed = max(source_column, target_column) + 1

    def lines():
        for number, line in enumerate(read_lines(path, errors), 1):
            fields = line.split("\t")
            if len(fields) < needed:
                raise ValueError(
                    f"{str(path)!r}, line {number}: expected at least "
                    f"{needed} tab-separated fields for columns={columns}. "
                    f"Received: {len(fields)} field(s) in {line[:80]!r}"
                )
            yield fields[source_column], fields[target_column]

    return _pairs_from_lines(lines(), str(path))


def _pairs_from_lines(lines, name):
    pairs, empty = [], []
    for number, (source, target) in enumerate(lines, 1):
        source, target = source.strip(), target.strip()
        if source and target:
            pairs.append((source, target))
        else:
            empty.append(number)
    if empty:
        warnings.warn(
            f"Skipped {len(empty)} line(s) of {name} with an empty source or "
            f"target (first at line {empty[0]}).",
            stacklevel=3,
        )
    if not pairs:
        raise ValueError(f"No sentence pairs found in {name}.")
    return pairs


def read_lines(path, errors="strict"):
    r"""The lines of a UTF-8 text file, plain or gzipped, or of stdin.

    Lines end at `"\n"` only (`str.splitlines()` would also split at
    U+2028 inside sentences); a `"\r"` before it, a byte order mark and
    the last line end are dropped, empty lines kept. Gzip is detected from
    the content.

    Args:
        path: the file, or None for stdin.
        errors: `"strict"` (a line that is not UTF-8 is an error) or
            `"replace"` (its undecodable bytes become U+FFFD).

    Returns:
        A list of str, one per line.

    Raises:
        InputError: the file cannot be read, or a line is not UTF-8 (the
            message names the file, or `<stdin>`, and the 1-based line).
    """
    check_choice("errors", errors, INPUT_ERRORS)
    name = "<stdin>" if path is None else repr(str(path))
    try:
        if path is None:
            data = sys.stdin.buffer.read()
        else:
            data = pathlib.Path(path).read_bytes()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
    except (OSError, EOFError) as error:  # EOFError: a truncated gzip.
        raise InputError(
            f"{name}: {getattr(error, 'strerror', None) or error}"
        ) from None
    try:
        text = data.decode("utf-8", errors=errors)
    except UnicodeDecodeError as error:
        start = data.rfind(b"\n", 0, error.start) + 1  # Of its line.
        number = data.count(b"\n", 0, start) + 1
        # Worded for the commands, whose output tests pin; in Python the
        # flag is this function's `errors` argument.
        raise InputError(
            f"{name}, line {number}: invalid UTF-8 ({error.reason} at byte "
            f"{error.start - start} of the line). Fix the input, or pass "
            "--errors replace to read undecodable bytes as U+FFFD."
        ) from None
    # No multi-byte UTF-8 character holds b"\n": the lines are the same.
    lines = text.removeprefix("\ufeff").split("\n")  # Byte order mark.
    if lines[-1] == "":  # What follows the last line end.
        lines.pop()
    return [line.removesuffix("\r") for line in lines]
