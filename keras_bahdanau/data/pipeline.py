"""tf.data pipelines that feed sentence pairs to the seq2seq models.

Keras accepts a `tf.data.Dataset` in `model.fit()` on every backend (JAX,
TensorFlow, torch), so one pipeline serves all three.
"""

import dataclasses
import warnings

import numpy as np
import tensorflow as tf

from keras_bahdanau.reserved import BOS_ID
from keras_bahdanau.reserved import EOS_ID
from keras_bahdanau.reserved import PAD_ID
from keras_bahdanau.reserved import UNK_ID
from keras_bahdanau.validation import check_int


@dataclasses.dataclass(frozen=True)
class DatasetReport:
    """What `make_dataset()` did with the pairs it was given.

    Attributes:
        num_pairs: pairs received.
        num_examples: pairs in the dataset.
        num_batches: batches in one pass over the dataset.
        num_too_long: pairs left out because a side had more than
            `max_length` tokens.
        num_empty: pairs left out because a side had no token at all.
        max_length: the length limit, in tokens without `[BOS]`/`[EOS]`.
        source_unknown_rate: fraction of `[UNK]` among the source tokens
            of the examples.
        target_unknown_rate: the same for the target tokens.
        source_padding: fraction of the batches' source positions that
            are padding.
        target_padding: the same for the decoder inputs (and labels).
        grid_padding: fraction of the `(target, source)` position pairs
            that hold padding on either side: the padded cells of
            Pervasive Attention's grid.
        bucket_widths: the widths the batches are padded to.
    """

    num_pairs: int
    num_examples: int
    num_batches: int
    num_too_long: int
    num_empty: int
    max_length: int
    source_unknown_rate: float
    target_unknown_rate: float
    source_padding: float = 0.0
    target_padding: float = 0.0
    grid_padding: float = 0.0
    bucket_widths: tuple = ()

    def __str__(self):
        return (
            f"{self.num_examples} of {self.num_pairs} pairs kept in "
            f"{self.num_batches} batches; "
            f"{self.num_too_long} longer than max_length={self.max_length} "
            f"tokens and {self.num_empty} empty left out; [UNK] rate "
            f"{self.source_unknown_rate:.2%} (source), "
            f"{self.target_unknown_rate:.2%} (target); padding "
            f"{self.source_padding:.0%} of the source and "
            f"{self.target_padding:.0%} of the target positions, "
            f"{self.grid_padding:.0%} of the grid"
            + (
                f" (widths {', '.join(map(str, self.bucket_widths))})."
                if self.bucket_widths
                else "."
            )
        )


def make_dataset(
    pairs,
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
):
    """Tokenizes sentence pairs into padded, length-bucketed batches.

    Each element is `({"source_ids": x, "target_ids": t}, y)`: for target
    tokens `y_1..y_n`, `t = [BOS] y_1 .. y_n` (the decoder inputs) and
    `y = y_1 .. y_n [EOS]` (the labels). All three are int32 (batch, T),
    padded with `[PAD]` (0) to one length `T`; sources get no `[BOS]` or
    `[EOS]`. Pairs with more than `max_length` tokens or no token on a
    side are left out, counted in the report and warned about.

    Batches are bucketed by length, like the paper's minibatches sorted by
    length (Bahdanau et al., 2015, appendix B): a pair is padded to the
    smallest multiple of `bucket_width` that holds it, at most to
    `max_length + 1` (the only width with `bucket=False`), or, with
    `buckets=N`, to the smallest of the `N` widths that pad these pairs
    least (`bucket_widths`; `report.bucket_widths` holds them, to batch
    the dev pairs alike). The few distinct shapes keep XLA (JAX, TF with
    `jit_compile`) from compiling often.

    Args:
        pairs: list of `(source, target)` string tuples.
        source_tokenizer: a `Tokenizer` for the sources.
        target_tokenizer: a `Tokenizer` for the targets.
        batch_size: pairs per batch (the paper uses 80).
        max_length: the most tokens on either side, not counting
            `[BOS]`/`[EOS]` (the paper trains with 30 and 50 words), or
            `None` for no limit.
        shuffle: whether to shuffle the pairs (anew each epoch).
        seed: shuffling seed; the same seed gives the same batches.
        bucket: whether to batch pairs of similar length together.
        bucket_width: width of the length buckets, in tokens.
        drop_remainder: whether to drop the last, smaller batch (of each
            bucket), for a fixed batch size.
        buckets: None (the multiples of `bucket_width`), an int `N`
            (the `N` widths that pad these pairs to the fewest positions,
            the widest `max_length + 1`), or a list of widths (e.g. the
            training set's `report.bucket_widths`; `max_length + 1` is
            added if no width holds every pair).

    Returns:
        A tuple `(dataset, report)`: the prefetched `tf.data.Dataset`, with
        a known cardinality (`report.num_batches`) and tf.data's
        autotuning off (`without_autotuning`), and a `DatasetReport`.

    Example:

    >>> pairs = ding_de_en("train")
    >>> source_tokenizer = build_tokenizer("word", [s for s, _ in pairs], 30000)
    >>> target_tokenizer = build_tokenizer("word", [t for _, t in pairs], 30000)
    >>> dataset, report = make_dataset(
    ...     pairs, source_tokenizer, target_tokenizer, batch_size=80, seed=1
    ... )
    >>> print(report)
    14789 of 14791 pairs kept in 189 batches; 2 longer than max_length=50
    tokens and 0 empty left out; [UNK] rate 0.00% (source), 0.00% (target).
    >>> model.fit(dataset, epochs=10, shuffle=False)
    """
    pairs = list(pairs)
    if not pairs:
        raise ValueError("`pairs` is empty: a dataset needs sentence pairs.")
    check_int("batch_size", batch_size)
    check_int("bucket_width", bucket_width)
    check_int("max_length", max_length, allow_none=True)

    sources = source_tokenizer.tokenize([source for source, _ in pairs])
    targets = target_tokenizer.tokenize([target for _, target in pairs])
    source_lengths = sources.row_lengths().numpy()
    target_lengths = targets.row_lengths().numpy()
    longest = max(source_lengths.max(), target_lengths.max())
    limit = longest if max_length is None else max_length
    empty = (source_lengths == 0) | (target_lengths == 0)
    too_long = (source_lengths > limit) | (target_lengths > limit)
    kept = np.flatnonzero(~empty & ~too_long)
    if len(kept) == 0:
        raise ValueError(
            f"No pair has between 1 and max_length={limit} tokens on both "
            f"sides (of {len(pairs)} pairs). Increase `max_length`."
        )
    sources = tf.gather(sources, kept)
    targets = tf.gather(targets, kept)
    # Decoder inputs and labels are one longer than the target sentence.
    padded_length = int(limit) + 1
    lengths = np.maximum(source_lengths[kept], target_lengths[kept] + 1)
    widths = _widths(lengths, padded_length, bucket, bucket_width, buckets)
    report = _report(
        batch_size=batch_size,
        drop_remainder=drop_remainder,
        widths=widths,
        num_pairs=len(pairs),
        num_too_long=int(too_long.sum()),
        num_empty=int((empty & ~too_long).sum()),
        max_length=int(limit),
        source_lengths=source_lengths[kept],
        target_lengths=target_lengths[kept],
        source_unknown=_unknown_count(sources),
        target_unknown=_unknown_count(targets),
    )
    if report.num_too_long or report.num_empty:
        warnings.warn(f"make_dataset: {report}", stacklevel=2)

    dataset = tf.data.Dataset.from_tensor_slices((sources, targets))
    if shuffle:
        dataset = dataset.shuffle(len(kept), seed=seed)
    dataset = batch_pairs(dataset, widths, batch_size, drop_remainder, bucket)
    dataset = dataset.apply(
        tf.data.experimental.assert_cardinality(report.num_batches)
    )
    return without_autotuning(dataset.prefetch(tf.data.AUTOTUNE)), report


def without_autotuning(dataset):
    """`dataset` with tf.data's autotuning thread turned off.

    With autotuning on, every iterator of a dataset runs a thread that
    re-optimizes the pipeline's parallelism, and destroying the iterator
    waits until that thread is done. Keras makes a new iterator for each
    epoch (and each validation), so training stood still at the start of
    an epoch: on the main job's config, two cores, 4-19 s in 19 of 28
    epochs, once 38 s (`docs/profile.md`, "The start of an epoch"). Off, the
    batches are the same: a parallel map with `AUTOTUNE` runs on as many
    threads as there are cores, and a prefetch buffer of `AUTOTUNE` grows
    when the model drains it.

    Args:
        dataset: a `tf.data.Dataset`.

    Returns:
        The dataset with `options().autotune.enabled` False.
    """
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)


def batch_pairs(pairs, widths, batch_size, drop_remainder, bucket=True):
    """Batches a dataset of `(source_ids, target_ids)` as `make_dataset`.

    Args:
        pairs: a `tf.data.Dataset` of int `(Tx,)`, `(Ty,)` pairs that fit
            the widest of `widths`.
        widths: the sorted widths (`bucket_widths` or multiples).
        batch_size, drop_remainder: as for `make_dataset`.
        bucket: False: every batch padded to `widths[-1]`.

    Returns:
        The `({"source_ids": x, "target_ids": t}, y)` batches.
    """
    pairs = pairs.map(_add_bos_and_eos, num_parallel_calls=tf.data.AUTOTUNE)
    if bucket:
        pairs = pairs.bucket_by_sequence_length(
            element_length_func=lambda source, inputs, labels: tf.maximum(
                tf.shape(source)[0], tf.shape(inputs)[0]
            ),
            # Bucket i holds lengths in [boundary[i-1], boundary[i]) and is
            # padded to boundary[i] - 1 = widths[i].
            bucket_boundaries=[width + 1 for width in widths],
            bucket_batch_sizes=[batch_size] * (len(widths) + 1),
            padding_values=PAD_ID,
            pad_to_bucket_boundary=True,
            drop_remainder=drop_remainder,
        )
    else:
        pairs = pairs.padded_batch(
            batch_size,
            padded_shapes=([widths[-1]],) * 3,
            padding_values=PAD_ID,
            drop_remainder=drop_remainder,
        )
    return pairs.map(_to_model_inputs)


def shard_batches(dataset, num_shards, index):
    """This shard's rows of each batch: the data of one of several hosts.

    Every host builds the same global batches (the same pairs, seed and
    order) and keeps its part of each, rows `[index * b / num_shards,
    (index + 1) * b / num_shards)` of a batch of `b`, as Keras's own
    sharding would (`DataParallel.distribute_dataset`: rebatch, then
    shard), which cannot size bucketed batches. A batch must split
    evenly: a training batch is the global batch size, divisible by the
    replicas (`distribution.prepare`).

    Args:
        dataset: `(inputs, labels)` batches (a dict of inputs).
        num_shards: int >= 1, the hosts; 1 returns `dataset`.
        index: int in `[0, num_shards)`, this host's.

    Returns:
        The dataset of this shard's `(inputs, labels)`.
    """
    check_int("num_shards", num_shards)
    if not 0 <= index < num_shards:
        raise ValueError(
            f"`index` must be in [0, num_shards={num_shards}). Received: "
            f"index={index}"
        )
    if num_shards == 1:
        return dataset

    def rows(inputs, labels):
        size = tf.shape(labels)[0] // num_shards
        check = tf.debugging.assert_equal(
            tf.shape(labels)[0] % num_shards,
            0,
            message=f"A batch does not split into {num_shards} shards.",
        )
        with tf.control_dependencies([check]):
            start = index * size
        return tf.nest.map_structure(
            lambda ids: ids[start : start + size], (inputs, labels)
        )

    return dataset.map(rows)


def _widths(lengths, padded_length, bucket, bucket_width, buckets):
    """The widths `make_dataset` pads to, for these padded lengths."""
    if not bucket:
        return [padded_length]
    if buckets is None:
        widths = [*range(bucket_width, padded_length, bucket_width)]
        return [*widths, padded_length]
    if isinstance(buckets, int):
        # The widest is `max_length + 1`, so any pair fits (e.g. dev's).
        return bucket_widths(np.append(lengths, padded_length), buckets)
    return _checked_widths(buckets, padded_length)


def _report(
    batch_size,
    drop_remainder,
    widths,
    source_lengths,
    target_lengths,
    source_unknown,
    target_unknown,
    **counts,
):
    """The `DatasetReport` of the kept pairs' lengths and `[UNK]` counts.

    Args:
        batch_size, drop_remainder: as for `make_dataset`.
        widths: the bucket widths.
        source_lengths, target_lengths: int arrays, the tokens of each
            kept pair (without `[BOS]`/`[EOS]`), or the sums that
            `_length_sums` makes of them.
        source_unknown, target_unknown: the `[UNK]` among those tokens.
        **counts: `num_pairs`, `num_too_long`, `num_empty`, `max_length`.

    Raises:
        ValueError: with `drop_remainder`, no bucket fills a batch.
    """
    sums = _length_sums(source_lengths, target_lengths, widths)
    # Each pair has a fixed bucket, so the number of batches is known in
    # advance (Keras then knows the steps per epoch).
    rounding = np.floor if drop_remainder else np.ceil
    num_batches = int(rounding(sums["bucket_sizes"] / batch_size).sum())
    if num_batches == 0:
        raise ValueError(
            f"drop_remainder=True leaves no batch: no bucket has "
            f"batch_size={batch_size} pairs. Use a smaller `batch_size`."
        )
    return DatasetReport(
        num_examples=int(sums["bucket_sizes"].sum()),
        num_batches=num_batches,
        source_unknown_rate=_rate(source_unknown, sums["source"]),
        target_unknown_rate=_rate(
            target_unknown, sums["target"] - sums["pairs"]
        ),
        source_padding=float(1 - sums["source"] / sums["padded"]),
        target_padding=float(1 - sums["target"] / sums["padded"]),
        grid_padding=float(1 - sums["grid"] / sums["padded_grid"]),
        bucket_widths=tuple(int(width) for width in widths),
        **counts,
    )


def _length_sums(source_lengths, target_lengths, widths):
    """What `_report` needs of the kept pairs' lengths, as int sums.

    `bucket_sizes` (pairs per width), `pairs`, `source` (source tokens),
    `target` (decoder positions: target tokens + 1), `grid` (their
    products), `padded` and `padded_grid` (positions and cells padded).
    A dict of such sums passes through unchanged (a stream counts them).
    """
    if isinstance(source_lengths, dict):
        sums = dict(source_lengths)
    else:
        source = np.asarray(source_lengths, np.int64)
        target = np.asarray(target_lengths, np.int64) + 1
        bucket = np.searchsorted(widths, np.maximum(source, target))
        sums = {
            "bucket_sizes": np.bincount(bucket, minlength=len(widths)),
            "pairs": len(source),
            "source": int(source.sum()),
            "target": int(target.sum()),
            "grid": int((source * target).sum()),
        }
    # Every pair is padded to its bucket's width on both sides.
    widths = np.asarray(widths, np.int64)
    sums["bucket_sizes"] = np.asarray(sums["bucket_sizes"], np.int64)
    sums["padded"] = int((sums["bucket_sizes"] * widths).sum())
    sums["padded_grid"] = int((sums["bucket_sizes"] * widths**2).sum())
    return sums


def bucket_widths(lengths, count):
    """The `count` widths that pad `lengths` to the fewest positions.

    A length is padded to the smallest width that holds it; the widest is
    the longest length. Exact, by dynamic programming over the distinct
    lengths: `cost[k][j]`, the fewest positions of the lengths up to the
    `j`-th distinct one in `k` buckets, is the least over `i < j` of
    `cost[k - 1][i]` plus the `j`-th length times the number of lengths
    after the `i`-th up to the `j`-th.

    Args:
        lengths: int array, one padded length per pair (> 0). Appending
            a length `L` longer than all makes `L` the widest width: it
            adds `L` positions whatever the other widths, so they stay
            the best for the real lengths.
        count: int >= 1, the most widths (fewer when there are fewer
            distinct lengths).

    Returns:
        The widths, a sorted list of ints.

    Example:

    >>> bucket_widths(np.array([3, 3, 4, 9, 10, 10]), 2)
    [4, 10]
    """
    check_int("count", count)
    values, counts = np.unique(np.asarray(lengths), return_counts=True)
    before = np.concatenate([[0], np.cumsum(counts)])  # pairs below each
    size = len(values)
    count = min(count, size)
    # cost[j]: the fewest positions of the first j distinct lengths so far.
    cost = np.full(size + 1, np.inf)
    cost[0] = 0.0
    choices = []
    for _ in range(count):
        # (i, j): the bucket of lengths i .. j - 1, padded to values[j - 1].
        bucket = values[None, :] * (before[None, 1:] - before[:-1, None])
        total = np.where(
            np.tri(size, size, dtype=bool).T, cost[:-1, None] + bucket, np.inf
        )  # (i, j - 1)
        choices.append(np.argmin(total, axis=0))
        cost = np.concatenate([[0.0], np.min(total, axis=0)])
    # Walk back from the longest length through the chosen bucket starts.
    widths, end = [], size
    for choice in reversed(choices):
        widths.append(int(values[end - 1]))
        end = int(choice[end - 1])
    return sorted(widths)


def _checked_widths(widths, padded_length):
    """`widths` sorted, with `padded_length` if none holds every pair."""
    widths = sorted(set(widths))
    if not widths or not all(
        isinstance(w, int | np.integer) and w > 0 for w in widths
    ):
        raise ValueError(
            "`buckets` must be None, a positive int or a list of positive "
            f"int widths. Received: buckets={widths!r}"
        )
    if widths[-1] < padded_length:
        widths.append(padded_length)
    return widths


def _add_bos_and_eos(source, target):
    target = tf.cast(target, "int32")
    inputs = tf.concat([[BOS_ID], target], axis=0)
    labels = tf.concat([target, [EOS_ID]], axis=0)
    return tf.cast(source, "int32"), inputs, labels


def _to_model_inputs(source, inputs, labels):
    return {"source_ids": source, "target_ids": inputs}, labels


def _unknown_count(ids):
    return int(np.sum(ids.flat_values.numpy() == UNK_ID))


def _rate(count, total):
    return count / total if total else 0.0
