import keras
import numpy as np
import pytest

from keras_bahdanau import RNNEncDec
from keras_bahdanau.training import compile_model
from tests.models.tasks import reversal_task
from tests.numpy_reference import sigmoid
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


def _split(kernel, n):
    """A packed `[z, r, candidate]` kernel or bias as its three blocks."""
    kernel = to_numpy(kernel)
    return kernel[..., :n], kernel[..., n : 2 * n], kernel[..., 2 * n :]


def _affine(layer, x):
    return x @ to_numpy(layer.kernel) + to_numpy(layer.bias)


def _cho_logits(model, source_ids, target_ids):
    """Cho et al. (2014), appendix A, written from the paper.

    Weights are read out of the layers and named as in the paper; the
    packed GRU kernels have columns `[z, r, candidate]`.
    """
    n = model.hidden_dim
    # A.1 encoder: h_t = z h_{t-1} + (1 - z) tanh(W e(x_t) + U [r h_{t-1}]).
    W_z, W_r, W = _split(model.encoder.cell.kernel, n)
    U_z, U_r, U = _split(model.encoder.cell.recurrent_kernel, n)
    b_z, b_r, b = _split(model.encoder.cell.bias, n)
    e_x = to_numpy(model.source_embedding.embeddings)[source_ids]
    h = np.zeros((len(source_ids), n))
    for t in range(source_ids.shape[1]):
        x = e_x[:, t]
        z = sigmoid(x @ W_z + h @ U_z + b_z)
        r = sigmoid(x @ W_r + h @ U_r + b_r)
        new_h = z * h + (1 - z) * np.tanh(x @ W + (r * h) @ U + b)
        real = source_ids[:, t : t + 1] != 0
        h = np.where(real, new_h, h)  # h_N: after the last real word
    c = np.tanh(_affine(model.context_projection, h))  # c = tanh(V h_N)
    h_dec = np.tanh(_affine(model.initial_state_projection, c))  # tanh(V' c)
    # A.2 decoder, `'` dropped from the names.
    cell = model.decoder.cell
    W_z, W_r, W = _split(cell.kernel, n)
    U_z, U_r, U = _split(cell.recurrent_kernel, n)
    C_z, C_r, C = _split(cell.context_kernel, n)
    b_z, b_r, b = _split(cell.bias, n)
    # The readout s' = O_h h' + O_y e(y_{t-1}) + O_c c: the maxout kernel's
    # rows are [O_h; O_y; O_c].
    readout = to_numpy(model.maxout.kernel)
    O_h, O_y, O_c = readout[:n], readout[n:-n], readout[-n:]
    b_o = to_numpy(model.maxout.bias)
    e_y = to_numpy(model.target_embedding.embeddings)[target_ids]
    logits = []
    for t in range(target_ids.shape[1]):
        e = e_y[:, t]
        z = sigmoid(e @ W_z + h_dec @ U_z + c @ C_z + b_z)
        r = sigmoid(e @ W_r + h_dec @ U_r + c @ C_r + b_r)
        candidate = np.tanh(e @ W + b + r * (h_dec @ U + c @ C))
        new_h_dec = z * h_dec + (1 - z) * candidate
        read = new_h_dec if model.readout_state == "current" else h_dec
        s_prime = read @ O_h + e @ O_y + c @ O_c + b_o
        # s_i = max(s'_{2i-1}, s'_{2i}): neighbouring pairs.
        s = np.maximum(s_prime[:, 0::2], s_prime[:, 1::2])
        logits.append(_affine(model.output_projection, s))
        h_dec = new_h_dec
    return np.stack(logits, 1)


@pytest.mark.parametrize("readout_state", ["current", "previous"])
def test_logits_match_equations(readout_state):
    model = _model(readout_state=readout_state)
    inputs = _batch()
    real = inputs["target_ids"] != 0
    np.testing.assert_allclose(
        to_numpy(model(inputs))[real],
        _cho_logits(model, **inputs)[real],
        atol=1e-4,
    )


def test_summary_is_the_state_after_the_last_real_word():
    # Trailing padding is masked: c, and so the logits, ignore it.
    model = _model()
    target = np.array([[2, 4, 5]])
    short = model({"source_ids": np.array([[5, 6, 7]]), "target_ids": target})
    padded = model(
        {"source_ids": np.array([[5, 6, 7, 0, 0]]), "target_ids": target}
    )
    np.testing.assert_allclose(to_numpy(padded), to_numpy(short), atol=1e-5)


def test_decode_step_equals_teacher_forcing():
    model = _model()
    inputs = _batch()
    logits = to_numpy(model(inputs))
    cache = model.encode(inputs["source_ids"])
    assert tuple(cache["context_terms"].shape) == (3, 3 * 5)
    for i in range(inputs["target_ids"].shape[1]):
        step_logits, attention, new_cache = model.decode_step(
            cache, inputs["target_ids"][:, i], i
        )
        np.testing.assert_allclose(
            to_numpy(step_logits), logits[:, i], atol=1e-4
        )
        np.testing.assert_array_equal(to_numpy(attention), 0.0)
        assert set(new_cache) == set(cache)
        cache = new_cache


def test_decode_step_under_mixed_bfloat16():
    # The searches call the cell outside `__call__`: its float32 kernels
    # must be cast to the bfloat16 activations.
    model = RNNEncDec(20, 17, **SIZES, dtype="mixed_bfloat16")
    cache = model.encode(_batch()["source_ids"])
    logits, _, new_cache = model.decode_step(cache, np.array([2, 2, 2]), 0)
    assert keras.backend.standardize_dtype(logits.dtype) == "float32"
    for key, value in new_cache.items():
        assert value.dtype == cache[key].dtype, key
    assert np.isfinite(to_numpy(logits)).all()


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
    # RNNSearch's test, more epochs. After 6, seeds and float rounding gave
    # 0.94 to 0.99; after 8, 0.962 to 0.98 (4 seeds, 3 backends).
    x, y, x_dev, y_dev = reversal_task(max_length=5)
    model = RNNEncDec(14, 14, embedding_dim=32, hidden_dim=128, maxout_dim=32,
                      initialization="glorot")  # fmt: skip
    compile_model(model, "adam", learning_rate=0.003)
    model.fit(x, y, batch_size=32, epochs=8, verbose=0)
    _, accuracy = model.evaluate(x_dev, y_dev, verbose=0)
    assert accuracy >= 0.95


def test_invalid_arguments():
    with pytest.raises(ValueError, match="hidden_dim=0"):
        RNNEncDec(10, 10, hidden_dim=0)
    with pytest.raises(ValueError, match="Unknown preset"):
        RNNEncDec.from_preset("rnnsearch_50")


@pytest.mark.parametrize("initialization", ["paper", "glorot"])
def test_weights_start_independent(initialization):
    # V (summary) and V' (h'_0) are both (n, n), W' and C of the decoder
    # come from one initializer argument: one shared initializer stream
    # used to give them the same values.
    model = RNNEncDec(30, 30, embedding_dim=8, hidden_dim=8, maxout_dim=8,
                      initialization=initialization)  # fmt: skip
    pairs = [
        (
            model.context_projection.kernel,
            model.initial_state_projection.kernel,
        ),
        (model.source_embedding.embeddings, model.target_embedding.embeddings),
        (model.encoder.cell.kernel, model.decoder.cell.kernel),
        (model.decoder.cell.kernel, model.decoder.cell.context_kernel),
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
