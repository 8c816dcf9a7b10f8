"""Parallel corpora as lists of `(source, target)` sentence pairs.

* `read_parallel_files()`, `read_tsv()`: parallel text as users have it.
* `read_dictionary()`: a word dictionary (unknown-word replacement).
* `split_pairs()`: a deterministic train/dev/test split of any corpus;
  `held_out_fractions()` shrinks its dev and test shares on a large one.
* `read_lines()`: the package's one reader of text lines, stdin included.
"""

import gzip
import hashlib
import math
import os
import pathlib
import sys
import warnings

from keras_bahdanau.validation import InputError
from keras_bahdanau.validation import check_choice

SPLITS = ("train", "dev", "test")
INPUT_ERRORS = ("strict", "replace")


def cache_dir():
    """The folder where downloaded corpora are kept.

    `$KERAS_BAHDANAU_CACHE` if set, else `~/.cache/keras_bahdanau`.
    """
    folder = os.environ.get("KERAS_BAHDANAU_CACHE")
    if folder:
        return pathlib.Path(folder)
    return pathlib.Path.home() / ".cache" / "keras_bahdanau"


# `held_out_fractions` aims at this many times `max_held_out` pairs, so
# that the cap nearly always cuts (at 3,000 pairs: 3,300 expected, the cap
# 5 standard deviations below) and a split has its size on any corpus.
_HELD_OUT_MARGIN = 1.1


def hash_position(source):
    """Where the MD5 of a source sentence places its pair, in [0, 1).

    The key of `split_pairs()`: the first 8 bytes of the digest of the
    UTF-8 text, as a fraction of 2**64.
    """
    digest = hashlib.md5(source.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def held_out_fractions(num_pairs, dev_fraction, test_fraction, max_held_out):
    """The dev and test fractions of a hash split with capped splits.

    A fraction of a large corpus would make dev and test large (5% of the
    paper's 12M pairs: 600k each), and the evaluation at the end of a run
    decodes them whole. Each fraction is made small enough that about
    1.1 x `max_held_out` pairs fall in its split, which `split_pairs`
    then cuts to `max_held_out`; a corpus under about `max_held_out /
    (1.1 x fraction)` pairs keeps its fractions (60k pairs at 5% and
    3,000).

    Args:
        num_pairs: int, the size of the corpus (lines of its files).
        dev_fraction, test_fraction: the fractions of a small corpus.
        max_held_out: int, the most pairs of each of dev and test; 0 or
            None: no cap (the fractions as they are).

    Returns:
        `(dev_fraction, test_fraction)`.

    Example:

    >>> held_out_fractions(10_000, 0.05, 0.05, 3000)
    (0.05, 0.05)
    >>> held_out_fractions(10_000_000, 0.05, 0.05, 3000)  # 3,300 each
    (0.00033000000000000005, 0.00033000000000000005)
    """
    if not max_held_out:
        return dev_fraction, test_fraction
    largest = _HELD_OUT_MARGIN * max_held_out / max(num_pairs, 1)
    return min(dev_fraction, largest), min(test_fraction, largest)


def split_pairs(pairs, dev_fraction=0.05, test_fraction=0.05, max_held_out=0):
    """Splits sentence pairs into train/dev/test by a hash of the source.

    The MD5 hash of its source sentence places each pair
    (`hash_position`), so the split depends on nothing else (order, other
    pairs, run, Python version), and a source sentence that occurs twice
    never ends up in two splits.

    Args:
        pairs: list of `(source, target)` string tuples.
        dev_fraction: expected fraction of pairs in the dev split.
        test_fraction: expected fraction of pairs in the test split.
        max_held_out: int, the most pairs of dev and of test (their first
            ones, in the order of `pairs`); the pairs a cap leaves out go
            to no split, so that no source of dev or test is trained on.
            0: no cap. `held_out_fractions` sizes the fractions for it.

    Returns:
        A dict `{"train": [...], "dev": [...], "test": [...]}` of lists of
        pairs, each in the order of `pairs`.
    """
    _check_fractions(dev_fraction, test_fraction)
    splits = {name: [] for name in SPLITS}
    for pair in pairs:
        name = _split_of(hash_position(pair[0]), dev_fraction, test_fraction)
        if name == "train" or len(splits[name]) < (max_held_out or math.inf):
            splits[name].append(pair)
    return splits


def _check_fractions(dev_fraction, test_fraction):
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


def _split_of(position, dev_fraction, test_fraction):
    """The split of a `hash_position`."""
    if position < dev_fraction:
        return "dev"
    if position < dev_fraction + test_fraction:
        return "test"
    return "train"


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


def read_dictionary(path, errors="strict"):
    """Reads `source<TAB>target` lines (`read_lines()`) into a dict.

    The word dictionary of `Translator.translate(..., dictionary=...)`; a
    line without exactly one tab is an `InputError`.
    """
    dictionary = {}
    for number, line in enumerate(read_lines(path, errors), 1):
        fields = line.split("\t")
        if len(fields) != 2:
            raise InputError(
                f"{str(path)!r}, line {number}: expected "
                f"`source<TAB>target`. Received: {line.rstrip()!r}"
            )
        dictionary[fields[0]] = fields[1]
    return dictionary


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
