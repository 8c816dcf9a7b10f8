"""`TranslationPreprocessor`: the text pipeline of a translation model.

One object, like keras-hub's `Seq2SeqLMPreprocessor`, holds the two
tokenizers (their vocabularies start with the reserved tokens of
`keras_bahdanau.reserved`) and the length policy for sources, and does
every text step: packing sentence pairs into training batches
(`make_dataset`), reading sources for the search (`read_sources`, in graph
mode: the same ops run eagerly, in `tf.data` and in the exported
SavedModel) and turning a search result back into text
(`decode_hypotheses`). Training, `Translator` and the serving graph use it.
"""

import warnings

import numpy as np
import tensorflow as tf

from keras_bahdanau.data.pipeline import make_dataset
from keras_bahdanau.text import STATUS_EMPTY
from keras_bahdanau.text import STATUS_OK
from keras_bahdanau.text import STATUS_TOO_LONG
from keras_bahdanau.validation import check_choice
from keras_bahdanau.validation import check_int

# What a source over `max_source_length` tokens becomes (`tokenize_sources`).
LONG_SOURCES = ("truncate", "error")


class TranslationPreprocessor:
    """Tokenizers, reserved tokens and packing for one language pair.

    Args:
        source_tokenizer: the `Tokenizer` of the source language.
        target_tokenizer: the `Tokenizer` of the target language (may be
            the same object, for a joint vocabulary).
        max_source_length: int >= 1 or None, the most tokens of a source
            that is translated as it is (see `tokenize_sources`).
        long_sources: what `tokenize_sources` does with a longer source:
            `"truncate"` (its first `max_source_length` tokens, with a
            `UserWarning`) or `"error"` (a `ValueError`).

    Example:

    ```python
    preprocessor = TranslationPreprocessor(source, target)
    dataset, report = preprocessor.make_dataset(pairs, batch_size=80)
    model.fit(dataset)
    sources = preprocessor.read_sources(["Das Haus ist klein."])
    sources["ids"]  # <tf.RaggedTensor [[57, 212, 19, 301, 4]]>
    ```
    """

    def __init__(
        self,
        source_tokenizer,
        target_tokenizer,
        max_source_length=None,
        long_sources="truncate",
    ):
        check_int("max_source_length", max_source_length, allow_none=True)
        check_choice("long_sources", long_sources, LONG_SOURCES)
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer
        self.max_source_length = max_source_length
        self.long_sources = long_sources

    @property
    def tokenizers(self):
        """`(source_tokenizer, target_tokenizer)`."""
        return self.source_tokenizer, self.target_tokenizer

    def check_model(self, model):
        """Raises a `ValueError` if the vocabularies do not fit `model`."""
        for side, tokenizer, size in (
            ("source", self.source_tokenizer, model.source_vocabulary_size),
            ("target", self.target_tokenizer, model.target_vocabulary_size),
        ):
            if tokenizer.vocabulary_size != size:
                raise ValueError(
                    f"The {side} tokenizer has {tokenizer.vocabulary_size} "
                    f"tokens but the model expects {size}: pass the "
                    "tokenizers the model was trained with."
                )

    def make_dataset(self, pairs, **kwargs):
        """Training batches of sentence pairs: `data.make_dataset`.

        Sources are packed as their tokens, decoder inputs as `[BOS] y`,
        labels as `y [EOS]`, all padded with `[PAD]` in length buckets.

        Args:
            pairs: list of `(source, target)` string tuples.
            **kwargs: `batch_size`, `max_length`, `shuffle`, `seed`,
                `bucket`, `bucket_width`, `drop_remainder` of
                `data.make_dataset`.

        Returns:
            `(dataset, report)`, as `data.make_dataset`.
        """
        return make_dataset(pairs, *self.tokenizers, **kwargs)

    def read_sources(self, text):
        """Tokenizes a batch of sentences and gives each one its status.

        In graph mode: the serving graph runs these ops. Invalid UTF-8
        bytes become U+FFFD (a Python str has none). What becomes of a
        sentence that is not `STATUS_OK` is the caller's.

        Args:
            text: string `(batch,)`, a list of str or a string tensor.

        Returns:
            A dict: `ids` int32 and `tokens` string `tf.RaggedTensor`s
            `(batch, None)` (see `Tokenizer.tokens`), `length` int32
            `(batch,)` and `status` string `(batch,)`, one of
            `text.STATUSES` (`STATUS_TOO_LONG`: more than
            `max_source_length` tokens).
        """
        # Invalid UTF-8 would fail the tokenizer's Unicode ops.
        text = tf.strings.unicode_transcode(
            tf.convert_to_tensor(text, tf.string), "UTF-8", "UTF-8", "replace"
        )
        ids = self.source_tokenizer.tokenize(text)
        length = tf.cast(ids.row_lengths(), tf.int32)  # (batch,)
        limit = self.max_source_length or tf.int32.max
        status = tf.where(
            length > limit,
            STATUS_TOO_LONG,
            tf.where(tf.equal(length, 0), STATUS_EMPTY, STATUS_OK),
        )  # (batch,)
        tokens = self.source_tokenizer.tokens(text)
        return {
            "ids": ids,
            "tokens": tokens,
            "length": length,
            "status": status,
        }

    def tokenize_sources(self, sentences):
        """Source ids and tokens per sentence, long ones cut or refused.

        Args:
            sentences: list of str.

        Returns:
            `(ids, tokens)`: per sentence an int32 NumPy array and a list
            of str, at most `max_source_length` long.

        Raises:
            ValueError: with `long_sources="error"`, a sentence has more
                than `max_source_length` tokens; nothing is returned.
        """
        limit = self.max_source_length
        sources = self.read_sources(sentences)
        ids = [np.asarray(row, "int32") for row in sources["ids"].to_list()]
        tokens = [
            [token.decode("utf-8") for token in row]
            for row in sources["tokens"].to_list()
        ]
        status = sources["status"].numpy()
        too_long = np.flatnonzero(status == STATUS_TOO_LONG.encode()).tolist()
        if too_long:
            longest = max(len(ids[i]) for i in too_long)
            found = (
                f"{len(too_long)} of {len(sentences)} sentences have more "
                f"than max_source_length={limit} tokens (the longest has "
                f"{longest}; sentence indices {too_long[:10]})"
            )
            if self.long_sources == "error":
                raise ValueError(
                    f"{found}. Split or shorten them, or pass "
                    "long_sources='truncate' to translate their first "
                    f"{limit} tokens."
                )
            warnings.warn(
                f"{found}; only their first {limit} tokens are translated. "
                "Pass max_source_length=None (CLI: --max-source-length 0) "
                "to translate them in full.",
                stacklevel=3,
            )
            for i in too_long:
                ids[i], tokens[i] = ids[i][:limit], tokens[i][:limit]
        return ids, tokens

    def decode_hypotheses(self, result, searched, n_best=None):
        """The text of a search result, and what an unsearched sentence gets.

        In graph mode, like `read_sources`. A sentence not searched (empty,
        or too long to serve) has one hypothesis, `""` scored 0. Its other
        slots are empty, like those a search leaves when it finds fewer
        hypotheses: `""`, score `-inf`, length 0.

        Args:
            result: a `decoding.SearchResult` (arrays or tensors).
            searched: bool `(batch,)`; the rows of `result` where it is
                False are ignored.
            n_best: int, scalar int32 tensor or None (all): the slots kept.

        Returns:
            A dict of `(batch, n_best)` tensors: `text`, `score`,
            `log_prob`, `length` (tokens with `[EOS]`, 0: no hypothesis)
            and `is_hypothesis`; and `tokens`, string `(batch, n_best, T)`,
            `""` after each hypothesis.
        """
        token_ids, scores, log_probs, lengths = (
            tf.convert_to_tensor(field)[:, :n_best] for field in result[:4]
        )
        shape = tf.shape(token_ids)  # (batch, n_best, T)
        text = tf.reshape(
            self.target_tokenizer.detokenize(
                tf.reshape(token_ids, [shape[0] * shape[1], shape[2]])
            ),
            shape[:2],
        )  # (batch * n_best, T) -> (batch, n_best)
        searched = tf.convert_to_tensor(searched, tf.bool)[:, None]
        first = tf.equal(tf.range(shape[1]), 0)[None, :]  # (1, n_best)
        empty_score = tf.where(first, 0.0, float("-inf"))  # (1, n_best)
        lengths = tf.where(searched, lengths, 0)  # (batch, n_best)
        vocabulary = tf.constant(self.target_tokenizer.get_vocabulary())
        return {
            "text": tf.where(searched, text, ""),
            "tokens": tf.where(
                tf.range(shape[2]) < lengths[:, :, None],
                tf.gather(vocabulary, token_ids),
                "",
            ),  # (batch, n_best, T)
            "score": tf.where(searched, scores, empty_score),
            "log_prob": tf.where(searched, log_probs, empty_score),
            "length": lengths,
            "is_hypothesis": tf.where(searched, lengths > 0, first),
        }


__all__ = ["LONG_SOURCES", "TranslationPreprocessor"]
