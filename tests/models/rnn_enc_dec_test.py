import keras
import numpy as np
import pytest

from keras_bahdanau import RNNEncDec
from keras_bahdanau.training import compile_model
from tests.models.tasks import reversal_task
from tests.numpy_reference import maxout
from tests.numpy_reference import paper_gru_step
from tests.numpy_reference import paper_weights_from_keras_gru
from tests.numpy_reference import run_gru
from tests.numpy_reference import to_numpy

SIZES = dict(embedding_dim=6, hidden_dim=5, maxout_dim=4)


def _model(**kwargs):
    model = RNNEncDec(20, 17, **{**SIZES, **kwargs})
    rng = np.random.default_rng(0)
    for weight in model.weights:
        weight.assign(rng.normal(0, 0.4, weight.shape).astype("float32"))
    return model


def _batch():
    source = np.array([[5, 6, 7, 8], [10, 11, 0, 0], [12, 0, 0, 0]])
    target = np.array([[2, 4, 5, 6], [2, 7, 8, 0], [2, 9, 0, 0]])
    return {"source_ids": source, "target_ids": target}


def _dense(layer, x, activation=np.tanh):
    return activation(x @ to_numpy(layer.kernel) + to_numpy(layer.bias))


def _numpy_logits(model, source_ids, target_ids):
    """Cho et al. (2014) with the fixed context c at every decoder step."""
    x = to_numpy(model.source_embedding.embeddings)[source_ids]
    encoder = paper_weights_from_keras_gru(model.encoder.cell)
    _, last = run_gru(x, source_ids != 0, encoder)
    context = _dense(model.context_projection, last)  # c = tanh(V h_Tx)
    state = _dense(model.initial_state_projection, context)  # s_0
    decoder = paper_weights_from_keras_gru(model.decoder.cell)
    E = to_numpy(model.target_embedding.embeddings)
    logits = []
    for i in range(target_ids.shape[1]):
        y_prev = E[target_ids[:, i]]
        new_state = paper_gru_step(
            np.concatenate([y_prev, context], -1), state, **decoder
        )
        read = new_state if model.readout_state == "current" else state
        t = maxout(
            np.concatenate([read, y_prev, context], -1),
            to_numpy(model.maxout.kernel),
            to_numpy(model.maxout.bias),
        )
        logits.append(_dense(model.output_projection, t, lambda a: a))
        state = new_state
    return np.stack(logits, 1)


@pytest.mark.parametrize("readout_state", ["current", "previous"])
def test_logits_match_equations(readout_state):
    model = _model(readout_state=readout_state)
    inputs = _batch()
    real = inputs["target_ids"] != 0
    np.testing.assert_allclose(
        to_numpy(model(inputs))[real],
        _numpy_logits(model, **inputs)[real],
        atol=1e-4,
    )


def test_decode_step_equals_teacher_forcing():
    model = _model()
    inputs = _batch()
    logits = to_numpy(model(inputs))
    cache = model.encode(inputs["source_ids"])
    for i in range(inputs["target_ids"].shape[1]):
        step_logits, attention, cache = model.decode_step(
            cache, inputs["target_ids"][:, i], i
        )
        np.testing.assert_allclose(
            to_numpy(step_logits), logits[:, i], atol=1e-4
        )
        np.testing.assert_array_equal(to_numpy(attention), 0.0)


def test_keras_round_trip(tmp_path):
    model = _model()
    model.save(tmp_path / "encdec.keras")
    loaded = keras.saving.load_model(tmp_path / "encdec.keras")
    assert isinstance(loaded, RNNEncDec)
    inputs = _batch()
    np.testing.assert_allclose(
        to_numpy(loaded(inputs)), to_numpy(model(inputs)), atol=1e-6
    )


def test_learns_to_reverse():
    # One fixed vector must hold the whole source: shorter sentences than
    # RNNSearch's test, more epochs.
    x, y, x_dev, y_dev = reversal_task(max_length=5)
    model = RNNEncDec(14, 14, embedding_dim=32, hidden_dim=128, maxout_dim=32,
                      initialization="glorot")  # fmt: skip
    compile_model(model, "adam", learning_rate=0.003)
    model.fit(x, y, batch_size=32, epochs=6, verbose=0)
    _, accuracy = model.evaluate(x_dev, y_dev, verbose=0)
    assert accuracy >= 0.95


def test_invalid_arguments():
    with pytest.raises(ValueError, match="hidden_dim=0"):
        RNNEncDec(10, 10, hidden_dim=0)
    with pytest.raises(ValueError, match="Unknown preset"):
        RNNEncDec.from_preset("rnnsearch_50")


@pytest.mark.parametrize("initialization", ["paper", "glorot"])
def test_weights_start_independent(initialization):
    # V (summary) and W_s (s_0) are both (n, n): one shared initializer
    # stream used to give them the same values.
    model = RNNEncDec(30, 30, embedding_dim=8, hidden_dim=8, maxout_dim=8,
                      initialization=initialization)  # fmt: skip
    pairs = [
        (
            model.context_projection.kernel,
            model.initial_state_projection.kernel,
        ),
        (model.source_embedding.embeddings, model.target_embedding.embeddings),
        (model.encoder.cell.kernel, model.decoder.cell.kernel),
    ]
    for first, second in pairs:
        a, b = to_numpy(first).ravel()[:64], to_numpy(second).ravel()[:64]
        assert abs(np.corrcoef(a, b)[0, 1]) < 0.9, (first.path, second.path)


def test_dtype_and_regularisation_survive_the_round_trip(tmp_path):
    model = RNNEncDec(20, 17, embedding_dim=4, hidden_dim=5, maxout_dim=4,
                      dtype="mixed_bfloat16", tie_embeddings=True,
                      word_dropout=0.2, hidden_dropout=0.1)  # fmt: skip
    config = model.get_config()
    assert config["tie_embeddings"] and config["word_dropout"] == 0.2
    rebuilt = RNNEncDec.from_config(config)
    assert rebuilt.decoder.dtype_policy.name == "mixed_bfloat16"
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras", compile=False)
    assert loaded.encoder.dtype_policy.name == "mixed_bfloat16"
    assert loaded.get_config() == config
