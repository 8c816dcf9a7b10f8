import subprocess
import sys

import keras
import numpy as np
import pytest
from keras import ops

from keras_bahdanau import training
from keras_bahdanau.training import MaskedSparseCategoricalCrossentropy
from keras_bahdanau.training import MaskedTokenAccuracy
from keras_bahdanau.training import jit_compile_argument
from keras_bahdanau.training import make_optimizer
from tests.numpy_reference import sgd_step_gradients
from tests.numpy_reference import to_numpy


def _log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_loss_is_the_mean_over_real_tokens():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 4, 7)).astype("float32")
    labels = np.array([[4, 5, 3, 0], [6, 3, 0, 0]])
    log_probs = _log_softmax(logits)
    real = labels != 0
    expected = -np.take_along_axis(log_probs, labels[..., None], -1)[..., 0]
    expected = expected[real].mean()  # 5 real tokens, not 8 positions
    value = MaskedSparseCategoricalCrossentropy()(labels, logits)
    np.testing.assert_allclose(to_numpy(value), expected, rtol=1e-5)


def test_token_accuracy_ignores_padding():
    metric = MaskedTokenAccuracy()
    labels = np.array([[4, 5, 0], [6, 0, 0]])
    logits = np.zeros((2, 3, 7), "float32")
    logits[0, 0, 4] = logits[0, 1, 1] = logits[1, 0, 6] = 1.0
    logits[:, 2, 0] = logits[1, 1, 0] = 5.0  # padding predicted: not counted
    metric.update_state(labels, logits)
    np.testing.assert_allclose(to_numpy(metric.result()), 2 / 3, rtol=1e-6)


def test_token_accuracy_is_the_argmax_share():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(3, 5, 11)).astype("float32")
    labels = rng.integers(1, 11, size=(3, 5))
    labels[1, 3:] = 0
    labels[0, :2] = logits[0, :2].argmax(-1)  # some hits for sure
    real = labels != 0
    expected = (logits.argmax(-1) == labels)[real].mean()
    metric = MaskedTokenAccuracy()
    metric.update_state(labels, logits)
    np.testing.assert_allclose(to_numpy(metric.result()), expected, rtol=1e-6)


def test_token_accuracy_counts_a_tie_with_the_label():
    metric = MaskedTokenAccuracy()
    labels = np.array([[3, 2]])
    logits = np.zeros((1, 2, 5), "float32")
    logits[0, 0, [1, 3]] = 2.0  # tied: the label 3 counts, not only id 1
    logits[0, 1, [1, 2]] = [2.0, 1.0]  # the label 2 is not the max
    metric.update_state(labels, logits)
    np.testing.assert_allclose(to_numpy(metric.result()), 0.5, rtol=1e-6)


def test_paper_optimizer():
    optimizer = make_optimizer("adadelta")
    assert isinstance(optimizer, keras.optimizers.Adadelta)
    assert optimizer.rho == 0.95 and optimizer.epsilon == 1e-6
    assert optimizer.global_clipnorm == 1.0
    with pytest.raises(ValueError, match="sgd"):
        make_optimizer("sgd")


def _repeated_word_model():
    """`out = sum(E[ids])` with one word four times in the batch."""
    inputs = keras.Input((4,), dtype="int32")
    embedding = keras.layers.Embedding(10, 4, embeddings_initializer="zeros")
    flat = keras.layers.Flatten()(embedding(inputs))
    out = keras.layers.Dense(
        1, kernel_initializer="ones", use_bias=False, trainable=False
    )(flat)
    return keras.Model(inputs, out), embedding


def test_repeated_words_are_summed_before_clipping_on_every_backend():
    # Loss (4 * sum(E_1) - 10)^2 at E = 0: the gradient of each of E_1's 4
    # entries is 4 occurrences x 2 x (0 - 10) = -80; global norm
    # sqrt(4 x 80^2) = 160, so clipping to 1 leaves -0.5 each and SGD(lr=1)
    # moves them to +0.5. (Keras on TensorFlow squared each occurrence's
    # row before summing, got the norm 80 and moved them to +1.)
    from keras_bahdanau.training import _SummedSparseGradients

    class SGD(_SummedSparseGradients, keras.optimizers.SGD):
        pass

    model, embedding = _repeated_word_model()
    model.compile(optimizer=SGD(1.0, global_clipnorm=1.0), loss="mse")
    model.train_on_batch(np.ones((1, 4), "int32"), np.array([[10.0]]))
    row = keras.ops.convert_to_numpy(embedding.embeddings)[1]
    np.testing.assert_allclose(row, np.full(4, 0.5), rtol=1e-6)


def test_adam_matches_numpy_with_repeated_words():
    model, embedding = _repeated_word_model()
    model.compile(optimizer=make_optimizer("adam", 0.1, None), loss="mse")
    e, m, v = np.zeros(4), np.zeros(4), np.zeros(4)
    beta1, beta2, eps = 0.9, 0.999, 1e-7
    for t in (1, 2, 3):
        model.train_on_batch(np.ones((1, 4), "int32"), np.array([[10.0]]))
        g = np.full(4, 4 * 2 * (4 * e.sum() - 10))
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g**2
        lr = 0.1 * np.sqrt(1 - beta2**t) / (1 - beta1**t)
        e = e - lr * m / (np.sqrt(v) + eps)
    row = keras.ops.convert_to_numpy(embedding.embeddings)[1]
    np.testing.assert_allclose(row, e, rtol=1e-5)


def test_import_registers_what_saved_models_refer_to():
    # A model saved after `compile_model` names these classes; a fresh
    # process that imports the models must be able to load it
    # (`import keras_bahdanau` alone loads no Keras: the CLI starts fast).
    code = (
        "import keras, keras_bahdanau.models\n"
        "for name in ('MaskedSparseCategoricalCrossentropy',"
        " 'MaskedTokenAccuracy', 'Adam', 'Adadelta'):\n"
        "    assert keras.saving.get_registered_object("
        "'keras_bahdanau>' + name) is not None, name\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_label_smoothing_against_numpy():
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(2, 4, 7)).astype("float32")
    labels = np.array([[4, 5, 3, 0], [6, 3, 0, 0]])
    eps = 0.2
    # The smoothed target distribution, written out: (1 - eps) on the
    # label plus eps / V everywhere; cross-entropy against it.
    target = np.full(logits.shape, eps / 7)
    np.put_along_axis(target, labels[..., None], 1 - eps + eps / 7, axis=-1)
    per_token = -(target * _log_softmax(logits)).sum(-1)
    expected = per_token[labels != 0].mean()
    loss = MaskedSparseCategoricalCrossentropy(label_smoothing=eps)
    np.testing.assert_allclose(
        to_numpy(loss(labels, logits)), expected, rtol=1e-5
    )
    # Padding still counts for nothing, whatever its logits.
    logits[1, 2:] = 100.0
    np.testing.assert_allclose(
        to_numpy(loss(labels, logits)), expected, rtol=1e-5
    )
    config = loss.get_config()
    assert config["label_smoothing"] == eps
    assert (
        MaskedSparseCategoricalCrossentropy.from_config(config).label_smoothing
        == eps
    )
    with pytest.raises(ValueError, match="label_smoothing=1.0"):
        MaskedSparseCategoricalCrossentropy(label_smoothing=1.0)


def _smoothed_loss_and_gradient(logits, labels, eps):
    """NumPy: the masked mean of the smoothed cross-entropy, and its
    gradient `(softmax(z) - q) * mask / N` by the logits, `q` the smoothed
    target distribution."""
    vocabulary = logits.shape[-1]
    target = np.full(logits.shape, eps / vocabulary)
    np.put_along_axis(
        target, labels[..., None], 1 - eps + eps / vocabulary, axis=-1
    )
    log_probs = _log_softmax(logits.astype("float64"))
    real = (labels != 0)[..., None]
    per_token = -(target * log_probs).sum(-1)
    gradient = (np.exp(log_probs) - target) * real / real.sum()
    return per_token[real[..., 0]].mean(), gradient


class _Logits(keras.layers.Layer):
    """A trainable `(batch, Ty, V)` tensor, whatever the input."""

    def __init__(self, values, **kwargs):
        super().__init__(**kwargs)
        self.logits = self.add_weight(
            shape=values.shape,
            initializer=keras.initializers.Constant(values),
            name="logits",
        )

    def call(self, inputs):
        return self.logits + 0.0 * ops.sum(inputs)


@pytest.mark.parametrize(
    "token_losses",
    [
        training.token_losses_from_logsumexp,
        training.token_losses_from_log_softmax,
    ],
)
@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_both_forms_of_the_loss_against_numpy(token_losses, eps, monkeypatch):
    # Every backend runs both forms, not only its own (`_TOKEN_LOSSES`).
    monkeypatch.setattr(
        training,
        "_TOKEN_LOSSES",
        {keras.backend.backend(): token_losses},
    )
    rng = np.random.default_rng(2)
    logits = (3 * rng.normal(size=(2, 5, 9))).astype("float32")
    labels = np.array([[4, 5, 3, 8, 0], [6, 3, 0, 0, 0]])
    expected, gradient = _smoothed_loss_and_gradient(logits, labels, eps)
    loss = MaskedSparseCategoricalCrossentropy(label_smoothing=eps)
    np.testing.assert_allclose(
        to_numpy(loss(labels, logits)), expected, rtol=1e-5
    )
    inputs = keras.Input((1,))
    layer = _Logits(logits)
    model = keras.Model(inputs, layer(inputs))
    _, (step,) = sgd_step_gradients(
        model, [layer.logits], np.zeros((2, 1), "float32"), labels, loss
    )
    # atol: float32's resolution at logits of up to about 8.
    np.testing.assert_allclose(step, gradient, rtol=1e-4, atol=2e-6)


def test_each_backend_computes_the_loss_in_its_form():
    forms = {
        "torch": training.token_losses_from_log_softmax,
        "jax": training.token_losses_from_logsumexp,
        "tensorflow": training.token_losses_from_logsumexp,
    }
    assert training.token_losses() is forms[keras.backend.backend()]


def test_jit_compile_argument():
    backend = keras.backend.backend()
    # XLA by default on JAX; elsewhere Keras's own "auto", which leaves
    # TensorFlow's CPU (where dropout's RNG is slow under XLA) and torch
    # without it.
    expected = True if backend == "jax" else "auto"
    assert jit_compile_argument("auto") == expected
    # Keras turns XLA off under tf.distribute; "auto" leaves it to Keras.
    assert jit_compile_argument("auto", "mirrored") == "auto"
    assert jit_compile_argument("true") is True
    assert jit_compile_argument("false") is False
    with pytest.raises(ValueError, match="'yes'"):
        jit_compile_argument("yes")
