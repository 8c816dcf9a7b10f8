"""Sequence labelling with a bidirectional RNN (Schuster & Paliwal, 1997).

The task needs the future as much as the past: a token is labelled 1 when
it is a strict local peak, larger than both neighbours (a missing neighbour
at either end counts as smaller), else 0. A left-to-right RNN reads the
right neighbour only one step too late, so it must guess; a BRNN sees both.

Both models are trained with `model.fit` on variable-length, right-padded
sequences (the padding is masked) and evaluated on held-out sequences.

Usage (under a minute on a 2-core CPU, any backend):

    KERAS_BACKEND=jax python examples/sequence_labelling_brnn.py

On a machine whose cores are busy with other jobs, the torch backend's
OpenMP threads wait on each other at every small op (measured: 5x slower);
`OMP_NUM_THREADS=1` avoids that.
"""

import argparse

from keras_bahdanau.startup import start_tensorflow

# Before Keras loads TensorFlow: without its C++ start-up log.
start_tensorflow()

import keras
import numpy as np

from keras_bahdanau.layers.bidirectional_rnn import BidirectionalRNN

VOCABULARY_SIZE = 10  # Token values 1..9; 0 is padding.


def make_data(rng, size, min_length=4, max_length=12):
    """Random right-padded sequences and their local-peak labels."""
    ids = np.zeros((size, max_length), "int32")
    labels = np.zeros((size, max_length), "int32")
    for row in range(size):
        length = rng.integers(min_length, max_length + 1)
        tokens = rng.integers(1, VOCABULARY_SIZE, length)
        # Pad both ends with 0, smaller than every token.
        padded = np.concatenate([[0], tokens, [0]])
        peaks = (tokens > padded[:-2]) & (tokens > padded[2:])
        ids[row, :length] = tokens
        labels[row, :length] = peaks
    return ids, labels


def build_model(bidirectional, units):
    inputs = keras.Input(shape=(None,), dtype="int32")
    x = keras.layers.Embedding(VOCABULARY_SIZE, 16, mask_zero=True)(inputs)
    if bidirectional:
        # y_t = V^f h^f_t + V^b h^b_t + c: the logits of the two labels.
        logits = BidirectionalRNN(
            keras.layers.SimpleRNNCell(units), output_units=2
        )(x)
    else:
        states = keras.layers.SimpleRNN(units, return_sequences=True)(x)
        logits = keras.layers.Dense(2)(states)
    model = keras.Model(inputs, logits)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-2),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model


def token_accuracy(model, ids, labels):
    """Accuracy over real (non-padding) tokens."""
    predictions = np.argmax(model.predict(ids, verbose=0), axis=-1)
    real = ids != 0
    return float((predictions == labels)[real].mean())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--units", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    keras.utils.set_random_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    train_ids, train_labels = make_data(rng, 2000)
    test_ids, test_labels = make_data(rng, 1000)
    real = test_ids != 0
    majority = max(test_labels[real].mean(), 1 - test_labels[real].mean())
    print(f"backend: {keras.backend.backend()}")
    print(f"majority-label baseline: {majority:.3f}")

    for name, bidirectional in [("forward RNN", False), ("BRNN", True)]:
        model = build_model(bidirectional, args.units)
        model.fit(
            train_ids,
            train_labels,
            batch_size=64,
            epochs=args.epochs,
            verbose=0,
        )
        accuracy = token_accuracy(model, test_ids, test_labels)
        print(f"{name:>11}: held-out token accuracy {accuracy:.3f}")


if __name__ == "__main__":
    main()
