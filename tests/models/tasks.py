"""Synthetic tasks the models must learn in CI time."""

import numpy as np


def reversal_task(n_train=3000, n_dev=300, vocabulary=10, max_length=6, seed=0):
    """Reverse a random sequence of 3 to `max_length` tokens (ids 4 and up).

    Returns `(x, y, x_dev, y_dev)` in the models' input format: decoder
    inputs start with BOS (2), labels end with EOS (3), 0 pads.
    """
    rng = np.random.default_rng(seed)

    def make(n, max_len=max_length):
        source = np.zeros((n, max_len), "int32")
        target = np.zeros((n, max_len + 1), "int32")
        labels = np.zeros((n, max_len + 1), "int32")
        for i in range(n):
            length = rng.integers(3, max_len + 1)
            sentence = rng.integers(4, 4 + vocabulary, length)
            source[i, :length] = sentence
            target[i, 0] = 2
            target[i, 1 : length + 1] = sentence[::-1]
            labels[i, :length] = sentence[::-1]
            labels[i, length] = 3
        return {"source_ids": source, "target_ids": target}, labels

    return (*make(n_train), *make(n_dev))
