"""Independent NumPy versions of the paper's equations, for the tests.

Written from the appendix of Bahdanau et al. (2015), not from the package:
the tests read the weights out of the Keras layers, map them onto the
paper's matrices, and compare.
"""

import keras
import numpy as np


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def to_numpy(x):
    return keras.ops.convert_to_numpy(x)


def sgd_step_gradients(model, weights, inputs, upstream, loss=None):
    """`d sum(model(inputs) * upstream) / d w` for each of `weights`.

    Backend-neutral: one SGD step of learning rate 1 through `fit` moves
    each weight by minus its gradient. With `loss`, the gradient is that
    of `loss(upstream, model(inputs))` instead (`upstream` the labels).

    Returns:
        `(before, gradients)`: the weights' values before the step, and
        the gradients, as NumPy arrays in the order of `weights`.
    """
    before = [to_numpy(w) for w in weights]
    model.compile(
        keras.optimizers.SGD(learning_rate=1.0),
        loss=loss or (lambda y_true, y_pred: keras.ops.sum(y_true * y_pred)),
    )
    # One batch, in order: a model whose output does not follow its input
    # rows still meets the labels of its rows.
    model.fit(
        inputs,
        upstream,
        batch_size=len(upstream),
        shuffle=False,
        verbose=0,
    )
    return before, [
        b - to_numpy(w) for b, w in zip(before, weights, strict=True)
    ]


def alignment(s_prev, keys_input, W_a, U_a, v_a, mask=None):
    """A.1.2 for one query per row: returns (c_i, alpha_i).

    s_prev (b, n), keys_input = annotations h (b, Tx, 2n).
    """
    e = np.tanh((s_prev @ W_a)[:, None, :] + keys_input @ U_a) @ v_a
    if mask is None:
        mask = np.ones(e.shape, bool)
    alpha = np.zeros_like(e)
    for b in range(e.shape[0]):
        if mask[b].any():
            scores = np.exp(e[b][mask[b]] - e[b][mask[b]].max())
            alpha[b][mask[b]] = scores / scores.sum()
    context = np.einsum("bt,btd->bd", alpha, keys_input)
    return context, alpha


def alignment_weight_gradients(s_prev, h, W_a, U_a, v_a, upstream):
    """Gradients of `sum(c_i * upstream_i)` w.r.t. `W_a`, `U_a`, `v_a`.

    Backpropagation through A.1.2 by hand (no mask), in float64:
    `c_i = sum_j alpha_ij h_j`, `alpha_i = softmax_j(e_ij)`,
    `e_ij = v_a^T t_ij`, `t_ij = tanh(W_a s_{i-1} + U_a h_j)`.
    """
    s_prev, h, W_a, U_a, v_a, upstream = (
        np.asarray(a, "float64") for a in (s_prev, h, W_a, U_a, v_a, upstream)
    )
    t = np.tanh((s_prev @ W_a)[:, None, :] + h @ U_a)  # (b, Tx, n')
    e = t @ v_a  # (b, Tx)
    alpha = np.exp(e - e.max(-1, keepdims=True))
    alpha /= alpha.sum(-1, keepdims=True)
    d_alpha = np.einsum("bd,btd->bt", upstream, h)
    d_e = alpha * (d_alpha - (alpha * d_alpha).sum(-1, keepdims=True))
    d_v = np.einsum("bt,btn->n", d_e, t)
    d_pre = d_e[:, :, None] * v_a * (1.0 - t**2)  # (b, Tx, n')
    d_W = s_prev.T @ d_pre.sum(1)
    d_U = np.einsum("btd,btn->dn", h, d_pre)
    return d_W, d_U, d_v


def maxout(x, W, b, pieces=2):
    t = x @ W + b
    return t.reshape(t.shape[:-1] + (-1, pieces)).max(-1)


def paper_gru_step(x, h, W, W_z, W_r, U, U_z, U_r, b, b_z, b_r):
    """A.2.1: h_i = (1 - z) h_{i-1} + z tanh(W x + U [r * h_{i-1}])."""
    z = sigmoid(x @ W_z + h @ U_z + b_z)
    r = sigmoid(x @ W_r + h @ U_r + b_r)
    candidate = np.tanh(x @ W + (r * h) @ U + b)
    return (1 - z) * h + z * candidate


def paper_weights_from_keras_gru(cell):
    """Maps a `keras.layers.GRUCell(reset_after=False)` onto A.2.1's matrices.

    Keras keeps `z` of the old state where the paper keeps `1 - z`, so the
    paper's update gate is Keras's with negated weights:
    `1 - sigmoid(a) = sigmoid(-a)`.
    """
    assert not cell.reset_after
    n = cell.units
    k, rk, bias = (
        to_numpy(w) for w in (cell.kernel, cell.recurrent_kernel, cell.bias)
    )
    return dict(
        W=k[:, 2 * n :],
        W_z=-k[:, :n],
        W_r=k[:, n : 2 * n],
        U=rk[:, 2 * n :],
        U_z=-rk[:, :n],
        U_r=rk[:, n : 2 * n],
        b=bias[2 * n :],
        b_z=-bias[:n],
        b_r=bias[n : 2 * n],
    )


def run_gru(x, mask, weights, reverse=False):
    """Runs a paper GRU over (b, T, m) skipping masked steps; h_0 = 0."""
    batch, steps, _ = x.shape
    n = weights["U"].shape[0]
    h = np.zeros((batch, n))
    outputs = np.zeros((batch, steps, n))
    order = range(steps - 1, -1, -1) if reverse else range(steps)
    for t in order:
        new_h = paper_gru_step(x[:, t], h, **weights)
        h = np.where(mask[:, t : t + 1], new_h, h)
        outputs[:, t] = h
    return outputs, h


def rnnsearch_encoder(model, source_ids):
    """A.2.1 and s_0: returns annotations (b, Tx, 2n) and s_0 (b, n)."""
    E = to_numpy(model.source_embedding.embeddings)
    x = E[source_ids]
    mask = source_ids != 0
    fw = paper_weights_from_keras_gru(model.encoder.forward_layer.cell)
    bw = paper_weights_from_keras_gru(model.encoder.backward_layer.cell)
    forward, _ = run_gru(x, mask, fw)
    backward, backward_first = run_gru(x, mask, bw, reverse=True)
    annotations = np.concatenate([forward, backward], -1)
    W_s = to_numpy(model.initial_state_projection.kernel)
    b_s = to_numpy(model.initial_state_projection.bias)
    s0 = np.tanh(backward_first @ W_s + b_s)  # h<-_1: first real word
    return annotations, s0, mask


def decoder_step(cell, y_embedded, s_prev, annotations, mask):
    """A.2.2 with the alignment model of A.1.2: returns (s_i, c_i, alpha_i)."""
    n = cell.units
    W_a = to_numpy(cell.attention.query_kernel)
    U_a = to_numpy(cell.attention.key_kernel)
    v_a = to_numpy(cell.attention.score_vector)
    K = to_numpy(cell.kernel)
    Uk = to_numpy(cell.recurrent_kernel)
    C = to_numpy(cell.context_kernel)
    b = to_numpy(cell.bias)
    c, alpha = alignment(s_prev, annotations, W_a, U_a, v_a, mask)
    z = sigmoid(
        y_embedded @ K[:, :n] + s_prev @ Uk[:, :n] + c @ C[:, :n] + b[:n]
    )
    r = sigmoid(
        y_embedded @ K[:, n : 2 * n]
        + s_prev @ Uk[:, n : 2 * n]
        + c @ C[:, n : 2 * n]
        + b[n : 2 * n]
    )
    s_tilde = np.tanh(
        y_embedded @ K[:, 2 * n :]
        + (r * s_prev) @ Uk[:, 2 * n :]
        + c @ C[:, 2 * n :]
        + b[2 * n :]
    )
    return (1 - z) * s_prev + z * s_tilde, c, alpha


def rnnsearch_logits(model, source_ids, target_ids):
    """The whole of RNNsearch in NumPy: logits (b, Ty, K_y), alphas."""
    annotations, s, mask = rnnsearch_encoder(model, source_ids)
    E = to_numpy(model.target_embedding.embeddings)
    W_m = to_numpy(model.maxout.kernel)
    b_m = to_numpy(model.maxout.bias)
    W_o = to_numpy(model.output_projection.kernel)
    b_o = to_numpy(model.output_projection.bias)
    logits, alphas = [], []
    for i in range(target_ids.shape[1]):
        y_prev = E[target_ids[:, i]]
        s_new, c, alpha = decoder_step(
            model.decoder.cell, y_prev, s, annotations, mask
        )
        s_read = s if model.readout_state == "previous" else s_new
        # t~_i = U_o s + V_o E y_{i-1} + C_o c_i, one matrix over the concat.
        t = maxout(np.concatenate([s_read, y_prev, c], -1), W_m, b_m)
        logits.append(t @ W_o + b_o)
        alphas.append(alpha)
        s = s_new
    return np.stack(logits, 1), np.stack(alphas, 1)
