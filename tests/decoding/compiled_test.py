import numpy as np
import pytest
from keras import ops

from keras_bahdanau.decoding import SearchConfig
from keras_bahdanau.decoding import compile_search
from keras_bahdanau.decoding import compiled
from keras_bahdanau.decoding import search
from keras_bahdanau.models import RNNEncDec
from keras_bahdanau.models import RNNSearch

SOURCES = np.array([[4, 6, 8, 3], [7, 5, 0, 0]], "int32")
# On torch `compile_search` runs `search` itself (eagerly, without
# autograd): a comparison would compare a function with itself. `search`
# is checked against NumPy references in search_test.py.
EAGER_ON_TORCH = "compile_search runs `search` itself on torch"


def tiny_model(seed, architecture=RNNSearch):
    model = architecture(
        10,
        10,
        embedding_dim=4,
        hidden_dim=4,
        maxout_dim=2,
        initialization="glorot",
    )
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        variable.assign(rng.normal(0.0, 0.5, variable.shape).astype("float32"))
    return model


def assert_close(result, expected, atol):
    """Every field of a compiled `SearchResult` against the eager one."""
    for field, value in expected._asdict().items():
        np.testing.assert_allclose(
            getattr(result, field),
            ops.convert_to_numpy(value),
            atol=atol,
            err_msg=field,
        )


def test_compiled_search_equals_search_and_is_shared(backend):
    config = SearchConfig(beam_size=2, n_best=2, relative_max_length=(1.0, 1))
    first, second = tiny_model(0), tiny_model(1)
    before = len(compiled._compiled_searches)
    results = [compile_search(m, config)(SOURCES) for m in (first, second)]
    for result in results:
        # Without max_length: floor(1.0 * 4 + 1) = 5 for 4 columns.
        assert result.token_ids.shape == (2, 2, 5)
    assert not np.array_equal(results[0].scores, results[1].scores)
    if backend == "torch":
        pytest.skip(EAGER_ON_TORCH)
    # One program for both models: the weights are its arguments.
    assert len(compiled._compiled_searches) == before + 1
    for model, result in zip((first, second), results, strict=True):
        assert_close(result, search(model, SOURCES, config), atol=1e-6)


@pytest.mark.parametrize(
    "architecture, config",
    [
        (RNNEncDec, SearchConfig(beam_size=3, max_length=6)),
        (
            RNNSearch,
            SearchConfig(
                beam_size=3,
                max_length=6,
                length_penalty=0.6,
                coverage_penalty=0.2,
            ),
        ),
        (RNNSearch, SearchConfig(beam_size=1, max_length=6)),
    ],
)
def test_compiled_search_equals_search_per_model_and_config(
    architecture, config, backend
):
    # The compiled program (XLA on JAX and TensorFlow) against the same
    # search run op by op; Pervasive Attention's is in its model test.
    if backend == "torch":
        pytest.skip(EAGER_ON_TORCH)
    model = tiny_model(2, architecture)
    result = compile_search(model, config)(SOURCES)
    assert_close(result, search(model, SOURCES, config), atol=1e-5)
