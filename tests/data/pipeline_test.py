import itertools

import keras
import numpy as np
import pytest

from keras_bahdanau import tokenizers
from keras_bahdanau.data import pipeline
from keras_bahdanau.reserved import BOS_ID
from keras_bahdanau.reserved import EOS_ID
from keras_bahdanau.reserved import PAD_ID


def make_pairs(count=120, seed=0):
    """Pairs of 1 to 30 words, the target one word longer."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(40)]
    pairs = []
    for _ in range(count):
        length = int(rng.integers(1, 31))
        source = rng.choice(words, length).tolist()
        pairs.append((" ".join(source), " ".join(source[::-1] + ["w0"])))
    return pairs


@pytest.fixture(scope="module")
def data():
    pairs = make_pairs()
    source = tokenizers.WordTokenizer.from_texts([s for s, _ in pairs], 100)
    target = tokenizers.WordTokenizer.from_texts([t for _, t in pairs], 100)
    return pairs, source, target


def collect(dataset):
    return [
        (x["source_ids"].numpy(), x["target_ids"].numpy(), y.numpy())
        for x, y in dataset
    ]


def test_batches_hold_bos_inputs_eos_labels_and_padding(data):
    pairs, source_tokenizer, target_tokenizer = data
    dataset, report = pipeline.make_dataset(
        pairs, source_tokenizer, target_tokenizer, batch_size=16, shuffle=False
    )
    assert report.num_examples == len(pairs) and report.num_too_long == 0
    assert dataset.cardinality().numpy() == report.num_batches
    assert len(list(dataset)) == report.num_batches
    examples = {}
    for source, inputs, labels in collect(dataset):
        assert source.dtype == inputs.dtype == labels.dtype == np.int32
        assert source.shape == inputs.shape == labels.shape
        assert source.shape[0] <= 16
        for x, t, y in zip(source, inputs, labels, strict=True):
            examples[tuple(x[x != PAD_ID])] = (t, y)
            assert t[0] == BOS_ID
            length = int(np.sum(y != PAD_ID))  # y_1..y_n, EOS
            assert y[length - 1] == EOS_ID
            np.testing.assert_array_equal(t[1:length], y[: length - 1])
            assert not t[length:].any() and not y[length:].any()
            # Padding only at the end of the source.
            assert not x[int(np.sum(x != PAD_ID)) :].any()
    assert len(examples) == len(set(s for s, _ in pairs))
    for source, target in pairs[:10]:
        x = tuple(source_tokenizer.tokenize(source).numpy())
        y = target_tokenizer.tokenize(target).numpy()
        np.testing.assert_array_equal(examples[x][0][1 : len(y) + 1], y)


def batched(data, bucket, bucket_width):
    """The batches and report of `data`'s pairs, 16 a batch, <= 40 tokens."""
    pairs, source_tokenizer, target_tokenizer = data
    dataset, report = pipeline.make_dataset(
        pairs,
        source_tokenizer,
        target_tokenizer,
        16,
        40,
        seed=1,
        bucket=bucket,
        bucket_width=bucket_width,
    )
    return collect(dataset), report


@pytest.mark.parametrize("bucket", [True, False])
@pytest.mark.parametrize("bucket_width", [2, 5])
def test_the_report_counts_the_padding_of_the_batches(
    data, bucket, bucket_width
):
    batches, report = batched(data, bucket, bucket_width)
    sources = np.concatenate([x.ravel() for x, _, _ in batches])
    inputs = np.concatenate([t.ravel() for _, t, _ in batches])
    np.testing.assert_allclose(report.source_padding, np.mean(sources == 0))
    np.testing.assert_allclose(report.target_padding, np.mean(inputs == 0))
    # Grid cell (j, i) is padding if target j or source i is.
    cells = [
        np.logical_or(t[:, :, None] == 0, x[:, None, :] == 0)
        for x, t, _ in batches
    ]
    np.testing.assert_allclose(
        report.grid_padding, np.mean(np.concatenate([c.ravel() for c in cells]))
    )
    assert f"{report.grid_padding:.0%} of the grid" in str(report)
    widths = ", ".join(map(str, report.bucket_widths))
    assert str(report).endswith(f"of the grid (widths {widths}).")


def test_bucketing_reduces_padding(data):
    bucketed_batches, bucketed = batched(data, True, 5)
    batches, unbucketed = batched(data, False, 5)
    assert bucketed.source_padding < 0.5 * unbucketed.source_padding
    assert bucketed.grid_padding < 0.5 * unbucketed.grid_padding
    # Longest sequence: max_length + 1.
    assert {x.shape[1] for x, _, _ in batches} == {41}
    assert {x.shape[1] for x, _, _ in bucketed_batches} <= {
        5,
        10,
        15,
        20,
        25,
        30,
        35,
        40,
        41,
    }


def _fewest_positions(lengths, count):
    """The least padded positions of `lengths` in `count` widths, by
    trying every choice of widths among the lengths."""
    values = sorted(set(lengths))
    best = None
    for inner in itertools.combinations(
        values[:-1], min(count, len(values)) - 1
    ):
        widths = [*inner, values[-1]]
        total = sum(min(w for w in widths if w >= n) for n in lengths)
        best = total if best is None else min(best, total)
    return best


@pytest.mark.parametrize("seed", range(5))
def test_bucket_widths_pad_least(seed):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 16, size=int(rng.integers(1, 40)))
    for count in (1, 2, 3, 5):
        widths = pipeline.bucket_widths(lengths, count)
        assert widths == sorted(widths) and widths[-1] == lengths.max()
        assert len(widths) <= count
        total = sum(min(w for w in widths if w >= n) for n in lengths)
        assert total == _fewest_positions(lengths.tolist(), count)


def test_buckets_from_the_data_and_reused(data):
    pairs, source_tokenizer, target_tokenizer = data
    dataset, report = pipeline.make_dataset(
        pairs, source_tokenizer, target_tokenizer, 16, 40, seed=1, buckets=3
    )
    widths = report.bucket_widths
    # Three widths, the widest max_length + 1; each pair in the narrowest
    # that holds it.
    assert len(widths) == 3 and widths[-1] == 41
    for x, t, _ in collect(dataset):
        longest = max(
            int(np.sum(x != PAD_ID, 1).max()), int(np.sum(t != PAD_ID, 1).max())
        )
        assert x.shape[1] in widths
        assert x.shape[1] == min(w for w in widths if w >= longest)
    # As many widths as the multiples of 10, and no more padding.
    _, tens = batched(data, True, 10)
    _, five = pipeline.make_dataset(
        pairs, source_tokenizer, target_tokenizer, 16, 40, buckets=5
    )
    assert len(five.bucket_widths) == len(tens.bucket_widths) == 5
    assert five.source_padding <= tens.source_padding
    # Other pairs (dev) batched with these widths.
    dev, dev_report = pipeline.make_dataset(
        make_pairs(40, seed=1), source_tokenizer, target_tokenizer, 16, 40,
        buckets=list(widths),
    )  # fmt: skip
    assert dev_report.bucket_widths == widths
    assert {x.shape[1] for x, _, _ in collect(dev)} <= set(widths)
    with pytest.raises(ValueError, match="buckets"):
        pipeline.make_dataset(
            pairs, source_tokenizer, target_tokenizer, buckets=[0, 10]
        )


def test_drop_remainder_gives_full_batches(data):
    pairs, source_tokenizer, target_tokenizer = data
    dataset, report = pipeline.make_dataset(
        pairs,
        source_tokenizer,
        target_tokenizer,
        32,
        31,
        bucket_width=16,
        drop_remainder=True,
    )
    batches = collect(dataset)
    assert report.num_batches == len(batches) == 3  # 45 // 32 + 75 // 32
    assert {x.shape for x, _, _ in batches} == {(32, 16), (32, 32)}


def test_length_filter_is_reported(data):
    pairs, source_tokenizer, target_tokenizer = data
    too_long = sum(
        1 for s, t in pairs if max(len(s.split()), len(t.split())) > 20
    )
    assert too_long > 0
    pairs = pairs + [("w1 w2", "   ")]  # An empty target.
    with pytest.warns(
        UserWarning, match=f"{too_long} longer than max_length=20"
    ):
        dataset, report = pipeline.make_dataset(
            pairs, source_tokenizer, target_tokenizer, 8, max_length=20
        )
    assert report.num_too_long == too_long and report.num_empty == 1
    assert report.num_examples == len(pairs) - too_long - 1
    batches = collect(dataset)
    assert sum(len(x) for x, _, _ in batches) == report.num_examples
    assert max(x.shape[1] for x, _, _ in batches) <= 21
    with pytest.raises(ValueError, match="No pair has"):
        pipeline.make_dataset(
            pairs[:3], source_tokenizer, target_tokenizer, 8, 1
        )


def test_shuffling_follows_the_seed(data):
    pairs, source_tokenizer, target_tokenizer = data

    def first_batches(seed):
        dataset, _ = pipeline.make_dataset(
            pairs, source_tokenizer, target_tokenizer, 8, seed=seed
        )
        return [x for x, _, _ in collect(dataset.take(3))]

    one, again, other = first_batches(1), first_batches(1), first_batches(2)
    assert all(np.array_equal(a, b) for a, b in zip(one, again, strict=True))
    assert not all(
        a.shape == b.shape and np.array_equal(a, b)
        for a, b in zip(one, other, strict=True)
    )


def test_autotuning_is_off_and_the_batches_are_those_with_it_on(data):
    """Keras's new iterator each epoch must not wait for tf.data's tuner."""
    pairs, source_tokenizer, target_tokenizer = data

    def shuffled():
        return pipeline.make_dataset(
            pairs, source_tokenizer, target_tokenizer, 8, seed=3
        )[0]

    dataset = shuffled()
    assert dataset.options().autotune.enabled is False
    assert dataset.take(2).options().autotune.enabled is False  # kept
    options = pipeline.tf.data.Options()
    options.autotune.enabled = True
    tuned = shuffled().with_options(options)
    assert tuned.options().autotune.enabled is True
    for _ in range(2):  # two epochs, each shuffled anew
        found, expected = collect(dataset), collect(tuned)
        assert len(found) == len(expected)
        for got, want in zip(found, expected, strict=True):
            for got_ids, want_ids in zip(got, want, strict=True):
                np.testing.assert_array_equal(got_ids, want_ids)


def test_feeds_model_fit(data):
    pairs, source_tokenizer, target_tokenizer = data
    dataset, report = pipeline.make_dataset(
        pairs,
        source_tokenizer,
        target_tokenizer,
        32,
        31,
        seed=1,
        bucket_width=32,
        drop_remainder=True,
    )
    # One batch shape, (32, 32): JAX compiles the train step only once.
    assert report.num_batches == 3
    source = keras.Input((None,), dtype="int32", name="source_ids")
    inputs = keras.Input((None,), dtype="int32", name="target_ids")
    context = keras.layers.GlobalAveragePooling1D()(
        keras.layers.Embedding(source_tokenizer.vocabulary_size, 8)(source)
    )
    hidden = keras.layers.Embedding(target_tokenizer.vocabulary_size, 8)(inputs)
    hidden = hidden + keras.ops.expand_dims(context, 1)
    logits = keras.layers.Dense(target_tokenizer.vocabulary_size)(hidden)
    model = keras.Model({"source_ids": source, "target_ids": inputs}, logits)
    model.compile(
        "adam",
        keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, ignore_class=PAD_ID
        ),
    )
    # shuffle=False: the dataset shuffles itself (Keras warns otherwise).
    history = model.fit(dataset, epochs=2, verbose=0, shuffle=False)
    assert len(history.history["loss"]) == 2
    assert np.isfinite(history.history["loss"]).all()


def test_invalid_arguments(data):
    pairs, source_tokenizer, target_tokenizer = data
    with pytest.raises(ValueError, match="`pairs` is empty"):
        pipeline.make_dataset([], source_tokenizer, target_tokenizer)
    with pytest.raises(ValueError, match="Received: batch_size=0"):
        pipeline.make_dataset(pairs, source_tokenizer, target_tokenizer, 0)
    with pytest.raises(ValueError, match="Received: max_length=0"):
        pipeline.make_dataset(pairs, source_tokenizer, target_tokenizer, 8, 0)
