import pytest

from keras_bahdanau.decoding import DEFAULT_RELATIVE_MAX_LENGTH
from keras_bahdanau.decoding import SearchConfig


def test_defaults_and_hashing():
    config = SearchConfig()
    assert (config.beam_size, config.n_best) == (5, 1)
    assert config.length_penalty == config.coverage_penalty == 0.0
    assert config.max_length is config.relative_max_length is None
    assert not config.is_greedy
    assert SearchConfig(beam_size=1).is_greedy
    assert not SearchConfig(beam_size=1, coverage_penalty=0.1).is_greedy
    # A cache key: equal configs are one key; a list becomes a tuple.
    same = SearchConfig(relative_max_length=[1.5, 2])
    assert same == SearchConfig(relative_max_length=(1.5, 2))
    assert len({same, SearchConfig(relative_max_length=(1.5, 2))}) == 1
    with pytest.raises(AttributeError):
        config.beam_size = 3


def test_for_source_length_gives_a_static_max_length():
    a, b = DEFAULT_RELATIVE_MAX_LENGTH
    config = SearchConfig().for_source_length(16)
    assert config.max_length == int(a * 16 + b) == 42
    assert config.relative_max_length == (a, b)
    config = SearchConfig(relative_max_length=(0.5, 1))
    assert config.for_source_length(5).max_length == 3
    assert (
        SearchConfig(relative_max_length=(0, 0)).for_source_length(5).max_length
        == 1
    )  # At least the EOS.
    fixed = SearchConfig(max_length=7)
    assert fixed.for_source_length(100) is fixed


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(beam_size=0), "beam_size=0"),
        (dict(beam_size=True), "beam_size=True"),
        (dict(n_best=6), "n_best=6, beam_size=5"),
        (dict(length_penalty=-0.5), "length_penalty=-0.5"),
        (dict(coverage_penalty=float("inf")), "coverage_penalty=inf"),
        (dict(max_length=0), "max_length=0"),
        (dict(max_length=2.5), "max_length=2.5"),
        (dict(relative_max_length=(1,)), r"relative_max_length=\(1,\)"),
    ],
)
def test_bad_values_raise_on_construction(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SearchConfig(**kwargs)
