"""examples/comparison.py, the helpers of the comparison scripts."""

import comparison  # examples/, see conftest.py
import pytest
import sacrebleu
import tensorflow as tf

from keras_bahdanau import run_directory as rd


def test_length_buckets_match_sacrebleu_per_bucket():
    lengths = [1, 5, 6, 12, 20, 21, 30]
    sources = [" ".join(["x"] * n) for n in lengths]
    references = [f"the cat sat on mat number {i} today" for i in lengths]
    hypotheses = [
        "the cat sat on mat today",
        references[1],
        "a dog sat on a mat",
        references[3],
        "the cat",
        references[5],
        "the cat sat on the mat number 30",
    ]
    buckets = comparison.length_buckets(
        sources, hypotheses, references, width=5, count=5
    )
    expected_members = {1: [0, 1], 6: [2], 11: [3], 16: [4], 21: [5, 6]}
    assert [b["min_length"] for b in buckets] == list(expected_members)
    assert [b["max_length"] for b in buckets] == [5, 10, 15, 20, None]
    for bucket, members in zip(buckets, expected_members.values(), strict=True):
        assert bucket["num_sentences"] == len(members)
        expected = sacrebleu.corpus_bleu(
            [hypotheses[i] for i in members],
            [[references[i] for i in members]],
        ).score
        assert bucket["bleu"] == pytest.approx(expected)


def _write_events(path, wall_times_and_tags):
    with tf.io.TFRecordWriter(str(path)) as writer:
        for wall_time, tag in wall_times_and_tags:
            event = tf.compat.v1.Event(wall_time=wall_time)
            if tag:
                event.summary.value.add(tag=tag, simple_value=1.0)
            writer.write(event.SerializeToString())


def test_training_time_adds_up_sessions(tmp_path):
    directory = tmp_path / rd.TENSORBOARD / "train"
    directory.mkdir(parents=True)
    # A session with two epochs, one killed before its first epoch ended
    # and the resumed session with one more epoch.
    sessions = [
        [(100.0, None), (150.0, "epoch_loss"), (150.0, "epoch_acc"),
         (210.0, "epoch_loss"), (211.0, "epoch_learning_rate")],
        [(1000.0, None), (1040.0, "batch_loss")],
        [(2000.0, None), (2070.0, "epoch_loss")],
    ]  # fmt: skip
    for index, events in enumerate(sessions):
        _write_events(directory / f"events.out.tfevents.{index}.v2", events)
    # A session killed while writing leaves half a record behind (here
    # its last event, after its last epoch).
    first = directory / "events.out.tfevents.0.v2"
    first.write_bytes(first.read_bytes()[:-6])
    seconds, epochs = comparison.training_time(tmp_path)
    assert seconds == pytest.approx(110.0 + 70.0)
    assert epochs == 3


def test_training_time_needs_a_finished_epoch(tmp_path):
    (tmp_path / rd.TENSORBOARD / "train").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match="No finished epoch"):
        comparison.training_time(tmp_path)
