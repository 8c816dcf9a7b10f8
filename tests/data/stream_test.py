import collections
import json
import types

import keras
import numpy as np
import pytest

from keras_bahdanau.data import STREAM_FILE
from keras_bahdanau.data import PairList
from keras_bahdanau.data import StreamCallback
from keras_bahdanau.data import TextCorpus
from keras_bahdanau.data import build_tokenizer
from keras_bahdanau.data import make_dataset
from keras_bahdanau.data import make_stream
from keras_bahdanau.data import shard_batches
from tests.data.text_corpus_test import write_parallel

MAX_LENGTH = 8
BATCH = 8


@pytest.fixture(scope="module")
def pairs():
    """Pairs of 1-11 words: some too long, one with no token at all."""
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(30)]
    pairs = []
    for _ in range(300):
        source = rng.choice(words, rng.integers(1, 12))
        pairs.append((" ".join(source), " ".join(source[::-1]).upper()))
    pairs[17] = ("\x01", "NOTHING TO SAY")  # no source token
    return pairs


@pytest.fixture(scope="module")
def tokenizers(pairs):
    return [
        build_tokenizer("word", [pair[side] for pair in pairs], 25)
        for side in (0, 1)
    ]


def batches(dataset, count):
    """The first `count` batches as `(source, target, labels)` arrays."""
    found = []
    for inputs, labels in dataset.take(count).as_numpy_iterator():
        found.append((inputs["source_ids"], inputs["target_ids"], labels))
    return found


def assert_same_batches(found, expected):
    assert len(found) == len(expected)
    for got, want in zip(found, expected, strict=True):
        for got_ids, want_ids in zip(got, want, strict=True):
            np.testing.assert_array_equal(got_ids, want_ids)


def rows(found):
    """The multiset of the batches' pairs (source ids, labels)."""
    return collections.Counter(
        (tuple(source[source > 0]), tuple(labels[labels > 0]))
        for batch in found
        for source, labels in zip(batch[0], batch[2], strict=True)
    )


def in_memory(pairs, tokenizers, **kwargs):
    with pytest.warns(UserWarning, match="make_dataset: "):
        dataset, report = make_dataset(
            pairs,
            *tokenizers,
            batch_size=BATCH,
            max_length=MAX_LENGTH,
            **kwargs,
        )
    return batches(dataset, report.num_batches), report


@pytest.mark.parametrize(
    "options",
    [
        {"drop_remainder": True, "buckets": 3},
        {"drop_remainder": False},
        {"drop_remainder": True, "bucket": False},
    ],
)
@pytest.mark.parametrize("source", ["files", "memory"])
def test_a_stream_yields_make_dataset_batches_and_report(
    pairs, tokenizers, tmp_path, options, source
):
    expected, report = in_memory(pairs, tokenizers, shuffle=False, **options)
    if source == "files":
        paths = write_parallel(tmp_path, *zip(*pairs, strict=True))
        corpus = TextCorpus.scan(paths, held_out=False, sample_size=None)
    else:
        corpus = PairList(pairs)
    dataset, stream = make_stream(
        corpus, *tokenizers, batch_size=BATCH, max_length=MAX_LENGTH,
        shuffle=False, **options,
    )  # fmt: skip
    # Known before a pass from the sample, here every pair: exact.
    assert stream.estimate == report
    assert stream.steps_per_epoch == report.num_batches
    assert stream.bucket_widths == report.bucket_widths
    assert stream.report() is None  # nothing read yet
    count = report.num_batches
    found = batches(dataset, 2 * count)  # two passes
    assert_same_batches(found[:count], expected)
    assert_same_batches(found[count:], expected)  # unshuffled: the same
    assert stream.report() == report  # counted as the stream passed
    assert report.num_too_long and report.num_empty == 1


def test_a_stream_runs_without_autotuning(pairs, tokenizers):
    dataset, _ = make_stream(
        PairList(pairs), *tokenizers, batch_size=BATCH, max_length=MAX_LENGTH
    )
    assert dataset.options().autotune.enabled is False


def test_each_pass_shuffles_the_kept_pairs_anew_by_the_seed(pairs, tokenizers):
    options = {"batch_size": BATCH, "max_length": MAX_LENGTH}
    expected, report = in_memory(
        pairs, tokenizers, shuffle=False, drop_remainder=False
    )
    count = report.num_batches
    dataset, _ = make_stream(pairs, *tokenizers, seed=3, **options)
    found = batches(dataset, 3 * count)
    passes = [found[i * count : (i + 1) * count] for i in range(3)]
    for one in passes:  # every kept pair once a pass
        assert rows(one) == rows(expected)
    assert len({str(rows(one[:3])) for one in passes}) == 3  # new orders
    again, _ = make_stream(pairs, *tokenizers, seed=3, **options)
    assert_same_batches(batches(again, 3 * count), found)
    other, _ = make_stream(pairs, *tokenizers, seed=4, **options)
    assert rows(batches(other, 3)) != rows(found[:3])
    # A buffer of 16 pairs shuffles less, and loses none.
    small, _ = make_stream(
        pairs, *tokenizers, seed=3, shuffle_buffer=16, **options
    )
    assert rows(batches(small, count)) == rows(expected)


@pytest.mark.parametrize("known", [True, False])
def test_a_stream_starts_at_a_step_as_if_it_had_trained_to_it(
    pairs, tokenizers, known
):
    options = {
        "batch_size": BATCH,
        "max_length": MAX_LENGTH,
        "seed": 5,
        "drop_remainder": True,
    }
    dataset, stream = make_stream(pairs, *tokenizers, **options)
    count = stream.steps_per_epoch
    reference = batches(dataset, 2 * count + 4)
    for step in (0, 5, count - 1, count, count + 3):
        if step >= count and not known:
            continue  # without a pass's length, only the first pass
        resumed, stream = make_stream(pairs, *tokenizers, **options)
        where = stream.start_at(step, count if known else 0)
        assert where == (divmod(step, count) if known else (0, step))
        assert_same_batches(
            batches(resumed, 4), reference[step : step + 4]
        )  # fmt: skip
        # Its report covers its first pass whole, the skipped batches too.
        batches(resumed, count)
        assert (
            stream.report()
            == make_stream(pairs, *tokenizers, **options)[1].estimate
        )
    with pytest.raises(ValueError, match="Received: step=-1"):
        stream.start_at(-1)


def test_a_dropped_iterator_does_not_count(pairs, tokenizers):
    _, report = in_memory(pairs, tokenizers, shuffle=False)
    dataset, stream = make_stream(
        pairs, *tokenizers, batch_size=BATCH, max_length=MAX_LENGTH, seed=1
    )
    # Keras reads a batch to build a model, and drops the iterator.
    dropped = iter(dataset)
    next(dropped)
    del dropped
    batches(dataset, report.num_batches)
    assert stream.report() == report


def test_stream_callback_starts_at_the_restored_step(
    pairs, tokenizers, tmp_path, capsys
):
    options = {"batch_size": BATCH, "max_length": MAX_LENGTH, "seed": 2}
    dataset, stream = make_stream(pairs, *tokenizers, **options)
    count = stream.steps_per_epoch
    reference = batches(dataset, 2 * count + 2)
    path = tmp_path / STREAM_FILE

    def start(step):
        dataset, stream = make_stream(pairs, *tokenizers, **options)
        callback = StreamCallback(stream, path)
        iterations = keras.Variable(step, dtype="int32", trainable=False)
        optimizer = types.SimpleNamespace(iterations=iterations)
        callback.set_model(types.SimpleNamespace(optimizer=optimizer))
        callback.on_train_begin()
        return dataset, stream, callback

    dataset, stream, callback = start(0)
    assert capsys.readouterr().out == ""
    found = []
    for number, batch in enumerate(dataset.take(count + 1)):
        found.append(batch)
        callback.on_train_batch_end(number)
    assert f"[train] first pass read: {stream.report()}" in (
        capsys.readouterr().out
    )
    record = json.loads(path.read_text())
    assert record["report"]["num_batches"] == count
    # A resumed run past the first pass: the record places the step.
    dataset, _, _ = start(count + 1)
    assert_same_batches(batches(dataset, 1), reference[count + 1 : count + 2])
    assert (
        f"goes on after step {count + 1:,}: in pass 2, after its first 1 "
        "batches, which are read again and not trained on."
    ) in capsys.readouterr().out


def test_shards_tile_the_global_batches(pairs, tokenizers):
    options = {
        "batch_size": BATCH,
        "max_length": MAX_LENGTH,
        "seed": 1,
        "drop_remainder": True,
    }
    dataset, _ = make_stream(pairs, *tokenizers, **options)
    whole = batches(dataset, 6)
    halves = []
    for index in (0, 1):
        dataset, _ = make_stream(pairs, *tokenizers, **options)
        halves.append(batches(shard_batches(dataset, 2, index), 6))
    for batch, first, second in zip(whole, *halves, strict=True):
        for ids, *parts in zip(batch, first, second, strict=True):
            assert len(parts[0]) == BATCH // 2
            np.testing.assert_array_equal(np.concatenate(parts), ids)
    assert shard_batches(dataset, 1, 0) is dataset
    odd = shard_batches(make_stream(pairs, *tokenizers, **options)[0], 3, 0)
    with pytest.raises(Exception, match="does not split into 3 shards"):
        batches(odd, 1)
    with pytest.raises(ValueError, match="Received: index=2"):
        shard_batches(dataset, 2, 2)


def test_invalid_streams(pairs, tokenizers):
    with pytest.raises(ValueError, match="Received: max_length=None"):
        make_stream(pairs, *tokenizers, max_length=None)
    with pytest.raises(ValueError, match="Received: shuffle_buffer=0"):
        make_stream(pairs, *tokenizers, shuffle_buffer=0)
    with pytest.raises(ValueError, match="`pairs` is empty"):
        PairList([])
    with pytest.raises(ValueError, match="No pair has between 1 and"):
        make_stream([("w1 w2 w3", "W1 W2 W3")], *tokenizers, max_length=2)
    corpus = PairList(pairs, sample=[])
    with pytest.raises(ValueError, match="no sample to choose"):
        make_stream(corpus, *tokenizers)


def test_bucket_widths_come_from_the_whole_sample_not_its_start(
    pairs, tokenizers, monkeypatch
):
    # A sample in file order whose first half is short pairs and second
    # half long ones (two corpora concatenated): with room for half the
    # sample, every other pair is tokenized, so the long pairs count.
    from keras_bahdanau.data import stream as stream_module

    short = [pair for pair in pairs if len(pair[0].split()) <= 3]
    long = [pair for pair in pairs if 6 <= len(pair[0].split()) <= 7]
    sample = short[:20] + long[:20]
    monkeypatch.setattr(stream_module, "BUCKET_SAMPLE", 20)
    _, stream = make_stream(
        PairList(short + long, sample=sample), *tokenizers,
        batch_size=BATCH, max_length=MAX_LENGTH, shuffle=False, buckets=2,
    )  # fmt: skip
    _, expected = in_memory(sample[::2], tokenizers, shuffle=False, buckets=2)
    assert stream.bucket_widths == expected.bucket_widths
    # The estimate scales the strided sample's counts to the corpus.
    assert stream.estimate.num_pairs == len(short) + len(long)
    assert min(stream.bucket_widths) <= 5 < max(stream.bucket_widths)
