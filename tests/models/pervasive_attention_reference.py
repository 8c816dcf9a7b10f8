"""An independent NumPy version of one Pervasive Attention DenseNet layer.

Written from Elbayad et al. (2018, arXiv:1808.03867), Sec. 3, not from
the package:
a layer maps its input of `f` channels through

    BatchNorm -> ReLU (or GLU) -> 1x1 conv (4g) -> BatchNorm -> ReLU
    (or GLU) -> masked k x k conv (g) -> dropout

and concatenates the `g` new channels after its input (DenseNet). The
`k x k` kernel is centred on the cell `(j, i)` (target `j`, source `i`)
and masked so that it never reads a future target row: kernel rows with
a target offset `> 0` are zero ("5 x 3" for `k = 5`: 5 source positions,
the current and the 2 previous target positions), with zero padding
beyond the grid. Batch norm is in inference mode (moving statistics);
padded source cells are zero at the convolution's input (the per-sentence
zero padding of Sec. 3, reproduced in a padded batch) and at its output
(the package's convention, `PervasiveAttention`'s docstring; the paper is
silent). Float64, plain loops: slow and obvious.

Around the DenseNet, from the authors' code (github.com/elbayadm/attn2d):
the grid with the 2018 code's optional 1x1 convolution of its channels
(`half_inputs`), max pooling over the real source positions, and the
tied prediction (`tie_target_weights`): a linear layer to the target
embedding's size, then the transposed target embedding and a bias.
"""

import numpy as np


def batch_norm(x, gamma, beta, mean, variance, epsilon=1e-5):
    """Inference-mode batch norm over the last (channel) axis."""
    return (x - mean) / np.sqrt(variance + epsilon) * gamma + beta


def activation(x, name):
    """ReLU, or the GLU `a * sigmoid(b)` of the two channel halves."""
    if name == "relu":
        return np.maximum(x, 0.0)
    values, gates = np.split(x, 2, axis=-1)
    return values / (1.0 + np.exp(-gates))


def masked_convolution(x, kernel):
    """The masked `k x k` convolution, "same" size, no bias.

    Args:
        x: `(batch, Ty, Tx, c)`.
        kernel: the full `(k, k, c, g)` kernel, axis 0 the target offset
            `p - k // 2`, axis 1 the source offset `q - k // 2`. Rows with
            a positive target offset (the future) are masked out here,
            whatever they hold.

    Returns:
        `(batch, Ty, Tx, g)`: `y[j, i] = sum_{p, q} m_p K[p, q]
        x[j + p - k // 2, i + q - k // 2]`, `m_p = [p <= k // 2]`, with
        `x = 0` outside the grid.
    """
    k = kernel.shape[0]
    half = k // 2
    future = np.arange(k) > half
    kernel = np.where(future[:, None, None, None], 0.0, kernel)
    batch, target_length, source_length, _ = x.shape
    y = np.zeros((batch, target_length, source_length, kernel.shape[-1]))
    for j in range(target_length):
        for i in range(source_length):
            for p in range(k):
                for q in range(k):
                    row, column = j + p - half, i + q - half
                    if 0 <= row < target_length and 0 <= column < source_length:
                        y[:, j, i] += x[:, row, column] @ kernel[p, q]
    return y


def dense_layer(x, source_mask, weights, activation_name="relu"):
    """One masked DenseNet layer (inference mode, no dropout).

    Args:
        x: `(batch, Ty, Tx, f)` layer input.
        source_mask: bool `(batch, Tx)`, True on real source tokens.
        weights: dict with `"norm1"` and `"norm2"` (each a dict of
            `gamma`, `beta`, `mean`, `variance`), `"conv1"` `(f', 4g)` (the
            1x1 convolution; `f' = f`, or `f / 2` after a GLU) and
            `"conv2"`, the full `(k, k, c, g)` kernel.
        activation_name: `"relu"` or `"glu"`.

    Returns:
        `(batch, Ty, Tx, f + g)`: the input, then the new channels.
    """
    x = np.asarray(x, "float64")
    cells = np.asarray(source_mask, "float64")[:, None, :, None]
    h = activation(batch_norm(x, **weights["norm1"]), activation_name)
    h = h @ weights["conv1"]
    h = activation(batch_norm(h, **weights["norm2"]), activation_name)
    new = masked_convolution(h * cells, weights["conv2"]) * cells
    return np.concatenate([x, new], axis=-1)


def input_grid(source, target, kernel=None, bias=None):
    """The grid `[x_i; y_j]`, optionally through a 1x1 convolution.

    Args:
        source: `(batch, Tx, ds)` source embeddings.
        target: `(batch, Ty, dt)` target embeddings.
        kernel: None, or the 1x1 convolution's `(ds + dt, n)` kernel.
        bias: its `(n,)` bias, with `kernel`.

    Returns:
        `(batch, Ty, Tx, ds + dt)`, or `(batch, Ty, Tx, n)` with `kernel`.
    """
    batch, source_length, _ = source.shape
    target_length = target.shape[1]
    grid = np.concatenate(
        [
            np.broadcast_to(
                source[:, None], (batch, target_length, *source.shape[1:])
            ),
            np.broadcast_to(
                target[:, :, None],
                (batch, target_length, source_length, target.shape[-1]),
            ),
        ],
        axis=-1,
    ).astype("float64")
    if kernel is None:
        return grid
    return grid @ kernel + bias


def max_pooling(features, source_mask):
    """`(batch, Ty, Tx, C) -> (batch, Ty, C)`: max over real sources."""
    masked = np.where(source_mask[:, None, :, None], features, -np.inf)
    return masked.max(axis=2)


def tied_logits(pooled, kernel, bias, embeddings, output_bias):
    """The tied prediction `h E^T + b`, `h = pooled W + b_h` (no dropout).

    Args:
        pooled: `(..., C)` pooled features.
        kernel: `W`, `(C, dt)`.
        bias: `b_h`, `(dt,)`.
        embeddings: the target embedding `E`, `(V, dt)`.
        output_bias: `b`, `(V,)`.

    Returns:
        `(..., V)` logits.
    """
    hidden = pooled @ kernel + bias
    return hidden @ embeddings.T + output_bias


def masked_moments(x, source_mask, target_mask):
    """Training-mode batch-norm statistics: over the real cells only.

    Args:
        x: `(batch, Ty, Tx, C)`.
        source_mask: bool `(batch, Tx)`.
        target_mask: bool `(batch, Ty)`.

    Returns:
        `(mean, variance)`, each `(C,)`: the mean and the biased variance
        of the cells `(b, j, i)` where target `j` and source `i` are real.
    """
    cells = (
        np.asarray(target_mask)[:, :, None] & np.asarray(source_mask)[:, None]
    )
    real = np.asarray(x, "float64")[cells]  # (cells, C)
    return real.mean(axis=0), real.var(axis=0)


def dense_layer_training(x, source_mask, target_mask, weights, momentum=0.9):
    """`dense_layer` in training mode (ReLU, no dropout).

    Each batch norm normalizes with the statistics of its input over the
    real cells (`masked_moments`) and moves its running statistics to
    `momentum * old + (1 - momentum) * batch`.

    Args:
        x, source_mask: as in `dense_layer`.
        target_mask: bool `(batch, Ty)`.
        weights: as in `dense_layer`; the `mean` and `variance` of the
            norms are the running statistics before the call.
        momentum: float.

    Returns:
        `(outputs, statistics)`: the layer output `(batch, Ty, Tx, f + g)`
        and `{"norm1": (mean, variance), "norm2": (...)}`, the running
        statistics after the call.
    """
    x = np.asarray(x, "float64")
    cells = np.asarray(source_mask, "float64")[:, None, :, None]
    statistics = {}

    def norm(h, name):
        mean, variance = masked_moments(h, source_mask, target_mask)
        old = weights[name]
        statistics[name] = (
            momentum * old["mean"] + (1 - momentum) * mean,
            momentum * old["variance"] + (1 - momentum) * variance,
        )
        batch = dict(old, mean=mean, variance=variance)
        return activation(batch_norm(h, **batch), "relu")

    h = norm(x, "norm1") @ weights["conv1"]
    h = norm(h, "norm2")
    new = masked_convolution(h * cells, weights["conv2"]) * cells
    return np.concatenate([x, new], axis=-1), statistics
