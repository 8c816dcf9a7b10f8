"""Initializers of the paper that Keras does not have."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_bahdanau")
class BlockOrthogonal(keras.initializers.Initializer):
    """A random orthogonal matrix for each square block of a packed kernel.

    Recurrent kernels pack several `n x n` matrices side by side (`[U_z, U_r,
    U]` is `n x 3n`). `keras.initializers.Orthogonal` on the packed kernel
    only makes its rows orthonormal; the paper (appendix B.1) initializes
    each recurrent matrix as a random orthogonal matrix, which this does.

    Args:
        seed: int or None.

    Example:

    >>> kernel = BlockOrthogonal(seed=1)((4, 12))
    """

    def __init__(self, seed=None):
        self.seed = seed

    def __call__(self, shape, dtype=None):
        rows, columns = shape
        if columns % rows:
            raise ValueError(
                "BlockOrthogonal needs a kernel made of square blocks. "
                f"Received: shape={shape}"
            )
        blocks = []
        for i in range(columns // rows):
            seed = None if self.seed is None else self.seed + i
            blocks.append(
                keras.initializers.Orthogonal(seed=seed)((rows, rows), dtype)
            )
        return ops.concatenate(blocks, axis=1)

    def get_config(self):
        return {"seed": self.seed}
