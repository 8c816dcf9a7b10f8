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
of `STATUSES`): `"ok"`, translated; `"empty"`, no token; `"too_long"`,
more than `max_source_tokens` tokens: not searched, answered as an empty
sentence (`""` scored 0, lengths 0). These rules are `keras_bahdanau.text`'s:
the others are translated as in a request of their own, and as `Translator(
max_source_length=max_source_tokens, long_sources="error")` translates them.
Every score is a finite float32, as JSON (TF Serving's REST API) has no
infinity or NaN: `LOWEST_SCORE` stands for both (see `_finite`).

`max_source_tokens` and `max_batch` (fixed at export, recorded in
`METADATA_FILE`) bound what one request costs: a request of more than
`max_batch` sentences fails as a whole with `INVALID_ARGUMENT`, as does a
bad `beam_size`, `n_best` or `length_penalty`; nothing is truncated or split.

The artifact is always built on the TensorFlow backend: a JAX export puts
the whole computation into one `XlaCallModule` op, which TF Serving runs
poorly, and torch cannot export a SavedModel here. On those backends the
export runs in a `KERAS_BACKEND=tensorflow` subprocess that loads the run's
`.keras` file (the weights load on any backend).
"""

import dataclasses
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import keras
import numpy as np
import tensorflow as tf

from keras_bahdanau import presets
from keras_bahdanau import run_directory
from keras_bahdanau.decoding import SearchConfig
from keras_bahdanau.decoding import SearchResult
from keras_bahdanau.decoding import as_search_config
from keras_bahdanau.decoding import beam_search
from keras_bahdanau.text import STATUS_EMPTY
from keras_bahdanau.text import STATUS_OK
from keras_bahdanau.text import STATUS_TOO_LONG
from keras_bahdanau.text import STATUSES
from keras_bahdanau.text import decode_hypotheses
from keras_bahdanau.text import read_sources
from keras_bahdanau.validation import check_int

SIGNATURES = ("serving_default", "translate_n_best", "align")
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
    search=None,
    max_source_tokens=100,
    max_batch=64,
    max_beam_size=8,
):
    """Writes a run's model as a TF Serving SavedModel version.

    The version is built in a hidden temporary folder inside `output` and
    renamed into place, so an interrupted export never leaves a half-written
    version (TF Serving ignores folders whose name is not a number).

    Args:
        run_dir: a run directory written by `keras-bahdanau train`, or a
            preset folder (`Translator.save_to_preset`).
        output: the model's folder, e.g. `saved_models/NAME`; created if
            needed. The SavedModel goes to `output/<version>/`.
        version: int >= 1, or None for one more than the highest existing
            version (1 for a new folder).
        checkpoint: `"best"` or `"last"` (run directories).
        overwrite: whether to replace an existing version.
        search: a `SearchConfig` with `n_best=1` (None: the defaults),
            the search of `serving_default` and `align`; `translate_n_best`
            takes `beam_size`, `n_best` and `length_penalty` per request.
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
    settings = _settings(search, max_source_tokens, max_batch, max_beam_size)
    check_int(
        "version",
        version,
        allow_none=True,
        why="(TF Serving serves numbered folders)",
    )
    # Fail early, with the run directory's own errors (missing, damaged
    # or mismatched files), before a subprocess is started.
    if presets.is_preset(run_dir):
        presets.check_preset(run_dir)
    else:
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
            write_saved_model(**build)
        else:
            _write_in_tensorflow_subprocess(build)
        # mkdtemp() made it private (0700); a server running as another
        # user must be able to read the version.
        temporary.chmod(0o755)
        _publish(temporary, target)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
    return target


def _settings(search, max_source_tokens, max_batch, max_beam_size):
    """The export settings, checked, as `METADATA_FILE` records them."""
    search = as_search_config(search)
    if search.n_best != 1:
        raise ValueError(
            "`search.n_best` must be 1: serving_default and align return "
            "the best translation, translate_n_best takes n_best per "
            f"request. Received: n_best={search.n_best}"
        )
    check_int("max_source_tokens", max_source_tokens)
    check_int("max_batch", max_batch)
    check_int("max_beam_size", max_beam_size)
    if search.beam_size > max_beam_size:
        raise ValueError(
            "`beam_size` (the beam of serving_default) must be at most "
            f"`max_beam_size`. Received: beam_size={search.beam_size}, "
            f"max_beam_size={max_beam_size}"
        )
    settings = dataclasses.asdict(search)
    del settings["n_best"]  # translate_n_best takes it per request.
    if search.relative_max_length is None:  # Not recorded when unused.
        del settings["relative_max_length"]
    return {
        **settings,
        "max_source_tokens": max_source_tokens,
        "max_batch": max_batch,
        "max_beam_size": max_beam_size,
    }


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
    """Runs `main` (so `write_saved_model`) with KERAS_BACKEND=tensorflow."""
    process = subprocess.run(
        [sys.executable, "-m", "keras_bahdanau.export", json.dumps(build)],
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


def main(argv=None):
    """`python -m keras_bahdanau.export BUILD`: the export subprocess.

    Runs `write_saved_model(**json.loads(BUILD))`; a `RunDirectoryError`
    exits with status 3, its message after `_RUN_DIRECTORY_ERROR` on
    stderr.
    """
    (build,) = sys.argv[1:] if argv is None else argv
    try:
        write_saved_model(**json.loads(build))
    except run_directory.RunDirectoryError as error:
        sys.stderr.write(_RUN_DIRECTORY_ERROR + str(error))
        return 3
    return 0


def write_saved_model(run_dir, checkpoint, path, settings):
    """Builds the signatures and writes the SavedModel into `path`.

    On the TensorFlow backend only. `settings`: as `METADATA_FILE`
    records them (the `SearchConfig` fields of the search, and the
    limits).
    """
    if keras.backend.backend() != "tensorflow":
        raise RuntimeError(
            "The SavedModel must be built on the TensorFlow backend. "
            f"Received: backend={keras.backend.backend()!r}"
        )
    if presets.is_preset(run_dir):
        model, source, target, _ = presets.load_preset(run_dir)
        origin = {"preset": str(pathlib.Path(run_dir).resolve())}
        trained_backend = presets.read_metadata(run_dir)["backend"]
    else:
        model, source, target, config = run_directory.load_run(
            run_dir, checkpoint
        )
        origin = {
            "run_dir": str(pathlib.Path(run_dir).resolve()),
            "checkpoint": checkpoint,
        }
        trained_backend = config.get("backend")
    graph = _ServingGraph(model, source, target, settings)
    text = tf.TensorSpec([None], tf.string, name="text")
    scalars = [
        tf.TensorSpec([], tf.int32, name="beam_size"),
        tf.TensorSpec([], tf.int32, name="n_best"),
        tf.TensorSpec([], tf.float32, name="length_penalty"),
    ]
    functions = {
        "serving_default": (graph.translate, [text]),
        "translate_n_best": (graph.translate_n_best, [text, *scalars]),
        "align": (graph.align, [text]),
    }
    # Traced once each, here. A tf.function handed to `save()` (as
    # `ExportArchive.write_out()` does) is traced a second time in the
    # save context, which doubles the export time of the beam searches.
    signatures = {
        name: tf.function(
            function, input_signature=signature, autograph=False
        ).get_concrete_function()
        for name, (function, signature) in functions.items()
    }
    root = tf.Module()
    root.model_variables = list(model.variables)
    # The tokenizers are saved for their lookup tables.
    root.source_tokenizer = source
    root.target_tokenizer = target
    tf.saved_model.save(root, path, signatures=signatures)
    metadata = {
        **origin,
        "model": type(model).__name__,
        "trained_backend": trained_backend,
        "export_backend": keras.backend.backend(),
        "settings": settings,
        "signatures": list(SIGNATURES),
        "versions": {"keras": keras.__version__, "tensorflow": tf.__version__},
    }
    metadata_path = pathlib.Path(path) / METADATA_FILE
    metadata_path.parent.mkdir(parents=True, exist_ok=True)
    metadata_path.write_text(json.dumps(metadata, indent=2) + "\n")


class _ServingGraph:
    """The signature functions, for `tf.function` (TF backend only).

    The text side is `text.read_sources` and `text.decode_hypotheses`, as
    in `Translator`; this class adds the request checks. All three
    signatures call one graph function, `search(source_ids, beam_size,
    length_penalty)`, that holds one beam search per beam size (shapes are
    static) and runs the one asked for: traced once, shared.
    """

    def __init__(self, model, source_tokenizer, target_tokenizer, settings):
        self.model = model
        self.source = source_tokenizer
        self.target = target_tokenizer
        limits = ("max_source_tokens", "max_batch", "max_beam_size")
        self.max_source_tokens, self.max_batch, self.max_beam_size = (
            settings[name] for name in limits
        )
        search = {k: v for k, v in settings.items() if k not in limits}
        # The static length covers the longest source allowed.
        self.config = SearchConfig(**search).for_source_length(
            self.max_source_tokens
        )
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
        return self._best(source, self._decode(source, 1))

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
        decoded = self._decode(source, n_best, beam_size, length_penalty)
        return {
            "translations": decoded["text"],  # (batch, n_best)
            "scores": _finite(decoded["score"]),  # (batch, n_best)
            "status": source["status"],
        }

    def align(self, text):
        source = self._read(text)
        decoded = self._decode(source, 1)
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
        source = read_sources(self.source, text, self.max_source_tokens)
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

    def _decode(self, source, n_best, beam_size=None, length_penalty=None):
        """`text.decode_hypotheses` of the search, and its attention."""
        if beam_size is None:  # The exported search.
            beam_size = self.config.beam_size
            length_penalty = self.config.length_penalty
        result = self.search(source["ids"], beam_size, length_penalty)
        decoded = decode_hypotheses(
            self.target, result, source["length"] > 0, n_best
        )
        return {**decoded, "attention": result.attention}

    def _search(self, source_ids, beam_size, length_penalty):
        """Beam search with a run-time beam size and length penalty.

        Returns the `SearchResult` of all `beam_size` hypotheses, padded
        to `max_beam_size` (empty slots: ids 0, scores -inf).
        """

        def branch(size):
            def pad(field, value=0):
                """(batch, size, ...) -> (batch, max_beam_size, ...)."""
                padding = [[0, 0], [0, self.max_beam_size - size]]
                padding += [[0, 0]] * (field.shape.rank - 2)
                return tf.pad(field, padding, constant_values=value)

            def search():
                result = beam_search(
                    self.model,
                    source_ids,
                    size,
                    self.config.max_length,
                    self.config.relative_max_length,
                    length_penalty,  # a request input
                    self.config.coverage_penalty,
                    n_best=size,
                )
                # Of token_ids, scores, log_probs, lengths and attention.
                padding = [0, float("-inf"), float("-inf"), 0, 0]
                return SearchResult(*map(pad, result, padding))

            return search

        # With beam size 1 and no penalties `Translator` runs greedy
        # search, which beam search with one beam equals.
        return tf.switch_case(
            beam_size - 1,
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


__all__ = [
    "LOWEST_SCORE",
    "METADATA_FILE",
    "SIGNATURES",
    "STATUSES",
    "STATUS_EMPTY",
    "STATUS_OK",
    "STATUS_TOO_LONG",
    "export_saved_model",
    "main",
    "write_saved_model",
]

if __name__ == "__main__":
    sys.exit(main())
