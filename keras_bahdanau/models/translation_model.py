import keras
from keras import ops

# Reserved ids shared by every vocabulary and model in the package.
PAD_ID = 0
UNK_ID = 1
BOS_ID = 2
EOS_ID = 3
NUM_RESERVED_IDS = 4


def check_positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(
            f"`{name}` must be a positive integer. Received: {name}={value!r}"
        )


def check_vocabulary_size(name, value):
    check_positive_int(name, value)
    if value <= NUM_RESERVED_IDS:
        raise ValueError(
            f"`{name}` must be larger than the {NUM_RESERVED_IDS} reserved "
            f"ids (padding, unknown, begin, end). Received: {name}={value}"
        )


READOUT_STATES = ("previous", "current")


# Regularisation of the RNN models, all off in the paper (section 4.2 and
# appendix B): the constructor arguments and their defaults.
REGULARIZATION = {
    "dropout": 0.0,
    "embedding_dropout": 0.0,
    "word_dropout": 0.0,
    "hidden_dropout": 0.0,
    "recurrent_dropout": 0.0,
    "tie_embeddings": False,
}


def check_rnn_arguments(
    source_vocabulary_size,
    target_vocabulary_size,
    embedding_dim,
    hidden_dim,
    maxout_dim,
    readout_state,
    **regularization,
):
    """Checks the constructor arguments RNNSearch and RNNEncDec share."""
    check_vocabulary_size("source_vocabulary_size", source_vocabulary_size)
    check_vocabulary_size("target_vocabulary_size", target_vocabulary_size)
    check_positive_int("embedding_dim", embedding_dim)
    check_positive_int("hidden_dim", hidden_dim)
    check_positive_int("maxout_dim", maxout_dim)
    if readout_state not in READOUT_STATES:
        raise ValueError(
            f"`readout_state` must be one of {READOUT_STATES}. "
            f"Received: readout_state={readout_state!r}"
        )
    for name, value in regularization.items():
        if name == "tie_embeddings":
            if value and maxout_dim != embedding_dim:
                raise ValueError(
                    "`tie_embeddings=True` uses the target embedding as "
                    "the output projection of the maxout readout, so "
                    "`maxout_dim` must equal `embedding_dim`. Received: "
                    f"maxout_dim={maxout_dim}, embedding_dim={embedding_dim}"
                )
        elif not 0.0 <= value < 1.0:
            raise ValueError(
                f"`{name}` must be in [0, 1). Received: {name}={value}"
            )


class TranslationModel(keras.Model):
    """Base class of the sequence-to-sequence models of the package.

    A subclass builds a functional model in `__init__` whose inputs are
    `{"source_ids": (batch, Tx), "target_ids": (batch, Ty)}` (int, 0 is
    padding; `target_ids` start with the begin-of-sentence id) and whose
    output is float32 logits `(batch, Ty, target_vocabulary_size)`, and
    implements the decoding protocol used by `keras_bahdanau.decoding`:

    - `encode(source_ids, max_length=None) -> cache`: a dict of batch-major
      tensors, holding at least `"source_mask"`.
    - `decode_step(cache, previous_ids, step) -> (logits, attention, cache)`
      with logits `(batch, V)` float32 and attention `(batch, Tx)`.

    This class adds input checking, so that float ids or wrong ranks raise a
    clear error instead of failing deep inside a backend, and presets.
    """

    presets = {}

    def call(self, inputs, training=None, mask=None):
        self._check_inputs(inputs)
        return super().call(inputs, training=training, mask=mask)

    @staticmethod
    def _check_inputs(inputs):
        if not isinstance(inputs, dict) or set(inputs) != {
            "source_ids",
            "target_ids",
        }:
            keys = sorted(inputs) if isinstance(inputs, dict) else None
            raise ValueError(
                "Inputs must be a dict with exactly the keys 'source_ids' and "
                f"'target_ids'. Received: {type(inputs).__name__} "
                f"with keys {keys}"
            )
        for name, value in inputs.items():
            check_token_ids(name, value)

    @classmethod
    def from_preset(cls, name, **kwargs):
        """Builds a model with a preset's sizes; `kwargs` override them.

        Example:

        >>> model = RNNSearch.from_preset(
        ...     "rnnsearch_tiny", source_vocabulary_size=100,
        ...     target_vocabulary_size=120)
        """
        if name not in cls.presets:
            raise ValueError(
                f"Unknown preset for {cls.__name__}: {name!r}. "
                f"Available presets: {sorted(cls.presets)}"
            )
        return cls(**{**cls.presets[name], **kwargs})


def check_token_ids(name, value):
    """Raises a clear error unless `value` is a rank-2 integer tensor."""
    dtype = keras.backend.standardize_dtype(
        getattr(value, "dtype", None) or ops.convert_to_tensor(value).dtype
    )
    if "int" not in dtype:
        raise ValueError(
            f"`{name}` must hold integer token ids. Received dtype={dtype}. "
            "Tokenize text first; do not pass floats (they would be "
            "truncated silently)."
        )
    rank = len(value.shape)
    if rank != 2:
        raise ValueError(
            f"`{name}` must have shape (batch, length). Received rank {rank} "
            f"with shape {tuple(value.shape)}"
        )
