"""Export a trained run as a SavedModel for TensorFlow Serving.

`export_saved_model(run_dir, output)` (CLI: `keras-bahdanau export RUN_DIR
--output saved_models/NAME`) writes TF Serving's layout,
`saved_models/NAME/<version>/`, with three signatures that take raw text:
tokenization, beam search and detokenization all run inside the graph, so
a server needs no Python and no keras_bahdanau. See docs/serving.md.

* `serving_default`: `text` string `(batch,)` -> `translation` string
  `(batch,)`, `score` float32 `(batch,)` and `status` string `(batch,)`,
  with the search settings fixed at export.
* `translate_n_best`: `text` `(batch,)`, `beam_size` int32 `()`, `n_best`
  int32 `()`, `length_penalty` float32 `()` -> `translations` string
  `(batch, n_best)`, `scores` float32 `(batch, n_best)`, best first, and
  `status` `(batch,)`. An empty n-best slot (fewer hypotheses exist) is
  `""` with score `LOWEST_SCORE`. `beam_size` is at most
  `max_beam_size`: shapes are static, so the graph holds one search per
  beam size from 1 to `max_beam_size`.
* `align`: `text` `(batch,)` -> `translation`, `score`, `status`,
  `source_tokens` string `(batch, Tx)`, `source_length` int32
  `(batch,)`, `target_tokens` string `(batch, T)` (ending with `[EOS]`),
  `target_length` int32 `(batch,)` and `alignment` float32
  `(batch, T, Tx)`; padded with `""` and 0 beyond the lengths.

Every signature answers each sentence on its own, with a `status` (one
of `STATUSES`): `"ok"`, translated; `"empty"`, no token (empty, only
spaces or control characters); `"too_long"`, more than
`max_source_tokens` tokens. An `"empty"` or `"too_long"` sentence is not
searched: its translation is `""`, its score 0 (in `translate_n_best`
one such hypothesis, the other slots empty) and its lengths in `align`
are 0. The other sentences of the request are translated exactly as in
a request of their own, and as `Translator(max_source_length=
max_source_tokens, long_sources="error")` translates them (which raises
where the served model answers `"too_long"`). Text is read as
`Translator` reads it: invalid UTF-8 bytes (which a Python str cannot
hold) become U+FFFD.

Every score is a finite float32, as JSON (TF Serving's REST API) has no
infinity or NaN: an empty n-best slot scores `LOWEST_SCORE`, the lowest
float32, below every real score so that the n-best lists stay sorted;
so does a search score of `-inf` (the coverage penalty of a source
token given no attention at all) or NaN (a broken model).

Two limits, fixed at export and recorded in `METADATA_FILE`, bound what
one request can cost (the search's memory grows with both): a sentence
of more than `max_source_tokens` tokens is answered `"too_long"` as
above, and a request of more than `max_batch` sentences fails as a
whole with `INVALID_ARGUMENT` and a message naming the limit, as does a
bad `beam_size`, `n_best` or `length_penalty`. Nothing is truncated or
split: TF Serving's own batching is the place to split requests.

The artifact is always built on the TensorFlow backend, whatever backend
trained the weights: a JAX export puts the whole computation into one
`XlaCallModule` op, which TF Serving runs poorly, and torch cannot export
a SavedModel here. So when the current backend is not TensorFlow, the
export runs in a subprocess with `KERAS_BACKEND=tensorflow` that loads the
run's `.keras` file (the weights load on any backend).
"""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import keras
import numpy as np

from keras_bahdanau import decoding
from keras_bahdanau import run_directory

SIGNATURES = ("serving_default", "translate_n_best", "align")
# The per-sentence `status` of every signature, see the module docstring.
STATUS_OK = "ok"
STATUS_EMPTY = "empty"
STATUS_TOO_LONG = "too_long"
STATUSES = (STATUS_OK, STATUS_EMPTY, STATUS_TOO_LONG)
# Stands for a score of -inf (an empty n-best slot): JSON has no infinity,
# and the lowest float32 still sorts below every real score.
LOWEST_SCORE = float(np.finfo(np.float32).min)
# Read by tools, ignored by TF Serving (assets.extra is for such files).
METADATA_FILE = "assets.extra/keras_bahdanau.json"


def export_saved_model(
    run_dir,
    output,
    version=None,
    checkpoint="best",
    overwrite=False,
    beam_size=5,
    length_penalty=0.0,
    coverage_penalty=0.0,
    max_length=None,
    max_source_tokens=100,
    max_batch=64,
    max_beam_size=8,
):
    """Writes a run's model as a TF Serving SavedModel version.

    The version is built in a hidden temporary folder inside `output` and
    renamed into place, so an interrupted export never leaves a half-written
    version (TF Serving ignores folders whose name is not a number).

    Args:
        run_dir: a run directory written by `keras-bahdanau train`.
        output: the model's folder, e.g. `saved_models/NAME`; created if
            needed. The SavedModel goes to `output/<version>/`.
        version: int >= 1, or None for one more than the highest existing
            version (1 for a new folder).
        checkpoint: `"best"` or `"last"`.
        overwrite: whether to replace an existing version.
        beam_size: int >= 1, the beam of `serving_default` and `align`.
        length_penalty: GNMT `alpha >= 0` of `serving_default` and
            `align`; `translate_n_best` takes its own.
        coverage_penalty: GNMT `beta >= 0` of all three signatures.
        max_length: int, the most target tokens (EOS included), or None
            for `2 * Tx + 10` as in `Translator`.
        max_source_tokens: int >= 1, the most tokens a sentence may have;
            a longer one is not translated and gets status `"too_long"`.
        max_batch: int >= 1, the most sentences per request; a larger
            request fails with `INVALID_ARGUMENT`.
        max_beam_size: int >= 1, the largest `beam_size` that
            `translate_n_best` accepts (one search per size in the graph).

    Returns:
        The `pathlib.Path` of the version folder.

    Example:

    ```python
    path = export_saved_model("runs/demo", "saved_models/demo")
    # saved_models/demo/1, served with
    # docker run -p 8501:8501 --mount type=bind,source=$PWD/saved_models/
    # demo,target=/models/demo -e MODEL_NAME=demo tensorflow/serving
    ```
    """
    settings = _settings(
        beam_size,
        length_penalty,
        coverage_penalty,
        max_length,
        max_source_tokens,
        max_batch,
        max_beam_size,
    )
    if version is not None and (not _is_int(version) or version < 1):
        raise ValueError(
            "`version` must be an int >= 1 (TF Serving serves numbered "
            f"folders) or None. Received: version={version!r}"
        )
    # Fail early, with the run directory's own errors (missing, damaged
    # or mismatched files), before a subprocess is started.
    run_directory.check_run(run_dir, checkpoint)
    output = pathlib.Path(output)
    if output.exists() and not output.is_dir():
        raise NotADirectoryError(
            f"`output` must be a folder (TF Serving's model base path). "
            f"Received: output={str(output)!r}, a file."
        )
    output.mkdir(parents=True, exist_ok=True)
    if version is None:
        version = 1 + max(
            (int(p.name) for p in output.iterdir() if p.name.isdigit()),
            default=0,
        )
    target = output / str(version)
    if target.exists() and not overwrite:
        raise FileExistsError(
            f"{target} already exists. Pass overwrite=True (CLI: "
            "--overwrite) to replace it, or another version."
        )

    temporary = pathlib.Path(
        tempfile.mkdtemp(prefix=f".{version}.partial-", dir=output)
    )
    try:
        build = dict(
            run_dir=str(run_dir),
            checkpoint=checkpoint,
            path=str(temporary),
            settings=settings,
        )
        if keras.backend.backend() == "tensorflow":
            _write_saved_model(**build)
        else:
            _write_in_tensorflow_subprocess(build)
        # mkdtemp() made it private (0700); a server running as another
        # user must be able to read the version.
        temporary.chmod(0o755)
        _publish(temporary, target)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
    return target


def _settings(
    beam_size,
    length_penalty,
    coverage_penalty,
    max_length,
    max_source_tokens,
    max_batch,
    max_beam_size,
):
    decoding._check_beam_arguments(
        beam_size, 1, length_penalty, coverage_penalty
    )
    if max_length is not None:
        decoding._check_length_arguments(max_length, None)
    for name, value in (
        ("max_source_tokens", max_source_tokens),
        ("max_batch", max_batch),
        ("max_beam_size", max_beam_size),
    ):
        if not _is_int(value) or value < 1:
            raise ValueError(
                f"`{name}` must be an int >= 1. Received: {name}={value!r}"
            )
    if beam_size > max_beam_size:
        raise ValueError(
            "`beam_size` (the beam of serving_default) must be at most "
            f"`max_beam_size`. Received: beam_size={beam_size}, "
            f"max_beam_size={max_beam_size}"
        )
    return dict(
        beam_size=beam_size,
        length_penalty=float(length_penalty),
        coverage_penalty=float(coverage_penalty),
        max_length=max_length,
        max_source_tokens=max_source_tokens,
        max_batch=max_batch,
        max_beam_size=max_beam_size,
    )


def _publish(temporary, target):
    """Renames the finished version into place (atomic on one filesystem)."""
    if not target.exists():
        # Fails rather than merges if another export created it meanwhile.
        os.rename(temporary, target)
        return
    old = pathlib.Path(
        tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent)
    )
    os.rename(target, old / target.name)
    os.rename(temporary, target)
    shutil.rmtree(old, ignore_errors=True)


# Precedes the message of a RunDirectoryError in the subprocess's stderr.
_RUN_DIRECTORY_ERROR = "keras_bahdanau.run_directory.RunDirectoryError: "


def _write_in_tensorflow_subprocess(build):
    command = (
        "import json, sys\n"
        "from keras_bahdanau import export, run_directory\n"
        "try:\n"
        "    export._write_saved_model(**json.loads(sys.argv[1]))\n"
        "except run_directory.RunDirectoryError as error:\n"
        f"    sys.stderr.write({_RUN_DIRECTORY_ERROR!r} + str(error))\n"
        "    sys.exit(3)\n"
    )
    process = subprocess.run(
        [sys.executable, "-c", command, json.dumps(build)],
        env={**os.environ, "KERAS_BACKEND": "tensorflow"},
        capture_output=True,
        text=True,
    )
    if process.returncode == 3 and _RUN_DIRECTORY_ERROR in process.stderr:
        # E.g. a model file refused by safe_mode: the same error as on
        # the TensorFlow backend, not a subprocess failure.
        message = process.stderr.rsplit(_RUN_DIRECTORY_ERROR, 1)[1]
        raise run_directory.RunDirectoryError(message)
    if process.returncode:
        raise RuntimeError(
            "The export in a KERAS_BACKEND=tensorflow subprocess failed "
            f"(exit status {process.returncode}):\n" + process.stderr[-4000:]
        )


def _write_saved_model(run_dir, checkpoint, path, settings):
    """Builds the signatures and writes the SavedModel (TF backend only)."""
    import tensorflow as tf

    if keras.backend.backend() != "tensorflow":
        raise RuntimeError(
            "The SavedModel must be built on the TensorFlow backend. "
            f"Received: backend={keras.backend.backend()!r}"
        )
    model, source, target, config = run_directory.load_run(run_dir, checkpoint)
    graph = _ServingGraph(model, source, target, **settings)
    text = tf.TensorSpec([None], tf.string, name="text")
    input_signatures = {
        "serving_default": [text],
        "translate_n_best": [
            text,
            tf.TensorSpec([], tf.int32, name="beam_size"),
            tf.TensorSpec([], tf.int32, name="n_best"),
            tf.TensorSpec([], tf.float32, name="length_penalty"),
        ],
        "align": [text],
    }
    functions = {
        "serving_default": graph.translate,
        "translate_n_best": graph.translate_n_best,
        "align": graph.align,
    }
    # Traced once each, here. A tf.function handed to `save()` (as
    # `ExportArchive.write_out()` does) is traced a second time in the
    # save context, which doubles the export time of the beam searches.
    signatures = {
        name: tf.function(
            function, input_signature=input_signatures[name], autograph=False
        ).get_concrete_function()
        for name, function in functions.items()
    }
    root = tf.Module()
    root.model_variables = list(model.variables)
    # The tokenizers are saved for their lookup tables.
    root.source_tokenizer = source
    root.target_tokenizer = target
    tf.saved_model.save(root, path, signatures=signatures)
    metadata = {
        "run_dir": str(pathlib.Path(run_dir).resolve()),
        "checkpoint": checkpoint,
        "model": type(model).__name__,
        "trained_backend": config.get("backend"),
        "export_backend": keras.backend.backend(),
        "settings": settings,
        "signatures": list(SIGNATURES),
        "versions": {
            "keras": keras.__version__,
            "tensorflow": tf.__version__,
        },
    }
    metadata_path = pathlib.Path(path) / METADATA_FILE
    metadata_path.parent.mkdir(parents=True, exist_ok=True)
    metadata_path.write_text(json.dumps(metadata, indent=2) + "\n")


class _ServingGraph:
    """The signature functions, for `tf.function` (TF backend only).

    All three signatures call one graph function, `search(source_ids,
    beam_size, length_penalty)`, that holds one beam search per beam size
    (shapes are static) and runs the one asked for: traced once, shared.
    """

    def __init__(
        self,
        model,
        source_tokenizer,
        target_tokenizer,
        beam_size,
        length_penalty,
        coverage_penalty,
        max_length,
        max_source_tokens,
        max_batch,
        max_beam_size,
    ):
        import tensorflow as tf

        from keras_bahdanau.translator import DEFAULT_RELATIVE_MAX_LENGTH

        self.model = model
        self.source = source_tokenizer
        self.target = target_tokenizer
        self.beam_size = beam_size
        self.length_penalty = length_penalty
        self.coverage_penalty = coverage_penalty
        self.max_source_tokens = max_source_tokens
        self.max_batch = max_batch
        self.max_beam_size = max_beam_size
        if max_length is None:
            # As `Translator`: at most `a * Tx + b` tokens; the static
            # length covers the longest source allowed.
            a, b = DEFAULT_RELATIVE_MAX_LENGTH
            self.max_length = int(a * max_source_tokens + b)
            self.relative_max_length = DEFAULT_RELATIVE_MAX_LENGTH
        else:
            self.max_length = max_length
            self.relative_max_length = None
        self.search = tf.function(
            self._search,
            input_signature=[
                tf.TensorSpec([None, None], tf.int32),
                tf.TensorSpec([], tf.int32),
                tf.TensorSpec([], tf.float32),
            ],
            autograph=False,
        )

    def translate(self, text):
        source = self._read(text)
        result = self.search(source["ids"], self.beam_size, self.length_penalty)
        return self._best(source, result)

    def translate_n_best(self, text, beam_size, n_best, length_penalty):
        import tensorflow as tf

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
        result = self.search(source["ids"], beam_size, length_penalty)
        token_ids = result["token_ids"][:, :n_best]  # (batch, n_best, T)
        shape = tf.shape(token_ids)
        translations = tf.reshape(
            self.target.detokenize(tf.reshape(token_ids, [-1, shape[2]])),
            shape[:2],
        )  # (batch * n_best, T) -> (batch, n_best)
        # A sentence not searched (empty, too long) has one hypothesis,
        # the empty one, scored 0, as `Translator` gives an empty source.
        searched = (source["length"] > 0)[:, None]  # (batch, 1)
        first = tf.equal(tf.range(shape[1]), 0)[None, :]  # (1, n_best)
        return {
            "translations": tf.where(searched, translations, ""),
            "scores": tf.where(
                searched,
                _finite(result["scores"][:, :n_best]),
                tf.where(first, 0.0, LOWEST_SCORE),
            ),  # (batch, n_best)
            "status": source["status"],
        }

    def align(self, text):
        import tensorflow as tf

        source = self._read(text)
        result = self.search(source["ids"], self.beam_size, self.length_penalty)
        searched = source["length"] > 0  # (batch,)
        target_length = tf.where(searched, result["lengths"][:, 0], 0)
        width = tf.reduce_max(tf.concat([target_length, [0]], 0))
        ids = result["token_ids"][:, 0, :width]  # (batch, T)
        is_target = tf.range(width)[None, :] < target_length[:, None]
        alignment = result["attention"][:, 0, :width]  # (batch, T, Tx)
        vocabulary = tf.constant(self.target.get_vocabulary())
        return {
            **self._best(source, result),
            "source_tokens": source["tokens"],  # (batch, Tx)
            "source_length": source["length"],
            "target_tokens": tf.where(
                is_target, tf.gather(vocabulary, ids), ""
            ),  # (batch, T)
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

        Refuses (INVALID_ARGUMENT) a request of more than `max_batch`
        sentences: that bounds what one request may cost. A sentence of
        more than `max_source_tokens` tokens only gets status `too_long`
        and an empty row (length 0, like an empty sentence), so that it
        costs the search no more than an empty one and leaves the other
        rows as they would be in a request of their own.
        """
        import tensorflow as tf

        check = _check(
            tf.size(text) <= self.max_batch,
            f"At most {self.max_batch} sentences per request (max_batch); "
            "split the request. Received: sentences =",
            tf.size(text),
        )
        with tf.control_dependencies([check]):
            # Invalid UTF-8 would fail the tokenizer's Unicode ops.
            text = tf.strings.unicode_transcode(
                text, "UTF-8", "UTF-8", errors="replace"
            )
        ids = self.source.tokenize(text)
        tokens = self.source.tokens(text)
        length = tf.cast(ids.row_lengths(), tf.int32)  # (batch,)
        too_long = length > self.max_source_tokens  # (batch,)
        status = tf.where(
            too_long,
            STATUS_TOO_LONG,
            tf.where(tf.equal(length, 0), STATUS_EMPTY, STATUS_OK),
        )  # (batch,)
        length = tf.where(too_long, 0, length)  # What the search reads.
        # As wide as the longest row searched, so a too-long row cannot
        # widen the batch (`to_tensor` cuts longer rows to this shape),
        # and at least one column: a model cannot encode zero positions.
        width = tf.maximum(tf.reduce_max(length), 1)  # 1 for no sentence
        shape = tf.stack([ids.nrows(), tf.cast(width, tf.int64)])
        searched = (length > 0)[:, None]  # (batch, 1)
        return {
            "ids": tf.where(
                searched, ids.to_tensor(0, shape=shape), 0
            ),  # (batch, Tx)
            "tokens": tf.where(
                searched, tokens.to_tensor("", shape=shape), ""
            ),  # (batch, Tx)
            "length": length,  # (batch,)
            "status": status,  # (batch,)
        }

    def _search(self, source_ids, beam_size, length_penalty):
        """Beam search with a run-time beam size and length penalty.

        Returns the `SearchResult` fields of all `beam_size` hypotheses,
        padded to `max_beam_size` (empty slots: ids 0, score -inf).
        """
        import tensorflow as tf

        def branch(size):
            def search():
                result = decoding.beam_search(
                    self.model,
                    source_ids,
                    beam_size=size,
                    max_length=self.max_length,
                    relative_max_length=self.relative_max_length,
                    length_penalty=length_penalty,  # a request input
                    coverage_penalty=self.coverage_penalty,
                    n_best=size,
                )
                pad = [[0, 0], [0, self.max_beam_size - size]]
                return {
                    "token_ids": tf.pad(result.token_ids, pad + [[0, 0]]),
                    "scores": tf.pad(
                        result.scores, pad, constant_values=float("-inf")
                    ),
                    "lengths": tf.pad(result.lengths, pad),
                    "attention": tf.pad(result.attention, pad + [[0, 0]] * 2),
                }

            return search

        # With beam size 1 and no penalties `Translator` runs greedy
        # search, which beam search with one beam equals.
        return tf.switch_case(
            beam_size - 1,
            [branch(size) for size in range(1, self.max_beam_size + 1)],
        )

    def _best(self, source, result):
        import tensorflow as tf

        searched = source["length"] > 0  # (batch,)
        translation = self.target.detokenize(result["token_ids"][:, 0])
        return {
            "translation": tf.where(searched, translation, ""),
            "score": tf.where(searched, _finite(result["scores"][:, 0]), 0.0),
            "status": source["status"],
        }


def _check(condition, message, value):
    import tensorflow as tf

    return tf.debugging.Assert(condition, [message, value])


def _finite(scores):
    """Scores with `LOWEST_SCORE` for -inf (and for NaN, a broken model).

    A search score `log P / lp + cp` is at most 0, so these are the only
    values JSON cannot carry: an empty n-best slot, a coverage penalty of
    `log 0` (a source token never attended to), NaN logits.
    """
    import tensorflow as tf

    return tf.where(tf.math.is_finite(scores), scores, LOWEST_SCORE)


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


# === The `export` command ===


def add_arguments(parser):
    parser.description = (
        "Write RUN_DIR's model as a TF Serving SavedModel, "
        "OUTPUT/<version>/, with text-in/text-out signatures "
        "(serving_default, translate_n_best, align). Built on the "
        "TensorFlow backend whatever the current one. See docs/serving.md."
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="run directory")
    parser.add_argument(
        "--output",
        help="model folder (TF Serving base path; default: "
        "saved_models/<name of RUN_DIR>)",
    )
    parser.add_argument(
        "--version",
        type=int,
        help="version number (default: the highest existing one + 1)",
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="replace an existing version"
    )
    from keras_bahdanau.translator import add_decoding_arguments

    add_decoding_arguments(parser)  # --checkpoint, --beam-size, ...
    parser.add_argument(
        "--max-source-tokens",
        type=int,
        default=100,
        help="most tokens per sentence (more: status too_long)",
    )
    parser.add_argument(
        "--max-batch",
        type=int,
        default=64,
        help="most sentences per request (more: INVALID_ARGUMENT)",
    )
    parser.add_argument(
        "--max-beam-size",
        type=int,
        default=8,
        help="largest beam_size of translate_n_best",
    )


def run(args):
    output = args.output or pathlib.Path(
        "saved_models", pathlib.Path(args.run_dir).resolve().name
    )
    path = export_saved_model(
        args.run_dir,
        output,
        version=args.version,
        checkpoint=args.checkpoint,
        overwrite=args.overwrite,
        beam_size=args.beam_size,
        length_penalty=args.length_penalty,
        coverage_penalty=args.coverage_penalty,
        max_length=args.max_length,
        max_source_tokens=args.max_source_tokens,
        max_batch=args.max_batch,
        max_beam_size=args.max_beam_size,
    )
    print(path)
    return 0


__all__ = [
    "LOWEST_SCORE",
    "METADATA_FILE",
    "SIGNATURES",
    "STATUSES",
    "STATUS_EMPTY",
    "STATUS_OK",
    "STATUS_TOO_LONG",
    "export_saved_model",
]
