import types

import keras
from keras import ops

from keras_bahdanau.initializers import BlockOrthogonal
from keras_bahdanau.initializers import paper_initializers
from keras_bahdanau.layers.context_gru_cell import ContextGRUCell
from keras_bahdanau.models.rnn_enc_dec.presets import RNN_ENC_DEC_PRESETS
from keras_bahdanau.models.translation_model import RNNTranslationModel


@keras.saving.register_keras_serializable(package="keras_bahdanau")
class RNNEncDec(RNNTranslationModel):
    """RNNencdec: the fixed-context encoder-decoder baseline (Cho et al.).

    The model RNNsearch is compared with in Bahdanau et al. (2015, section
    4.2), as Cho et al. (2014) define it in appendix A. The encoder (A.1) is
    one GRU over the source, `c` a summary of its last state:

    ```
    h_t   = z_t * h_{t-1} + (1 - z_t) * tanh(W e(x_t) + U [r_t * h_{t-1}])
    c     = tanh(V h_N)
    ```

    `h_N` being the state after the last real source word (padding is
    masked) and `z_t`, `r_t` the gates of `keras.layers.GRU(reset_after=
    False)`, whose update convention is Cho et al.'s. The decoder (A.2)
    starts from `h'_0 = tanh(V' c)` and conditions every step on the same
    `c`, inside the gates and, in the candidate, inside the reset gate (see
    `ContextGRUCell`):

    ```
    z'_t  = sigmoid(W'_z e(y_{t-1}) + U'_z h'_{t-1} + C_z c)
    r'_t  = sigmoid(W'_r e(y_{t-1}) + U'_r h'_{t-1} + C_r c)
    h'_t  = z'_t * h'_{t-1}
            + (1 - z'_t) * tanh(W' e(y_{t-1}) + r'_t * (U' h'_{t-1} + C c))
    s'_t  = O_h h'_t + O_y e(y_{t-1}) + O_c c,  logits = G maxout(s'_t)
    ```

    In the code: `V` is `context_projection`, `V'`
    `initial_state_projection`, `[W'_z, W'_r, W']`, `[U'_z, U'_r, U']` and
    `[C_z, C_r, C]` the `kernel`, `recurrent_kernel` and `context_kernel`
    of `decoder.cell`, `[O_h; O_y; O_c]` the `maxout` kernel (`U_o`, `V_o`,
    `C_o` in `RNNTranslationModel`) and `G` `output_projection` (`W_o`).
    Every map has a bias, which the paper leaves out. As in RNNsearch's
    readout, the previous word enters `s'_t` through its embedding, and the
    first step reads the embedding of the begin-of-sentence id.

    Same inputs, outputs and decoding protocol as `RNNSearch`, so training,
    search and evaluation treat the two alike. It has no alignment:
    `decode_step` returns all-zero attention weights.

    Args:
        source_vocabulary_size: int, `K_x` (ids 0-3 are reserved).
        target_vocabulary_size: int, `K_y`.
        embedding_dim: int, `m` (620 in the paper).
        hidden_dim: int, encoder and decoder size (1000 in the paper); `c`
            has this size too.
        maxout_dim: int, `l` (500 in the paper).
        readout_state: `"current"` (Cho et al.'s `O_h h'_t`, default) or
            `"previous"` (`h'_{t-1}`).
        dropout, embedding_dropout, word_dropout, recurrent_dropout,
            tie_embeddings: as for `RNNSearch` (`recurrent_dropout` acts on
            the encoder GRU).
        hidden_dropout: float, dropout on the summary `c` (after `h'_0` is
            computed from it) and on the decoder states that enter the
            readout.
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
        Cho, van Merrienboer, Gulcehre, Bahdanau, Bougares, Schwenk,
        Bengio. Learning Phrase Representations using RNN Encoder-Decoder
        for Statistical Machine Translation. EMNLP 2014, arXiv:1406.1078,
        section 2.2 and appendix A (A.1 encoder, A.2 decoder and maxout
        readout). Bahdanau et al. 2015, arXiv:1409.0473, section 4.2
        (RNNencdec).
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
        config = self._check_arguments(locals())
        init = paper_initializers(initialization)
        n = hidden_dim

        def dense(name):
            return keras.layers.Dense(
                n,
                activation="tanh",
                kernel_initializer=init["kernel"],
                dtype=dtype,
                name=name,
            )

        # === Layers === (attached to `self` by `RNNTranslationModel`)
        layers = types.SimpleNamespace()
        layers.source_embedding = self._embedding("source", config, init)
        layers.encoder = keras.layers.GRU(
            n,
            reset_after=False,
            recurrent_dropout=recurrent_dropout,
            kernel_initializer=init["kernel"],
            recurrent_initializer=BlockOrthogonal(),
            dtype=dtype,
            name="encoder",
        )
        layers.context_projection = dense("context_projection")  # V
        layers.initial_state_projection = dense("initial_state_projection")
        layers.target_embedding = self._embedding("target", config, init)
        cell = ContextGRUCell(
            n,
            context_dim=n,
            kernel_initializer=init["kernel"],
            dtype=dtype,
        )
        layers.decoder = keras.layers.RNN(
            cell, return_sequences=True, dtype=dtype, name="decoder"
        )
        self._add_readout_layers(layers, config, init)

        # === Functional Model ===
        inputs = self._inputs()
        context, initial_state = self._encode(
            layers, inputs["source_ids"], ops.not_equal(inputs["source_ids"], 0)
        )
        context = layers.hidden_dropout(context)
        target_embedded = self._embed(
            layers, layers.target_embedding, inputs["target_ids"]
        )
        # h'_1 .. h'_Ty; `c` rides along as the cell's second state.
        states = layers.decoder(
            target_embedded, initial_state=[initial_state, context]
        )
        # (b, n) -> (b, Ty, n): the same context at every step, for C_o c.
        # A broadcast, not ops.repeat: Ty is unknown while the graph is built.
        contexts = ops.expand_dims(context, 1) * ops.ones_like(
            target_embedded[:, :, :1]
        )
        logits = self._teacher_forced_readout(
            layers, config, initial_state, states, target_embedded, contexts
        )
        super().__init__(layers, inputs, logits, config, **kwargs)

    @classmethod
    def _encode(cls, layers, source_ids, source_mask):
        """The fixed context `c` (batch, n) and `h'_0` (batch, n)."""
        embedded = cls._embed(layers, layers.source_embedding, source_ids)
        # The GRU skips masked steps, so this is h_N, the state after the
        # last real word.
        last_state = layers.encoder(embedded, mask=source_mask)
        context = layers.context_projection(last_state)  # c = tanh(V h_N)
        return context, layers.initial_state_projection(context)

    def encode(self, source_ids, max_length=None):
        """Runs the encoder once per sentence; returns the decoding cache.

        Args:
            source_ids: int `(batch, Tx)`.
            max_length: unused (RNN decoders need no target buffer).

        Returns:
            dict with `context` `c` (batch, n), `context_terms`
            `[C_z; C_r; C] c` (batch, 3n), computed once for all steps
            (see `ContextGRUCell.precompute`), `source_mask` bool
            (batch, Tx) and `state` `h'_0` (batch, n).
        """
        source_ids = ops.convert_to_tensor(source_ids, "int32")
        source_mask = ops.not_equal(source_ids, 0)
        context, state = self._encode(self, source_ids, source_mask)
        return {
            "context": context,
            "context_terms": self.decoder.cell.precompute(context),
            "source_mask": source_mask,
            "state": state,
        }

    def decode_step(self, cache, previous_ids, step=None):
        """One decoder step (A.2) and the readout.

        Args:
            cache: from `encode` (or a previous `decode_step`).
            previous_ids: int `(batch,)`, `y_{t-1}` (BOS at the first step).
            step: unused (the state carries the position).

        Returns:
            `(logits, attention, cache)`: float32 `(batch, V)`, all-zero
            attention `(batch, Tx)` (RNNencdec has no alignment), and the
            cache holding `h'_t`.
        """
        embedded = self.target_embedding(previous_ids)  # (b,) -> (b, m)
        cell = self.decoder.cell
        state = cell.step(
            cell.project_inputs(embedded),
            cache["state"],
            cache["context_terms"],
        )
        logits = self._readout_step(
            cache["state"], state, embedded, cache["context"]
        )
        attention = ops.zeros(ops.shape(cache["source_mask"]), "float32")
        return logits, attention, {**cache, "state": state}
