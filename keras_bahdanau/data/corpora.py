"""Parallel corpora as lists of `(source, target)` sentence pairs.

* `read_parallel_files()`, `read_tsv()`: parallel text as users have it.
* `read_dictionary()`: a word dictionary (unknown-word replacement).
* `split_pairs()`: a deterministic train/dev/test split of any corpus.
* `read_lines()`: the package's one reader of text lines, stdin included.
"""

import gzip
import hashlib
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
