import argparse

import pytest

from keras_bahdanau.commands import flags
from keras_bahdanau.decoding import SearchConfig
from keras_bahdanau.translator import Translator


def parse(*arguments):
    parser = argparse.ArgumentParser()
    parser.add_argument("run_dir")
    flags.add_search_arguments(parser)
    return parser.parse_args(["runs/x", *arguments])


def test_the_search_flags_default_to_search_config():
    args = parse()
    assert flags.search_config(args) == SearchConfig()
    assert (args.checkpoint, args.batch_size, args.errors) == (
        "best",
        32,
        "strict",
    )
    args = parse(*"--beam-size 3 --length-penalty 0.6 --max-length 9".split())
    assert flags.search_config(args, n_best=2) == SearchConfig(
        beam_size=3, n_best=2, length_penalty=0.6, max_length=9
    )
    with pytest.raises(ValueError, match="beam_size=0"):
        flags.search_config(parse("--beam-size", "0"))


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
