"""Text in, text out: batched translation with a trained model.

`Translator` wraps a model and its `TranslationPreprocessor` (usually
loaded from a preset or a run directory) and turns sentences into
translations: tokenization (`TranslationPreprocessor.tokenize_sources`),
batching by length, the compiled search of `keras_bahdanau.decoding`,
detokenization (`TranslationPreprocessor.decode_hypotheses`) and
unknown-word replacement (`text.replace_unknown_words`).
"""

import dataclasses
import math
import pathlib
import tempfile

import numpy as np

from keras_bahdanau import presets
from keras_bahdanau import run_directory
from keras_bahdanau.decoding import SearchConfig
from keras_bahdanau.decoding import SearchResult
from keras_bahdanau.decoding import as_search_config
from keras_bahdanau.decoding import compile_search
from keras_bahdanau.decoding.config import run_search
from keras_bahdanau.preprocessor import LONG_SOURCES
from keras_bahdanau.preprocessor import TranslationPreprocessor
from keras_bahdanau.reserved import BOS
from keras_bahdanau.reserved import PAD
from keras_bahdanau.reserved import UNK_ID
from keras_bahdanau.text import Translation
from keras_bahdanau.text import replace_unknown_words
from keras_bahdanau.tokenizers import WordTokenizer
from keras_bahdanau.tokenizers import join_words
from keras_bahdanau.validation import check_int

# Marks the arguments that a `TranslationPreprocessor` brings itself.
_FROM_PREPROCESSOR = object()


class Translator:
    """Translates sentences with a model and its tokenizers.

    Sentences are tokenized, sorted by length and translated in batches
    (the order of the results is the order of the inputs). Each batch is
    padded to a width that is a multiple of `bucket_width` tokens and to a
    power-of-two number of rows, and the compiled searches are cached (see
    `decoding.compile_search`), so that JAX and TensorFlow compile once
    per bucket shape and `SearchConfig` rather than once per batch.

    Edge cases, by design:

    * An empty source (no token after tokenization, e.g. `""` or only
      spaces) is not run through the model: its translation is the empty
      string, `score = log_prob = 0.0`, no tokens and a `(0, 0)` attention.
    * A source with more than `max_source_length` tokens is truncated to
      its first `max_source_length` tokens, with a `UserWarning` that says
      which sentences were cut; with `long_sources="error"` the call
      raises a `ValueError` instead and translates nothing.
      `max_source_length=None` translates every sentence in full: memory
      and time then grow with the longest sentence (the attention of one
      batch holds `batch_size * beam_size * max_length * Tx` floats), so
      bound it for input you do not control.
    * Fewer than `n_best` hypotheses come back when fewer exist (e.g. a
      tiny vocabulary and a short maximum length).

    Args:
        model: a `keras_bahdanau.models` model (the decoding protocol:
            `encode`, `decode_step`).
        source_tokenizer: the model's `TranslationPreprocessor`, or the
            `Tokenizer` of the source language (a preprocessor is then
            built from it, `target_tokenizer`, `max_source_length` and
            `long_sources`).
        target_tokenizer: the `Tokenizer` of the target language; not
            with a preprocessor.
        max_source_length: int >= 1 or None (the default), the most source
            tokens a sentence may have (see above); not with a
            preprocessor, which has its own.
        bucket_width: int >= 1, source batches are padded to a multiple of
            it.
        long_sources: `"truncate"` (the default) or `"error"`, see above;
            not with a preprocessor.
        search: the `SearchConfig` of `translate` and `generate` calls
            that pass none (None: `SearchConfig()`, beam search with 5
            beams); a preset or run directory brings its own.

    Example:

    ```python
    translator = Translator.from_preset("runs/ding_de_en")
    translator.translate("Das Haus ist klein.").text
    # 'The house is small.'
    best, second = translator.translate(
        "Das Haus ist klein.", SearchConfig(n_best=2)
    )
    translator.generate(["Das Haus ist klein."])  # ['The house is small.']
    translator.save_to_preset("presets/ding_de_en")
    translator.export("saved_models/ding_de_en")  # TF Serving
    ```
    """

    def __init__(
        self,
        model,
        source_tokenizer,
        target_tokenizer=None,
        max_source_length=_FROM_PREPROCESSOR,
        bucket_width=16,
        long_sources=_FROM_PREPROCESSOR,
        search=None,
    ):
        check_int("bucket_width", bucket_width)
        if isinstance(source_tokenizer, TranslationPreprocessor):
            given = {
                "target_tokenizer": target_tokenizer is not None,
                "max_source_length": max_source_length
                is not _FROM_PREPROCESSOR,
                "long_sources": long_sources is not _FROM_PREPROCESSOR,
            }
            if any(given.values()):
                raise TypeError(
                    "With a TranslationPreprocessor, pass no "
                    f"{[name for name, is_given in given.items() if is_given]}"
                    ": the preprocessor holds them."
                )
            preprocessor = source_tokenizer
        else:
            if target_tokenizer is None:
                raise TypeError(
                    "Translator needs a TranslationPreprocessor, or a source "
                    "and a target tokenizer. Received no `target_tokenizer`."
                )
            preprocessor = TranslationPreprocessor(
                source_tokenizer,
                target_tokenizer,
                None
                if max_source_length is _FROM_PREPROCESSOR
                else max_source_length,
                "truncate"
                if long_sources is _FROM_PREPROCESSOR
                else long_sources,
            )
        preprocessor.check_model(model)
        self.model = model
        self.preprocessor = preprocessor
        self.bucket_width = bucket_width
        self.search = as_search_config(search)

    @property
    def source_tokenizer(self):
        return self.preprocessor.source_tokenizer

    @property
    def target_tokenizer(self):
        return self.preprocessor.target_tokenizer

    @property
    def max_source_length(self):
        return self.preprocessor.max_source_length

    @property
    def long_sources(self):
        return self.preprocessor.long_sources

    @classmethod
    def from_preset(cls, preset, checkpoint="best", **kwargs):
        """Loads a trained model: a preset folder or a run directory.

        Args:
            preset: a folder written by `save_to_preset`, or a run
                directory of `keras-bahdanau train`.
            checkpoint: for a run directory, `"best"` or `"last"`.
            **kwargs: `Translator` arguments that replace the preset's
                (`max_source_length`, `bucket_width`, `long_sources`,
                `search`).

        Returns:
            A `Translator`.

        Raises:
            FileNotFoundError: `preset` is neither, or misses a file.
            run_directory.RunDirectoryError: a file is damaged, of a newer
                format, or unsafe (see `run_directory.load_run`).
        """
        path = pathlib.Path(preset)
        if presets.is_preset(path):
            model, source, target, settings = presets.load_preset(path)
            settings = {**settings, **kwargs}
            search = settings.pop("search", None)
            if isinstance(search, dict):
                search = SearchConfig(**search)
            return cls(model, source, target, search=search, **settings)
        if (path / run_directory.CONFIG).is_file():
            return cls.from_run_dir(path, checkpoint, **kwargs)
        if not path.exists() and "/" not in str(preset):
            raise FileNotFoundError(
                f"No preset folder {preset!r}. `Translator.from_preset` "
                "loads a trained model (a folder of `save_to_preset` or a "
                "run directory of `keras-bahdanau train`); a size preset "
                "such as 'rnnsearch_tiny' builds an untrained model with "
                "`RNNSearch.from_preset`."
            )
        raise FileNotFoundError(
            f"{preset} is neither a preset folder (no {presets.METADATA}) "
            f"nor a run directory (no {run_directory.CONFIG})."
        )

    def save_to_preset(self, preset):
        """Writes the model, tokenizers and settings as a preset folder.

        `Translator.from_preset(preset)` loads it back, on any backend.

        Args:
            preset: a new (or empty) folder.

        Returns:
            The `pathlib.Path` of the preset.
        """
        settings = {
            "max_source_length": self.max_source_length,
            "bucket_width": self.bucket_width,
            "long_sources": self.long_sources,
            "search": dataclasses.asdict(self.search),
        }
        return presets.save_preset(
            preset,
            self.model,
            self.source_tokenizer,
            self.target_tokenizer,
            settings,
        )

    def export(self, output, search=None, **options):
        """Writes a TF Serving SavedModel version of this translator.

        Args:
            output: the model's folder; the SavedModel goes to
                `output/<version>/` (see `export.export_saved_model`).
            search: the search of `serving_default` and `align` (None:
                `self.search`, with `n_best=1`).
            **options: `version`, `overwrite`, `max_source_tokens`,
                `max_batch`, `max_beam_size` of `export_saved_model`.

        Returns:
            The `pathlib.Path` of the version folder.
        """
        from keras_bahdanau.export import export_saved_model

        if search is None:
            search = dataclasses.replace(self.search, n_best=1)
        # The SavedModel is built on the TensorFlow backend, in another
        # process unless this is it: the preset carries the model there.
        with tempfile.TemporaryDirectory() as folder:
            preset = self.save_to_preset(pathlib.Path(folder) / "preset")
            return export_saved_model(preset, output, search=search, **options)

    @classmethod
    def from_run_dir(
        cls,
        run_dir,
        checkpoint="best",
        max_source_length="auto",
        long_sources="truncate",
        bucket_width=16,
        search=None,
    ):
        """Loads the model and tokenizers of a run directory.

        Args:
            run_dir: a directory written by `keras-bahdanau train`.
            checkpoint: `"best"` (lowest dev loss) or `"last"`.
            max_source_length: `"auto"` for the longest sentence length the
                run was trained on (`max_length` in its config.json; no
                limit if it has none), an int, or None for no limit.
            long_sources: `"truncate"` or `"error"`, see `Translator`.
            bucket_width: see `Translator`.
            search: the default `SearchConfig`; None: the run's
                `evaluation.beam_size` and `evaluation.length_penalty`.

        Returns:
            A `Translator`.

        Raises:
            FileNotFoundError, run_directory.RunDirectoryError: the run
                directory is missing a file, or holds a damaged,
                incompatible or unsafe one (see `run_directory.load_run`).
        """
        model, source, target, config = run_directory.load_run(
            run_dir, checkpoint
        )
        if max_source_length == "auto":
            max_source_length = run_directory.training_max_length(config)
        evaluation = config.get("evaluation") or {}
        if search is None and "beam_size" in evaluation:
            # The run's own search, as its dev and test scores used.
            search = run_search(evaluation)
        return cls(
            model,
            source,
            target,
            max_source_length,
            bucket_width=bucket_width,
            long_sources=long_sources,
            search=search,
        )

    def translate(
        self,
        sentences,
        search=None,
        *,
        return_attention=False,
        replace_unknown=False,
        dictionary=None,
        batch_size=32,
    ):
        """Translates one sentence or a list of sentences.

        Args:
            sentences: a str, or a list of str.
            search: a `keras_bahdanau.decoding.SearchConfig` (None:
                `self.search`); without `max_length` a source of `Tx`
                tokens gets at most `2 * Tx + 10`.
            return_attention: whether to fill `Translation.attention`.
            replace_unknown: whether to replace each `[UNK]` of the output
                by its most attended source word (word-level tokenizers
                only; see `replace_unknown_words`).
            dictionary: optional dict `source word -> target word` used by
                `replace_unknown`.
            batch_size: int >= 1, sentences per search call.

        Returns:
            For a str, its result; for a list, a list of results in input
            order. A result is a `Translation` if `search.n_best == 1`,
            else a list of up to `n_best` `Translation`s, best score first.
        """
        search = self.search if search is None else as_search_config(search)
        single = isinstance(sentences, str)
        sentences = [sentences] if single else list(sentences)
        bad = [s for s in sentences if not isinstance(s, str)]
        if bad:
            raise ValueError(
                "`sentences` must be a str or a list of str. Received an "
                f"element {bad[0]!r} of type {type(bad[0]).__name__}"
            )
        check_int("batch_size", batch_size)
        if replace_unknown and not (
            isinstance(self.source_tokenizer, WordTokenizer)
            and isinstance(self.target_tokenizer, WordTokenizer)
        ):
            raise ValueError(
                "`replace_unknown=True` needs word-level tokenizers "
                "(WordTokenizer) on both sides: a subword vocabulary has "
                "(almost) no [UNK] and no source word to copy. Received: "
                f"{type(self.source_tokenizer).__name__} and "
                f"{type(self.target_tokenizer).__name__}"
            )

        source_ids, source_tokens = self.preprocessor.tokenize_sources(
            sentences
        )
        # Longest first: similar lengths share a batch (less padding), and
        # a batch too large for memory fails at once. Empty sources come
        # last, in a batch of their own that is not searched.
        order = sorted(range(len(sentences)), key=lambda i: -len(source_ids[i]))
        searched = [i for i in order if len(source_ids[i])]
        batches = [
            searched[start : start + batch_size]
            for start in range(0, len(searched), batch_size)
        ] + [order[len(searched) :]]
        # n_best only slices the pool of `beam_size` finished hypotheses,
        # so one compiled search serves every n_best.
        run = compile_search(
            self.model, dataclasses.replace(search, n_best=search.beam_size)
        )
        results = [None] * len(sentences)
        for batch in filter(None, batches):
            is_searched = bool(len(source_ids[batch[0]]))
            if is_searched:
                rows = [source_ids[i] for i in batch]
                result = run(self._pad(rows, batch_size))  # (height, ...)
                result = SearchResult(*(x[: len(batch)] for x in result))
            else:  # `decode_hypotheses` reads no row that is not searched.
                result = SearchResult(
                    token_ids=np.zeros((len(batch), 1, 1), "int32"),
                    scores=np.zeros((len(batch), 1), "float32"),
                    log_probs=np.zeros((len(batch), 1), "float32"),
                    lengths=np.zeros((len(batch), 1), "int32"),
                    attention=np.zeros((len(batch), 1, 1, 1), "float32"),
                )
            decoded = self.preprocessor.decode_hypotheses(
                result,
                np.full(len(batch), is_searched),
                search.n_best,
            )
            decoded = {key: value.numpy() for key, value in decoded.items()}
            for row, i in enumerate(batch):
                source = source_tokens[i]
                results[i] = []
                for k in np.flatnonzero(decoded["is_hypothesis"][row]):
                    length = decoded["length"][row, k]
                    tokens = [
                        t.decode("utf-8")
                        for t in decoded["tokens"][row, k, :length]
                    ]
                    attention = np.array(
                        result.attention[row, k, :length, : len(source)]
                    )
                    text = decoded["text"][row, k]
                    if replace_unknown:
                        tokens = replace_unknown_words(
                            tokens, source, attention, dictionary
                        )
                        # Without [PAD]/[BOS]/[EOS], as `detokenize()` does.
                        words = [t for t in tokens[:-1] if t not in (PAD, BOS)]
                        text = join_words(" ".join(words)).numpy()
                    results[i].append(
                        Translation(
                            text=text.decode("utf-8"),
                            score=float(decoded["score"][row, k]),
                            log_prob=float(decoded["log_prob"][row, k]),
                            source_tokens=list(source),
                            target_tokens=tokens,
                            attention=attention if return_attention else None,
                        )
                    )
        if search.n_best == 1:
            results = [hypotheses[0] for hypotheses in results]
        return results[0] if single else results

    def generate(self, inputs, max_length=None):
        """Translations as strings, as keras-hub's `Seq2SeqLM.generate`.

        Args:
            inputs: a str or a list of str.
            max_length: the most target tokens (None: `self.search`'s).

        Returns:
            A str for a str, else a list of str: the best translations
            with `self.search`.
        """
        search = dataclasses.replace(self.search, n_best=1)
        if max_length is not None:
            search = dataclasses.replace(search, max_length=max_length)
        results = self.translate(inputs, search)
        if isinstance(inputs, str):
            return results.text
        return [result.text for result in results]

    def _pad(self, rows, batch_size):
        """A batch padded to its bucket shape: int32 `(height, width)`."""
        longest = max(len(row) for row in rows)
        width = self.bucket_width * math.ceil(longest / self.bucket_width)
        height = min(batch_size, 1 << (len(rows) - 1).bit_length())
        # Filler rows hold one [UNK]: an all-padding row would have no
        # source position to attend to.
        source_ids = np.zeros((height, width), "int32")
        source_ids[len(rows) :, 0] = UNK_ID
        for i, row in enumerate(rows):
            source_ids[i, : len(row)] = row
        return source_ids


__all__ = [
    "LONG_SOURCES",
    "Translation",
    "Translator",
]
