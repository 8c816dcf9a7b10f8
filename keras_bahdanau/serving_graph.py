"""`ServingGraph`: the functions of the SavedModel's signatures, which
export.py traces and documents (TF backend only)."""

import dataclasses

import numpy as np
import tensorflow as tf

from keras_bahdanau.decoding import SearchResult
from keras_bahdanau.decoding import beam_search
from keras_bahdanau.text import STATUS_TOO_LONG

# Stands for a score of -inf (an empty n-best slot): JSON has no infinity,
# and the lowest float32 still sorts below every real score.
LOWEST_SCORE = float(np.finfo(np.float32).min)
# The options of a request that the search runs with, as tensors: one
# graph function serves every request, so it is traced once.
SEARCH_REQUEST = {
    "beam_size": tf.TensorSpec([], tf.int32),
    "length_penalty": tf.TensorSpec([], tf.float32),
}


class ServingGraph:
    """The signature functions, for `tf.function` (TF backend only).

    The text side is the `TranslationPreprocessor`'s (`generate_preprocess`,
    `generate_postprocess`), as in `Translator`; this class adds the request
    checks. Each signature
    hands its search, a `SearchConfig` (`translate_n_best`: with the
    request's tensors), to one graph function, `search(source_ids,
    request)`, `request` being its `SEARCH_REQUEST` fields. That function
    holds one beam search per beam size (shapes are static) and runs the
    one asked for: traced once, shared. `settings`: `ExportSettings`;
    `preprocessor`: its `max_source_length` is `settings.max_source_tokens`.
    """

    def __init__(self, model, preprocessor, settings):
        self.model = model
        self.preprocessor = preprocessor
        self.max_source_tokens = settings.max_source_tokens
        self.max_batch = settings.max_batch
        self.max_beam_size = settings.max_beam_size
        # The static length covers the longest source allowed.
        self.config = settings.search.for_source_length(self.max_source_tokens)
        self.search = tf.function(
            self._search,
            input_signature=[
                tf.TensorSpec([None, None], tf.int32),
                SEARCH_REQUEST,
            ],
            autograph=False,
        )

    def translate(self, text):
        source = self._read(text)
        return self._best(source, self._decode(source, self.config))

    def translate_n_best(self, text, beam_size, n_best, length_penalty):
        checks = [
            _check(
                (beam_size >= 1) & (beam_size <= self.max_beam_size),
                f"beam_size must be in [1, {self.max_beam_size}] (the "
                "largest exported beam). Received: beam_size =",
                beam_size,
            ),
            _check(
                (n_best >= 1) & (n_best <= beam_size),
                "n_best must be in [1, beam_size]. Received: n_best =",
                n_best,
            ),
            _check(
                tf.math.is_finite(length_penalty) & (length_penalty >= 0.0),
                "length_penalty must be a finite number >= 0. Received: "
                "length_penalty =",
                length_penalty,
            ),
        ]
        with tf.control_dependencies(checks):
            source = self._read(text)
        config = dataclasses.replace(
            self.config,
            beam_size=beam_size,
            n_best=n_best,
            length_penalty=length_penalty,
        )
        decoded = self._decode(source, config)
        return {
            "translations": decoded["text"],  # (batch, n_best)
            "scores": _finite(decoded["score"]),  # (batch, n_best)
            "status": source["status"],
        }

    def align(self, text):
        source = self._read(text)
        decoded = self._decode(source, self.config)
        target_length = decoded["length"][:, 0]  # (batch,)
        width = tf.reduce_max(tf.concat([target_length, [0]], 0))
        is_target = tf.range(width)[None, :] < target_length[:, None]
        alignment = decoded["attention"][:, 0, :width]  # (batch, T, Tx)
        return {
            **self._best(source, decoded),
            "source_tokens": source["tokens"],  # (batch, Tx)
            "source_length": source["length"],
            "target_tokens": decoded["tokens"][:, 0, :width],  # (batch, T)
            "target_length": target_length,
            # Weights from a softmax are finite, unless the model itself
            # gives NaN; JSON could not carry that.
            "alignment": tf.where(
                is_target[:, :, None] & tf.math.is_finite(alignment),
                alignment,
                0.0,
            ),  # (batch, T, Tx)
        }

    def _read(self, text):
        """Checks and tokenizes a batch of text; each sentence's status.

        A `too_long` sentence gets an empty row (length 0), so it costs the
        search no more than an empty one and leaves the other rows as they
        would be in a request of their own.
        """
        check = _check(
            tf.size(text) <= self.max_batch,
            f"At most {self.max_batch} sentences per request (max_batch); "
            "split the request. Received: sentences =",
            tf.size(text),
        )
        with tf.control_dependencies([check]):
            text = tf.identity(text)
        source = self.preprocessor.generate_preprocess(text)
        too_long = tf.equal(source["status"], STATUS_TOO_LONG)  # (batch,)
        length = tf.where(too_long, 0, source["length"])  # What is searched.
        # As wide as the longest row searched, so a too-long row cannot
        # widen the batch (`to_tensor` cuts longer rows to this shape),
        # and at least one column: a model cannot encode zero positions.
        width = tf.maximum(tf.reduce_max(length), 1)  # 1 for no sentence
        shape = tf.stack([source["ids"].nrows(), tf.cast(width, tf.int64)])
        searched = (length > 0)[:, None]  # (batch, 1)
        return {
            "ids": tf.where(
                searched, source["ids"].to_tensor(0, shape=shape), 0
            ),  # (batch, Tx)
            "tokens": tf.where(
                searched, source["tokens"].to_tensor("", shape=shape), ""
            ),  # (batch, Tx)
            "length": length,  # (batch,)
            "status": source["status"],  # (batch,)
        }

    def _decode(self, source, config):
        """The decoded hypotheses of `config`'s search, and its attention.

        `config`: `self.config`, or it with a request's tensors.
        """
        request = {name: getattr(config, name) for name in SEARCH_REQUEST}
        result = self.search(source["ids"], request)
        decoded = self.preprocessor.generate_postprocess(
            result, source["length"] > 0, config.n_best
        )
        return {**decoded, "attention": result.attention}

    def _search(self, source_ids, request):
        """Beam search with a run-time beam size and length penalty.

        `request`: scalar tensors of `SEARCH_REQUEST`'s fields. Returns the
        `SearchResult` of all `beam_size` hypotheses, padded to
        `max_beam_size` (empty slots: ids 0, scores -inf).
        """
        config = dataclasses.replace(self.config, **request)

        def branch(size):
            def pad(field, value=0):
                """(batch, size, ...) -> (batch, max_beam_size, ...)."""
                padding = [[0, 0], [0, self.max_beam_size - size]]
                padding += [[0, 0]] * (field.shape.rank - 2)
                return tf.pad(field, padding, constant_values=value)

            def search():
                # All `size` hypotheses: `_decode` keeps the n_best asked.
                kept = dataclasses.replace(config, beam_size=size, n_best=size)
                result = beam_search(self.model, source_ids, kept)
                # Of token_ids, scores, log_probs, lengths and attention.
                padding = [0, float("-inf"), float("-inf"), 0, 0]
                return SearchResult(*map(pad, result, padding))

            return search

        # With beam size 1 and no penalties `Translator` runs greedy
        # search, which beam search with one beam equals.
        return tf.switch_case(
            config.beam_size - 1,
            [branch(size) for size in range(1, self.max_beam_size + 1)],
        )

    def _best(self, source, decoded):
        return {
            "translation": decoded["text"][:, 0],
            "score": _finite(decoded["score"][:, 0]),
            "status": source["status"],
        }


def _check(condition, message, value):
    return tf.debugging.Assert(condition, [message, value])


def _finite(scores):
    """Scores with `LOWEST_SCORE` for -inf (an empty slot) and NaN."""
    return tf.where(tf.math.is_finite(scores), scores, LOWEST_SCORE)
