import keras
import numpy as np
import tensorflow as tf

from keras_bahdanau import RNNSearch
from keras_bahdanau.training import compile_model

SIZES = dict(embedding_dim=6, hidden_dim=5, alignment_dim=4, maxout_dim=3)
LENGTHS = (4, 7, 4)  # two bucket widths, the first seen again


def _bucketed_dataset():
    # Lengths unknown in the spec, as `make_dataset` gives them.
    rng = np.random.default_rng(0)
    batches = []
    for length in LENGTHS:
        ids = rng.integers(4, 20, (3, length)).astype("int32")
        ids[0, length - 2 :] = 0  # Some padding.
        batches.append(({"source_ids": ids, "target_ids": ids}, ids))
    ids = tf.TensorSpec((None, None), tf.int32)
    spec = ({"source_ids": ids, "target_ids": ids}, ids)
    dataset = tf.data.Dataset.from_generator(
        lambda: iter(batches), output_signature=spec
    )
    return dataset.apply(tf.data.experimental.assert_cardinality(3))


def _fit(jit_compile):
    keras.utils.set_random_seed(3)
    model = RNNSearch(20, 20, **SIZES)
    compile_model(model, "adam", 0.01, jit_compile=jit_compile)
    history = model.fit(_bucketed_dataset(), epochs=2, shuffle=False, verbose=0)
    return history.history["loss"], model.get_weights()


def test_fit_with_xla_on_batches_of_several_lengths():
    # On TensorFlow, Keras's own train function relaxes the lengths to
    # unknown and XLA fails on the decoder's gradient; the model's step per
    # shape trains, exactly like the uncompiled step. torch's
    # `jit_compile=True` is `torch.compile` (minutes): eager on both sides.
    jit = keras.backend.backend() != "torch"
    losses, weights = _fit(jit_compile=jit)
    reference_losses, reference_weights = _fit(jit_compile=False)
    assert np.all(np.isfinite(losses)) and losses[1] < losses[0]
    np.testing.assert_allclose(losses, reference_losses, rtol=1e-4)
    for weight, reference in zip(weights, reference_weights, strict=True):
        np.testing.assert_allclose(weight, reference, rtol=1e-3, atol=1e-5)
