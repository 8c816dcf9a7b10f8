import keras
import numpy as np
import pytest

from keras_bahdanau.training import MaskedSparseCategoricalCrossentropy
from keras_bahdanau.training import MaskedTokenAccuracy
from keras_bahdanau.training import make_optimizer
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


def test_paper_optimizer():
    optimizer = make_optimizer("adadelta")
    assert isinstance(optimizer, keras.optimizers.Adadelta)
    assert optimizer.rho == 0.95 and optimizer.epsilon == 1e-6
    assert optimizer.global_clipnorm == 1.0
    with pytest.raises(ValueError, match="sgd"):
        make_optimizer("sgd")
