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


def independent(initializer, index=0):
    """A copy of `initializer` that draws values of its own.

    An unseeded Keras initializer draws its seed once, at construction,
    so every call returns the same stream: a layer that builds several
    weights from one initializer (`W_a` and `U_a`, `W` and `C`) calls it
    through this, or its weights start with equal leading values.

    Args:
        initializer: a Keras initializer, its name or its config.
        index: which weight this copy is for. A seeded initializer gets
            `seed + index` (the first weight keeps the given seed); an
            unseeded one a fresh random seed.

    Returns:
        A new initializer instance.
    """
    initializer = keras.initializers.get(initializer)
    config = initializer.get_config()
    if isinstance(config.get("seed"), int):
        config["seed"] += index
    return type(initializer).from_config(config)


def paper_initializers(initialization):
    """Initializer configs for `"paper"` or `"glorot"` initialization.

    The paper (appendix B.1) draws weight matrices from N(0, 0.01^2), `W_a`
    and `U_a` from N(0, 0.001^2), recurrent matrices as random orthogonal
    matrices, and `v_a` and biases as zeros. `"glorot"` keeps orthogonal
    recurrent weights and zero `v_a` but uses Glorot-uniform elsewhere.

    Configs, not instances: each layer builds its own instance, with its
    own random seed (one shared instance would give every layer the same
    values).

    Returns:
        A dict with the keys `"kernel"`, `"attention"` and `"embedding"`.
    """

    def config(class_name, **kwargs):
        return {"class_name": class_name, "config": {**kwargs, "seed": None}}

    if initialization == "paper":
        return {
            "kernel": config("RandomNormal", stddev=0.01),
            "attention": config("RandomNormal", stddev=0.001),
            "embedding": config("RandomNormal", stddev=0.01),
        }
    if initialization == "glorot":
        return {
            "kernel": config("GlorotUniform"),
            "attention": config("GlorotUniform"),
            "embedding": config("RandomUniform", minval=-0.05, maxval=0.05),
        }
    raise ValueError(
        '`initialization` must be "paper" or "glorot". '
        f"Received: initialization={initialization!r}"
    )
