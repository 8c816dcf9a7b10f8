import contextlib
import importlib.util
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from keras_bahdanau import RNNSearch
from keras_bahdanau.training import compile_model
from tests.models.tasks import reversal_task
from tests.numpy_reference import rnnsearch_encoder
from tests.numpy_reference import rnnsearch_logits
from tests.numpy_reference import to_numpy

SIZES = dict(embedding_dim=6, hidden_dim=5, maxout_dim=4)


def _model(**kwargs):
    model = RNNSearch(20, 17, **{**SIZES, **kwargs})
    # Paper initialization makes alignments uniform and logits tiny; random
    # weights exercise every term of the equations.
    rng = np.random.default_rng(0)
    for weight in model.weights:
        weight.assign(rng.normal(0, 0.4, weight.shape).astype("float32"))
    return model


def _batch():
    source = np.array([[5, 6, 7, 8, 9], [10, 11, 0, 0, 0], [12, 0, 0, 0, 0]])
    target = np.array([[2, 4, 5, 6], [2, 7, 8, 0], [2, 9, 0, 0]])
    return {"source_ids": source, "target_ids": target}


def test_encoder_matches_a21_with_masks():
    model = _model()
    inputs = _batch()
    cache = model.encode(inputs["source_ids"])
    annotations, s0, mask = rnnsearch_encoder(model, inputs["source_ids"])
    # The values are [h_j; C h_j]: the annotations first.
    got = to_numpy(cache["values"])[..., : annotations.shape[-1]]
    np.testing.assert_allclose(got[mask], annotations[mask], atol=1e-5)
    np.testing.assert_allclose(to_numpy(cache["state"]), s0, atol=1e-5)


@pytest.mark.parametrize("readout_state", ["previous", "current"])
def test_logits_match_appendix_a(readout_state):
    model = _model(readout_state=readout_state)
    inputs = _batch()
    expected, _ = rnnsearch_logits(model, **inputs)
    logits = model(inputs)
    assert keras.backend.standardize_dtype(logits.dtype) == "float32"
    target_mask = inputs["target_ids"] != 0
    np.testing.assert_allclose(
        to_numpy(logits)[target_mask], expected[target_mask], atol=2e-4
    )


def test_decode_step_equals_teacher_forcing_and_attention_is_a_distribution():
    model = _model()
    inputs = _batch()
    logits = to_numpy(model(inputs))
    _, expected_alphas = rnnsearch_logits(model, **inputs)
    cache = model.encode(inputs["source_ids"])
    source_mask = inputs["source_ids"] != 0
    for i in range(inputs["target_ids"].shape[1]):
        step_logits, attention, cache = model.decode_step(
            cache, inputs["target_ids"][:, i], i
        )
        attention = to_numpy(attention)
        np.testing.assert_allclose(
            to_numpy(step_logits), logits[:, i], atol=1e-4
        )
        np.testing.assert_allclose(attention, expected_alphas[:, i], atol=1e-5)
        np.testing.assert_allclose(attention.sum(-1), 1.0, atol=1e-5)
        assert np.all(attention[~source_mask] == 0.0)


def test_padding_and_batch_mates_do_not_change_logits():
    model = _model()
    inputs = _batch()
    batched = to_numpy(model(inputs))
    for row in range(3):
        source = inputs["source_ids"][row : row + 1]
        target = inputs["target_ids"][row : row + 1]
        source = source[:, : max(1, int((source != 0).sum()))]
        alone = to_numpy(model({"source_ids": source, "target_ids": target}))
        padded = to_numpy(
            model(
                {
                    "source_ids": np.pad(source, ((0, 0), (0, 4))),
                    "target_ids": np.pad(target, ((0, 0), (0, 3))),
                }
            )
        )
        real = target[0] != 0
        np.testing.assert_allclose(
            alone[0][real], batched[row][real], atol=1e-5
        )
        np.testing.assert_allclose(
            padded[0][: len(real)][real], alone[0][real], atol=1e-5
        )


def test_logits_are_causal_in_the_target():
    model = _model()
    inputs = _batch()
    changed = {
        "source_ids": inputs["source_ids"],
        "target_ids": inputs["target_ids"].copy(),
    }
    changed["target_ids"][:, 2:] = 13
    before, after = to_numpy(model(inputs)), to_numpy(model(changed))
    np.testing.assert_allclose(before[:, :2], after[:, :2], atol=1e-6)
    assert np.abs(before[:, 2:] - after[:, 2:]).max() > 1e-3


def test_paper_initialization():
    model = RNNSearch(20, 17, **SIZES)
    attention = model.decoder.cell.attention
    np.testing.assert_array_equal(to_numpy(attention.score_vector), 0.0)
    for recurrent in (
        model.encoder.forward_layer.cell.recurrent_kernel,
        model.encoder.backward_layer.cell.recurrent_kernel,
        model.decoder.cell.recurrent_kernel,
    ):
        for block in np.split(to_numpy(recurrent), 3, axis=1):  # U_z, U_r, U
            np.testing.assert_allclose(block.T @ block, np.eye(5), atol=1e-5)
    assert abs(to_numpy(model.maxout.kernel).std() - 0.01) < 0.005


def test_keras_round_trip_without_custom_objects(tmp_path):
    model = _model(readout_state="current", attention_dim=3)
    path = tmp_path / "rnnsearch.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded, RNNSearch)
    assert loaded.get_config() == model.get_config()
    inputs = _batch()
    np.testing.assert_allclose(
        to_numpy(loaded(inputs)), to_numpy(model(inputs)), atol=1e-6
    )


CROSS_BACKEND_SCRIPT = """
import sys, numpy as np, keras
import keras_bahdanau.models  # registers the classes the file names
model = keras.saving.load_model(sys.argv[1])
x = dict(np.load(sys.argv[2]))
np.save(sys.argv[3], keras.ops.convert_to_numpy(model(x)))
"""


@pytest.mark.parametrize("other", ["jax", "tensorflow", "torch"])
def test_file_saved_here_loads_on_other_backends(tmp_path, other):
    if other == keras.backend.backend():
        pytest.skip("same backend: covered by the in-process round trip")
    if importlib.util.find_spec(other) is None:
        pytest.skip(f"{other} is not installed (the `all` extra has it)")
    model = _model()
    inputs = _batch()
    model.save(tmp_path / "m.keras")
    np.savez(tmp_path / "x.npz", **inputs)
    env = {**os.environ, "KERAS_BACKEND": other}
    subprocess.run(
        [sys.executable, "-c", CROSS_BACKEND_SCRIPT, str(tmp_path / "m.keras"),
         str(tmp_path / "x.npz"), str(tmp_path / "y.npy")],
        check=True, env=env, capture_output=True, timeout=300,
    )  # fmt: skip
    np.testing.assert_allclose(
        np.load(tmp_path / "y.npy"), to_numpy(model(inputs)), atol=1e-5
    )


def test_learns_to_reverse():
    x, y, x_dev, y_dev = reversal_task()
    model = RNNSearch(14, 14, embedding_dim=32, hidden_dim=64, maxout_dim=32,
                      initialization="glorot")  # fmt: skip
    # At a learning rate of 0.01, runs that differed only in float rounding
    # (the order of a sum) ended anywhere from 0.87 to 1.0; at 0.005 for 3
    # epochs, 0.998 to 1.0 (4 seeds, 3 backends).
    compile_model(model, "adam", learning_rate=0.005)
    model.fit(x, y, batch_size=32, epochs=3, verbose=0)
    _, accuracy = model.evaluate(x_dev, y_dev, verbose=0)
    assert accuracy >= 0.95


def test_presets():
    model = RNNSearch.from_preset(
        "rnnsearch_tiny", source_vocabulary_size=50, target_vocabulary_size=60
    )
    assert model.hidden_dim == 256 and model.target_vocabulary_size == 60
    config = RNNSearch.presets["rnnsearch_50"]
    assert (config["embedding_dim"], config["hidden_dim"]) == (620, 1000)
    with pytest.raises(ValueError, match="Unknown preset.*rnnsearch_50"):
        RNNSearch.from_preset("rnnsearch_100")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"hidden_dim": 0}, "hidden_dim=0"),
        ({"embedding_dim": -3}, "embedding_dim=-3"),
        ({"maxout_dim": 2.5}, "maxout_dim=2.5"),
        ({"source_vocabulary_size": 4}, "source_vocabulary_size=4"),
        ({"readout_state": "next"}, "readout_state='next'"),
        ({"dropout": 1.0}, "dropout=1.0"),
        ({"initialization": "xavier"}, "initialization='xavier'"),
    ],
)
def test_invalid_arguments(kwargs, message):
    args = {"source_vocabulary_size": 10, "target_vocabulary_size": 10}
    with pytest.raises(ValueError, match=message):
        RNNSearch(**{**args, **SIZES, **kwargs})


@pytest.mark.parametrize(
    "inputs, message",
    [
        ({"source_ids": np.ones((1, 3)), "target_ids": np.ones((1, 2), int)},
         "integer token ids"),
        ({"source_ids": np.ones(3, int), "target_ids": np.ones((1, 2), int)},
         "shape \\(batch, length\\)"),
        ({"source_ids": np.ones((1, 3), int)}, "target_ids"),
    ],
)  # fmt: skip
def test_bad_inputs_raise_clear_errors(inputs, message):
    with pytest.raises(ValueError, match=message):
        _model()(inputs)


def _leading_correlation(a, b):
    """Correlation of the first 64 values of two weights (same stream: 1)."""
    a, b = to_numpy(a).ravel()[:64], to_numpy(b).ravel()[:64]
    return abs(np.corrcoef(a, b)[0, 1])


@pytest.mark.parametrize("initialization", ["paper", "glorot"])
def test_every_weight_gets_its_own_random_draw(initialization):
    # Square sizes, so that weights built from one shared initializer
    # stream would start with the same values (correlation 1).
    model = RNNSearch(
        30, 30, embedding_dim=8, hidden_dim=8, maxout_dim=8,
        initialization=initialization,
    )  # fmt: skip
    cell = model.decoder.cell
    weights = {
        "E-bar": model.source_embedding.embeddings,
        "E": model.target_embedding.embeddings,
        "W_s": model.initial_state_projection.kernel,
        "W": cell.kernel,
        "C": cell.context_kernel,
        "W_a": cell.attention.query_kernel,
        "U_a": cell.attention.key_kernel,
        "maxout": model.maxout.kernel,
        "W_o": model.output_projection.kernel,
        "encoder W->": model.encoder.forward_layer.cell.kernel,
        "encoder W<-": model.encoder.backward_layer.cell.kernel,
    }
    names = sorted(weights)
    for i, first in enumerate(names):
        for second in names[i + 1 :]:
            correlation = _leading_correlation(weights[first], weights[second])
            assert correlation < 0.9, (first, second, correlation)


@pytest.mark.parametrize("dtype", ["mixed_bfloat16", "float32"])
def test_dtype_survives_the_config_round_trip(tmp_path, dtype):
    model = RNNSearch(20, 17, **SIZES, dtype=dtype)
    assert model.encoder.dtype_policy.name == dtype
    rebuilt = RNNSearch.from_config(model.get_config())
    assert rebuilt.encoder.dtype_policy.name == dtype
    assert rebuilt.maxout.dtype_policy.name == dtype
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras", compile=False)
    assert loaded.decoder.dtype_policy.name == dtype
    # Logits stay float32 whatever the policy.
    logits = loaded(_batch())
    assert keras.backend.standardize_dtype(logits.dtype) == "float32"


REGULARIZED = dict(
    dropout=0.3,
    embedding_dropout=0.3,
    word_dropout=0.3,
    hidden_dropout=0.3,
    recurrent_dropout=0.3,
)


def test_dropout_acts_in_training_only():
    model = _model(**REGULARIZED)
    inputs = _batch()
    expected, _ = rnnsearch_logits(model, **inputs)  # the equations, no dropout
    target_mask = inputs["target_ids"] != 0
    for _ in range(2):  # inference is deterministic and dropout-free
        logits = to_numpy(model(inputs, training=False))
        np.testing.assert_allclose(
            logits[target_mask], expected[target_mask], atol=2e-4
        )
    first = to_numpy(model(inputs, training=True))
    second = to_numpy(model(inputs, training=True))
    assert np.abs(first - logits).max() > 1e-3
    assert np.abs(first - second).max() > 1e-3  # a new mask each call


def test_word_dropout_drops_whole_tokens():
    model = _model(word_dropout=0.5)
    ids = np.arange(4, 20)[None, :]  # (1, 16)
    embedded = to_numpy(model.source_embedding(ids))
    dropped = to_numpy(model.word_dropout(embedded, training=True))
    zero = np.all(dropped == 0.0, axis=-1)  # (1, 16): whole tokens
    assert 0 < zero.sum() < 16
    kept = ~zero
    # Kept tokens are scaled by 1 / (1 - p), all their units alike.
    np.testing.assert_allclose(dropped[kept], 2.0 * embedded[kept], rtol=1e-6)
    np.testing.assert_array_equal(
        to_numpy(model.word_dropout(embedded, training=False)), embedded
    )


def test_tied_embeddings_use_e_as_the_output_projection(tmp_path):
    model = RNNSearch(20, 17, embedding_dim=4, hidden_dim=5, maxout_dim=4,
                      tie_embeddings=True)  # fmt: skip
    assert model.output_projection is None
    names = [weight.path for weight in model.weights]
    assert not any("output_projection" in name for name in names)
    rng = np.random.default_rng(1)
    for weight in model.weights:
        weight.assign(rng.normal(0, 0.4, weight.shape).astype("float32"))
    inputs = _batch()
    # W_o = E^T (plus a bias): the logits of the paper's equations with it.
    embeddings = to_numpy(model.target_embedding.embeddings)
    bias = to_numpy(model.target_embedding.reverse_bias)
    features = to_numpy(
        model.maxout(
            keras.ops.ones((1, 5 + 4 + 10))  # [s; E y; c] of ones
        )
    )
    np.testing.assert_allclose(
        to_numpy(model.target_embedding(features, reverse=True)),
        features @ embeddings.T + bias,
        atol=1e-5,
    )
    logits = to_numpy(model(inputs))
    model.save(tmp_path / "tied.keras")
    loaded = keras.saving.load_model(tmp_path / "tied.keras", compile=False)
    np.testing.assert_allclose(to_numpy(loaded(inputs)), logits, atol=1e-6)
    with pytest.raises(ValueError, match="maxout_dim` must equal"):
        RNNSearch(20, 17, embedding_dim=4, hidden_dim=5, maxout_dim=3,
                  tie_embeddings=True)  # fmt: skip


def test_regularised_model_learns_to_reverse():
    x, y, x_dev, y_dev = reversal_task()
    model = RNNSearch(14, 14, embedding_dim=32, hidden_dim=64, maxout_dim=32,
                      initialization="glorot", tie_embeddings=True,
                      dropout=0.1, embedding_dropout=0.1, word_dropout=0.05,
                      hidden_dropout=0.1)  # fmt: skip
    compile_model(model, "adam", learning_rate=0.01, label_smoothing=0.1)
    model.fit(x, y, batch_size=32, epochs=3, verbose=0)
    _, accuracy = model.evaluate(x_dev, y_dev, verbose=0)
    assert accuracy >= 0.9


def test_mixed_bfloat16_model_decodes():
    """The searches call the cell outside Keras's autocast: it must cast."""
    from keras_bahdanau.decoding import SearchConfig
    from keras_bahdanau.decoding import beam_search
    from keras_bahdanau.decoding import greedy_search

    model = RNNSearch(20, 17, **SIZES, dtype="mixed_bfloat16")
    inputs = _batch()
    logits = to_numpy(model(inputs))
    cache = model.encode(inputs["source_ids"])
    scale = np.abs(logits).max()
    for i in range(inputs["target_ids"].shape[1]):
        step_logits, _, cache = model.decode_step(
            cache, inputs["target_ids"][:, i], i
        )
        step_logits = to_numpy(step_logits)
        assert step_logits.dtype == np.float32
        # bfloat16 keeps 8 bits of mantissa: 2^-8 of the scale, and more.
        np.testing.assert_allclose(
            step_logits, logits[:, i], atol=0.05 * scale + 1e-3
        )
    source = inputs["source_ids"]
    greedy = greedy_search(model, source, max_length=6)
    beam = beam_search(model, source, SearchConfig(beam_size=2, max_length=6))
    for result in (greedy, beam):
        assert np.all(np.isfinite(to_numpy(result.scores)))
        assert to_numpy(result.token_ids).shape[0] == 3


def test_the_searches_join_the_decoder_kernels_once(monkeypatch):
    # `decoding_scope`: [W_a, U_z, U_r] and U joined once per search, not
    # at every step; the same hypotheses as joined at every step.
    from keras_bahdanau.decoding import SearchConfig
    from keras_bahdanau.decoding import beam_search
    from keras_bahdanau.decoding import greedy_search

    model = _model()
    source = _batch()["source_ids"]
    cell = model.decoder.cell
    seen, joined = [], cell.recurrent_kernels

    def recurrent_kernels():
        seen.append(cell._split_kernels is not None)
        return joined()

    monkeypatch.setattr(cell, "recurrent_kernels", recurrent_kernels)

    def searches():
        return [
            greedy_search(model, source, max_length=6),
            beam_search(model, source, SearchConfig(beam_size=2, max_length=6)),
        ]

    once = searches()
    # Each search joins once on entering the scope; its steps read that.
    assert seen.count(False) == 2 and seen.count(True) >= 2
    assert cell._split_kernels is None  # not kept past a search
    monkeypatch.setattr(
        RNNSearch, "decoding_scope", lambda self: contextlib.nullcontext()
    )
    every_step = searches()
    for a, b in zip(once, every_step, strict=True):
        np.testing.assert_array_equal(
            to_numpy(a.token_ids), to_numpy(b.token_ids)
        )
        np.testing.assert_allclose(
            to_numpy(a.scores), to_numpy(b.scores), rtol=1e-6
        )
