import types

import keras
from keras import ops

from keras_bahdanau.initializers import BlockOrthogonal
from keras_bahdanau.initializers import paper_initializers
from keras_bahdanau.layers.attention_decoder import AttentionDecoder
from keras_bahdanau.layers.projected_gru_cell import ProjectedGRUCell
from keras_bahdanau.layers.projected_rnn import ProjectedRNN
from keras_bahdanau.models.rnn_search.presets import RNN_SEARCH_PRESETS
from keras_bahdanau.models.translation_model import RNNTranslationModel
from keras_bahdanau.validation import check_int


@keras.saving.register_keras_serializable(package="keras_bahdanau")
class RNNSearch(RNNTranslationModel):
    """RNNsearch: the attention-based encoder-decoder of Bahdanau et al.

    Encoder (A.2.1): one source embedding `E-bar` shared by a forward and a
    backward GRU; the annotation of word `j` is `h_j = [h->_j; h<-_j]`.

    Decoder (A.2.2): `s_0 = tanh(W_s h<-_1)`, `h<-_1` being the backward
    state at the first real source word; then at each step the alignment
    model (A.1.2) gives `c_i` from `s_{i-1}` and the conditional GRU gives
    `s_i` (see `AttentionGRUCell`). Readout: `t~_i = U_o s_{i-1} +
    V_o E y_{i-1} + C_o c_i`, a maxout over pairs, and `W_o t_i` are the
    logits. `readout_state="current"` uses `s_i` instead of `s_{i-1}`, the
    form of eq. (4) in the main text.

    The encoder GRU follows the paper (`reset_after=False`, the reset gate
    applied before the recurrent product), in a `ProjectedRNN` that
    multiplies the inputs of all steps at once; `reset_after=True` gives
    the cuDNN form, faster on GPUs (`keras.layers.GRU`). Keras's GRU keeps
    `z` of the old state where the paper keeps `1 - z`; with `z_keras = 1 -
    z_paper` the two are the same function, and the tests check the paper's
    equations with that mapping.

    Initialization (`initialization="paper"`, appendix B.1): weight matrices
    N(0, 0.01^2), `W_a` and `U_a` N(0, 0.001^2), orthogonal recurrent
    matrices, zero biases and zero `v_a`, so the first alignments are
    uniform. `"glorot"` trains faster for small models.

    Args:
        source_vocabulary_size: int, `K_x` (ids 0-3 are reserved).
        target_vocabulary_size: int, `K_y`.
        embedding_dim: int, `m` (620 in the paper).
        hidden_dim: int, `n` (1000 in the paper); annotations are `2n`.
        maxout_dim: int, `l` (500 in the paper).
        attention_dim: int, hidden size `n'` of the alignment model;
            defaults to `hidden_dim`.
        reset_after: bool, encoder GRU form (see above).
        readout_state: `"previous"` (appendix, default) or `"current"`.
        dropout: float, dropout on the maxout output `t_i` (0 in the paper).
        embedding_dropout: float, dropout on the units of the source and
            target embeddings `E-bar x_j`, `E y_{i-1}` (Gal & Ghahramani,
            2016, arXiv:1512.05287).
        word_dropout: float, the probability that a whole source or target
            token is dropped (its embedding zeroed) in training (Sennrich,
            Haddow & Birch, 2016, arXiv:1606.02891, section 4.1).
        hidden_dropout: float, dropout on the annotations `h_j` and on the
            decoder states `s` that enter the readout.
        recurrent_dropout: float, variational dropout on the recurrent
            state of the encoder GRUs (Keras `GRU(recurrent_dropout=...)`).
        tie_embeddings: bool, whether the target embedding `E` is also the
            output projection `W_o` (`W_o = E^T`, with a bias; Press & Wolf,
            2017, arXiv:1608.05859); needs `maxout_dim == embedding_dim`.
        initialization: `"paper"` or `"glorot"`.
        dtype: dtype policy for the layers; logits are always float32.

        All dropout is active in training only and 0 in the paper's recipe;
        Sennrich & Zhang (2019, arXiv:1905.11901) found it, with tied
        embeddings, to matter most for small corpora.
        **kwargs: `name`, `trainable`.

    Inputs:
        `{"source_ids": int (batch, Tx), "target_ids": int (batch, Ty)}`;
        `target_ids` are the decoder inputs `(BOS, y_1, ..., y_{Ty-1})`;
        0 is padding.

    Outputs:
        float32 logits `(batch, Ty, target_vocabulary_size)`.

    Example:

    >>> model = RNNSearch(100, 120, embedding_dim=16, hidden_dim=32,
    ...                   maxout_dim=16)
    >>> logits = model({"source_ids": np.array([[5, 6, 7, 0]]),
    ...                 "target_ids": np.array([[2, 8, 9]])})
    >>> tuple(logits.shape)
    (1, 3, 120)

    Reference:
        Bahdanau, Cho, Bengio. Neural Machine Translation by Jointly Learning
        to Align and Translate. ICLR 2015, arXiv:1409.0473. Appendix
        A.1.2, A.2.1, A.2.2 (the readout: see `RNNTranslationModel`), B.1.
    """

    presets = RNN_SEARCH_PRESETS
    config_keys = (
        *RNNTranslationModel.config_keys,
        "attention_dim",
        "reset_after",
    )

    def __init__(
        self,
        source_vocabulary_size,
        target_vocabulary_size,
        embedding_dim=620,
        hidden_dim=1000,
        maxout_dim=500,
        attention_dim=None,
        reset_after=False,
        readout_state="previous",
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
        check_int("attention_dim", attention_dim, allow_none=True)
        init = paper_initializers(initialization)
        n = hidden_dim

        # === Layers === (attached to `self` by `RNNTranslationModel`)
        layers = types.SimpleNamespace()
        layers.source_embedding = self._embedding("source", config, init)
        gru_arguments = {
            "reset_after": reset_after,
            "recurrent_dropout": recurrent_dropout,
            "kernel_initializer": init["kernel"],
            "recurrent_initializer": BlockOrthogonal(),
            "dtype": dtype,
        }
        if reset_after:  # keras.layers.GRU: cuDNN's kernel on a GPU.
            gru = keras.layers.GRU(
                n, return_sequences=True, return_state=True, **gru_arguments
            )
        else:  # The same weights, the input products out of the loop.
            gru = ProjectedRNN(
                ProjectedGRUCell(n, **gru_arguments),
                return_sequences=True,
                return_state=True,
                dtype=dtype,
            )
        layers.encoder = keras.layers.Bidirectional(
            gru,
            merge_mode="concat",
            dtype=dtype,
            name="encoder",
        )
        layers.initial_state_projection = keras.layers.Dense(
            n,
            activation="tanh",
            kernel_initializer=init["kernel"],
            dtype=dtype,
            name="initial_state_projection",  # W_s
        )
        layers.target_embedding = self._embedding("target", config, init)
        layers.decoder = AttentionDecoder(
            n,
            context_dim=2 * n,
            attention_units=attention_dim,
            kernel_initializer=init["kernel"],
            attention_kernel_initializer=init["attention"],
            dtype=dtype,
            name="decoder",
        )
        self._add_readout_layers(layers, config, init)

        # === Functional Model ===
        inputs = self._inputs()
        source_mask = ops.not_equal(inputs["source_ids"], 0)
        annotations, initial_state = self._encode(
            layers, inputs["source_ids"], source_mask
        )
        annotations = layers.hidden_dropout(annotations)
        target_embedded = self._embed(
            layers, layers.target_embedding, inputs["target_ids"]
        )
        # (b, Ty, m) -> (b, Ty, n + 2n): [s_i; c_i] for every step.
        decoder_outputs = layers.decoder(
            target_embedded, annotations, initial_state, source_mask
        )
        logits = self._teacher_forced_readout(
            layers,
            config,
            initial_state,
            decoder_outputs[:, :, :n],  # s_1 .. s_Ty
            target_embedded,
            decoder_outputs[:, :, n:],  # c_1 .. c_Ty
        )
        super().__init__(layers, inputs, logits, config, **kwargs)

    @classmethod
    def _encode(cls, layers, source_ids, source_mask):
        """Annotations `h_j` (batch, Tx, 2n) and `s_0` (batch, n)."""
        embedded = cls._embed(layers, layers.source_embedding, source_ids)
        annotations, _, backward_state = layers.encoder(
            embedded, mask=source_mask
        )
        # The backward GRU reads right to left and skips padding, so its
        # final state is h<-_1, the state at the first real word.
        return annotations, layers.initial_state_projection(backward_state)

    def encode(self, source_ids, max_length=None):
        """Runs the encoder once per sentence; returns the decoding cache.

        Args:
            source_ids: int `(batch, Tx)`.
            max_length: unused (RNN decoders need no target buffer).

        Returns:
            dict with the decoder's per-sentence terms (`keys` `U_a h_j`
            and `values` `[h_j; C h_j]`, the annotations first; see
            `AttentionGRUCell.precompute`), `source_mask` bool (batch, Tx)
            and `state` `s_0` (batch, n).
        """
        source_ids = ops.convert_to_tensor(source_ids, "int32")
        source_mask = ops.not_equal(source_ids, 0)
        annotations, state = self._encode(self, source_ids, source_mask)
        memory = self.decoder.cell.precompute(annotations, source_mask)
        return {**memory, "state": state}

    def decoding_scope(self):
        """Within it, every `decode_step` reads the decoder's recurrent
        kernels `[W_a, U_z, U_r]` and `U` joined once, not at each step
        (the searches enter it)."""
        return self.decoder.cell.recurrent_kernels_split_once()

    def decode_step(self, cache, previous_ids, step=None):
        """One decoder step: the decoder cell of A.2.2 and the readout.

        Args:
            cache: from `encode` (or a previous `decode_step`).
            previous_ids: int `(batch,)`, `y_{i-1}` (BOS at the first step).
            step: unused (the state carries the position).

        Returns:
            `(logits, attention, cache)`: float32 `(batch, V)`, the alignment
            `alpha_i` `(batch, Tx)`, and the cache holding `s_i`.
        """
        embedded = self.target_embedding(previous_ids)  # (b,) -> (b, m)
        cell = self.decoder.cell
        # c_i from s_{i-1} (A.1.2), then s_i.
        state, context, attention = cell.step(
            cell.project_inputs(embedded), cache["state"], cache
        )
        logits = self._readout_step(cache["state"], state, embedded, context)
        return logits, attention, {**cache, "state": state}
