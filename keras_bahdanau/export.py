"""Export a trained model as a SavedModel for TensorFlow Serving.

`export_saved_model(preset, output)` (CLI: `keras-bahdanau export PRESET
--output saved_models/NAME`; `Translator.export`) writes TF Serving's layout,
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
infinity or NaN: `LOWEST_SCORE` stands for both.

`max_source_tokens` and `max_batch` (fixed at export with the search, in
`ExportSettings`, recorded in `METADATA_FILE`) bound what one request
costs: a request of more than `max_batch` sentences fails as a whole with
`INVALID_ARGUMENT`, as does a bad `beam_size`, `n_best` or
`length_penalty`; nothing is truncated or split.

The artifact is always built on the TensorFlow backend: a JAX export puts
the whole computation into one `XlaCallModule` op, which TF Serving runs
poorly, and torch cannot export a SavedModel here. On those backends the
export runs in a `KERAS_BACKEND=tensorflow` subprocess that loads the
preset (the weights load on any backend); on TensorFlow it runs in this
process, from the `Translator` itself. The graph functions are
serving_graph.py's `ServingGraph`.
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
import tensorflow as tf

from keras_bahdanau import presets
from keras_bahdanau.decoding import SearchConfig
from keras_bahdanau.decoding import as_search_config
from keras_bahdanau.preprocessor import TranslationPreprocessor
from keras_bahdanau.run_directory import RunDirectoryError
from keras_bahdanau.serving_graph import LOWEST_SCORE
from keras_bahdanau.serving_graph import ServingGraph
from keras_bahdanau.text import STATUS_EMPTY
from keras_bahdanau.text import STATUS_OK
from keras_bahdanau.text import STATUS_TOO_LONG
from keras_bahdanau.text import STATUSES
from keras_bahdanau.validation import check_int

SIGNATURES = ("serving_default", "translate_n_best", "align")
# Read by tools, ignored by TF Serving (assets.extra is for such files).
METADATA_FILE = "assets.extra/keras_bahdanau.json"


def export_saved_model(
    preset,
    output,
    version=None,
    checkpoint="best",
    overwrite=False,
    search=None,
    max_source_tokens=100,
    max_batch=64,
    max_beam_size=8,
):
    """Writes a trained model as a TF Serving SavedModel version.

    The version is built in a hidden temporary folder inside `output` and
    renamed into place, so an interrupted export never leaves a half-written
    version (TF Serving ignores folders whose name is not a number).

    Args:
        preset: a preset folder (a run directory of `keras-bahdanau
            train`, or a folder of `Translator.save_to_preset`), or a
            `Translator` (`Translator.export`).
        output: the model's folder, e.g. `saved_models/NAME`; created if
            needed. The SavedModel goes to `output/<version>/`.
        version: int >= 1, or None for one more than the highest existing
            version (1 for a new folder).
        checkpoint: `"best"` or `"last"` (run directories), for a folder.
        overwrite: whether to replace an existing version.
        search: a `SearchConfig` with `n_best=1`, the search of
            `serving_default` and `align` (None: the preset's own, with
            `n_best=1`); `translate_n_best` takes `beam_size`, `n_best`
            and `length_penalty` per request.
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
    check_int(
        "version",
        version,
        allow_none=True,
        why="(TF Serving serves numbered folders)",
    )
    translator = None
    if isinstance(preset, str | os.PathLike):
        # Fails early, with the preset's own errors (missing, damaged or
        # mismatched files), before a subprocess is started.
        own_search = presets.check_preset(preset, checkpoint).settings["search"]
    else:
        translator, own_search = preset, preset.search
    if search is None:
        search = dataclasses.replace(own_search, n_best=1)
    settings = ExportSettings(
        search, max_source_tokens, max_batch, max_beam_size
    )
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
        if keras.backend.backend() == "tensorflow":
            if translator is None:
                write_preset_saved_model(
                    str(preset), checkpoint, temporary, settings
                )
            else:
                write_saved_model(translator, temporary, settings)
        elif translator is None:
            _write_in_tensorflow_subprocess(
                str(preset), checkpoint, str(temporary), settings
            )
        else:
            # The model goes to the TensorFlow process as a preset.
            with tempfile.TemporaryDirectory() as folder:
                saved = translator.save_to_preset(pathlib.Path(folder) / "p")
                _write_in_tensorflow_subprocess(
                    str(saved), None, str(temporary), settings
                )
        # mkdtemp() made it private (0700); a server running as another
        # user must be able to read the version.
        temporary.chmod(0o755)
        _publish(temporary, target)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
    return target


# The limits of `ExportSettings`, recorded after the search's fields.
_LIMITS = ("max_source_tokens", "max_batch", "max_beam_size")


@dataclasses.dataclass(frozen=True)
class ExportSettings:
    """What an export fixes, checked: `export_saved_model`'s `search`
    (None: `SearchConfig()`) and limits, recorded in `METADATA_FILE`."""

    search: SearchConfig | None
    max_source_tokens: int
    max_batch: int
    max_beam_size: int

    def __post_init__(self):
        search = as_search_config(self.search)
        object.__setattr__(self, "search", search)
        if search.n_best != 1:
            raise ValueError(
                "`search.n_best` must be 1: serving_default and align return "
                "the best translation, translate_n_best takes n_best per "
                f"request. Received: n_best={search.n_best}"
            )
        for name in _LIMITS:
            check_int(name, getattr(self, name))
        if search.beam_size > self.max_beam_size:
            raise ValueError(
                "`beam_size` (the beam of serving_default) must be at most "
                f"`max_beam_size`. Received: beam_size={search.beam_size}, "
                f"max_beam_size={self.max_beam_size}"
            )

    def to_json(self):
        """A dict of JSON values, as `METADATA_FILE` records the settings."""
        search = self.search.to_dict()
        del search["n_best"]  # translate_n_best takes it per request.
        if self.search.relative_max_length is None:  # Not recorded unused.
            del search["relative_max_length"]
        return {**search, **{name: getattr(self, name) for name in _LIMITS}}

    @classmethod
    def from_json(cls, record):
        """The settings of a `to_json` dict."""
        limits = {name: record[name] for name in _LIMITS}
        search = {k: v for k, v in record.items() if k not in limits}
        return cls(SearchConfig.from_dict(search), **limits)


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


def _write_in_tensorflow_subprocess(preset, checkpoint, path, settings):
    """Runs `main` (so `write_preset_saved_model`) with
    KERAS_BACKEND=tensorflow."""
    build = dict(preset=preset, checkpoint=checkpoint, path=path)
    build["settings"] = settings.to_json()  # The process boundary.
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
        raise RunDirectoryError(message)
    if process.returncode:
        raise RuntimeError(
            "The export in a KERAS_BACKEND=tensorflow subprocess failed "
            f"(exit status {process.returncode}):\n" + process.stderr[-4000:]
        )


def main(argv=None):
    """`python -m keras_bahdanau.export BUILD`: the export subprocess.

    Runs `write_preset_saved_model` with the arguments that
    `_write_in_tensorflow_subprocess` wrote as JSON; a `RunDirectoryError`
    exits with status 3, its message after `_RUN_DIRECTORY_ERROR` on
    stderr.
    """
    (build,) = sys.argv[1:] if argv is None else argv
    build = json.loads(build)
    settings = ExportSettings.from_json(build.pop("settings"))
    try:
        write_preset_saved_model(**build, settings=settings)
    except RunDirectoryError as error:
        sys.stderr.write(_RUN_DIRECTORY_ERROR + str(error))
        return 3
    return 0


def write_preset_saved_model(preset, checkpoint, path, settings):
    """`write_saved_model` of a preset's model (TensorFlow backend).

    `checkpoint`: `"best"` or `"last"`, recorded with the preset's path;
    None: the best, of a temporary preset (`Translator.export`), recorded
    as an object's.
    """
    from keras_bahdanau.translator import Translator

    translator = Translator.from_preset(preset, checkpoint or "best")
    origin = None
    if checkpoint is not None:
        metadata = presets.check_preset(preset).metadata
        origin = {
            "preset": str(pathlib.Path(preset).resolve()),
            "checkpoint": checkpoint,
            "trained_backend": metadata["backend"],
        }
    write_saved_model(translator, path, settings, origin)


def write_saved_model(translator, path, settings, origin=None):
    """Builds the signatures and writes the SavedModel into `path`.

    On the TensorFlow backend only. `translator`: its model and
    tokenizers are exported; `settings`: an `ExportSettings`, recorded in
    `METADATA_FILE` with `origin` (where the model came from; None: this
    process's translator).
    """
    if keras.backend.backend() != "tensorflow":
        raise RuntimeError(
            "The SavedModel must be built on the TensorFlow backend. "
            f"Received: backend={keras.backend.backend()!r}"
        )
    model = translator.model
    source, target = translator.preprocessor.tokenizers
    if origin is None:  # A `Translator` of this process.
        origin = {"preset": None, "checkpoint": None, "trained_backend": None}
    # The length policy of `Translator(..., long_sources="error")`.
    preprocessor = TranslationPreprocessor(
        source, target, settings.max_source_tokens, long_sources="error"
    )
    graph = ServingGraph(model, preprocessor, settings)
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
        "export_backend": keras.backend.backend(),
        "settings": settings.to_json(),
        "signatures": list(SIGNATURES),
        "versions": {"keras": keras.__version__, "tensorflow": tf.__version__},
    }
    metadata_path = pathlib.Path(path) / METADATA_FILE
    metadata_path.parent.mkdir(parents=True, exist_ok=True)
    metadata_path.write_text(json.dumps(metadata, indent=2) + "\n")


__all__ = [
    "ExportSettings",
    "LOWEST_SCORE",
    "METADATA_FILE",
    "SIGNATURES",
    "STATUSES",
    "STATUS_EMPTY",
    "STATUS_OK",
    "STATUS_TOO_LONG",
    "export_saved_model",
    "main",
    "write_preset_saved_model",
    "write_saved_model",
]

if __name__ == "__main__":
    sys.exit(main())
