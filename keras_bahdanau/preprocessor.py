"""`TranslationPreprocessor`: the text pipeline of a translation model.

One object, like keras-hub's `Seq2SeqLMPreprocessor`, holds the two
tokenizers (their vocabularies start with the reserved tokens of
`keras_bahdanau.reserved`) and the length policy for sources, and does
every text step with keras-hub's verbs: calling it packs sentence pairs
into training examples (`make_dataset` batches them by length),
`generate_preprocess` reads sources for the search and
`generate_postprocess` turns a search result back into text, in graph
mode: the same ops run eagerly, in `tf.data` and in the exported
SavedModel. Training, `Translator` and the serving graph use it.
"""

import tensorflow as tf

from keras_bahdanau import presets
from keras_bahdanau.data.pipeline import make_dataset
from keras_bahdanau.data.stream import PairList
from keras_bahdanau.data.stream import make_stream
from keras_bahdanau.data.text_corpus import TextCorpus
from keras_bahdanau.reserved import BOS_ID
from keras_bahdanau.reserved import EOS_ID
from keras_bahdanau.reserved import PAD_ID
from keras_bahdanau.text import STATUS_EMPTY
from keras_bahdanau.text import STATUS_OK
from keras_bahdanau.text import STATUS_TOO_LONG
from keras_bahdanau.validation import check_choice
from keras_bahdanau.validation import check_int

# What `Translator` does with a source over `max_source_length` tokens.
LONG_SOURCES = ("truncate", "error")


class TranslationPreprocessor:
    """Tokenizers, reserved tokens and packing for one language pair.

    Args:
        source_tokenizer: the `Tokenizer` of the source language.
        target_tokenizer: the `Tokenizer` of the target language (may be
            the same object, for a joint vocabulary).
        max_source_length: int >= 1 or None, the most tokens of a source
            that is translated as it is.
        long_sources: what `Translator` does with a longer source:
            `"truncate"` (its first `max_source_length` tokens, with a
            `UserWarning`) or `"error"` (a `ValueError`).

    Call arguments:
        sources: string `()` or `(batch,)`, a str, a list of str or a
            string tensor.
        targets: their translations, the same shape.

    Returns (of a call):
        `(x, y)` as `model.fit` takes them: `x = {"source_ids": ...,
        "target_ids": [BOS] y_1 .. y_n}`, `y = y_1 .. y_n [EOS]`, int32
        `(batch, T)` padded with `[PAD]` to the longest in the batch
        (`(T,)` for one pair). Usable in `tf.data.Dataset.map`.

    Example:

    ```python
    preprocessor = TranslationPreprocessor(source, target)
    x, y = preprocessor(["Das Haus ist klein."], ["The house is small."])
    pairs = tf.data.Dataset.from_tensor_slices((sources, targets))
    model.fit(pairs.batch(32).map(preprocessor))
    dataset, report = preprocessor.make_dataset(pairs, batch_size=80)
    sources = preprocessor.generate_preprocess(["Das Haus ist klein."])
    sources["ids"]  # <tf.RaggedTensor [[57, 212, 19, 301, 4]]>
    ```
    """

    _POLICY = ("max_source_length", "long_sources")

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

    def __call__(self, sources, targets):
        single = tf.convert_to_tensor(sources).shape.rank == 0
        sources, targets = (
            tf.reshape(text, [-1]) for text in (sources, targets)
        )
        source = self.source_tokenizer.tokenize(sources)
        target = self.target_tokenizer.tokenize(targets)
        column = tf.ones([target.nrows(), 1], target.dtype)  # (batch, 1)
        column = tf.RaggedTensor.from_tensor(column)
        inputs = tf.concat([column * BOS_ID, target], axis=1)
        labels = tf.concat([target, column * EOS_ID], axis=1)
        x = {
            "source_ids": source.to_tensor(PAD_ID),
            "target_ids": inputs.to_tensor(PAD_ID),
        }  # (batch, Tx), (batch, Ty + 1)
        y = labels.to_tensor(PAD_ID)  # (batch, Ty + 1)
        if single:
            return {name: ids[0] for name, ids in x.items()}, y[0]
        return x, y

    @property
    def tokenizers(self):
        """`(source_tokenizer, target_tokenizer)`."""
        return self.source_tokenizer, self.target_tokenizer

    def get_config(self):
        """The length policy, as `translator.json` of a preset holds it."""
        return {
            "max_source_length": self.max_source_length,
            "long_sources": self.long_sources,
        }

    @classmethod
    def from_preset(cls, preset, **kwargs):
        """The preprocessor of a preset: its tokenizers and length policy.

        Args:
            preset: a preset folder or a run directory (`presets.py`).
            **kwargs: `max_source_length`, `long_sources` replacing the
                preset's.
        """
        found = presets.check_preset(preset)
        policy = {name: found.settings[name] for name in cls._POLICY}
        return cls(*found.tokenizers, **{**policy, **kwargs})

    def save_to_preset(self, preset):
        """Writes the tokenizers and length policy into a preset folder.

        As keras-hub's `Preprocessor.save_to_preset`: the folder's
        `assets/` and `translator.json` (created, or updated), beside the
        model's files; `Translator.save_to_preset` writes a whole preset.
        """
        presets.write_preprocessor(preset, self.tokenizers, self.get_config())

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
        """Training batches of sentence pairs, bucketed by length.

        `data.make_dataset`: the pairs packed as a call packs them, padded
        to the width of their length bucket, pairs too long or empty left
        out (counted in the report). A corpus too large to hold is
        streamed from disk instead (`data.make_stream`).

        Args:
            pairs: list of `(source, target)` string tuples, or a corpus
                to stream: a `data.TextCorpus` (or `data.PairList`).
            **kwargs: `batch_size`, `max_length`, `shuffle`, `seed`,
                `bucket`, `bucket_width`, `buckets`, `drop_remainder` of
                `data.make_dataset`; a stream also takes
                `shuffle_buffer`.

        Returns:
            `(dataset, report)`, as `data.make_dataset`; for a stream
            `(dataset, stream)`, as `data.make_stream`.
        """
        if isinstance(pairs, TextCorpus | PairList):
            return make_stream(pairs, *self.tokenizers, **kwargs)
        return make_dataset(pairs, *self.tokenizers, **kwargs)

    def generate_preprocess(self, text):
        """Tokenizes a batch of sources and gives each one its status.

        In graph mode: the serving graph runs these ops. Invalid UTF-8
        bytes become U+FFFD (a Python str has none). Nothing is cut: what
        becomes of a sentence that is not `STATUS_OK` is the caller's.

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

    def generate_postprocess(self, result, searched, n_best=None):
        """The text of a search result, and what an unsearched sentence gets.

        In graph mode, like `generate_preprocess`. A sentence not searched
        (empty, or too long to serve) has one hypothesis, `""` scored 0.
        Its other slots are empty, like those a search leaves when it
        finds fewer hypotheses: `""`, score `-inf`, length 0.

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
