import argparse

import pytest

from keras_bahdanau.commands import flags
from keras_bahdanau.decoding import SearchConfig
from keras_bahdanau.translator import Translator

# A preset's own search, unlike `SearchConfig()` in every field.
OWN = SearchConfig(
    beam_size=3,
    length_penalty=0.4,
    coverage_penalty=0.1,
    max_length=7,
)


def parse(*arguments):
    parser = argparse.ArgumentParser()
    parser.add_argument("preset")
    flags.add_search_arguments(parser)
    return parser.parse_args(["runs/x", *arguments])


def test_without_search_flags_a_command_searches_as_its_preset():
    args = parse()
    assert flags.search_config(args, OWN) == OWN
    assert flags.search_config(args, OWN, n_best=2) == SearchConfig(
        beam_size=3,
        n_best=2,
        length_penalty=0.4,
        coverage_penalty=0.1,
        max_length=7,
    )
    assert (args.checkpoint, args.batch_size, args.errors) == (
        "best",
        32,
        "strict",
    )


def test_each_search_flag_replaces_its_field_only():
    args = parse(*"--beam-size 4 --length-penalty 0 --max-length 9".split())
    assert flags.search_config(args, OWN) == SearchConfig(
        beam_size=4, length_penalty=0.0, coverage_penalty=0.1, max_length=9
    )
    args = parse("--coverage-penalty", "0")
    assert flags.search_config(args, OWN).coverage_penalty == 0.0
    with pytest.raises(ValueError, match="beam_size=0"):
        flags.search_config(parse("--beam-size", "0"), OWN)


@pytest.mark.parametrize(
    "arguments, expected",
    [((), {}), (("--max-source-length", "0"), {"max_source_length": None})],
)
def test_translator_from_args_maps_the_source_limit(
    monkeypatch, arguments, expected
):
    calls = []
    monkeypatch.setattr(
        Translator,
        "from_preset",
        lambda preset, **kwargs: calls.append((preset, kwargs)),
    )
    flags.translator_from_args(parse(*arguments))
    flags.translator_from_args(parse(*arguments), "runs/y")
    assert calls == [
        (preset, {"checkpoint": "best", **expected})
        for preset in ("runs/x", "runs/y")
    ]
