"""`search(model, source_ids, config)`: the search a `SearchConfig` asks for."""

from keras import ops

from keras_bahdanau.decoding.beam_search import beam_search
from keras_bahdanau.decoding.greedy_search import greedy_search


def search(model, source_ids, config):
    """Greedy search if `config.is_greedy`, else beam search.

    Args:
        model: a model following the decoding protocol (`encode`,
            `decode_step`), e.g. `keras_bahdanau.models.RNNSearch`.
        source_ids: int `(batch, Tx)` token ids, 0 = padding; `Tx` must be
            static without `config.max_length` (see
            `SearchConfig.for_source_length`).
        config: a `SearchConfig`.

    Returns:
        A `SearchResult` (`n_best = 1` for greedy search).
    """
    config = config.for_source_length(ops.shape(source_ids)[1])
    if config.is_greedy:
        return greedy_search(
            model, source_ids, config.max_length, config.relative_max_length
        )
    return beam_search(model, source_ids, config)
