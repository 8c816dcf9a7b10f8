"""The base classes of the models and the checks of their arguments.

`TranslationModel` is what every model of the package is (inputs, logits,
the decoding protocol); `RNNTranslationModel` is what RNNsearch and
RNNencdec share: their embeddings, their readout and their config.
"""

import keras
from keras import ops

from keras_bahdanau.layers.maxout_dense import MaxoutDense
from keras_bahdanau.layers.reversible_embedding import ReversibleEmbedding
from keras_bahdanau.reserved import NUM_RESERVED_IDS
from keras_bahdanau.validation import check_choice
from keras_bahdanau.validation import check_int

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


def check_vocabulary_size(name, value):
    """Raises a `ValueError` unless `value` leaves room for a real word."""
    check_int(name, value)
    if value <= NUM_RESERVED_IDS:
        raise ValueError(
            f"`{name}` must be larger than the {NUM_RESERVED_IDS} reserved "
            f"ids (padding, unknown, begin, end). Received: {name}={value}"
        )


def check_rate(name, value):
    """Raises a `ValueError` unless `value` is a dropout rate in [0, 1)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 <= value < 1
    ):
        raise ValueError(
            f"`{name}` must be a float in [0, 1). Received: {name}={value!r}"
        )


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
    - optionally `decoding_scope()`: a context manager the searches run
      in, for terms every `decode_step` of a search shares.

    This class adds input checking, so that float ids or wrong ranks raise a
    clear error instead of failing deep inside a backend, and presets.
    """

    presets = {}

    def make_train_function(self, force=False):
        """Keras's train function; with XLA on TensorFlow, one per shape.

        Keras traces TensorFlow's train step with `reduce_retracing=True`,
        which relaxes the lengths of bucketed batches to unknown once it
        has seen two of them; XLA (`jit_compile`, which Keras turns on by
        default on a GPU) then cannot compile the gradient of the decoder's
        `while` loop ("... must be a compile-time constant"). On TensorFlow
        with `jit_compile` and one replica, each batch shape here gets its
        own compiled step instead, as on JAX: a run sees only a few shapes
        (the length buckets of `keras_bahdanau.data.make_dataset`).
        """
        if not (
            keras.backend.backend() == "tensorflow"
            and self.jit_compile
            and self.steps_per_execution == 1
            and self.distribute_strategy.num_replicas_in_sync == 1
        ):
            return super().make_train_function(force)
        if self.train_function is None or force:
            self.train_function = _train_function_per_shape(self)
        return self.train_function

    def call(self, inputs, training=None, mask=None):
        self._check_inputs(inputs)
        return super().call(inputs, training=training, mask=mask)

    @staticmethod
    def _check_inputs(inputs):
        keys = sorted(inputs) if isinstance(inputs, dict) else None
        if keys != ["source_ids", "target_ids"]:
            raise ValueError(
                "Inputs must be a dict with exactly the keys 'source_ids' and "
                f"'target_ids'. Received: {type(inputs).__name__} "
                f"with keys {keys}"
            )
        for name, value in inputs.items():
            check_token_ids(name, value)

    @staticmethod
    def _inputs():
        """The functional model's inputs: int32 ids `(batch, T)`."""
        return {
            name: keras.Input((None,), dtype="int32", name=name)
            for name in ("source_ids", "target_ids")
        }

    @classmethod
    def from_preset(cls, preset, load_weights=True, **kwargs):
        """A model of a size name, or the trained model of a preset folder.

        As keras-hub's `Backbone.from_preset`. A size name (a key of
        `cls.presets`, e.g. `"rnnsearch_tiny"`) builds an untrained model
        of those sizes, `kwargs` overriding them (the vocabulary sizes, at
        least). A preset folder (of `Translator.save_to_preset`, or a run
        directory of `keras-bahdanau train`) rebuilds the trained model
        from its config, with its weights; `Translator.from_preset` loads
        the same folder with its tokenizers and search.

        Args:
            preset: a size name, or the path of a preset folder.
            load_weights: for a folder, whether to load its weights (False:
                its model, freshly initialized).
            **kwargs: for a size name, constructor arguments.

        Example:

        >>> model = RNNSearch.from_preset(
        ...     "rnnsearch_tiny", source_vocabulary_size=100,
        ...     target_vocabulary_size=120)
        >>> trained = RNNSearch.from_preset("runs/ding_de_en")
        """
        if preset in cls.presets:
            return cls(**{**cls.presets[preset], **kwargs})
        import pathlib

        from keras_bahdanau import presets  # It imports this module.

        if not pathlib.Path(preset).is_dir():
            raise ValueError(
                f"Unknown preset for {cls.__name__}: {preset!r}, neither a "
                f"size nor a folder. Available presets: {sorted(cls.presets)}"
                ", or the folder of a trained model's preset."
            )
        if kwargs:
            raise ValueError(
                "A trained model's preset fixes its sizes: pass no "
                f"constructor arguments. Received: {sorted(kwargs)}"
            )
        found = presets.check_preset(preset)
        name = found.config.get("class_name")
        if cls.presets and name != cls.__name__:
            raise ValueError(
                f"{preset} holds a {name}, not a {cls.__name__}: load it "
                f"with {name}.from_preset or Translator.from_preset."
            )
        if load_weights:
            return presets.load_preset(preset)[0]
        return keras.saving.deserialize_keras_object(
            found.config, safe_mode=True
        )

    @classmethod
    def from_config(cls, config):
        # The constructor builds the graph (a serialized `dtype` policy
        # too), not `Functional.from_config`.
        return cls(**config)


def _train_function_per_shape(model):
    """`model.train_step` under `tf.function(jit_compile=True)`, traced
    once per distinct batch shape (TensorFlow backend only)."""
    import tensorflow as tf  # Only reached on the TensorFlow backend.

    @tf.function(jit_compile=True, autograph=False)
    def step(data):
        return model.distribute_strategy.run(model.train_step, args=(data,))

    def train_function(iterator):
        return step(next(iterator))

    return train_function


class RNNTranslationModel(TranslationModel):
    """Base of `RNNSearch` and `RNNEncDec`: the readout their decoders share.

    The two models differ in the context `c_i` (one per step from the
    alignment model in RNNsearch, one fixed `c` in RNNencdec) and in the
    encoder; both predict `y_i` from a decoder state `s`, the previous word
    and the context with the same maxout readout (Bahdanau et al., 2015,
    arXiv:1409.0473, appendix A.2.2; Cho et al., 2014, arXiv:1406.1078,
    section 2.2 and appendix A):

    ```
    t~_i = U_o s + V_o E y_{i-1} + C_o c_i            (2l values)
    t_i = [max(t~_{i,2j-1}, t~_{i,2j})]_{j=1..l}      (maxout)
    logits_i = W_o t_i
    ```

    `s` is `s_{i-1}` (`readout_state="previous"`, the appendix) or `s_i`
    (`"current"`: eq. (4) of the main text, and Cho et al.'s
    `g(s_i, y_{i-1}, c)`). `tie_embeddings=True` uses `E^T` as `W_o`.

    A subclass's `__init__` checks its arguments (`_check_arguments`),
    builds its layers into a `types.SimpleNamespace` (the torch backend
    forbids sub-modules before `keras.Model.__init__`) with `_embedding`
    and `_add_readout_layers`, wires the graph with `_embed` and
    `_teacher_forced_readout`, and ends with `super().__init__(layers,
    inputs, logits, config)`; its `decode_step` ends with `_readout_step`.
    Keep the order the layers are made in: it fixes the initial weights.

    Args:
        layers: the namespace of the layers, attached to the model under
            their names.
        inputs: the dict of the functional model's `keras.Input`s.
        logits: the functional model's output.
        config: the constructor arguments, from `_check_arguments`.
        **kwargs: `name`, `trainable`.
    """

    # The constructor arguments `get_config` returns; subclasses add theirs.
    config_keys = (
        "source_vocabulary_size",
        "target_vocabulary_size",
        "embedding_dim",
        "hidden_dim",
        "maxout_dim",
        "readout_state",
        *REGULARIZATION,
        "initialization",
        "dtype",
    )

    def __init__(self, layers, inputs, logits, config, **kwargs):
        super().__init__(inputs=inputs, outputs=logits, **kwargs)
        for name, layer in vars(layers).items():
            setattr(self, name, layer)
        self._config = config
        # The sizes, `readout_state`, ... as attributes too; not the rates
        # of the dropout layers that have their names (their `rate`).
        for key, value in config.items():
            if not hasattr(self, key):
                setattr(self, key, value)

    @classmethod
    def _check_arguments(cls, arguments):
        """Checks the constructor's arguments; returns those of the config.

        Args:
            arguments: the constructor's `locals()`.

        Returns:
            A dict with the keys `config_keys`.
        """
        config = {key: arguments[key] for key in cls.config_keys}
        for name in ("source_vocabulary_size", "target_vocabulary_size"):
            check_vocabulary_size(name, config[name])
        for name in ("embedding_dim", "hidden_dim", "maxout_dim"):
            check_int(name, config[name])
        check_choice("readout_state", config["readout_state"], READOUT_STATES)
        for name in REGULARIZATION:
            if name != "tie_embeddings":
                check_rate(name, config[name])
        if config["tie_embeddings"] and (
            config["maxout_dim"] != config["embedding_dim"]
        ):
            raise ValueError(
                "`tie_embeddings=True` uses the target embedding as the "
                "output projection of the maxout readout, so `maxout_dim` "
                "must equal `embedding_dim`. Received: maxout_dim="
                f"{config['maxout_dim']}, "
                f"embedding_dim={config['embedding_dim']}"
            )
        return config

    @staticmethod
    def _embedding(side, config, init):
        """`E-bar` (`side="source"`) or `E` (`"target"`), an `Embedding`;
        a tied `E` is a `ReversibleEmbedding`, also `W_o = E^T`."""
        tied = side == "target" and config["tie_embeddings"]
        layer = ReversibleEmbedding if tied else keras.layers.Embedding
        return layer(
            config[f"{side}_vocabulary_size"],
            config["embedding_dim"],
            embeddings_initializer=init["embedding"],
            dtype=config["dtype"],
            name=f"{side}_embedding",
        )

    @staticmethod
    def _add_readout_layers(layers, config, init):
        """Adds the maxout `[U_o, V_o, C_o]`, the dropout layers and `W_o`
        (None when tied: `W_o = E^T`)."""
        dtype = config["dtype"]
        layers.maxout = MaxoutDense(
            config["maxout_dim"],
            num_pieces=2,
            kernel_initializer=init["kernel"],
            dtype=dtype,
            name="maxout",
        )
        # Identities when the rate is 0.
        for name in ("readout_dropout", "embedding_dropout", "hidden_dropout"):
            rate = config["dropout" if name == "readout_dropout" else name]
            setattr(
                layers, name, keras.layers.Dropout(rate, dtype=dtype, name=name)
            )
        # (batch, T, 1) noise: a token's whole embedding is kept or dropped.
        layers.word_dropout = keras.layers.Dropout(
            config["word_dropout"],
            noise_shape=(None, None, 1),
            dtype=dtype,
            name="word_dropout",
        )
        layers.output_projection = None
        if not config["tie_embeddings"]:
            layers.output_projection = keras.layers.Dense(
                config["target_vocabulary_size"],
                kernel_initializer=init["kernel"],
                dtype="float32",
                name="output_projection",
            )

    @staticmethod
    def _embed(layers, embedding, ids):
        """Embeds `(batch, T)` ids; drops whole tokens, then units, in
        training."""
        return layers.embedding_dropout(layers.word_dropout(embedding(ids)))

    @staticmethod
    def _readout(layers, states, target_embedded, contexts):
        """`W_o maxout(U_o s + V_o E y_{i-1} + C_o c_i)`: float32 logits."""
        features = ops.concatenate([states, target_embedded, contexts], -1)
        hidden = layers.readout_dropout(layers.maxout(features))
        if layers.output_projection is None:  # W_o = E^T
            return layers.target_embedding(hidden, reverse=True)
        return layers.output_projection(hidden)

    @classmethod
    def _teacher_forced_readout(
        cls, layers, config, initial_state, states, target_embedded, contexts
    ):
        """The logits of every step `(batch, Ty, V)` from `s_1 .. s_Ty`."""
        if config["readout_state"] == "previous":
            # s_0 .. s_{Ty-1}: shift the states right by one step.
            states = ops.concatenate(
                [ops.expand_dims(initial_state, 1), states[:, :-1]], axis=1
            )
        states = layers.hidden_dropout(states)
        return cls._readout(layers, states, target_embedded, contexts)

    def _readout_step(self, previous_state, state, embedded, context):
        """One step's logits `(batch, V)` from `s_{i-1}` or `s_i`."""
        if self.readout_state == "previous":
            state = previous_state
        return self._readout(self, state, embedded, context)

    def get_config(self):
        config = {
            **self._config,
            "name": self.name,
            "trainable": self.trainable,
        }
        if config["dtype"] is not None:
            # What the layers were built with: the functional model's own
            # policy is the global one.
            config["dtype"] = keras.dtype_policies.serialize(
                keras.dtype_policies.get(config["dtype"])
            )
        return config
