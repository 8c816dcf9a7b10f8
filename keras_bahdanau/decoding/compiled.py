"""`compile_search`: the searches compiled once per shape, and their cache."""

import contextlib
import json
import types

import keras
from keras import ops

from keras_bahdanau.decoding.hypotheses import SearchResult
from keras_bahdanau.decoding.search import search

# Compiled searches by (architecture, SearchConfig), see `compile_search`.
_compiled_searches = {}


def compile_search(model, config):
    """Returns a compiled search: int32 source ids -> `SearchResult`.

    On TensorFlow the search is an XLA-compiled `tf.function`
    (`jit_compile=True`), on JAX it is `jax.jit`-compiled, with the weights
    as arguments (a `keras.StatelessScope`), not constants: compiled once
    per input shape and cached by (architecture, `SearchConfig`), a program
    serves all models of the same architecture (e.g. the best and last
    checkpoints of a run). On torch the search runs eagerly under
    `torch.no_grad()`.

    Args:
        model: a model following the decoding protocol.
        config: a `SearchConfig`. Without `max_length`, each call's static
            maximum length comes from the width of its source ids (see
            `SearchConfig.for_source_length`): one program per width.

    Returns:
        A function of a NumPy int32 `(batch, Tx)` array returning a
        `SearchResult` of NumPy arrays.

    Example:

    ```python
    run = compile_search(model, SearchConfig(beam_size=5, max_length=50))
    result = run(np.array([[5, 6, 7, 0]], "int32"))
    result.token_ids.shape  # (1, 1, 50)
    ```
    """
    compiled = keras.backend.backend() in ("jax", "tensorflow")
    architecture = _architecture(model) if compiled else None

    def run(source_ids):
        source_ids = ops.convert_to_tensor(source_ids, "int32")
        static = config.for_source_length(ops.shape(source_ids)[1])
        if compiled:
            result = _shared_search(architecture, static)(model, source_ids)
        else:  # Eager, and on torch without recording an autograd graph.
            with _no_grad():
                result = search(model, source_ids, static)
        return SearchResult(*(ops.convert_to_numpy(field) for field in result))

    return run


def _no_grad():
    if keras.backend.backend() != "torch":
        return contextlib.nullcontext()
    import torch  # Only on the torch backend.

    return torch.no_grad()


def _architecture(model):
    """What a compiled search depends on besides the weights' values."""
    # Not the name: `rnn_search_1` computes what `rnn_search` does.
    config = {k: v for k, v in model.get_config().items() if k != "name"}
    return (
        type(model).__qualname__,
        json.dumps(config, sort_keys=True, default=str),
        tuple(layer.dtype_policy.name for layer in model.layers),
        # Not the paths: they hold per-instance names like `forward_gru_1`.
        tuple((tuple(v.shape), v.dtype) for v in model.variables),
    )


def _shared_search(architecture, config):
    """The cached program of `(architecture, config)`, built if new."""
    key = (architecture, config)
    if key not in _compiled_searches:
        # The model whose variables the values stand for, set per call (a
        # new input shape traces again, with that call's model).
        traced = types.SimpleNamespace(model=None)

        def stateless_search(values, source_ids):
            variables = traced.model.variables
            with keras.StatelessScope(
                state_mapping=list(zip(variables, values, strict=True))
            ):
                return search(traced.model, source_ids, config)

        if keras.backend.backend() == "jax":
            import jax

            stateless_search = jax.jit(stateless_search)
        else:
            import tensorflow as tf

            # XLA: beam 5 at batch 64 ran 1.3x faster than the plain
            # graph on a CPU (benchmarks/README.md). A SavedModel's search
            # is traced by `export`, without XLA, for any TF Serving build.
            stateless_search = tf.function(stateless_search, jit_compile=True)

        def run(model, source_ids):
            traced.model = model
            try:
                values = [variable.value for variable in model.variables]
                return stateless_search(values, source_ids)
            finally:
                traced.model = None  # Keeps no model alive.

        _compiled_searches[key] = run
    return _compiled_searches[key]
