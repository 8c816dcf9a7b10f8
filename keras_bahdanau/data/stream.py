"""Training batches streamed from a corpus that stays on disk.

`make_stream` is `make_dataset` for a corpus too large to hold: the pairs
are read from their files (`TextCorpus.dataset()`), tokenized in parallel
`tf.data` maps, shuffled in a bounded buffer (anew each pass, by the seed
and the pass's number) and batched by length exactly as `make_dataset`
batches them (`batch_pairs`). Memory is the shuffle buffer's, whatever
the corpus's size. On pairs that fit the buffer, unshuffled, it yields
`make_dataset`'s batches one for one.

What a stream cannot know before it has read a pass is counted as it
reads (in `tf.Variable`s the maps update): `Stream.report()` is the
`DatasetReport` of the first pass once it is read; `StreamCallback`
prints it then. Until then the bucket widths and the batches per pass
come from a sample of the pairs.

The dataset is endless, one pass after the other, and starts where
`Stream.start_at(step)` says: on a resumed run `StreamCallback` sets it
to the restored optimizer's step count, so that no pair of the
interrupted pass is trained on twice or skipped (the batches before it
are read again, and dropped).
"""

import dataclasses
import json
import random
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from keras_bahdanau.data.pipeline import _length_sums
from keras_bahdanau.data.pipeline import _report
from keras_bahdanau.data.pipeline import _widths
from keras_bahdanau.data.pipeline import batch_pairs
from keras_bahdanau.data.pipeline import without_autotuning
from keras_bahdanau.data.text_corpus import CHUNK_LINES
from keras_bahdanau.reserved import UNK_ID
from keras_bahdanau.validation import check_int

# At most this many pairs of the vocabulary sample (every k-th) are
# tokenized to choose the bucket widths and to estimate a pass's batches.
BUCKET_SAMPLE = 100_000
# A run directory's record of a stream's first pass (`StreamCallback`).
STREAM_FILE = "stream.json"
# The counts of a pass, in this order, then the pairs of each width.
_COUNTS = (
    "pairs",
    "too_long",
    "empty",
    "source",
    "source_unknown",
    "target",
    "target_unknown",
    "grid",
)


class PairList:
    """Pairs held in memory, streamed like a `TextCorpus` (the same API).

    Args:
        pairs: list of `(source, target)` string tuples.
        sample: the vocabulary sample (default: the pairs).
    """

    def __init__(self, pairs, sample=None):
        self._pairs = list(pairs)
        if not self._pairs:
            raise ValueError("`pairs` is empty: a stream needs sentence pairs.")
        self.num_pairs = len(self._pairs)
        self.sample = self._pairs if sample is None else sample
        self.name = f"{self.num_pairs:,} pairs in memory"

    def pairs(self):
        return iter(self._pairs)

    def dataset(self, chunk_lines=CHUNK_LINES):
        numbers = tf.range(self.num_pairs, dtype=tf.int64)
        sources = [source for source, _ in self._pairs]
        targets = [target for _, target in self._pairs]
        return tf.data.Dataset.from_tensor_slices(
            (numbers, sources, targets)
        ).batch(chunk_lines)


class Stream:
    """The counters and start of a stream made by `make_stream`.

    Attributes:
        corpus: the `TextCorpus` (or `PairList`) it reads.
        widths: the bucket widths.
        estimate: the `DatasetReport` of the sample (`num_pairs` scaled
            to the corpus): the expected batches of a pass and padding.
        steps_per_epoch: `estimate.num_batches`, for `model.fit`, whose
            epochs are then about one pass each.
    """

    def __init__(self, corpus, tokenizers, widths, estimate, sampled, batching):
        self.corpus = corpus
        self._sampled = sampled
        self.widths = widths
        self.estimate = estimate
        self.steps_per_epoch = estimate.num_batches
        self._tokenizers = tokenizers
        self._batching = batching  # batch_size, max_length, ...
        size = len(_COUNTS) + len(widths)
        self._counts = tf.Variable(tf.zeros([size], tf.int64), trainable=False)
        # Which iteration counts: a dataset iterator that Keras opens and
        # drops (to build a model from a batch) must not count with the
        # one that trains.
        self._generation = tf.Variable(0, dtype=tf.int64, trainable=False)
        self._start = tf.Variable(0, dtype=tf.int64, trainable=False)
        self._per_pass = tf.Variable(0, dtype=tf.int64, trainable=False)

    @property
    def bucket_widths(self):
        """The widths, as `DatasetReport.bucket_widths` (to batch dev)."""
        return tuple(self.widths)

    def start_at(self, step, batches_per_pass=0):
        """Where the next iteration of the dataset starts.

        Args:
            step: int >= 0, the batches trained on so far (the restored
                optimizer's step count).
            batches_per_pass: the batches of one pass, if known (a record
                of the first pass, `STREAM_FILE`); 0: unknown, then
                `step` must lie in the first pass, which is read up to it.

        Returns:
            `(pass, batch)`: 0-based, the pass the stream starts in and
            the batches of it that it reads and drops.
        """
        check_int("step", step, minimum=0)
        check_int("batches_per_pass", batches_per_pass, minimum=0)
        self._start.assign(step)
        self._per_pass.assign(batches_per_pass)
        if batches_per_pass:
            return divmod(step, batches_per_pass)
        return 0, step

    def report(self):
        """The `DatasetReport` of the first pass read, or None before."""
        counts = self._counts.numpy()
        values = dict(zip(_COUNTS, counts.tolist(), strict=False))
        if values["pairs"] < self.corpus.num_pairs:
            return None
        bucket_sizes = counts[len(_COUNTS) :]
        sums = {
            "bucket_sizes": bucket_sizes,
            "pairs": int(bucket_sizes.sum()),
            "source": values["source"],
            "target": values["target"],
            "grid": values["grid"],
        }
        return _report(
            batch_size=self._batching["batch_size"],
            drop_remainder=self._batching["drop_remainder"],
            widths=self.widths,
            source_lengths=sums,
            target_lengths=None,
            source_unknown=values["source_unknown"],
            target_unknown=values["target_unknown"],
            num_pairs=values["pairs"],
            num_too_long=values["too_long"],
            num_empty=values["empty"],
            max_length=self._batching["max_length"],
        )

    def dataset(self):
        """The endless `tf.data.Dataset` of batches (see `make_stream`).

        Each iteration starts where `start_at` said, reads every line
        again and counts the first pass it reads from its start.
        """

        def iteration(_):
            generation = self._generation.assign_add(1)
            with tf.control_dependencies([generation]):
                reset = self._counts.assign(tf.zeros_like(self._counts))
            with tf.control_dependencies([reset]):
                start = self._start.read_value()
                per_pass = tf.maximum(self._per_pass.read_value(), 1)
            known = self._per_pass > 0
            first = tf.where(known, start // per_pass, 0)
            skip = tf.where(known, start % per_pass, start)
            return (
                tf.data.Dataset.counter(first)
                .flat_map(lambda number: self._pass(number, first, generation))
                .skip(skip)
            )

        return without_autotuning(
            tf.data.Dataset.range(1)
            .flat_map(iteration)
            .prefetch(tf.data.AUTOTUNE)
        )

    def _pass(self, number, first, generation):
        """The batches of pass `number`; counted if it is `first`."""
        batching = self._batching
        source_tokenizer, target_tokenizer = self._tokenizers
        limit = batching["max_length"]
        widths = tf.constant(self.widths, tf.int64)

        def tokenize(_, sources, targets):
            source = source_tokenizer.tokenize(sources)  # (n, None)
            target = target_tokenizer.tokenize(targets)
            source_length = source.row_lengths()  # (n,)
            target_length = target.row_lengths()
            too_long = (source_length > limit) | (target_length > limit)
            empty = (source_length == 0) | (target_length == 0)
            empty &= ~too_long
            kept = ~(too_long | empty)
            source = tf.ragged.boolean_mask(source, kept)
            target = tf.ragged.boolean_mask(target, kept)
            source_length = tf.boolean_mask(source_length, kept)
            target_length = tf.boolean_mask(target_length, kept) + 1
            bucket = tf.searchsorted(
                widths, tf.maximum(source_length, target_length)
            )
            counts = tf.concat(
                [
                    tf.stack(
                        [
                            tf.size(kept, tf.int64),
                            _count(too_long),
                            _count(empty),
                            tf.reduce_sum(source_length),
                            _count(source.flat_values == UNK_ID),
                            tf.reduce_sum(target_length),
                            _count(target.flat_values == UNK_ID),
                            tf.reduce_sum(source_length * target_length),
                        ]
                    ),
                    tf.math.bincount(
                        bucket,
                        minlength=len(self.widths),
                        maxlength=len(self.widths),
                        dtype=tf.int64,
                    ),
                ],
                axis=0,
            )
            counting = (number == first) & (self._generation == generation)
            update = self._counts.assign_add(tf.where(counting, counts, 0))
            with tf.control_dependencies([update]):
                return tf.identity(source), tf.identity(target)

        pairs = (
            self.corpus.dataset()
            .map(tokenize, num_parallel_calls=tf.data.AUTOTUNE)
            .unbatch()
        )
        if batching["shuffle"]:
            seed = batching["seed"] * 1_000_003 + number
            pairs = pairs.shuffle(batching["shuffle_buffer"], seed=seed)
        return batch_pairs(
            pairs,
            self.widths,
            batching["batch_size"],
            batching["drop_remainder"],
            batching["bucket"],
        )

    def __str__(self):
        estimate = self.estimate
        widths = ", ".join(map(str, self.widths))
        return (
            f"{self.corpus.num_pairs:,} pairs streamed from "
            f"{self.corpus.name}; from a sample of {self._sampled:,}: "
            f"about {estimate.num_examples:,} kept in "
            f"{estimate.num_batches:,} batches per pass, padding about "
            f"{estimate.source_padding:.0%} of the source and "
            f"{estimate.target_padding:.0%} of the target positions "
            f"(widths {widths}); the pass's own counts follow once it is "
            "read."
        )


def _unknown_in(ids, rows):
    """The `[UNK]` ids in the `rows` (a mask) of ragged `ids`."""
    tokens = ids.flat_values.numpy()
    return int(np.sum(tokens[np.repeat(rows, ids.row_lengths())] == UNK_ID))


def _count(mask):
    return tf.reduce_sum(tf.cast(mask, tf.int64))


def make_stream(
    corpus,
    source_tokenizer,
    target_tokenizer,
    batch_size=80,
    max_length=50,
    shuffle=True,
    seed=None,
    bucket=True,
    bucket_width=10,
    drop_remainder=False,
    buckets=None,
    shuffle_buffer=100_000,
):
    """Streams a corpus's pairs as `make_dataset`'s padded batches.

    The same batches as `make_dataset` (`({"source_ids": x,
    "target_ids": t}, y)`, bucketed by length, pairs too long or empty
    left out and counted), read from disk pass after pass. Shuffling
    draws from a buffer of `shuffle_buffer` pairs, reseeded each pass by
    `seed` and the pass's number: a corpus that is sorted (by source or
    length, say) should be shuffled once on disk. With `buckets=N` the
    widths come from the lengths of `BUCKET_SAMPLE` pairs spread evenly
    over `corpus.sample` (every k-th), as do the estimates of
    `Stream.estimate`; a sample of every pair gives `make_dataset`'s
    widths and counts.

    Args:
        corpus: a `TextCorpus`, or a `PairList` (or a list of pairs).
        source_tokenizer, target_tokenizer: `Tokenizer`s.
        batch_size, bucket, bucket_width, drop_remainder, buckets: as
            for `make_dataset`.
        max_length: int, the most tokens on a side (a stream cannot
            find its longest pair before it reads it).
        shuffle: whether to shuffle each pass.
        seed: int, the shuffling seed; None: a random one.
        shuffle_buffer: int, the pairs the shuffle buffer holds.

    Returns:
        `(dataset, stream)`: the endless `tf.data.Dataset` and its
        `Stream` (`stream.steps_per_epoch` for `model.fit`).

    Example:

    >>> corpus = TextCorpus.scan(["train.de", "train.en"], sample_size=10**6)
    >>> dataset, stream = make_stream(corpus, source, target, seed=1)
    >>> model.fit(dataset, steps_per_epoch=stream.steps_per_epoch,
    ...           callbacks=[StreamCallback(stream)])
    """
    if isinstance(corpus, list):
        corpus = PairList(corpus)
    for name, value in (
        ("batch_size", batch_size),
        ("max_length", max_length),
        ("bucket_width", bucket_width),
        ("shuffle_buffer", shuffle_buffer),
    ):
        check_int(name, value)
    if seed is None:
        seed = random.SystemRandom().randrange(2**31)
    check_int("seed", seed, minimum=0)
    # The sample is in file order: every k-th pair of it, not its first
    # ones, spans the whole file (a concatenation of corpora, say).
    stride = max(-(-len(corpus.sample) // BUCKET_SAMPLE), 1)
    sample = corpus.sample[::stride]
    if not sample:
        raise ValueError(
            "The corpus has no sample to choose bucket widths from: scan it "
            "with a `sample_size` (`TextCorpus.scan`)."
        )
    widths, estimate = _estimate(
        sample,
        corpus.num_pairs,
        (source_tokenizer, target_tokenizer),
        max_length,
        {
            "bucket": bucket,
            "bucket_width": bucket_width,
            "buckets": buckets,
            "batch_size": batch_size,
            "drop_remainder": drop_remainder,
        },
    )
    stream = Stream(
        corpus,
        (source_tokenizer, target_tokenizer),
        widths,
        estimate,
        len(sample),
        {
            "batch_size": batch_size,
            "max_length": max_length,
            "shuffle": shuffle,
            "seed": seed,
            "bucket": bucket,
            "drop_remainder": drop_remainder,
            "shuffle_buffer": shuffle_buffer,
        },
    )
    return stream.dataset(), stream


def _estimate(sample, num_pairs, tokenizers, max_length, batching):
    """The widths and the scaled `DatasetReport` of a sample of pairs.

    As `make_dataset` finds them for the sample, its counts scaled to
    `num_pairs` (exactly `make_dataset`'s when the sample is every pair).
    """
    sources, targets = (
        tokenizer.tokenize([pair[side] for pair in sample])
        for side, tokenizer in enumerate(tokenizers)
    )
    source_lengths = sources.row_lengths().numpy()
    target_lengths = targets.row_lengths().numpy()
    too_long = (source_lengths > max_length) | (target_lengths > max_length)
    empty = ((source_lengths == 0) | (target_lengths == 0)) & ~too_long
    kept = ~(too_long | empty)
    if not kept.any():
        raise ValueError(
            f"No pair has between 1 and max_length={max_length} tokens on "
            f"both sides (of {len(sample)} pairs sampled). Increase "
            "`max_length`."
        )
    widths = _widths(
        np.maximum(source_lengths[kept], target_lengths[kept] + 1),
        max_length + 1,
        batching["bucket"],
        batching["bucket_width"],
        batching["buckets"],
    )
    scale = num_pairs / len(sample)
    sums = _length_sums(source_lengths[kept], target_lengths[kept], widths)
    sums = {
        key: np.round(np.asarray(value) * scale).astype(np.int64)
        for key, value in sums.items()
        if key not in ("padded", "padded_grid")
    }
    unknown = [
        round(
            np.sum(ids.flat_values.numpy()[np.repeat(kept, lengths)] == UNK_ID)
            * scale
        )
        for ids, lengths in (
            (sources, source_lengths),
            (targets, target_lengths),
        )
    ]
    estimate = _report(
        batch_size=batching["batch_size"],
        drop_remainder=batching["drop_remainder"],
        widths=widths,
        source_lengths=sums,
        target_lengths=None,
        source_unknown=unknown[0],
        target_unknown=unknown[1],
        num_pairs=num_pairs,
        num_too_long=round(int(too_long.sum()) * scale),
        num_empty=round(int(empty.sum()) * scale),
        max_length=max_length,
    )
    return widths, estimate


class StreamCallback(keras.callbacks.Callback):
    """Starts a stream where training stands; prints its first pass.

    At the start of training it reads the optimizer's step count and
    starts the stream there (`Stream.start_at`): 0 in a new run, the step
    of the backup in a resumed one. Place it after the callback that
    restores the backup (`keras.callbacks.BackupAndRestore`), which does
    so at the start of training too. Once the first pass has been read,
    it prints the pass's `DatasetReport` and writes it to `path`, where a
    resumed run finds the batches of a pass (so that it starts in the
    right pass without reading the ones before).

    Args:
        stream: the `Stream` of the training dataset.
        path: the JSON file of the report (a run directory's
            `STREAM_FILE`), or None.
        label: the report's prefix in the log.

    Example:

    >>> dataset, stream = make_stream(corpus, source, target, seed=1)
    >>> model.fit(dataset, steps_per_epoch=stream.steps_per_epoch,
    ...           callbacks=[StreamCallback(stream, "run/stream.json")])
    """

    def __init__(self, stream, path=None, label="[train]"):
        super().__init__()
        self.stream = stream
        self.path = None if path is None else Path(path)
        self.label = label
        self._reported = False

    def on_train_begin(self, logs=None):
        iterations = self.model.optimizer.iterations
        step = int(keras.ops.convert_to_numpy(iterations))
        record = {}
        if self.path is not None and self.path.is_file():
            record = json.loads(self.path.read_text(encoding="utf-8"))
        self._reported = bool(record)
        per_pass = record.get("report", {}).get("num_batches", 0)
        number, skipped = self.stream.start_at(step, per_pass)
        if step:
            print(
                f"The training stream goes on after step {step:,}: in pass "
                f"{number + 1}, after its first {skipped:,} batches, which "
                "are read again and not trained on."
            )

    def on_train_batch_end(self, batch, logs=None):
        if self._reported:
            return
        report = self.stream.report()
        if report is None:
            return
        self._reported = True
        print(f"\n{self.label} first pass read: {report}")
        if self.path is not None:
            from keras_bahdanau.run_directory import atomic_write_text

            record = {"report": dataclasses.asdict(report)}
            atomic_write_text(self.path, json.dumps(record, indent=2))
