"""Text in, text out: batched translation with a trained model.

`Translator`, keras-hub's task for translation, wraps a model and its
`TranslationPreprocessor`: it loads and saves presets (`from_preset`,
`save_to_preset`), translates (`translate`, `generate`), trains further
(`fit`) and exports a SavedModel (`export`). `translate` runs three
passes: the preprocessor tokenizes the sentences and the length policy is
applied, the compiled search of `keras_bahdanau.decoding` runs on batches
of similar length, and the preprocessor detokenizes (with unknown words
replaced on request, `text.replace_unknown_words`).
"""

import dataclasses
import math
import warnings

import numpy as np

from keras_bahdanau import presets
from keras_bahdanau.decoding import SearchResult
from keras_bahdanau.decoding import as_search_config
from keras_bahdanau.decoding import compile_search
from keras_bahdanau.preprocessor import LONG_SOURCES
from keras_bahdanau.preprocessor import TranslationPreprocessor
from keras_bahdanau.reserved import BOS
from keras_bahdanau.reserved import PAD
from keras_bahdanau.reserved import UNK_ID
from keras_bahdanau.text import STATUS_TOO_LONG
from keras_bahdanau.text import Translation
from keras_bahdanau.text import replace_unknown_words
from keras_bahdanau.tokenizers import WordTokenizer
from keras_bahdanau.tokenizers import join_words
from keras_bahdanau.training import compile_model
from keras_bahdanau.validation import check_int


class Translator:
    """Translates sentences with a model and its preprocessor.

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
    * A source with more than the preprocessor's `max_source_length`
      tokens is truncated to its first `max_source_length` tokens, with a
      `UserWarning` that says which sentences were cut; with
      `long_sources="error"` the call raises a `ValueError` instead and
      translates nothing. `max_source_length=None` translates every
      sentence in full: memory and time then grow with the longest
      sentence (the attention of one batch holds `batch_size * beam_size
      * max_length * Tx` floats), so bound it for input you do not
      control.
    * Fewer than `n_best` hypotheses come back when fewer exist (e.g. a
      tiny vocabulary and a short maximum length).

    Args:
        model: a `keras_bahdanau.models` model (the decoding protocol:
            `encode`, `decode_step`).
        preprocessor: its `TranslationPreprocessor` (the tokenizers and
            the length policy).
        bucket_width: int >= 1, source batches are padded to a multiple of
            it.
        search: the `SearchConfig` of `translate` and `generate` calls
            that pass none (None: `SearchConfig()`, beam search with 5
            beams); a preset brings its own.

    Example:

    ```python
    translator = Translator.from_preset("runs/ding_de_en")
    translator.translate("Das Haus ist klein.").text
    # 'The house is small.'
    best, second = translator.translate(
        "Das Haus ist klein.", SearchConfig(n_best=2)
    )
    translator.generate(["Das Haus ist klein."])  # ['The house is small.']
    translator.fit(more_pairs, epochs=2)
    translator.save_to_preset("presets/ding_de_en")
    translator.export("saved_models/ding_de_en")  # TF Serving
    ```
    """

    def __init__(self, model, preprocessor, bucket_width=16, search=None):
        check_int("bucket_width", bucket_width)
        if not isinstance(preprocessor, TranslationPreprocessor):
            raise TypeError(
                "`preprocessor` must be a TranslationPreprocessor: pass "
                "TranslationPreprocessor(source_tokenizer, target_tokenizer)"
                f". Received: {type(preprocessor).__name__}"
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

    def get_config(self):
        """The settings a preset holds besides the preprocessor's."""
        return {
            "bucket_width": self.bucket_width,
            "search": self.search.to_dict(),
        }

    @classmethod
    def from_preset(cls, preset, checkpoint="best", **kwargs):
        """Loads a trained model: a preset folder or a run directory.

        The model comes back compiled with the defaults of `fit` (Adam,
        learning rate 1e-3, the masked loss of `training.compile_model`),
        so `translator.model.fit(...)` trains it further; compile it
        yourself for other settings.

        Args:
            preset: a folder written by `save_to_preset`, or a run
                directory of `keras-bahdanau train` (either layout of
                `presets.py`).
            checkpoint: `"best"` (the preset's weights) or, in a run
                directory, `"last"` (the last epoch's).
            **kwargs: settings that replace the preset's:
                `max_source_length` and `long_sources` (the
                preprocessor's), `bucket_width`, `search`.

        Returns:
            A `Translator`.

        Raises:
            FileNotFoundError: `preset` is not a preset, or misses a file.
            run_directory.RunDirectoryError: a file is damaged, of another
                format, or unsafe (see `presets.load_preset`).
            TypeError: a keyword argument is not one of the settings.
        """
        unknown = sorted(set(kwargs) - set(presets.SETTINGS))
        if unknown:
            raise TypeError(
                f"Translator.from_preset takes the settings "
                f"{sorted(presets.SETTINGS)}. Received: {unknown}"
            )
        model, source, target, settings = presets.load_preset(
            preset, checkpoint
        )
        settings = {**settings, **kwargs}
        preprocessor = TranslationPreprocessor(
            source,
            target,
            settings["max_source_length"],
            settings["long_sources"],
        )
        _compile_default(model)
        return cls(
            model, preprocessor, settings["bucket_width"], settings["search"]
        )

    def save_to_preset(self, preset):
        """Writes the model, preprocessor and settings as a preset folder.

        `Translator.from_preset(preset)` loads it back, on any backend,
        and every command takes it (see `presets.py`).

        Args:
            preset: a new (or empty) folder.

        Returns:
            The `pathlib.Path` of the preset.
        """
        return presets.save_preset(preset, self)

    def export(self, output, search=None, **options):
        """Writes a TF Serving SavedModel version of this translator.

        On the TensorFlow backend from this process's model; on the
        others from a temporary preset, in a TensorFlow subprocess.

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

        return export_saved_model(self, output, search=search, **options)

    def fit(self, pairs, validation_pairs=None, batch_size=32, **kwargs):
        """Trains the model further on sentence pairs (`model.fit`).

        The pairs are packed by the preprocessor (`make_dataset`:
        shuffled, in length buckets, none left out for its length). A
        model that is not compiled gets `from_preset`'s default compile.

        Args:
            pairs: list of `(source, target)` str tuples.
            validation_pairs: optional pairs for `validation_data`.
            batch_size: int >= 1, pairs per batch.
            **kwargs: `model.fit`'s (`epochs`, `callbacks`, `verbose`...).

        Returns:
            `model.fit`'s `History`.
        """
        if not getattr(self.model, "compiled", False):
            _compile_default(self.model)
        dataset, _ = self.preprocessor.make_dataset(
            pairs, batch_size=batch_size, max_length=None
        )
        if validation_pairs is not None:
            validation_pairs, _ = self.preprocessor.make_dataset(
                validation_pairs,
                batch_size=batch_size,
                max_length=None,
                shuffle=False,
            )
        # The dataset shuffles itself each epoch.
        kwargs.setdefault("shuffle", False)
        return self.model.fit(
            dataset, validation_data=validation_pairs, **kwargs
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
        if replace_unknown and not all(
            isinstance(tokenizer, WordTokenizer)
            for tokenizer in self.preprocessor.tokenizers
        ):
            raise ValueError(
                "`replace_unknown=True` needs word-level tokenizers "
                "(WordTokenizer) on both sides: a subword vocabulary has "
                "(almost) no [UNK] and no source word to copy. Received: "
                f"{type(self.source_tokenizer).__name__} and "
                f"{type(self.target_tokenizer).__name__}"
            )
        source_ids, source_tokens = self._preprocess(sentences)
        results = [None] * len(sentences)
        for rows, result in self._search(source_ids, search, batch_size):
            translations = self._postprocess(
                result,
                [source_tokens[i] for i in rows],
                search.n_best,
                return_attention,
                replace_unknown,
                dictionary,
            )
            for i, hypotheses in zip(rows, translations, strict=True):
                results[i] = hypotheses
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

    def _preprocess(self, sentences):
        """Pass 1: source ids and tokens per sentence, long ones cut.

        Returns:
            `(ids, tokens)`: per sentence an int32 NumPy array and a list
            of str, at most `max_source_length` long.

        Raises:
            ValueError: with `long_sources="error"`, a sentence has more
                than `max_source_length` tokens; nothing is translated.
        """
        limit = self.max_source_length
        sources = self.preprocessor.generate_preprocess(sentences)
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

    def _search(self, source_ids, search, batch_size):
        """Pass 2: yields `(rows, result)`, a batch's sentence indices and
        `SearchResult` (empty sources: one batch, not searched: None).

        Longest first: similar lengths share a batch (less padding), and a
        batch too large for memory fails at once.
        """
        order = sorted(
            range(len(source_ids)), key=lambda i: -len(source_ids[i])
        )
        searched = [i for i in order if len(source_ids[i])]
        # n_best only slices the pool of `beam_size` finished hypotheses,
        # so one compiled search serves every n_best.
        run = compile_search(
            self.model, dataclasses.replace(search, n_best=search.beam_size)
        )
        for start in range(0, len(searched), batch_size):
            rows = searched[start : start + batch_size]
            result = run(self._pad([source_ids[i] for i in rows], batch_size))
            yield rows, SearchResult(*(x[: len(rows)] for x in result))
        if len(searched) < len(order):
            yield order[len(searched) :], None

    def _postprocess(
        self, result, sources, n_best, attention, replace_unknown, dictionary
    ):
        """Pass 3: the `Translation`s of a batch, a list per sentence.

        `result`: the batch's `SearchResult`, None for empty sources;
        `sources`: their tokens; `attention`: whether to keep it; the rest
        as in `translate`.
        """
        searched = result is not None
        if not searched:  # `generate_postprocess` reads none of its rows.
            size = len(sources)
            result = SearchResult(
                token_ids=np.zeros((size, 1, 1), "int32"),
                scores=np.zeros((size, 1), "float32"),
                log_probs=np.zeros((size, 1), "float32"),
                lengths=np.zeros((size, 1), "int32"),
                attention=np.zeros((size, 1, 1, 1), "float32"),
            )
        decoded = self.preprocessor.generate_postprocess(
            result, np.full(len(sources), searched), n_best
        )
        decoded = {key: value.numpy() for key, value in decoded.items()}
        translations = []
        for row, source in enumerate(sources):
            translations.append([])
            for k in np.flatnonzero(decoded["is_hypothesis"][row]):
                length = decoded["length"][row, k]
                tokens = [
                    t.decode("utf-8")
                    for t in decoded["tokens"][row, k, :length]
                ]
                alignment = np.array(
                    result.attention[row, k, :length, : len(source)]
                )
                text = decoded["text"][row, k]
                if replace_unknown:
                    tokens = replace_unknown_words(
                        tokens, source, alignment, dictionary
                    )
                    # Without [PAD]/[BOS]/[EOS], as `detokenize()` does.
                    words = [t for t in tokens[:-1] if t not in (PAD, BOS)]
                    text = join_words(" ".join(words)).numpy()
                translations[-1].append(
                    Translation(
                        text=text.decode("utf-8"),
                        score=float(decoded["score"][row, k]),
                        log_prob=float(decoded["log_prob"][row, k]),
                        source_tokens=list(source),
                        target_tokens=tokens,
                        attention=alignment if attention else None,
                    )
                )
        return translations

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


def _compile_default(model):
    """`from_preset`'s and `fit`'s compile: Adam, the package's loss."""
    compile_model(model, "adam")


__all__ = [
    "LONG_SOURCES",
    "Translation",
    "Translator",
]
