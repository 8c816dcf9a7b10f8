"""`TextCorpus`: the training pairs of parallel text files, left on disk.

`TextCorpus.scan()` reads the files once, line by line, and keeps only
what is small whatever the corpus: the dev and test pairs of the hash
split (`split_pairs`' rule, each split capped), the vocabulary sample
(`sample_pairs`) and the numbers of the lines that are not training
pairs. A line that cannot be read (not UTF-8, a TSV line with too few
fields) is left out and named by its number; an empty side is left out
and counted, as `read_parallel_files` does. The training pairs stay in
the files: `pairs()` reads them again in Python, `dataset()` as `tf.data`
chunks for `data.stream.make_stream`.

Example:

```python
corpus = TextCorpus.scan(["train.de", "train.en"], sample_size=300_000)
corpus.num_pairs, len(corpus.dev), len(corpus.sample)
# (9_993_412, 3000, 300_000)
```
"""

import array
import dataclasses
import gzip
import hashlib
import math
import pathlib
import random
import warnings

import numpy as np

from keras_bahdanau.data.corpora import _check_fractions
from keras_bahdanau.data.corpora import held_out_fractions
from keras_bahdanau.validation import InputError

# Lines of text per element of `TextCorpus.dataset()`.
CHUNK_LINES = 1024
# The bad lines a scan names one by one (it counts them all).
_NAMED_BAD_LINES = 10
_GZIP_MAGIC = b"\x1f\x8b"


@dataclasses.dataclass
class TextCorpus:
    """A parallel corpus in text files, scanned once, streamed after.

    Built by `TextCorpus.scan()`, which documents the attributes' rules.

    Attributes:
        paths: the files: `(source, target)`, or `(tsv,)`.
        columns: the `(source, target)` columns of a TSV file; None for
            two files.
        num_lines: the lines of each file.
        end: the lines read for training (fewer than `num_lines` when
            `max_train_pairs` cuts the training pairs).
        excluded: sorted 0-based numbers of the lines before `end` that
            are not training pairs (dev, test, empty, unreadable).
        num_pairs: the training pairs.
        dev, test: the held-out pairs, lists of `(source, target)`.
        sample: the vocabulary sample, pairs in file order.
        num_empty_lines: lines with an empty side, left out.
        bad_lines: `(line number, reason)` of the first unreadable lines.
        num_bad_lines: all unreadable lines, left out.
    """

    paths: tuple
    columns: tuple | None
    num_lines: int
    end: int
    excluded: np.ndarray
    num_pairs: int
    dev: list
    test: list
    sample: list
    num_empty_lines: int = 0
    bad_lines: list = dataclasses.field(default_factory=list)
    num_bad_lines: int = 0

    @classmethod
    def scan(
        cls,
        paths,
        columns=None,
        held_out=True,
        dev_fraction=0.05,
        test_fraction=0.05,
        max_held_out=3000,
        max_train_pairs=0,
        sample_size=0,
        seed=0,
    ):
        """Reads the files once: checks, splits and samples their lines.

        Args:
            paths: `[source_file, target_file]` (aligned lines), or
                `[tsv_file]` with `columns`. Gzipped files are read too.
            columns: the `(source, target)` field indices of a TSV file.
            held_out: whether to split dev and test off by hash (False:
                every pair trains; dev and test come from elsewhere).
            dev_fraction, test_fraction: the split's fractions on a small
                corpus (`held_out_fractions`).
            max_held_out: int, the most pairs of each of dev and test
                (their first, in file order); 0: no cap.
            max_train_pairs: int, the most training pairs (the first);
                0: all.
            sample_size: int, the training pairs to draw for learning
                vocabularies (`sample_pairs`); None: all of them, 0: none.
            seed: the sample's seed.

        Returns:
            A `TextCorpus`.

        Raises:
            InputError: a file cannot be read, or the two files have
                different numbers of lines.
            ValueError: no training pair is left.
        """
        paths = tuple(str(path) for path in paths)
        if len(paths) != (1 if columns else 2):
            raise ValueError(
                "`paths` must be [source_file, target_file], or [tsv_file] "
                f"with `columns`. Received: paths={list(paths)}, "
                f"columns={columns}"
            )
        _check_fractions(dev_fraction, test_fraction)
        counts = [count_lines(path) for path in paths]
        if len(set(counts)) > 1:
            raise InputError(
                "Parallel files must have the same number of lines. "
                f"Received: {counts[0]:,} lines in {paths[0]!r} and "
                f"{counts[1]:,} lines in {paths[1]!r}"
            )
        num_lines = counts[0]
        dev_limit, test_limit = 0.0, 0.0  # positions of dev and test
        if held_out:
            dev_fraction, test_fraction = held_out_fractions(
                num_lines, dev_fraction, test_fraction, max_held_out
            )
            # As `_split_of` compares a position with them.
            dev_limit, test_limit = dev_fraction, dev_fraction + test_fraction
        cap = max_held_out or math.inf
        limit = max_train_pairs or math.inf
        dev, test, bad, empty = [], [], [], []
        excluded = array.array("q")
        reservoir = _Reservoir(sample_size, seed)
        num_bad, num_empty, num_pairs, end = 0, 0, 0, 0
        md5 = hashlib.md5
        # The hot loop of a scan (about 2 s per million lines): kept flat.
        for index, pair in enumerate(_read_pairs(paths, columns)):
            if pair.__class__ is str:  # why the line cannot be read
                num_bad += 1
                if len(bad) < _NAMED_BAD_LINES:
                    bad.append((index + 1, pair))
                excluded.append(index)
                continue
            if not (pair[0] and pair[1]):
                num_empty += 1
                empty = empty or [index + 1]
                excluded.append(index)
                continue
            if test_limit:  # `hash_position`, inline
                digest = md5(pair[0].encode("utf-8")).digest()
                position = int.from_bytes(digest[:8], "big") / 2**64
                if position < test_limit:
                    held = dev if position < dev_limit else test
                    if len(held) < cap:
                        held.append(pair)
                    excluded.append(index)
                    continue
            if num_pairs == limit:
                continue  # past `end`: not read for training
            if num_pairs < reservoir.size or num_pairs == reservoir.next:
                reservoir.take(num_pairs, pair)
            num_pairs += 1
            end = index + 1
        name = " and ".join(map(repr, paths))
        if empty:
            warnings.warn(
                f"Skipped {num_empty:,} line(s) of {name} with an empty "
                f"source or target (first at line {empty[0]:,}).",
                stacklevel=2,
            )
        if num_bad:
            named = "; ".join(f"line {n:,}: {why}" for n, why in bad)
            warnings.warn(
                f"Left out {num_bad:,} line(s) of {name} that cannot be "
                f"read ({named}{'; ...' if num_bad > len(bad) else ''}). "
                "Fix them, or leave them out: they count in no split.",
                stacklevel=2,
            )
        if not num_pairs:
            raise ValueError(f"No sentence pairs found in {name}.")
        excluded = np.frombuffer(excluded, np.int64)
        return cls(
            paths=paths,
            columns=tuple(columns) if columns else None,
            num_lines=num_lines,
            end=end,
            excluded=excluded[excluded < end],
            num_pairs=num_pairs,
            dev=dev,
            test=test,
            sample=reservoir.items(),
            num_empty_lines=num_empty,
            bad_lines=bad,
            num_bad_lines=num_bad,
        )

    @property
    def name(self):
        """The files, for messages: `'train.de', 'train.en'`."""
        return ", ".join(map(repr, self.paths))

    def pairs(self):
        """The training pairs, read from the files again (a generator).

        Yields:
            `(source, target)` string tuples, stripped, in file order.
        """
        excluded = set(self.excluded.tolist())
        for index, pair in enumerate(_read_pairs(self.paths, self.columns)):
            if index >= self.end:
                return
            if index not in excluded:
                yield pair

    def dataset(self, chunk_lines=CHUNK_LINES):
        """The training pairs as a `tf.data.Dataset` of chunks.

        Each element is `(line_numbers, sources, targets)`: int64
        `(n,)` (0-based) and string `(n,)`, the training pairs among
        `chunk_lines` lines of the files, in file order, unstripped (the
        tokenizers normalise spaces). A new iteration reads the files
        again.
        """
        import tensorflow as tf

        files = [_text_lines(path) for path in self.paths]
        lines = files[0] if self.columns else tf.data.Dataset.zip(*files)
        # A sentinel past every line number: never empty, always sorted.
        excluded = tf.constant(np.append(self.excluded, 2**62), tf.int64)
        columns, needed = self.columns, max(self.columns or (0,)) + 1

        def select(chunk, text):
            if columns:
                fields = tf.strings.split(text, "\t")
                text = tf.unstack(
                    fields.to_tensor("", shape=[None, needed]), axis=1
                )
                text = (text[columns[0]], text[columns[1]])
            size = tf.shape(text[0], out_type=tf.int64)[0]
            numbers = chunk * chunk_lines + tf.range(size)  # (n,)
            found = tf.gather(excluded, tf.searchsorted(excluded, numbers))
            keep = tf.not_equal(found, numbers)  # (n,)
            # The byte order mark of a file's first line (`read_lines`).
            text = tf.cond(
                chunk == 0,
                lambda: [_drop_mark(t, numbers) for t in text],
                lambda: list(text),
            )
            return tuple(tf.boolean_mask(t, keep) for t in [numbers, *text])

        return (
            lines.take(self.end)
            .batch(chunk_lines)
            .enumerate()
            .map(select, num_parallel_calls=tf.data.AUTOTUNE)
        )


def sample_pairs(pairs, size, seed=0):
    """A uniform random sample of `size` pairs, in their order.

    The vocabulary sample: with `size` pairs or fewer, all of them (the
    same list); else `size` drawn without replacement by reservoir
    sampling (Li's Algorithm L, one pass) seeded by `seed`, so that
    `TextCorpus.scan` draws the same sample from the files as this
    function from the pairs they hold.

    Args:
        pairs: an iterable of pairs.
        size: int >= 0, or None for all.
        seed: int, the draw's seed.

    Returns:
        A list of pairs, in the order of `pairs`.
    """
    reservoir = _Reservoir(size, seed)
    for index, pair in enumerate(pairs):
        if index < reservoir.size or index == reservoir.next:
            reservoir.take(index, pair)
    return reservoir.items()


class _Reservoir:
    """Li (1994), Algorithm L: a uniform sample of a stream in one pass.

    The caller offers item `index` (0, 1, ...) only when `index < size`
    or `index == next`: random numbers are drawn only when an item is
    taken, about `size x (1 + log(n / size))` times for `n` items.
    """

    def __init__(self, size, seed):
        self.size = math.inf if size is None else size
        # The index of the next item taken past the first `size`.
        self.next = self.size or math.inf
        self._items = []  # (index, item)
        # Python's generator, not NumPy's: 20 times faster one number at
        # a time, and its sequence for a seed is stable across versions.
        self._random = random.Random(seed)
        self._weight = 1.0

    def take(self, index, item):
        if index < self.size:
            self._items.append((index, item))
            if index == self.size - 1:
                self._advance(index)
        else:
            self._items[self._random.randrange(self.size)] = (index, item)
            self._advance(index)

    def _advance(self, index):
        # 1 - random() lies in (0, 1]: its logarithm is finite.
        uniform = self._random.random
        self._weight *= math.exp(math.log(1 - uniform()) / self.size)
        jump = math.log(1 - uniform()) / math.log1p(-self._weight)
        self.next = index + math.floor(jump) + 1

    def items(self):
        return [item for _, item in sorted(self._items, key=_first)]


def _first(pair):
    return pair[0]


def count_lines(path):
    r"""The lines of a text file, plain or gzipped, as `read_lines` counts.

    Lines end at `"\n"`; a last line without one counts.

    Raises:
        InputError: the file cannot be read.
    """
    count, last = 0, b"\n"
    with _open(path) as file:
        try:
            while chunk := file.read(1 << 22):
                count += chunk.count(b"\n")
                last = chunk[-1:]
        except (OSError, EOFError) as error:
            raise _input_error(path, error) from None
    return count + (last != b"\n")


def _open(path):
    try:
        file = open(path, "rb")  # noqa: SIM115 (returned)
        if file.read(2) == _GZIP_MAGIC:
            file.close()
            return gzip.open(path, "rb")
        file.seek(0)
        return file
    except OSError as error:
        raise _input_error(path, error) from None


def _input_error(path, error):
    reason = getattr(error, "strerror", None) or error
    return InputError(f"{str(path)!r}: {reason}")


def _read_lines(path):
    r"""The lines of a file as bytes, each with its `\n` (a generator)."""
    with _open(path) as file:
        try:
            yield from file
        except (OSError, EOFError) as error:
            raise _input_error(path, error) from None


def _read_pairs(paths, columns):
    """Each line's `(source, target)`, stripped, or why it is unreadable.

    As `read_parallel_files` and `read_tsv` read them: a byte order mark
    starting the file is dropped, and the sides are stripped (of the
    line end too).
    """
    if columns:
        yield from _read_tsv_pairs(paths[0], columns)
        return
    rows = zip(*map(_read_lines, paths), strict=True)
    for raw in rows:  # the first line: its byte order mark
        try:
            source, target = _decoded(raw)
            yield source.strip(), target.strip()
        except UnicodeDecodeError:
            yield _not_utf8(paths, raw)
        break
    for raw_source, raw_target in rows:
        try:
            source = raw_source.decode("utf-8")
            target = raw_target.decode("utf-8")
        except UnicodeDecodeError:
            yield _not_utf8(paths, (raw_source, raw_target))
            continue
        yield source.strip(), target.strip()


def _decoded(raw):
    """The text of the first line of each file, without a byte order mark."""
    return [line.decode("utf-8").removeprefix("\ufeff") for line in raw]


def _read_tsv_pairs(path, columns):
    needed = max(columns) + 1
    for index, raw in enumerate(_read_lines(path)):
        try:
            (line,) = _decoded([raw]) if index == 0 else [raw.decode("utf-8")]
        except UnicodeDecodeError:
            yield _not_utf8([path], [raw])
            continue
        fields = line.rstrip("\n").split("\t")
        if len(fields) < needed:
            yield (
                f"{len(fields)} tab-separated field(s), columns="
                f"{list(columns)} need {needed}"
            )
            continue
        yield fields[columns[0]].strip(), fields[columns[1]].strip()


def _not_utf8(paths, raw):
    """Why a line is unreadable: the file and byte where it is not UTF-8."""
    for path, line in zip(paths, raw, strict=True):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as error:
            return (
                f"not UTF-8 in {path!r} ({error.reason} at byte {error.start})"
            )
    raise AssertionError("unreachable: every line decodes")


def _drop_mark(text, numbers):
    import tensorflow as tf

    dropped = tf.strings.regex_replace(text, "^\ufeff", "")
    return tf.where(numbers == 0, dropped, text)


def _text_lines(path):
    """`tf.data.TextLineDataset` of a file, gzipped or not."""
    import tensorflow as tf

    with _open(path) as file:
        gzipped = isinstance(file, gzip.GzipFile)
    return tf.data.TextLineDataset(
        str(pathlib.Path(path)), compression_type="GZIP" if gzipped else ""
    )
