import types

import keras
from keras import ops

from keras_bahdanau.initializers import BlockOrthogonal
from keras_bahdanau.initializers import paper_initializers
from keras_bahdanau.layers.maxout_dense import MaxoutDense
from keras_bahdanau.models.rnn_search import add_dropout_layers
from keras_bahdanau.models.rnn_search import embed
from keras_bahdanau.models.rnn_search import output_projection
from keras_bahdanau.models.rnn_search import readout
from keras_bahdanau.models.rnn_search import target_embedding
from keras_bahdanau.models.rnn_search_presets import RNN_ENC_DEC_PRESETS
from keras_bahdanau.models.translation_model import TranslationModel
from keras_bahdanau.models.translation_model import check_rnn_arguments


@keras.saving.register_keras_serializable(package="keras_bahdanau")
class RNNEncDec(TranslationModel):
    """RNNencdec: the fixed-context encoder-decoder baseline (Cho et al.).

    The model RNNsearch is compared with in Bahdanau et al. (2015): a GRU
    encoder reads the source into one vector `c = tanh(V h_Tx)` (`h_Tx` is the
    state after the last real word), the decoder starts from
    `s_0 = tanh(W_s c)` and conditions every step on the same `c`:

    ```
    s_i = GRU(s_{i-1}, [E y_{i-1}; c])
    t~_i = U_o s_i + V_o E y_{i-1} + C_o c,  logits = W_o maxout(t~_i)
    ```

    Same inputs, outputs and decoding protocol as `RNNSearch`, so training,
    search and evaluation treat the two alike. It has no alignment:
    `decode_step` returns all-zero attention weights.

    Args:
        source_vocabulary_size: int, `K_x` (ids 0-3 are reserved).
        target_vocabulary_size: int, `K_y`.
        embedding_dim: int, `m` (620 in the paper).
        hidden_dim: int, encoder and decoder size (1000 in the paper).
        maxout_dim: int, `l` (500 in the paper).
        readout_state: `"current"` (Cho et al.'s `g(s_i, y_{i-1}, c)`,
            default) or `"previous"`.
        dropout, embedding_dropout, word_dropout, recurrent_dropout,
            tie_embeddings: as for `RNNSearch` (`recurrent_dropout` acts on
            the encoder GRU).
        hidden_dropout: float, dropout on the summary `c` and on the
            decoder states that enter the readout.
        initialization: `"paper"` or `"glorot"` (see `RNNSearch`).
        dtype: dtype policy; logits are always float32.
        **kwargs: `name`, `trainable`.

    Example:

    >>> model = RNNEncDec(100, 120, embedding_dim=16, hidden_dim=32,
    ...                   maxout_dim=16)
    >>> logits = model({"source_ids": np.array([[5, 6, 7, 0]]),
    ...                 "target_ids": np.array([[2, 8, 9]])})
    >>> tuple(logits.shape)
    (1, 3, 120)

    Reference:
        Cho et al. Learning Phrase Representations using RNN Encoder-Decoder
        for Statistical Machine Translation. EMNLP 2014. Bahdanau et al.
        2015, section 4.2 (RNNencdec).
    """

    presets = RNN_ENC_DEC_PRESETS

    def __init__(
        self,
        source_vocabulary_size,
        target_vocabulary_size,
        embedding_dim=620,
        hidden_dim=1000,
        maxout_dim=500,
        readout_state="current",
        dropout=0.0,
        embedding_dropout=0.0,
        word_dropout=0.0,
        hidden_dropout=0.0,
        recurrent_dropout=0.0,
        tie_embeddings=False,
        initialization="paper",
        dtype=None,
        **kwargs,
    ):
        regularization = dict(
            dropout=dropout,
            embedding_dropout=embedding_dropout,
            word_dropout=word_dropout,
            hidden_dropout=hidden_dropout,
            recurrent_dropout=recurrent_dropout,
            tie_embeddings=tie_embeddings,
        )
        check_rnn_arguments(
            source_vocabulary_size,
            target_vocabulary_size,
            embedding_dim,
            hidden_dim,
            maxout_dim,
            readout_state,
            **regularization,
        )
        init = paper_initializers(initialization)
        n = hidden_dim

        def gru(name, **gru_kwargs):
            return keras.layers.GRU(
                n,
                reset_after=False,
                kernel_initializer=init["kernel"],
                recurrent_initializer=BlockOrthogonal(),
                dtype=dtype,
                name=name,
                **gru_kwargs,
            )

        def dense(units, name, **dense_kwargs):
            return keras.layers.Dense(
                units,
                kernel_initializer=init["kernel"],
                dtype=dtype,
                name=name,
                **dense_kwargs,
            )

        # === Layers === (attached to `self` below; see RNNSearch)
        layers = types.SimpleNamespace()
        layers.source_embedding = keras.layers.Embedding(
            source_vocabulary_size,
            embedding_dim,
            embeddings_initializer=init["embedding"],
            dtype=dtype,
            name="source_embedding",
        )
        layers.encoder = gru("encoder", recurrent_dropout=recurrent_dropout)
        layers.context_projection = dense(
            n, "context_projection", activation="tanh"
        )
        layers.initial_state_projection = dense(
            n, "initial_state_projection", activation="tanh"
        )
        layers.target_embedding = target_embedding(
            target_vocabulary_size, embedding_dim, init, dtype, tie_embeddings
        )
        layers.decoder = gru("decoder", return_sequences=True)
        layers.maxout = MaxoutDense(
            maxout_dim,
            num_pieces=2,
            kernel_initializer=init["kernel"],
            dtype=dtype,
            name="maxout",
        )
        add_dropout_layers(layers, dtype, **regularization)
        layers.output_projection = output_projection(
            target_vocabulary_size, init, tie_embeddings
        )

        # === Functional Model ===
        source_ids = keras.Input((None,), dtype="int32", name="source_ids")
        target_ids = keras.Input((None,), dtype="int32", name="target_ids")
        context, initial_state = self._encode(
            layers, source_ids, ops.not_equal(source_ids, 0)
        )
        context = layers.hidden_dropout(context)
        target_embedded = embed(layers, layers.target_embedding, target_ids)
        # (b, n) -> (b, Ty, n): the same context at every step.
        # A broadcast, not ops.repeat: Ty is unknown while the graph is built.
        contexts = ops.expand_dims(context, 1) * ops.ones_like(
            target_embedded[:, :, :1]
        )
        states = layers.decoder(
            ops.concatenate([target_embedded, contexts], axis=-1),
            initial_state=initial_state,
        )  # s_1 .. s_Ty
        if readout_state == "previous":
            states = ops.concatenate(
                [ops.expand_dims(initial_state, 1), states[:, :-1]], axis=1
            )
        states = layers.hidden_dropout(states)
        logits = readout(layers, states, target_embedded, contexts)
        super().__init__(
            inputs={"source_ids": source_ids, "target_ids": target_ids},
            outputs=logits,
            **kwargs,
        )
        for name, layer in vars(layers).items():
            setattr(self, name, layer)

        # === Config ===
        self.source_vocabulary_size = source_vocabulary_size
        self.target_vocabulary_size = target_vocabulary_size
        self.embedding_dim = embedding_dim
        self.hidden_dim = hidden_dim
        self.maxout_dim = maxout_dim
        self.readout_state = readout_state
        self.regularization = regularization  # as RNNSearch
        self.initialization = initialization
        # What the layers were built with, for get_config: the functional
        # model's own policy is the global one.
        self.layer_dtype = (
            keras.dtype_policies.serialize(keras.dtype_policies.get(dtype))
            if dtype is not None
            else None
        )

    @staticmethod
    def _encode(layers, source_ids, source_mask):
        """The fixed context `c` (batch, n) and `s_0` (batch, n)."""
        embedded = embed(layers, layers.source_embedding, source_ids)
        last_state = layers.encoder(embedded, mask=source_mask)  # h_Tx
        context = layers.context_projection(last_state)
        return context, layers.initial_state_projection(context)

    def encode(self, source_ids, max_length=None):
        """Returns the decoding cache: `context`, `state` and `source_mask`."""
        source_ids = ops.convert_to_tensor(source_ids, "int32")
        source_mask = ops.not_equal(source_ids, 0)
        context, state = self._encode(self, source_ids, source_mask)
        return {"context": context, "source_mask": source_mask, "state": state}

    def decode_step(self, cache, previous_ids, step=None):
        """One decoder step; the attention returned is all zeros."""
        embedded = self.target_embedding(previous_ids)  # (b,) -> (b, m)
        previous_state = cache["state"]
        context = cache["context"]
        state, _ = self.decoder.cell(
            ops.concatenate([embedded, context], axis=-1), [previous_state]
        )
        state = state[0] if isinstance(state, (list, tuple)) else state
        readout_state = (
            previous_state if self.readout_state == "previous" else state
        )
        logits = readout(self, readout_state, embedded, context)
        attention = ops.zeros(ops.shape(cache["source_mask"]), "float32")
        return logits, attention, {**cache, "state": state}

    def get_config(self):
        return {
            "source_vocabulary_size": self.source_vocabulary_size,
            "target_vocabulary_size": self.target_vocabulary_size,
            "embedding_dim": self.embedding_dim,
            "hidden_dim": self.hidden_dim,
            "maxout_dim": self.maxout_dim,
            "readout_state": self.readout_state,
            **self.regularization,
            "initialization": self.initialization,
            "dtype": self.layer_dtype,
            "name": self.name,
            "trainable": self.trainable,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)
