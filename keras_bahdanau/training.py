"""Loss, metric and optimizers for training translation models with `fit`."""

import keras
from keras import ops

from keras_bahdanau.reserved import PAD_ID


def token_losses_from_logsumexp(logits, labels, label_smoothing):
    """Each token's label-smoothed cross-entropy, from one logsumexp.

    `-log p_y = logsumexp(z) - z_y` and `-mean_k log p_k = logsumexp(z) -
    mean_k z_k`: one logsumexp and a gather of `z_y`, where the backends'
    sparse cross-entropy builds a one-hot `(batch, Ty, V)` target, one
    more tensor of the logits' size to write and read. The form of JAX
    and TensorFlow, where it is faster than
    `token_losses_from_log_softmax` (docs/profile.md, "Training").

    Args:
        logits: float32 `(batch, Ty, V)`, `z`.
        labels: int32 `(batch, Ty)`, `y`.
        label_smoothing: float `eps` in [0, 1).

    Returns:
        float32 `(batch, Ty)`: `(1 - eps) * (-log p_y) + eps * mean_k(-log
        p_k)`, padding included (the caller masks it).
    """
    label_logits = ops.squeeze(
        ops.take_along_axis(logits, labels[..., None], axis=-1), -1
    )  # (batch, Ty)
    losses = ops.logsumexp(logits, axis=-1) - (1.0 - label_smoothing) * (
        label_logits
    )
    if label_smoothing:
        losses = losses - label_smoothing * ops.mean(logits, axis=-1)
    return losses


def token_losses_from_log_softmax(logits, labels, label_smoothing):
    """`token_losses_from_logsumexp`'s values, from the log-softmax.

    The form of torch: PyTorch's `log_softmax` and its gradient are one
    pass over the `(batch, Ty, V)` logits each, where the gradient of its
    `logsumexp` takes three (a subtraction, an exponential, a product),
    and at the main job's shape those passes are a large share of the
    training step (docs/profile.md, "Training").

    Args and returns: as `token_losses_from_logsumexp`.
    """
    log_probs = ops.log_softmax(logits, axis=-1)  # (batch, Ty, V)
    losses = -(1.0 - label_smoothing) * ops.squeeze(
        ops.take_along_axis(log_probs, labels[..., None], axis=-1), -1
    )
    if label_smoothing:
        losses = losses - label_smoothing * ops.mean(log_probs, axis=-1)
    return losses


# The form each backend computes the loss in; others use the logsumexp.
_TOKEN_LOSSES = {"torch": token_losses_from_log_softmax}


def token_losses():
    """The form of the loss for the current backend (`_TOKEN_LOSSES`)."""
    return _TOKEN_LOSSES.get(
        keras.backend.backend(), token_losses_from_logsumexp
    )


@keras.saving.register_keras_serializable(package="keras_bahdanau")
class MaskedSparseCategoricalCrossentropy(keras.losses.Loss):
    """Cross-entropy per real target token; padding (id 0) is ignored.

    The mean is taken over the real tokens of the batch, not over the
    `batch * Ty` padded grid, so short and long batches weigh each token
    alike. Computed in float32 from logits.

    With `label_smoothing = eps > 0` the target distribution is `(1 - eps)`
    on the reference token plus `eps / V` on every token of the
    vocabulary (Szegedy et al., 2016, arXiv:1512.00567, section 7), so a
    token's loss is `(1 - eps) * (-log p_y) + eps * mean_k(-log p_k)`.

    Args:
        label_smoothing: float in [0, 1), 0 in the paper.

    Example:

    >>> loss = MaskedSparseCategoricalCrossentropy()
    >>> labels = np.array([[5, 3, 0]])
    >>> value = loss(labels, np.zeros((1, 3, 10), "float32"))  # log(10)
    """

    def __init__(
        self,
        label_smoothing=0.0,
        name="masked_sparse_categorical_crossentropy",
        **kwargs,
    ):
        super().__init__(name=name, **kwargs)
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(
                "`label_smoothing` must be in [0, 1). Received: "
                f"label_smoothing={label_smoothing}"
            )
        self.label_smoothing = label_smoothing

    def call(self, y_true, y_pred):
        y_true = ops.cast(y_true, "int32")
        mask = ops.cast(ops.not_equal(y_true, PAD_ID), "float32")
        logits = ops.cast(y_pred, "float32")  # (batch, Ty, V)
        losses = token_losses()(logits, y_true, self.label_smoothing)
        # One scalar per batch: the base class's mean over it is a no-op.
        return ops.sum(losses * mask) / ops.maximum(ops.sum(mask), 1.0)

    def get_config(self):
        return {**super().get_config(), "label_smoothing": self.label_smoothing}


@keras.saving.register_keras_serializable(package="keras_bahdanau")
class MaskedTokenAccuracy(keras.metrics.Metric):
    """Share of real target tokens (label != 0) that get the highest logit.

    A token counts when its label's logit is the largest of its row,
    which is `argmax(y_pred) == y_true` except on exact ties, where the
    label counts as predicted (an argmax would pick the first of the
    tied ids). The comparison needs one max over the vocabulary instead
    of an argmax, the costliest single op of the JAX training step
    (docs/profile.md).
    """

    def __init__(self, name="token_accuracy", **kwargs):
        super().__init__(name=name, **kwargs)
        self.correct = self.add_variable((), "zeros", name="correct")
        self.total = self.add_variable((), "zeros", name="total")

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true = ops.cast(y_true, "int32")
        mask = ops.cast(ops.not_equal(y_true, PAD_ID), "float32")
        label_logits = ops.squeeze(
            ops.take_along_axis(y_pred, y_true[..., None], axis=-1), -1
        )
        hits = ops.cast(
            ops.greater_equal(label_logits, ops.max(y_pred, axis=-1)), "float32"
        )
        self.correct.assign_add(ops.sum(hits * mask))
        self.total.assign_add(ops.sum(mask))

    def result(self):
        return self.correct / ops.maximum(self.total, 1.0)


OPTIMIZERS = ("adadelta", "adam")
# The settings of a config's `training.jit_compile`.
JIT_COMPILE = ("auto", "true", "false")


def jit_compile_argument(setting, strategy=None):
    """`model.compile`'s `jit_compile` for a `training.jit_compile` setting.

    `"auto"` is XLA on JAX; elsewhere it is Keras's own `"auto"`: XLA on
    TensorFlow with a GPU, none on TensorFlow's CPU, under a
    `tf.distribute` strategy, or on torch (where `True` means
    `torch.compile`, which compiled for 45 s and was not faster). On
    TensorFlow's CPU the main job's training step ran 1.7x faster without
    XLA than with it, and compiled in a fifth of the time: under XLA the
    random numbers of Keras's dropout (TensorFlow's stateless RNG with its
    default algorithm) cost more than the rest of the step
    (docs/profile.md). `"true"` and `"false"` force it.

    Args:
        setting: `"auto"`, `"true"` or `"false"`.
        strategy: the config's `distribution.strategy`, or None.
    """
    if setting not in JIT_COMPILE:
        raise ValueError(
            f"`jit_compile` must be one of {JIT_COMPILE}. Received: {setting!r}"
        )
    if setting != "auto":
        return setting == "true"
    if keras.backend.backend() == "jax" and strategy != "mirrored":
        return True
    return "auto"


class _SummedSparseGradients:
    """Merges repeated rows of sparse gradients before clipping and update.

    On the TensorFlow backend the gradient of an embedding lookup is a
    `tf.IndexedSlices` with one row per occurrence of a word. Keras 3.15
    squares those rows before it adds up the repeats of a word, so the
    global norm for `global_clipnorm` and Adam's second moment come out
    wrong (smaller) whenever a word occurs twice in a batch. Converting to
    a dense gradient adds the repeats first, as JAX and torch do.
    """

    def apply(self, grads, trainable_variables=None):
        if keras.backend.backend() == "tensorflow":
            import tensorflow as tf

            grads = [
                tf.convert_to_tensor(g)
                if isinstance(g, tf.IndexedSlices)
                else g
                for g in grads
            ]
        return super().apply(grads, trainable_variables)


@keras.saving.register_keras_serializable(package="keras_bahdanau")
class Adadelta(_SummedSparseGradients, keras.optimizers.Adadelta):
    """`keras.optimizers.Adadelta`, with sparse gradients summed first."""


@keras.saving.register_keras_serializable(package="keras_bahdanau")
class Adam(_SummedSparseGradients, keras.optimizers.Adam):
    """`keras.optimizers.Adam`, with sparse gradients summed first."""


def make_optimizer(name="adadelta", learning_rate=None, clipnorm=1.0):
    """Builds an optimizer with gradient-norm clipping.

    `"adadelta"` is the paper's recipe (section 4.2 and appendix B.2):
    Adadelta with `epsilon=1e-6`, `rho=0.95`, learning rate 1, and the norm
    of the whole gradient clipped to at most 1. `"adam"` (learning rate
    1e-3 by default) converges faster for small models on a CPU.

    Args:
        name: `"adadelta"` or `"adam"`.
        learning_rate: float, or None for the default of the optimizer.
        clipnorm: float or None, maximum global gradient norm.
    """
    if name == "adadelta":
        return Adadelta(
            learning_rate=1.0 if learning_rate is None else learning_rate,
            rho=0.95,
            epsilon=1e-6,
            global_clipnorm=clipnorm,
        )
    if name == "adam":
        return Adam(
            learning_rate=1e-3 if learning_rate is None else learning_rate,
            global_clipnorm=clipnorm,
        )
    raise ValueError(
        f"`optimizer` must be one of {OPTIMIZERS}. Received: {name!r}"
    )


def compile_model(
    model,
    optimizer="adadelta",
    learning_rate=None,
    label_smoothing=0.0,
    **kwargs,
):
    """`model.compile` with the masked loss and token accuracy.

    `optimizer` is a name for `make_optimizer` or a Keras optimizer;
    `label_smoothing` goes to `MaskedSparseCategoricalCrossentropy`;
    `kwargs` go to `model.compile` (e.g. `jit_compile`).
    """
    if isinstance(optimizer, str):
        optimizer = make_optimizer(optimizer, learning_rate)
    model.compile(
        optimizer=optimizer,
        loss=MaskedSparseCategoricalCrossentropy(label_smoothing),
        metrics=[MaskedTokenAccuracy()],
        **kwargs,
    )
    return model
