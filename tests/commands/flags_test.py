import argparse

import pytest

from keras_bahdanau import run_directory
from keras_bahdanau.commands import flags
from keras_bahdanau.decoding import SearchConfig
from keras_bahdanau.translator import Translator


def parse(*arguments):
    parser = argparse.ArgumentParser()
    parser.add_argument("run_dir")
    flags.add_search_arguments(parser)
    return parser.parse_args(["runs/x", *arguments])


def make_run_config(path, evaluation):
    path.mkdir()
    run_directory.write_config(path, {"evaluation": evaluation})
    return path


def test_the_search_flags_default_to_search_config_and_the_run(tmp_path):
    args = parse()
    old_run = make_run_config(tmp_path / "old", {"beam_size": 5})
    assert flags.search_config(args, old_run) == SearchConfig()
    assert (args.checkpoint, args.batch_size, args.errors) == (
        "best",
        32,
        "strict",
    )
    # The run's chosen length penalty, unless the flag sets one.
    run = make_run_config(tmp_path / "new", {"length_penalty": 0.4})
    assert flags.search_config(args, run).length_penalty == 0.4
    args = parse(*"--beam-size 3 --length-penalty 0.6 --max-length 9".split())
    assert flags.search_config(args, run, n_best=2) == SearchConfig(
        beam_size=3, n_best=2, length_penalty=0.6, max_length=9
    )
    args = parse("--length-penalty", "0")
    assert flags.search_config(args, run).length_penalty == 0.0
    with pytest.raises(ValueError, match="beam_size=0"):
        flags.search_config(parse("--beam-size", "0"), run)
    with pytest.raises(FileNotFoundError, match="not a run directory"):
        flags.search_config(parse(), tmp_path / "none")


@pytest.mark.parametrize(
    "arguments, expected",
    [((), "auto"), (("--max-source-length", "0"), None)],
)
def test_translator_from_args_maps_the_source_limit(
    monkeypatch, arguments, expected
):
    calls = []
    monkeypatch.setattr(
        Translator,
        "from_run_dir",
        lambda run_dir, **kwargs: calls.append((run_dir, kwargs)),
    )
    flags.translator_from_args(parse(*arguments))
    flags.translator_from_args(parse(*arguments), "runs/y")
    assert calls == [
        (run_dir, {"checkpoint": "best", "max_source_length": expected})
        for run_dir in ("runs/x", "runs/y")
    ]
