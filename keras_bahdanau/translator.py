"""Text in, text out: batched translation with a trained model.

`Translator` wraps a model and its two tokenizers (usually loaded from a
run directory) and turns sentences into translations with
`keras_bahdanau.decoding`: tokenization, batching by length, compiled
search, detokenization and unknown-word replacement.

This module also holds two commands of the `keras-bahdanau` CLI:

* `translate RUN_DIR`: one sentence per line from `--input` (or stdin) to
  `--output` (or stdout). With `--n-best 1` each output line is the
  translation of the input line: one output line per input line, an empty
  input line giving an empty line. With `--n-best N > 1` the output is
  Moses' n-best format, `i ||| translation ||| score`, `i` the 0-based
  input line, up to `N` lines per input line, best first. The whole input
  is read and decoded before the model loads: a line that is not UTF-8
  stops the command with one line naming it (exit status 2), unless
  `--errors replace` reads its bad bytes as U+FFFD.
* `plot-attention RUN_DIR`: one alignment heatmap per sentence (Figure 3
  of the paper), `attention_001.png`, ... in `--output-dir`.
"""

import dataclasses
import json
import math
import sys
import types
import warnings
from pathlib import Path

import keras
import numpy as np
from keras import ops

from keras_bahdanau import decoding
from keras_bahdanau import run_directory
from keras_bahdanau.cli import InputError
from keras_bahdanau.data.vocabulary import BOS
from keras_bahdanau.data.vocabulary import PAD
from keras_bahdanau.data.vocabulary import UNK
from keras_bahdanau.data.vocabulary import UNK_ID
from keras_bahdanau.data.vocabulary import WordTokenizer
from keras_bahdanau.data.vocabulary import join_words

# Without `max_length`, sentence `i` may have `2 * Tx_i + 10` tokens.
DEFAULT_RELATIVE_MAX_LENGTH = (2.0, 10)
# What `Translator` does with a source over `max_source_length` tokens.
LONG_SOURCES = ("truncate", "error")
# What the commands do with input bytes that are not UTF-8 (`--errors`).
INPUT_ERRORS = ("strict", "replace")


@dataclasses.dataclass(frozen=True, eq=False)
class Translation:
    """One hypothesis for one source sentence.

    Attributes:
        text: the detokenized translation.
        score: `s(Y, X)`, the search score: `log P(Y|X)` with the length
            and coverage penalties applied (see `decoding.beam_search`).
        log_prob: `log P(Y|X)`, the sum of the model's log-probabilities of
            the tokens of `target_tokens` (EOS included), no penalties.
        source_tokens: list of str, the source tokens the model read (from
            `tokenizer.tokens()`, after truncation; no BOS/EOS).
        target_tokens: list of str, the emitted tokens, ending with
            `[EOS]` (after unknown-word replacement when asked).
        attention: float32 NumPy array `(len(target_tokens),
            len(source_tokens))`, row `t` the alignment used to emit token
            `t`; None unless `return_attention=True`.
    """

    text: str
    score: float
    log_prob: float
    source_tokens: list
    target_tokens: list
    attention: np.ndarray | None = None

    def __str__(self):
        return self.text


class Translator:
    """Translates sentences with a model and its tokenizers.

    Sentences are tokenized, sorted by length and translated in batches
    (the order of the results is the order of the inputs). Each batch is
    padded to a width that is a multiple of `bucket_width` tokens and to a
    power-of-two number of rows, and the compiled searches are cached (see
    `compile_search`), so that JAX and TensorFlow compile once per bucket
    shape and search options rather than once per batch.

    Edge cases, by design:

    * An empty source (no token after tokenization, e.g. `""` or only
      spaces) is not run through the model: its translation is the empty
      string, `score = log_prob = 0.0`, no tokens and a `(0, 0)` attention.
    * A source with more than `max_source_length` tokens is truncated to
      its first `max_source_length` tokens, with a `UserWarning` that says
      which sentences were cut; with `long_sources="error"` the call
      raises a `ValueError` instead and translates nothing (an exported
      SavedModel answers such a sentence with status `too_long` and
      translates the others). `max_source_length=None` translates every
      sentence in full: memory and time then grow with the longest
      sentence (the attention of one batch holds `batch_size * beam_size
      * max_length * Tx` floats), so bound it for input you do not control.
    * Fewer than `n_best` hypotheses come back when fewer exist (e.g. a
      tiny vocabulary and a short maximum length).

    Args:
        model: a `keras_bahdanau.models` model (the decoding protocol:
            `encode`, `decode_step`).
        source_tokenizer: the `Tokenizer` of the source language.
        target_tokenizer: the `Tokenizer` of the target language.
        max_source_length: int >= 1 or None, the most source tokens a
            sentence may have (see above).
        bucket_width: int >= 1, source batches are padded to a multiple of
            it.
        long_sources: what happens to a source of more than
            `max_source_length` tokens: `"truncate"` (with a warning) or
            `"error"` (a `ValueError`).

    Example:

    ```python
    translator = Translator.from_run_dir("runs/rnnsearch")
    translator.translate("Das Haus ist klein.").text
    # 'The house is small.'
    best, second = translator.translate("Das Haus ist klein.", n_best=2)
    ```
    """

    def __init__(
        self,
        model,
        source_tokenizer,
        target_tokenizer,
        max_source_length=None,
        bucket_width=16,
        long_sources="truncate",
    ):
        if max_source_length is not None and not _is_positive_int(
            max_source_length
        ):
            raise ValueError(
                "`max_source_length` must be a positive int or None. "
                f"Received: max_source_length={max_source_length!r}"
            )
        if not _is_positive_int(bucket_width):
            raise ValueError(
                "`bucket_width` must be a positive int. "
                f"Received: bucket_width={bucket_width!r}"
            )
        if long_sources not in LONG_SOURCES:
            raise ValueError(
                f"`long_sources` must be one of {LONG_SOURCES}. "
                f"Received: long_sources={long_sources!r}"
            )
        for side, tokenizer, size in (
            ("source", source_tokenizer, model.source_vocabulary_size),
            ("target", target_tokenizer, model.target_vocabulary_size),
        ):
            if tokenizer.vocabulary_size != size:
                raise ValueError(
                    f"The {side} tokenizer has {tokenizer.vocabulary_size} "
                    f"tokens but the model expects {size}: pass the "
                    "tokenizers the model was trained with."
                )
        self.model = model
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer
        self.max_source_length = max_source_length
        self.bucket_width = bucket_width
        self.long_sources = long_sources
        self._target_vocabulary = np.array(target_tokenizer.get_vocabulary())
        self._search_functions = {}

    @classmethod
    def from_run_dir(
        cls,
        run_dir,
        checkpoint="best",
        max_source_length="auto",
        long_sources="truncate",
    ):
        """Loads the model and tokenizers of a run directory.

        Args:
            run_dir: a directory written by `keras-bahdanau train`.
            checkpoint: `"best"` (lowest dev loss) or `"last"`.
            max_source_length: `"auto"` for the longest sentence length the
                run was trained on (`max_length` in its config.json; no
                limit if it has none), an int, or None for no limit.
            long_sources: `"truncate"` or `"error"`, see `Translator`.

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
            max_source_length = training_max_length(config)
        return cls(
            model,
            source,
            target,
            max_source_length,
            long_sources=long_sources,
        )

    def translate(
        self,
        sentences,
        beam_size=5,
        n_best=1,
        length_penalty=0.0,
        coverage_penalty=0.0,
        max_length=None,
        return_attention=False,
        replace_unknown=False,
        dictionary=None,
        batch_size=32,
    ):
        """Translates one sentence or a list of sentences.

        `beam_size=1` without penalties runs greedy search, anything else
        beam search (`keras_bahdanau.decoding`).

        Args:
            sentences: a str, or a list of str.
            beam_size: int >= 1, the beam width.
            n_best: int in `[1, beam_size]`, hypotheses per sentence.
            length_penalty: GNMT `alpha >= 0` (0 = none).
            coverage_penalty: GNMT `beta >= 0` (0 = none).
            max_length: int, the most target tokens (EOS included); by
                default `2 * Tx + 10` for a source of `Tx` tokens.
            return_attention: whether to fill `Translation.attention`.
            replace_unknown: whether to replace each `[UNK]` of the output
                by its most attended source word (word-level tokenizers
                only; see `decoding.replace_unknown_words`).
            dictionary: optional dict `source word -> target word` used by
                `replace_unknown`.
            batch_size: int >= 1, sentences per search call.

        Returns:
            For a str, its result; for a list, a list of results in input
            order. A result is a `Translation` if `n_best == 1`, else a
            list of up to `n_best` `Translation`s, best score first.
        """
        single = isinstance(sentences, str)
        sentences = [sentences] if single else list(sentences)
        bad = [s for s in sentences if not isinstance(s, str)]
        if bad:
            raise ValueError(
                "`sentences` must be a str or a list of str. Received an "
                f"element {bad[0]!r} of type {type(bad[0]).__name__}"
            )
        if not _is_positive_int(batch_size):
            raise ValueError(
                "`batch_size` must be a positive int. "
                f"Received: batch_size={batch_size!r}"
            )
        if max_length is not None and not _is_positive_int(max_length):
            raise ValueError(
                "`max_length` must be a positive int or None. "
                f"Received: max_length={max_length!r}"
            )
        # Checked here too so that bad options fail even without a search.
        decoding._check_beam_arguments(
            beam_size, n_best, length_penalty, coverage_penalty
        )
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

        source_ids, source_tokens = self._tokenize(sentences)
        results = [None] * len(sentences)
        for i, ids in enumerate(source_ids):
            if len(ids) == 0:
                results[i] = [
                    Translation(
                        text="",
                        score=0.0,
                        log_prob=0.0,
                        source_tokens=[],
                        target_tokens=[],
                        attention=np.zeros((0, 0), "float32")
                        if return_attention
                        else None,
                    )
                ]
        # Longest first: similar lengths share a batch (less padding), and
        # a batch too large for memory fails at once.
        order = sorted(
            (i for i in range(len(sentences)) if results[i] is None),
            key=lambda i: -len(source_ids[i]),
        )
        # n_best only slices the pool of `beam_size` finished hypotheses,
        # so it is applied here: one compiled search serves every n_best.
        options = (beam_size, length_penalty, coverage_penalty)
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            result = self._search(
                [source_ids[i] for i in batch],
                batch_size,
                max_length,
                options,
            )
            for row, i in enumerate(batch):
                results[i] = self._hypotheses(
                    result,
                    row,
                    n_best,
                    source_tokens[i],
                    return_attention,
                    replace_unknown,
                    dictionary,
                )
        if n_best == 1:
            results = [hypotheses[0] for hypotheses in results]
        return results[0] if single else results

    def _tokenize(self, sentences):
        """Source ids and tokens per sentence; long ones cut or refused."""
        if not sentences:
            return [], []
        ids = self.source_tokenizer.tokenize(sentences)
        tokens = self.source_tokenizer.tokens(sentences)
        ids = [np.asarray(row, "int32") for row in ids.to_list()]
        tokens = [
            [token.decode("utf-8") for token in row] for row in tokens.to_list()
        ]
        limit = self.max_source_length
        too_long = [
            i for i, row in enumerate(ids) if limit and len(row) > limit
        ]
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

    def _search(self, rows, batch_size, max_length, options):
        """Pads a batch to its bucket shape and runs the cached search."""
        longest = max(len(row) for row in rows)
        width = self.bucket_width * math.ceil(longest / self.bucket_width)
        height = min(batch_size, 1 << (len(rows) - 1).bit_length())
        # Filler rows hold one [UNK]: an all-padding row would have no
        # source position to attend to.
        source_ids = np.zeros((height, width), "int32")
        source_ids[len(rows) :, 0] = UNK_ID
        for i, row in enumerate(rows):
            source_ids[i, : len(row)] = row
        if max_length is None:
            a, b = DEFAULT_RELATIVE_MAX_LENGTH
            static_max_length = int(a * width + b)
            relative_max_length = DEFAULT_RELATIVE_MAX_LENGTH
        else:
            static_max_length, relative_max_length = max_length, None
        key = (static_max_length, relative_max_length, *options)
        if key not in self._search_functions:
            beam_size, length_penalty, coverage_penalty = options
            self._search_functions[key] = compile_search(
                self.model,
                beam_size=beam_size,
                n_best=beam_size,
                max_length=static_max_length,
                relative_max_length=relative_max_length,
                length_penalty=length_penalty,
                coverage_penalty=coverage_penalty,
            )
        return self._search_functions[key](source_ids)

    def _hypotheses(
        self,
        result,
        row,
        n_best,
        source_tokens,
        return_attention,
        replace_unknown,
        dictionary,
    ):
        hypotheses = []
        for k in range(n_best):
            length = int(result.lengths[row, k])
            if length == 0:  # An empty n-best slot.
                continue
            ids = result.token_ids[row, k, :length]
            tokens = self._target_vocabulary[ids].tolist()
            attention = result.attention[row, k, :length, : len(source_tokens)]
            if replace_unknown:
                tokens = decoding.replace_unknown_words(
                    tokens, source_tokens, attention, dictionary, unk=UNK
                )
                # Without [PAD]/[BOS] (and [EOS]), as `detokenize()` does.
                words = [t for t in tokens[:-1] if t not in (PAD, BOS)]
                text = join_words(" ".join(words)).numpy()
            else:
                text = self.target_tokenizer.detokenize(ids).numpy()
            hypotheses.append(
                Translation(
                    text=text.decode("utf-8"),
                    score=float(result.scores[row, k]),
                    log_prob=float(result.log_probs[row, k]),
                    source_tokens=list(source_tokens),
                    target_tokens=tokens,
                    attention=np.array(attention) if return_attention else None,
                )
            )
        return hypotheses


def compile_search(
    model,
    beam_size=5,
    n_best=1,
    max_length=100,
    relative_max_length=None,
    length_penalty=0.0,
    coverage_penalty=0.0,
):
    """Returns a compiled search: int32 source ids -> `SearchResult`.

    `beam_size=1` without penalties is `decoding.greedy_search`, anything
    else `decoding.beam_search`. On TensorFlow the search is a
    `tf.function`, on JAX it is `jax.jit`-compiled with the weights passed
    as arguments (a `keras.StatelessScope`); both compile once per input
    shape. The JAX programs are shared by all models of the same
    architecture (e.g. the best and last checkpoints of a run, or runs that
    differ only in their data). On torch the search runs eagerly under
    `torch.no_grad()`.

    Args:
        model: a model following the decoding protocol.
        beam_size, n_best, max_length, relative_max_length, length_penalty,
            coverage_penalty: as for `decoding.beam_search`.

    Returns:
        A function of a NumPy int32 `(batch, Tx)` array returning a
        `decoding.SearchResult` of NumPy arrays.

    Example:

    ```python
    search = compile_search(model, beam_size=5, max_length=50)
    result = search(np.array([[5, 6, 7, 0]], "int32"))
    result.token_ids.shape  # (1, 1, 50)
    ```
    """
    settings = dict(
        beam_size=beam_size,
        n_best=n_best,
        max_length=max_length,
        relative_max_length=relative_max_length,
        length_penalty=length_penalty,
        coverage_penalty=coverage_penalty,
    )
    backend = keras.backend.backend()
    if backend in ("jax", "tensorflow"):
        run = _shared_search(model, settings)
    elif backend == "torch":
        import torch

        def run(source_ids):
            with torch.no_grad():
                return _search(model, source_ids, settings)

    else:

        def run(source_ids):
            return _search(model, source_ids, settings)

    def compiled(source_ids):
        result = run(ops.convert_to_tensor(source_ids, "int32"))
        return decoding.SearchResult(
            *(ops.convert_to_numpy(field) for field in result)
        )

    return compiled


def _search(model, source_ids, settings):
    if settings["beam_size"] == 1 and not (
        settings["length_penalty"] or settings["coverage_penalty"]
    ):
        return decoding.greedy_search(
            model,
            source_ids,
            settings["max_length"],
            settings["relative_max_length"],
        )
    return decoding.beam_search(model, source_ids, **settings)


# Compiled searches by (architecture, settings). Weights are arguments, not
# constants baked into the program, so one program serves every model of
# the same architecture whatever its weights.
_compiled_searches = {}


def _shared_search(model, settings):
    architecture = (
        type(model).__qualname__,
        json.dumps(model.get_config(), sort_keys=True, default=str),
        tuple(layer.dtype_policy.name for layer in model.layers),
        # Not the paths: they hold per-instance names like `forward_gru_1`.
        tuple((tuple(v.shape), v.dtype) for v in model.variables),
    )
    key = (architecture, json.dumps(settings, sort_keys=True))
    if key not in _compiled_searches:
        # The model whose variables the values stand for, set per call (a
        # new input shape traces again, with that call's model).
        traced = types.SimpleNamespace(model=None)

        def stateless_search(values, source_ids):
            variables = traced.model.variables
            with keras.StatelessScope(
                state_mapping=list(zip(variables, values, strict=True))
            ):
                return _search(traced.model, source_ids, settings)

        if keras.backend.backend() == "jax":
            import jax

            stateless_search = jax.jit(stateless_search)
        else:
            import tensorflow as tf

            stateless_search = tf.function(stateless_search)
        _compiled_searches[key] = traced, stateless_search
    traced, stateless_search = _compiled_searches[key]

    def run(source_ids):
        traced.model = model
        try:
            values = [variable.value for variable in model.variables]
            return stateless_search(values, source_ids)
        finally:
            traced.model = None  # Keeps no model alive.

    return run


def training_max_length(config):
    """The longest training sentence (tokens) a run's config allows, or None.

    Read from `config["data"]["max_length"]` (or a top-level
    `max_length`).
    """
    data = config.get("data") or {}
    return data.get("max_length", config.get("max_length"))


# === The `translate` command ===


def add_arguments(parser):
    parser.description = (
        "Translate one sentence per line from --input (default: stdin) to "
        "--output (default: stdout): one output line per input line, an "
        "empty input line giving an empty line. With --n-best N > 1 the "
        "output is Moses' n-best format `i ||| translation ||| score` (i: "
        "0-based input line), up to N lines per input line, best first. "
        "The whole input is read and checked to be UTF-8 before the model "
        "loads (see --errors)."
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="run directory")
    parser.add_argument("--input", help="input file (default: stdin)")
    parser.add_argument("--output", help="output file (default: stdout)")
    add_search_arguments(parser)
    parser.add_argument(
        "--n-best", type=int, default=1, help="hypotheses per sentence"
    )
    parser.add_argument(
        "--replace-unknown",
        action="store_true",
        help="replace [UNK] by the most attended source word",
    )
    parser.add_argument(
        "--dictionary",
        help="with --replace-unknown: a file of `source<TAB>target` word "
        "pairs used to translate the copied source words",
    )


def run(args):
    # All input first: bad input fails at once, before the model loads.
    sentences = _read_input_lines(args.input, args.errors)
    dictionary = (
        _read_dictionary(args.dictionary, args.errors)
        if args.dictionary
        else None
    )
    translator = translator_from_args(args)
    output = (
        open(args.output, "w", encoding="utf-8") if args.output else sys.stdout
    )
    try:
        # Chunks of several batches: sorting by length pays off, yet the
        # output of a long input streams. (A bad --batch-size is refused
        # by `translate`.)
        chunk_size = 8 * max(args.batch_size, 1)
        for start in range(0, len(sentences), chunk_size):
            results = translator.translate(
                sentences[start : start + chunk_size],
                n_best=args.n_best,
                replace_unknown=args.replace_unknown,
                dictionary=dictionary,
                **search_options(args),
            )
            for index, hypotheses in enumerate(results, start):
                if args.n_best == 1:
                    output.write(hypotheses.text + "\n")
                else:
                    for hypothesis in hypotheses:
                        output.write(
                            f"{index} ||| {hypothesis.text} ||| "
                            f"{hypothesis.score:.6f}\n"
                        )
            output.flush()
    finally:
        if args.output:
            output.close()
    return 0


# === The `plot-attention` command ===


def _add_plot_arguments(parser):
    parser.description = (
        "Translate sentences and draw their alignments as heatmaps "
        "(Figure 3 of the paper): one file attention_NNN.FORMAT per "
        "sentence, numbered from 001 in input order. Empty sentences are "
        "skipped with a warning."
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="run directory")
    parser.add_argument(
        "--sentence",
        action="append",
        default=[],
        help="a sentence to translate (repeatable)",
    )
    parser.add_argument("--input", help="a file of sentences, one per line")
    parser.add_argument(
        "--output-dir", required=True, help="folder for the figures"
    )
    parser.add_argument("--format", choices=("png", "svg"), default="png")
    parser.add_argument("--dpi", type=int, default=100, help="PNG resolution")
    add_search_arguments(parser)


def _run_plot(args):
    from keras_bahdanau.plotting import plot_attention

    sentences = list(args.sentence)
    if args.input:
        sentences += _read_input_lines(args.input, args.errors)
    if not sentences:
        raise ValueError("Nothing to plot: pass --sentence or --input.")
    translator = translator_from_args(args)
    translations = translator.translate(
        sentences, return_attention=True, **search_options(args)
    )
    output_dir = Path(args.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    for number, translation in enumerate(translations, 1):
        if not translation.source_tokens:
            warnings.warn(
                f"Sentence {number} is empty: no alignment to plot.",
                stacklevel=2,
            )
            continue
        path = output_dir / f"attention_{number:03d}.{args.format}"
        plot_attention(
            translation.attention,
            translation.source_tokens,
            translation.target_tokens,
            path=path,
            dpi=args.dpi,
        )
        print(f"{path}\t{translation.text}")
    return 0


plot_attention_command = types.SimpleNamespace(
    add_arguments=_add_plot_arguments, run=_run_plot
)


# === Shared by the commands (also used by `evaluate`) ===


def add_decoding_arguments(parser):
    """Checkpoint and search flags, shared with `export`."""
    parser.add_argument(
        "--checkpoint", choices=run_directory.CHECKPOINTS, default="best"
    )
    parser.add_argument("--beam-size", type=int, default=5)
    parser.add_argument(
        "--length-penalty", type=float, default=0.0, help="GNMT alpha"
    )
    parser.add_argument(
        "--coverage-penalty", type=float, default=0.0, help="GNMT beta"
    )
    parser.add_argument(
        "--max-length",
        type=int,
        default=None,
        help="most target tokens (default: 2 * source tokens + 10)",
    )


def add_search_arguments(parser):
    """Flags shared by `translate`, `plot-attention` and `evaluate`."""
    add_decoding_arguments(parser)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument(
        "--max-source-length",
        type=int,
        default=None,
        help="truncate longer sources, with a warning (default: the "
        "run's training max_length; 0: no limit)",
    )
    parser.add_argument(
        "--errors",
        choices=INPUT_ERRORS,
        default="strict",
        help="input bytes that are not UTF-8: stop with an error naming "
        "the line (strict, the default) or read them as U+FFFD (replace)",
    )


def search_options(args):
    """`Translator.translate` options from `add_search_arguments` flags."""
    return dict(
        beam_size=args.beam_size,
        length_penalty=args.length_penalty,
        coverage_penalty=args.coverage_penalty,
        max_length=args.max_length,
        batch_size=args.batch_size,
    )


def translator_from_args(args, run_dir=None):
    """A `Translator` for `run_dir` (default `args.run_dir`) and the flags."""
    limit = args.max_source_length
    return Translator.from_run_dir(
        run_dir or args.run_dir,
        checkpoint=args.checkpoint,
        max_source_length="auto" if limit is None else (limit or None),
    )


def _read_input_lines(path, errors="strict"):
    """The lines of a UTF-8 text file, or of stdin, for the commands.

    Lines end at `"\n"` only (not at U+2028 and the like, which
    `str.splitlines()` would split on); the `"\r"` of a `"\r\n"` line end
    is dropped, and so is a byte order mark at the start. The last line
    may lack its line end. Empty lines are kept: the result has one item
    per input line.

    Args:
        path: the file, or None for stdin (read as bytes).
        errors: `"strict"` (a line that is not UTF-8 is an error) or
            `"replace"` (its undecodable bytes become U+FFFD).

    Returns:
        A list of str.

    Raises:
        keras_bahdanau.cli.InputError: the file cannot be read, or a line
            is not UTF-8 (naming the file, or `<stdin>`, and the 1-based
            line).
    """
    if errors not in INPUT_ERRORS:
        raise ValueError(
            f"`errors` must be one of {INPUT_ERRORS}. Received: "
            f"errors={errors!r}"
        )
    name = "<stdin>" if path is None else repr(str(path))
    try:
        if path is None:
            data = sys.stdin.buffer.read()
        else:
            with open(path, "rb") as file:
                data = file.read()
    except OSError as error:
        raise InputError(f"{name}: {error.strerror or error}") from None
    raw_lines = data.split(b"\n")
    if raw_lines[-1] == b"":  # What follows the last line end.
        raw_lines.pop()
    lines = []
    for number, raw in enumerate(raw_lines, 1):
        try:
            line = raw.decode("utf-8", errors=errors)
        except UnicodeDecodeError as error:
            raise InputError(
                f"{name}, line {number}: invalid UTF-8 ({error.reason} at "
                f"byte {error.start} of the line). Fix the input, or pass "
                "--errors replace to read undecodable bytes as U+FFFD."
            ) from None
        lines.append(line.removesuffix("\r"))
    if lines:
        lines[0] = lines[0].removeprefix("\ufeff")
    return lines


def _read_dictionary(path, errors="strict"):
    """Reads `source<TAB>target` lines into a dict."""
    dictionary = {}
    for number, line in enumerate(_read_input_lines(path, errors), 1):
        fields = line.split("\t")
        if len(fields) != 2:
            raise InputError(
                f"{str(path)!r}, line {number}: expected "
                f"`source<TAB>target`. Received: {line.rstrip()!r}"
            )
        dictionary[fields[0]] = fields[1]
    return dictionary


def _is_positive_int(value):
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


__all__ = [
    "Translation",
    "Translator",
    "compile_search",
    "plot_attention_command",
    "training_max_length",
]
