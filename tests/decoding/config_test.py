import dataclasses

import pytest
from keras import ops

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
        (dict(beam_size=2.0), "beam_size=2.0"),
        (dict(n_best=6), "n_best=6, beam_size=5"),
        (dict(n_best=0), "n_best=0"),
        (dict(length_penalty=-0.5), "length_penalty=-0.5"),
        (dict(coverage_penalty=-1), "coverage_penalty=-1"),
        (dict(coverage_penalty=float("inf")), "coverage_penalty=inf"),
        (dict(coverage_penalty=float("nan")), "coverage_penalty=nan"),
        (dict(max_length=0), "max_length=0"),
        (dict(max_length=2.5), "max_length=2.5"),
        (dict(relative_max_length=(1,)), r"relative_max_length=\(1,\)"),
        (dict(relative_max_length=1.5), "relative_max_length=1.5"),
        (dict(relative_max_length=(-1, 2)), r"relative_max_length=\(-1, 2\)"),
    ],
)
def test_bad_values_raise_on_construction(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SearchConfig(**kwargs)


def test_a_serving_request_may_set_tensor_options(backend):
    """A request's options are tensors, checked in the serving graph."""

    def request_config(beam_size, n_best, length_penalty):
        request = dict(
            beam_size=beam_size, n_best=n_best, length_penalty=length_penalty
        )
        config = dataclasses.replace(SearchConfig(max_length=7), **request)
        assert config.beam_size is beam_size
        assert config.length_penalty is length_penalty
        # The Python numbers are still checked.
        with pytest.raises(ValueError, match="coverage_penalty=-1"):
            SearchConfig(coverage_penalty=-1, **request)
        return config.length_penalty

    values = [
        ops.convert_to_tensor(3, "int32"),
        ops.convert_to_tensor(2, "int32"),
        ops.convert_to_tensor(0.5, "float32"),
    ]
    request_config(*values)
    if backend == "tensorflow":  # Graph tensors, as in the SavedModel.
        import tensorflow as tf

        tf.function(request_config)(*values)


def test_to_dict_is_json_and_from_dict_reads_it_back():
    import json

    config = SearchConfig(
        beam_size=3, n_best=2, length_penalty=0.6, relative_max_length=(1, 4)
    )
    fields = json.loads(json.dumps(config.to_dict()))
    assert fields == {
        "beam_size": 3,
        "n_best": 2,
        "length_penalty": 0.6,
        "coverage_penalty": 0.0,
        "max_length": None,
        "relative_max_length": [1, 4],
    }
    assert SearchConfig.from_dict(fields) == config
    assert SearchConfig.from_dict({"beam_size": 2}) == SearchConfig(beam_size=2)
    with pytest.raises(ValueError, match="beam_width"):
        SearchConfig.from_dict({"beam_width": 2})
    with pytest.raises(ValueError, match="n_best"):
        SearchConfig.from_dict({"beam_size": 2, "n_best": 3})
