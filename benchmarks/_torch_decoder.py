"""A plain-PyTorch RNNsearch decoder: the reference of decode_throughput.py.

What a user would write by hand to translate with a trained RNNsearch,
batched, in float32 under `torch.inference_mode()`: the same equations as
`keras_bahdanau.models.RNNSearch` (Bahdanau, Cho & Bengio, 2015,
arXiv:1409.0473, appendix A.1.2 and A.2), with the weights copied from a
Keras model by `TorchRNNSearchDecoder.from_keras`, and the same search
rules as `keras_bahdanau.decoding.greedy_search` and `beam_search` with
no length or coverage penalty.

Encoder (A.2.1): the source embedding, a forward and a backward GRU
written out (Keras's form: the kernel columns are `[z, r, h]`, the old
state is kept with weight `z`; `reset_after=False` applies the reset gate
before the recurrent product, as the paper does), the input products
`x W + b` of all positions in one product per direction, the backward
state held over right padding. Per sentence, once: `s_0 = tanh(W_s h<-_1
+ b_s)`, the keys `U_a h_j` and, by linearity of `C c_i = sum_j alpha_ij
C h_j`, the context terms `[C_z; C_r; C] h_j` of the gates (the package
computes both once too).

Decoder step (A.2.2), the paper's gate convention (`1 - z` of the old
state):

```
e_ij  = v_a^T tanh(W_a s_{i-1} + U_a h_j),  alpha_i = softmax_j(e_ij)
c_i   = sum_j alpha_ij h_j
z, r  = sigmoid([W_z; W_r] E y_{i-1} + [U_z; U_r] s_{i-1} + [C_z; C_r] c_i
                + b)
s~_i  = tanh(W E y_{i-1} + U (r * s_{i-1}) + C c_i + b)
s_i   = (1 - z) * s_{i-1} + z * s~_i
t_i   = maxout over pairs of ([U_o, V_o, C_o] [s_{i-1}; E y_{i-1}; c_i]
                              + b_o)
logits = W_o t_i + b
```

Search rules (as `keras_bahdanau.decoding.beam_search`): the float32
log-softmax of the logits; `[PAD]` and `[BOS]` are never emitted, and the
last of `max_length` tokens can only be EOS. Greedy search takes the
argmax until every sentence has said EOS. Beam search keeps the
`beam_size` best unfinished hypotheses and a separate pool of the
`beam_size` best finished ones: at each step the `2 * beam_size` best
candidates by `log P(Y|X)`; EOS among the first `beam_size` enter the
pool (score `log P(Y|X)`: no length penalty); the `beam_size` best
non-EOS ones stay alive; a sentence stops when its best alive hypothesis
cannot beat the worst pooled one. Unlike the package's searches, this
decoder records no attention weights and reorders only the decoder
states with the beams (the per-sentence tensors are the same for every
beam of a sentence).
"""

import torch

PAD_ID = 0  # keras_bahdanau.reserved
BOS_ID = 2
EOS_ID = 3


def _numpy(variable):
    import keras

    return torch.from_numpy(keras.ops.convert_to_numpy(variable).copy())


class TorchRNNSearchDecoder:
    """Greedy and beam search of an RNNsearch, in plain PyTorch.

    Args:
        weights: dict of float32 CPU tensors, the names of `from_keras`.
        reset_after: bool, the encoder GRU's form (see the module doc).
        readout_state: `"previous"` (`s_{i-1}` in the readout, the
            appendix) or `"current"` (`s_i`).

    Example:

    ```python
    decoder = TorchRNNSearchDecoder.from_keras(model)  # an RNNSearch
    tokens, scores, lengths = decoder.beam_search(source_ids, 5, 30)
    ```
    """

    def __init__(self, weights, reset_after=False, readout_state="previous"):
        if readout_state not in ("previous", "current"):
            raise ValueError(
                "`readout_state` must be 'previous' or 'current'. "
                f"Received: readout_state={readout_state!r}"
            )
        self.weights = weights
        self.reset_after = reset_after
        self.readout_state = readout_state
        self.hidden_dim = weights["decoder_recurrent_kernel"].shape[0]
        self.maxout_dim = weights["maxout_kernel"].shape[1] // 2

    @classmethod
    def from_keras(cls, model):
        """Copies the weights of a float32 `RNNSearch` (untied)."""
        if model.tie_embeddings:
            raise ValueError(
                "The reference has its own output projection. Received: "
                "tie_embeddings=True"
            )
        cell = model.decoder.cell
        attention = cell.attention
        weights = {
            "source_embedding": model.source_embedding.embeddings,
            "target_embedding": model.target_embedding.embeddings,
            "initial_state_kernel": model.initial_state_projection.kernel,
            "initial_state_bias": model.initial_state_projection.bias,
            "query_kernel": attention.query_kernel,  # W_a
            "key_kernel": attention.key_kernel,  # U_a
            "score_vector": attention.score_vector,  # v_a
            "decoder_kernel": cell.kernel,  # [W_z, W_r, W]
            "decoder_recurrent_kernel": cell.recurrent_kernel,  # [U_z, U_r, U]
            "decoder_context_kernel": cell.context_kernel,  # [C_z, C_r, C]
            "decoder_bias": cell.bias,
            "maxout_kernel": model.maxout.kernel,  # [U_o; V_o; C_o]
            "maxout_bias": model.maxout.bias,
            "output_kernel": model.output_projection.kernel,  # W_o
            "output_bias": model.output_projection.bias,
        }
        for direction in ("forward", "backward"):
            gru = getattr(model.encoder, f"{direction}_layer").cell
            weights[f"{direction}_kernel"] = gru.kernel
            weights[f"{direction}_recurrent_kernel"] = gru.recurrent_kernel
            weights[f"{direction}_bias"] = gru.bias  # (2, 3n) if reset_after
        weights = {name: _numpy(value) for name, value in weights.items()}
        return cls(
            weights,
            reset_after=model.reset_after,
            readout_state=model.readout_state,
        )

    def parameter_count(self):
        return sum(weight.numel() for weight in self.weights.values())

    # === The model ===

    def _gru(self, inputs, mask, direction):
        """One encoder direction: `(b, Tx, m)` -> `(b, Tx, n)`, final `(b, n)`.

        The state is held where `mask` is False (padding), so the backward
        direction starts at the last real word.
        """
        w = self.weights
        kernel = w[f"{direction}_kernel"]
        recurrent = w[f"{direction}_recurrent_kernel"]
        bias = w[f"{direction}_bias"]
        n = recurrent.shape[0]
        input_bias = bias[0] if self.reset_after else bias
        projected = inputs @ kernel + input_bias  # (b, Tx, 3n), all at once
        state = inputs.new_zeros(inputs.shape[0], n)
        outputs = [None] * inputs.shape[1]
        positions = range(inputs.shape[1])
        if direction == "backward":
            positions = reversed(positions)
        for t in positions:
            x = projected[:, t]  # (b, 3n)
            if self.reset_after:  # r applied after the recurrent product
                h = state @ recurrent + bias[1]  # (b, 3n)
                z = torch.sigmoid(x[:, :n] + h[:, :n])
                r = torch.sigmoid(x[:, n : 2 * n] + h[:, n : 2 * n])
                candidate = torch.tanh(x[:, 2 * n :] + r * h[:, 2 * n :])
            else:
                h = state @ recurrent[:, : 2 * n]  # (b, 2n)
                z = torch.sigmoid(x[:, :n] + h[:, :n])
                r = torch.sigmoid(x[:, n : 2 * n] + h[:, n:])
                candidate = torch.tanh(
                    x[:, 2 * n :] + (r * state) @ recurrent[:, 2 * n :]
                )
            new_state = z * state + (1 - z) * candidate  # Keras's GRU form
            state = torch.where(mask[:, t, None], new_state, state)
            outputs[t] = state
        return torch.stack(outputs, 1), state

    def encode(self, source_ids):
        """The per-sentence tensors and `s_0`.

        Args:
            source_ids: int64 `(b, Tx)`, 0 = padding (right-padded).

        Returns:
            `(memory, s_0)`: a dict of `annotations` `(b, Tx, 2n)`, `keys`
            `U_a h_j` `(b, Tx, a)`, `context_terms` `[C_z; C_r; C] h_j`
            `(b, Tx, 3n)` and `mask` bool `(b, Tx)`; `s_0` `(b, n)`.
        """
        w = self.weights
        mask = source_ids != PAD_ID
        embedded = w["source_embedding"][source_ids]  # (b, Tx, m)
        forward, _ = self._gru(embedded, mask, "forward")
        backward, first = self._gru(embedded, mask, "backward")
        annotations = torch.cat([forward, backward], -1)  # (b, Tx, 2n)
        state = torch.tanh(
            first @ w["initial_state_kernel"] + w["initial_state_bias"]
        )  # s_0 from h<-_1
        memory = {
            "annotations": annotations,
            "keys": annotations @ w["key_kernel"],
            "context_terms": annotations @ w["decoder_context_kernel"],
            "mask": mask,
        }
        return memory, state

    def step(self, memory, state, previous_ids):
        """One decoder step: `(logits (b, V), s_i (b, n))`."""
        w, n = self.weights, self.hidden_dim
        embedded = w["target_embedding"][previous_ids]  # (b, m)
        # (b, 1, a) + (b, Tx, a) -> (b, Tx)
        scores = (
            torch.tanh((state @ w["query_kernel"])[:, None] + memory["keys"])
            @ w["score_vector"]
        )
        scores = scores.masked_fill(~memory["mask"], -1e9)
        alpha = torch.softmax(scores, -1) * memory["mask"]  # (b, Tx)
        # (b, 1, Tx) @ (b, Tx, 2n) -> (b, 2n), and the same for C h_j.
        context = torch.bmm(alpha[:, None], memory["annotations"])[:, 0]
        x = (
            embedded @ w["decoder_kernel"]
            + w["decoder_bias"]
            + torch.bmm(alpha[:, None], memory["context_terms"])[:, 0]
        )  # (b, 3n)
        recurrent = w["decoder_recurrent_kernel"]
        h = state @ recurrent[:, : 2 * n]
        z = torch.sigmoid(x[:, :n] + h[:, :n])
        r = torch.sigmoid(x[:, n : 2 * n] + h[:, n:])
        candidate = torch.tanh(
            x[:, 2 * n :] + (r * state) @ recurrent[:, 2 * n :]
        )
        new_state = (1 - z) * state + z * candidate  # the paper's form
        readout = state if self.readout_state == "previous" else new_state
        features = torch.cat([readout, embedded, context], -1)
        pieces = features @ w["maxout_kernel"] + w["maxout_bias"]  # (b, 2l)
        hidden = pieces.unflatten(-1, (self.maxout_dim, 2)).amax(-1)
        logits = hidden @ w["output_kernel"] + w["output_bias"]  # (b, V)
        return logits, new_state

    @staticmethod
    def _log_softmax(logits, is_last):
        """float32 log-probabilities with the search's bans."""
        log_probs = torch.log_softmax(logits, -1)
        log_probs[:, [PAD_ID, BOS_ID]] = float("-inf")
        if is_last:  # Only EOS may end the longest hypothesis.
            eos = log_probs[:, EOS_ID].clone()
            log_probs.fill_(float("-inf"))
            log_probs[:, EOS_ID] = eos
        return log_probs

    # === The searches ===

    @torch.inference_mode()
    def greedy_search(self, source_ids, max_length):
        """The argmax at every step.

        Args:
            source_ids: int `(b, Tx)` NumPy array or tensor.
            max_length: int, the most tokens per output (EOS included).

        Returns:
            `(tokens, log_probs, lengths)`: int64 `(b, max_length)`, EOS
            included and 0 after it; float32 `(b,)`; int64 `(b,)`.
        """
        source_ids = torch.as_tensor(source_ids).long()
        memory, state = self.encode(source_ids)
        batch_size = source_ids.shape[0]
        previous = torch.full((batch_size,), BOS_ID)
        tokens = torch.zeros((batch_size, max_length), dtype=torch.long)
        log_probs = torch.zeros(batch_size)
        lengths = torch.zeros(batch_size, dtype=torch.long)
        for step in range(max_length):
            logits, state = self.step(memory, state, previous)
            step_log_probs = self._log_softmax(logits, step + 1 >= max_length)
            best, best_tokens = step_log_probs.max(-1)  # (b,), (b,)
            alive = lengths == 0
            best_tokens = torch.where(alive, best_tokens, PAD_ID)
            log_probs += torch.where(alive, best, 0.0)
            tokens[:, step] = best_tokens
            lengths = torch.where(
                alive & (best_tokens == EOS_ID), step + 1, lengths
            )
            previous = best_tokens
            if not (lengths == 0).any():
                break
        return tokens, log_probs, lengths

    @torch.inference_mode()
    def beam_search(self, source_ids, beam_size, max_length):
        """Beam search without penalties; the best hypothesis per sentence.

        Args:
            source_ids: int `(b, Tx)` NumPy array or tensor.
            beam_size: int >= 1.
            max_length: int, the most tokens per output (EOS included).

        Returns:
            `(tokens, scores, lengths)` of the best finished hypothesis:
            int64 `(b, max_length)` (0 after EOS), float32 `(b,)` (`log
            P(Y|X)`), int64 `(b,)`.
        """
        k = beam_size
        source_ids = torch.as_tensor(source_ids).long()
        memory, state = self.encode(source_ids)
        # Every beam of a sentence attends to the same tensors: tiled once.
        memory = {
            key: value.repeat_interleave(k, 0) for key, value in memory.items()
        }
        state = state.repeat_interleave(k, 0)  # (b * k, n)
        batch_size = source_ids.shape[0]
        neg_inf = float("-inf")
        alive_ids = torch.zeros((batch_size, k, max_length), dtype=torch.long)
        alive_log_probs = torch.full((batch_size, k), neg_inf)
        alive_log_probs[:, 0] = 0.0  # One start, so no duplicates.
        finished_ids = torch.zeros_like(alive_ids)
        finished_scores = torch.full((batch_size, k), neg_inf)
        finished_lengths = torch.zeros((batch_size, k), dtype=torch.long)
        offsets = torch.arange(batch_size)[:, None] * k  # (b, 1)
        previous = torch.full((batch_size * k,), BOS_ID)

        def gather(tensor, beams):  # (b, n, ...) at (b, k) -> (b, k, ...)
            index = beams.reshape(*beams.shape, *[1] * (tensor.dim() - 2))
            return tensor.gather(1, index.expand(-1, -1, *tensor.shape[2:]))

        for step in range(max_length):
            if not (alive_log_probs > neg_inf).any():
                break
            logits, state = self.step(memory, state, previous)
            log_probs = self._log_softmax(logits, step + 1 >= max_length)
            vocabulary_size = log_probs.shape[-1]
            log_probs = log_probs + alive_log_probs.reshape(-1, 1)
            # The 2k best of k * V candidates, best first.
            top_log_probs, positions = log_probs.reshape(batch_size, -1).topk(
                2 * k
            )  # (b, 2k)
            top_beams = positions // vocabulary_size
            top_tokens = positions % vocabulary_size

            # EOS among the k best: finished, into the pool of k.
            new_tokens = top_tokens[:, :k]
            new_log_probs = top_log_probs[:, :k]
            is_new = (new_tokens == EOS_ID) & (new_log_probs > neg_inf)
            new_ids = gather(alive_ids, top_beams[:, :k]).clone()
            new_ids[:, :, step] = new_tokens
            new_ids = torch.where(is_new[:, :, None], new_ids, 0)
            finished_scores, keep = torch.cat(
                [finished_scores, torch.where(is_new, new_log_probs, neg_inf)],
                1,
            ).topk(k)
            finished_ids = gather(torch.cat([finished_ids, new_ids], 1), keep)
            finished_lengths = torch.cat(
                [finished_lengths, torch.where(is_new, step + 1, 0)], 1
            ).gather(1, keep)

            # The k best non-EOS candidates stay alive.
            alive_log_probs, keep = torch.where(
                top_tokens == EOS_ID, neg_inf, top_log_probs
            ).topk(k)
            beams = top_beams.gather(1, keep)  # (b, k)
            previous = top_tokens.gather(1, keep)  # (b, k)
            alive_ids = gather(alive_ids, beams).clone()
            alive_ids[:, :, step] = previous
            state = state[(beams + offsets).flatten()]
            previous = previous.flatten()
            # Stop sentences whose best alive cannot beat the worst pooled.
            is_done = (
                alive_log_probs.max(1).values <= finished_scores.min(1).values
            )
            alive_log_probs = alive_log_probs.masked_fill(
                is_done[:, None], neg_inf
            )
        return finished_ids[:, 0], finished_scores[:, 0], finished_lengths[:, 0]
