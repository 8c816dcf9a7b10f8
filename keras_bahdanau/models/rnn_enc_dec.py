import types

import keras
from keras import ops

from keras_bahdanau.initializers import BlockOrthogonal
from keras_bahdanau.layers.maxout_dense import MaxoutDense
from keras_bahdanau.models.rnn_search import RNNSearch
from keras_bahdanau.models.rnn_search_presets import RNN_ENC_DEC_PRESETS
from keras_bahdanau.models.translation_model import TranslationModel
from keras_bahdanau.models.translation_model import check_rnn_arguments
from keras_bahdanau.models.translation_model import paper_initializers


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
        dropout: float, dropout on the maxout output.
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
        initialization="paper",
        dtype=None,
        **kwargs,
    ):
        check_rnn_arguments(
            source_vocabulary_size,
            target_vocabulary_size,
            embedding_dim,
            hidden_dim,
            maxout_dim,
            readout_state,
            dropout,
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
        layers.encoder = gru("encoder")
        layers.context_projection = dense(
            n, "context_projection", activation="tanh"
        )
        layers.initial_state_projection = dense(
            n, "initial_state_projection", activation="tanh"
        )
        layers.target_embedding = keras.layers.Embedding(
            target_vocabulary_size,
            embedding_dim,
            embeddings_initializer=init["embedding"],
            dtype=dtype,
            name="target_embedding",
        )
        layers.decoder = gru("decoder", return_sequences=True)
        layers.maxout = MaxoutDense(
            maxout_dim,
            num_pieces=2,
            kernel_initializer=init["kernel"],
            dtype=dtype,
            name="maxout",
        )
        layers.readout_dropout = keras.layers.Dropout(
            dropout, dtype=dtype, name="readout_dropout"
        )
        layers.output_projection = keras.layers.Dense(
            target_vocabulary_size,
            kernel_initializer=init["kernel"],
            dtype="float32",
            name="output_projection",
        )

        # === Functional Model ===
        source_ids = keras.Input((None,), dtype="int32", name="source_ids")
        target_ids = keras.Input((None,), dtype="int32", name="target_ids")
        context, initial_state = self._encode(
            layers, source_ids, ops.not_equal(source_ids, 0)
        )
        target_embedded = layers.target_embedding(target_ids)  # (b,Ty,m)
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
        logits = RNNSearch._readout(layers, states, target_embedded, contexts)
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
        self.dropout = dropout
        self.initialization = initialization

    @staticmethod
    def _encode(layers, source_ids, source_mask):
        """The fixed context `c` (batch, n) and `s_0` (batch, n)."""
        embedded = layers.source_embedding(source_ids)  # (b, Tx, m)
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
        logits = RNNSearch._readout(self, readout_state, embedded, context)
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
            "dropout": self.dropout,
            "initialization": self.initialization,
            "name": self.name,
            "trainable": self.trainable,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)
