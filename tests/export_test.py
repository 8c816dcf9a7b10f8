"""The TF Serving export, checked the way TF Serving would use it.

No `tensorflow_model_server` binary or Docker engine exists here, so the
SavedModel is exported once per session (through the CLI; on JAX and torch
that goes through the TF-backend subprocess) and checked faithfully: its
op list, `saved_model_cli show --all`, and one fresh process that imports
only TensorFlow (keras, jax, torch, keras_hub, tensorflow_text and
keras_bahdanau blocked), loads the SavedModel and runs every request. The
requests are built by examples/serving_client.py, so they also prove that
the client's PredictRequests fit the signatures. Outputs are compared with
`Translator` on the current backend.
"""

import base64
import contextlib
import dataclasses
import http.server
import importlib.util
import json
import math
import pathlib
import shutil
import subprocess
import sys
import threading
import types
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bahdanau import cli
from keras_bahdanau import export
from keras_bahdanau import presets
from keras_bahdanau import run_directory
from keras_bahdanau.data import SentencePieceTokenizer
from keras_bahdanau.data import WordPieceTokenizer
from keras_bahdanau.data import WordTokenizer
from keras_bahdanau.decoding import SearchConfig
from keras_bahdanau.models import RNNSearch
from keras_bahdanau.preprocessor import TranslationPreprocessor
from keras_bahdanau.translator import Translator
from tests.run_fixture import PAIRS
from tests.run_fixture import build_run_dir

ROOT = pathlib.Path(__file__).resolve().parents[1]
SETTINGS = dict(
    beam_size=2,
    length_penalty=0.6,
    coverage_penalty=0.2,
    max_source_tokens=8,
    max_batch=12,
    max_beam_size=2,
)
SENTENCES = [source for source, _ in PAIRS] + [
    "",
    # 8 tokens: exactly `max_source_tokens`.
    "Der Hund und die Katze schlafen heute.",
]
# Over `max_source_tokens`: status too_long, never truncated.
TOO_LONG = {
    "nine_tokens": "Der Hund und die Katze schlafen heute im Haus",
    "long_sentence": "Das Haus ist klein. " * 1250,  # 6,250 tokens.
}
HOSTILE = {
    "empty": "",
    "whitespace": " \t\n\u3000\u00a0 ",
    "invalid_utf8": b"Das \xff\xfe Haus \xc3",
    "control": "Das\x00Haus\x07ist\x1b[31m klein\x7f.",
    "emoji": "Das Haus 🏠 ist klein 👍🏽.",
    "mixed_scripts": "Das Haus дом 家 بيت ist klein.",
    "long_token": "Donaudampfschifffahrt" * 5000,  # 105,000 letters.
}
# Normal sentences, the last two of `max_source_tokens` tokens or fewer.
NORMAL = [PAIRS[4][0], SENTENCES[-1], PAIRS[9][0]]
# One request of `max_batch` sentences of every kind, too long ones
# between normal ones: each must get the result it gets alone.
MIXED = [
    NORMAL[0],
    TOO_LONG["nine_tokens"],
    HOSTILE["empty"],
    NORMAL[1],
    TOO_LONG["long_sentence"],
    HOSTILE["whitespace"],
    HOSTILE["invalid_utf8"],
    HOSTILE["control"],
    NORMAL[2],
    HOSTILE["emoji"],
    HOSTILE["mixed_scripts"],
    HOSTILE["long_token"],
]
BANNED_OPS = {"PyFunc", "PyFuncStateless", "EagerPyFunc", "XlaCallModule"}
# The loader blocks these before importing TensorFlow: an import of any
# of them raises ImportError, as on a TF Serving machine without them.
# Custom ops (tf-text) come from their shared libraries, as TF Serving
# links them: the `tensorflow_text` Python package itself needs keras.
# It stays findable (docs/serving.md's Python host finds the libraries
# through its spec) but its import fails.
BLOCKED = (
    "keras",
    "jax",
    "torch",
    "keras_hub",
    "tensorflow_text",
    "tf_keras",
    "keras_bahdanau",
)
LOADER = r"""
import base64, importlib.abc, importlib.machinery, json, pathlib, sys, time
BLOCKED = %r
for name in BLOCKED:
    if name != "tensorflow_text":
        sys.modules[name] = None


class Unimportable(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name.partition(".")[0] != "tensorflow_text":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None:
            spec.loader = self
        return spec

    def create_module(self, spec):
        raise ImportError(f"{spec.name} is blocked")

    def exec_module(self, module):
        raise ImportError(f"{module.__name__} is blocked")


sys.meta_path.insert(0, Unimportable())
import numpy as np
import tensorflow as tf
from tensorflow.core.framework import tensor_pb2
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow.python.framework import op_def_registry

spec = json.load(sys.stdin)
saved_model = saved_model_pb2.SavedModel.FromString(
    pathlib.Path(spec["path"], "saved_model.pb").read_bytes()
)
ops = set()
for meta_graph in saved_model.meta_graphs:
    ops.update(node.op for node in meta_graph.graph_def.node)
    for function in meta_graph.graph_def.library.function:
        ops.update(node.op for node in function.node_def)
unregistered = sorted(o for o in ops if op_def_registry.get(o) is None)
if "python_host" in spec:
    # docs/serving.md's code: loads the op libraries, then the model.
    namespace = {}
    exec(spec["python_host"], namespace)
    model = namespace["model"]
else:
    model = tf.saved_model.load(spec["path"])
# A call may name another SavedModel ("path"): one process, one import.
models = {spec["path"]: model}


def spec_of(tensor_spec):
    return [tensor_spec.dtype.name, tensor_spec.shape.as_list()]


def plain(array):
    if array.dtype == object:  # Strings must be valid UTF-8.
        return np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(
            array
        ).tolist() if array.size else array.tolist()
    return array.tolist()


results = {
    "ops": sorted(ops),
    "unregistered": unregistered,
    "signatures": {
        name: {
            "inputs": {
                k: spec_of(v)
                for k, v in function.structured_input_signature[1].items()
            },
            "outputs": {
                k: spec_of(v) for k, v in function.structured_outputs.items()
            },
        }
        for name, function in model.signatures.items()
    },
    "calls": {},
}
for key, call in spec["calls"].items():
    inputs = {
        name: tf.constant(
            tf.make_ndarray(tensor_pb2.TensorProto.FromString(
                base64.b64decode(value)
            ))
        )
        for name, value in call["inputs"].items()
    }
    start = time.perf_counter()
    try:
        path = call.get("path", spec["path"])
        if path not in models:
            models[path] = tf.saved_model.load(path)
        outputs = models[path].signatures[call["signature"]](**inputs)
        result = {k: plain(v.numpy()) for k, v in outputs.items()}
    except tf.errors.OpError as error:
        result = {"error": type(error).__name__, "message": error.message}
    result["seconds"] = time.perf_counter() - start
    results["calls"][key] = result
results["imported"] = [n for n in BLOCKED if sys.modules.get(n) is not None]
print(json.dumps(results))
"""


def load_serving_client():
    path = ROOT / "examples" / "serving_client.py"
    spec = importlib.util.spec_from_file_location("serving_client", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


client = load_serving_client()


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    path = build_run_dir(tmp_path_factory.mktemp("run"))
    # Random v_a: the fixture's zero v_a gives uniform alignments, which
    # would hide a transposed or shifted alignment matrix.
    model, *_ = presets.load_preset(path)
    (score_vector,) = [v for v in model.weights if "score_vector" in v.path]
    score_vector.assign(
        np.random.default_rng(0).normal(size=score_vector.shape) * 3.0
    )
    model.save_weights(path / presets.WEIGHTS)
    return path


def served_translator(model, source, target, max_source_length):
    """The `Translator` that translates as an export serves."""
    preprocessor = TranslationPreprocessor(
        source, target, max_source_length, long_sources="error"
    )
    return Translator(model, preprocessor)


@pytest.fixture(scope="module")
def pervasive_run_dir(tmp_path_factory):
    return build_run_dir(
        tmp_path_factory.mktemp("pervasive_run"),
        architecture="pervasive_attention",
    )


def request(signature, texts, **scalars):
    """A call for the loader, given as the client's gRPC request inputs."""
    predict_request = client.grpc_request(
        texts, "translator", signature, **scalars
    )
    return {
        "signature": signature,
        "inputs": {
            name: base64.b64encode(tensor.SerializeToString()).decode()
            for name, tensor in predict_request.inputs.items()
        },
    }


CALLS = {
    "translate": request("serving_default", SENTENCES),
    "align": request("align", SENTENCES),
    "n_best": request(
        "translate_n_best", SENTENCES, beam_size=2, n_best=2, length_penalty=0
    ),
    "one_beam": request(
        "translate_n_best", SENTENCES, beam_size=1, n_best=1, length_penalty=1
    ),
    "strong_penalty": request(
        "translate_n_best", SENTENCES, beam_size=2, n_best=1, length_penalty=2
    ),
    "no_sentences": request("serving_default", []),
    "hostile": request("serving_default", list(HOSTILE.values())),
    "hostile_align": request("align", list(HOSTILE.values())),
    **{
        f"hostile_{name}": request("serving_default", [text])
        for name, text in HOSTILE.items()
    },
    "too_many": request("serving_default", ["Das ist gut."] * 13),
    # A request limit refuses the request, too-long sentences or not.
    "too_many_with_too_long": request(
        "serving_default", MIXED + ["Das ist gut."]
    ),
    "mixed": request("serving_default", MIXED),
    "mixed_align": request("align", MIXED),
    "mixed_n_best": request(
        "translate_n_best", MIXED, beam_size=2, n_best=2, length_penalty=0
    ),
    **{
        f"alone_{i}": request("serving_default", [text])
        for i, text in enumerate(NORMAL)
    },
    **{
        f"alone_align_{i}": request("align", [text])
        for i, text in enumerate(NORMAL)
    },
    **{
        f"alone_n_best_{i}": request(
            "translate_n_best", [text], beam_size=2, n_best=2, length_penalty=0
        )
        for i, text in enumerate(NORMAL)
    },
    "too_long": request(
        "serving_default", ["Das ist gut.", TOO_LONG["nine_tokens"]]
    ),
    "too_long_align": request("align", [TOO_LONG["long_sentence"]]),
    "too_long_n_best": request(
        "translate_n_best",
        [TOO_LONG["long_sentence"], "Das"],
        beam_size=2,
        n_best=1,
        length_penalty=0,
    ),
    "beam_too_large": request(
        "translate_n_best", ["Das"], beam_size=3, n_best=1, length_penalty=0
    ),
    "n_best_too_large": request(
        "translate_n_best", ["Das"], beam_size=1, n_best=2, length_penalty=0
    ),
    "negative_length_penalty": request(
        "translate_n_best", ["Das"], beam_size=1, n_best=1, length_penalty=-1
    ),
}
# Sent to the Pervasive Attention SavedModel too (each signature called
# costs seconds of graph optimization; the others share its search).
PERVASIVE_CALLS = ("translate", "too_long")
HOSTILE_TEXTS = [text for text in HOSTILE.values() if isinstance(text, str)]
DEFAULT_OPTIONS = {
    key: SETTINGS[key]
    for key in ("beam_size", "length_penalty", "coverage_penalty")
}
DEFAULT_SEARCH = SearchConfig(**DEFAULT_OPTIONS)
# The export's limits: `export_saved_model`'s arguments besides `search`.
LIMITS = {k: v for k, v in SETTINGS.items() if k not in DEFAULT_OPTIONS}
N_BEST_OPTIONS = {
    "n_best": dict(beam_size=2, n_best=2, length_penalty=0.0),
    "one_beam": dict(beam_size=1, n_best=1, length_penalty=1.0),
    "strong_penalty": dict(beam_size=2, n_best=1, length_penalty=2.0),
}
# Settings whose search sets a relative_max_length (a tuple; JSON: a list).
EXPORT_SETTINGS = export.ExportSettings(
    SearchConfig(beam_size=2, length_penalty=0.6, relative_max_length=(1, 4)),
    max_source_tokens=8,
    max_batch=12,
    max_beam_size=3,
)


def python_host(path):
    """docs/serving.md's Python host code, loading the SavedModel `path`."""
    text = (ROOT / "docs" / "serving.md").read_text()
    section = text.split("### A Python host", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert '"saved_models/demo/1"' in code
    return code.replace('"saved_models/demo/1"', repr(str(path)))


def load_and_call(path, calls, as_python_host=False):
    """Runs `calls` on the SavedModel in a fresh TensorFlow-only process.

    With `as_python_host`, the process loads it with the code of
    docs/serving.md (TF Text's op libraries first), else with
    `tf.saved_model.load` alone.
    """
    spec = {"path": str(path), "calls": calls}
    if as_python_host:
        spec["python_host"] = python_host(path)
    process = subprocess.run(
        [sys.executable, "-c", LOADER % (BLOCKED,)],
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        cwd=path,  # Not the repository: keras_bahdanau is not on the path.
        timeout=600,
    )
    assert process.returncode == 0, process.stderr[-3000:]
    return json.loads(process.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def session(run_dir, pervasive_run_dir, tmp_path_factory):
    """Exports once, then checks it out of process while `Translator` runs.

    A background thread runs the exports (on JAX and torch: subprocesses)
    of the RNNsearch run and of a Pervasive Attention run, then
    `saved_model_cli` and the TensorFlow-only loader (one process for
    both SavedModels) side by side; meanwhile this thread computes what
    `Translator` gives for the same requests. Returns a namespace with
    `path`, `pervasive_path`, `served` (the loader's results), `cli` (the
    `saved_model_cli` process and its output), `translator` and
    `expected`.
    """
    saved_models = tmp_path_factory.mktemp("saved_models")
    output = saved_models / "translator"
    arguments = ["export", str(run_dir), "--output", str(output)]
    for name, value in SETTINGS.items():
        arguments += ["--" + name.replace("_", "-"), str(value)]
    result = types.SimpleNamespace(
        path=output / "1", pervasive_path=saved_models / "pervasive" / "1"
    )

    def export_both():
        assert cli.main(arguments) == 0
        # From the object: Translator.export, through a preset.
        Translator.from_preset(pervasive_run_dir).export(
            result.pervasive_path.parent, search=DEFAULT_SEARCH, **LIMITS
        )

    if keras.backend.backend() == "tensorflow":
        # In this process: its tracing must not race the Translator's.
        export_both()
    calls = {
        **CALLS,
        **{
            f"pervasive_{key}": {
                **CALLS[key],
                "path": str(result.pervasive_path),
            }
            for key in PERVASIVE_CALLS
        },
    }

    def check_out_of_process():
        if keras.backend.backend() != "tensorflow":
            export_both()
        show = subprocess.Popen(
            ["saved_model_cli", "show", "--dir", str(result.path), "--all"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        result.served = load_and_call(result.path, calls)
        result.cli = (show, *show.communicate(timeout=600))

    errors = []

    def run():
        try:
            check_out_of_process()
        except BaseException as error:  # Re-raised in the main thread.
            errors.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    model, source, target, _ = presets.load_preset(run_dir)
    # The served model's limit, as the Translator's.
    result.translator = served_translator(
        model, source, target, SETTINGS["max_source_tokens"]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # Nothing truncated.
        result.expected = {
            "translate": result.translator.translate(
                SENTENCES + HOSTILE_TEXTS,
                DEFAULT_SEARCH,
                return_attention=True,
            ),
            **{
                key: result.translator.translate(
                    SENTENCES, SearchConfig(**{**DEFAULT_OPTIONS, **options})
                )
                for key, options in N_BEST_OPTIONS.items()
            },
        }
    model, source, target, _ = presets.load_preset(pervasive_run_dir)
    result.expected["pervasive_translate"] = served_translator(
        model, source, target, SETTINGS["max_source_tokens"]
    ).translate(SENTENCES, DEFAULT_SEARCH)
    thread.join()
    if errors:
        raise errors[0]
    return result


@pytest.fixture(scope="module")
def served(session):
    return session.served


def test_layout_and_metadata(session):
    exported = session.path
    assert exported.name == "1"
    assert exported.stat().st_mode & 0o777 == 0o755  # Not mkdtemp's 0700.
    assert (exported / "saved_model.pb").is_file()
    assert (exported / "variables").is_dir()
    # Nothing half-written is left next to the version.
    assert [p.name for p in exported.parent.iterdir()] == ["1"]
    metadata = json.loads((exported / export.METADATA_FILE).read_text())
    # Built on TensorFlow whatever the backend of this process.
    assert metadata["export_backend"] == "tensorflow"
    assert metadata["settings"] == {**SETTINGS, "max_length": None}
    assert metadata["signatures"] == list(export.SIGNATURES)


def test_only_core_tensorflow_ops(served):
    ops = set(served["ops"])
    assert not ops & BANNED_OPS
    # Registered by `import tensorflow` alone: no custom op library needed.
    assert served["unregistered"] == []
    assert {"While", "LookupTableFindV2", "UnicodeTranscode"} <= ops
    # A loaded SavedModel must not have pulled in a blocked package.
    assert served["imported"] == []


def test_signatures_are_batch_major(served):
    signatures = served["signatures"]
    assert set(signatures) == set(export.SIGNATURES)
    assert signatures["serving_default"] == {
        "inputs": {"text": ["string", [None]]},
        "outputs": {
            "translation": ["string", [None]],
            "score": ["float32", [None]],
            "status": ["string", [None]],
        },
    }
    assert signatures["translate_n_best"] == {
        "inputs": {
            "text": ["string", [None]],
            "beam_size": ["int32", []],
            "n_best": ["int32", []],
            "length_penalty": ["float32", []],
        },
        "outputs": {
            "translations": ["string", [None, None]],
            "scores": ["float32", [None, None]],
            "status": ["string", [None]],
        },
    }
    outputs = signatures["align"]["outputs"]
    assert outputs["status"] == ["string", [None]]
    assert outputs["alignment"] == ["float32", [None, None, None]]
    assert outputs["source_tokens"] == outputs["target_tokens"]
    assert outputs["source_length"] == ["int32", [None]]


def test_saved_model_cli_lists_the_signatures(session):
    process, stdout, stderr = session.cli
    assert process.returncode == 0, stderr[-3000:]
    for name in export.SIGNATURES:
        assert f"signature_def['{name}']" in stdout
    for name, dtype in [
        ("inputs['text']", "DT_STRING"),
        ("inputs['beam_size']", "DT_INT32"),
        ("outputs['translation']", "DT_STRING"),
        ("outputs['alignment']", "DT_FLOAT"),
    ]:
        assert f"{name} tensor_info:\n        dtype: {dtype}" in stdout


def test_serving_default_equals_translator(session):
    result = session.served["calls"]["translate"]
    expected = session.expected["translate"][: len(SENTENCES)]
    assert result["translation"] == [t.text for t in expected]
    np.testing.assert_allclose(
        result["score"], [t.score for t in expected], atol=1e-4
    )
    assert result["translation"][len(PAIRS)] == ""  # The empty sentence.
    assert result["score"][len(PAIRS)] == 0.0


@pytest.mark.parametrize("key", sorted(N_BEST_OPTIONS))
def test_translate_n_best_equals_translator(session, key):
    result = session.served["calls"][key]
    n_best = N_BEST_OPTIONS[key]["n_best"]
    expected = session.expected[key]
    if n_best == 1:
        expected = [[translation] for translation in expected]
    for i, hypotheses in enumerate(expected):
        texts, scores = result["translations"][i], result["scores"][i]
        assert len(texts) == len(scores) == n_best
        assert texts[: len(hypotheses)] == [h.text for h in hypotheses]
        np.testing.assert_allclose(
            scores[: len(hypotheses)], [h.score for h in hypotheses], atol=1e-4
        )
        # Empty n-best slots (the empty sentence has one hypothesis).
        assert set(texts[len(hypotheses) :]) <= {""}
        assert set(scores[len(hypotheses) :]) <= {export.LOWEST_SCORE}
    assert result["scores"][len(PAIRS)] == [0.0] + [export.LOWEST_SCORE] * (
        n_best - 1
    )
    assert result["status"][len(PAIRS)] == "empty"


def test_align_equals_translator_attention(session):
    result = session.served["calls"]["align"]
    expected = session.expected["translate"][: len(SENTENCES)]
    alignment = np.array(result["alignment"])  # (batch, T, Tx)
    assert alignment.shape == (
        len(SENTENCES),
        max(result["target_length"]),
        len(result["source_tokens"][0]),
    )
    for i, translation in enumerate(expected):
        source_length = result["source_length"][i]
        target_length = result["target_length"][i]
        source_tokens = result["source_tokens"][i]
        target_tokens = result["target_tokens"][i]
        assert source_tokens[:source_length] == translation.source_tokens
        assert target_tokens[:target_length] == translation.target_tokens
        assert set(source_tokens[source_length:]) <= {""}
        assert set(target_tokens[target_length:]) <= {""}
        assert result["translation"][i] == translation.text
        np.testing.assert_allclose(
            alignment[i, :target_length, :source_length],
            translation.attention,
            atol=1e-5,
        )
        assert not alignment[i, target_length:].any()
        assert not alignment[i, :, source_length:].any()
    longest = len(SENTENCES) - 1
    assert result["source_length"][longest] == SETTINGS["max_source_tokens"]


def test_hostile_input_gives_defined_results(session):
    calls = session.served["calls"]
    batch = calls["hostile"]
    expected = dict(
        zip(
            HOSTILE_TEXTS,
            session.expected["translate"][len(SENTENCES) :],
            strict=True,
        )
    )
    for i, (name, text) in enumerate(HOSTILE.items()):
        single = calls[f"hostile_{name}"]
        assert "error" not in single, (name, single)
        # Bounded time: at most max_source_tokens tokens per sentence.
        assert single["seconds"] < 60, name
        assert math.isfinite(single["score"][0]), name
        assert single["translation"] == [batch["translation"][i]], name
        np.testing.assert_allclose(
            single["score"], [batch["score"][i]], atol=1e-4
        )
        if isinstance(text, str):
            assert single["translation"] == [expected[text].text], name
    names = list(HOSTILE)
    assert batch["translation"][names.index("empty")] == ""
    assert batch["translation"][names.index("whitespace")] == ""
    aligned = calls["hostile_align"]
    lengths = dict(zip(names, aligned["source_length"], strict=True))
    assert lengths["long_token"] == 1
    # Invalid bytes become U+FFFD (a symbol, so a token of its own).
    row = aligned["source_tokens"][names.index("invalid_utf8")]
    assert row[: lengths["invalid_utf8"]] == [
        "Das",
        "\ufffd",
        "\ufffd",
        "Haus",
        "\ufffd",
    ]


def test_limits_fail_with_clear_errors(session):
    calls = session.served["calls"]
    assert calls["no_sentences"]["translation"] == []
    assert calls["no_sentences"]["status"] == []
    for key, message in [
        ("too_many", "At most 12 sentences per request"),
        ("too_many", "Received: sentences =] [13]"),
        ("too_many_with_too_long", "Received: sentences =] [13]"),
        ("beam_too_large", "beam_size must be in [1, 2]"),
        ("n_best_too_large", "n_best must be in [1, beam_size]"),
        ("negative_length_penalty", "length_penalty must be a finite"),
    ]:
        assert calls[key]["error"] == "InvalidArgumentError", key
        assert message in calls[key]["message"], (key, calls[key]["message"])
    # The served model answers "too_long" where the Translator with the
    # same limit refuses: the same sentences.
    for text, length in [(TOO_LONG["nine_tokens"], 9), (SENTENCES[-1], 8)]:
        tokens = session.translator.source_tokenizer.tokenize(text)
        assert len(tokens) == length
    for text in TOO_LONG.values():
        with pytest.raises(ValueError, match="more than max_source_length=8"):
            session.translator.translate(["Das ist gut.", text])


def test_a_too_long_sentence_is_answered_not_refused(session):
    calls = session.served["calls"]
    alone = session.expected["translate"][SENTENCES.index("Das ist gut.")]
    result = calls["too_long"]  # ["Das ist gut.", nine tokens]
    assert result["status"] == ["ok", "too_long"]
    assert result["translation"] == [alone.text, ""]
    assert result["score"][1] == 0.0
    np.testing.assert_allclose(result["score"][0], alone.score, atol=1e-4)
    aligned = calls["too_long_align"]  # [6,250 tokens]
    assert aligned["status"] == ["too_long"]
    assert aligned["source_length"] == aligned["target_length"] == [0]
    # An empty row was searched: one column, nothing emitted.
    assert aligned["source_tokens"] == [[""]]
    assert aligned["target_tokens"] == [[]]
    # Far faster than searching 6,250 tokens.
    assert aligned["seconds"] < 5
    n_best = calls["too_long_n_best"]  # [6,250 tokens, "Das"]
    assert n_best["status"] == ["too_long", "ok"]
    assert n_best["translations"][0] == [""]
    assert n_best["scores"][0] == [0.0]
    assert n_best["translations"][1] != [""]


def expected_status(translator, text):
    """The status the served model must give `text`, by Translator's rule."""
    if isinstance(text, bytes):  # Read as the served model reads it.
        text = text.decode("utf-8", "replace")
    length = len(translator.source_tokenizer.tokenize(text))
    if length > SETTINGS["max_source_tokens"]:
        return "too_long"
    return "ok" if length else "empty"


def test_a_mixed_batch_answers_each_sentence_as_alone(session):
    calls = session.served["calls"]
    assert len(MIXED) == SETTINGS["max_batch"]
    statuses = [expected_status(session.translator, t) for t in MIXED]
    assert statuses.count("too_long") == len(TOO_LONG)
    assert statuses.count("empty") == 2
    batch, n_best, aligned = (
        calls[key] for key in ("mixed", "mixed_n_best", "mixed_align")
    )
    for result in (batch, n_best, aligned):
        assert result.get("status") == statuses, result
    # Not searched: what an empty sentence gives.
    for i, status in enumerate(statuses):
        if status == "ok":
            continue
        assert batch["translation"][i] == "", i
        assert batch["score"][i] == 0.0, i
        assert n_best["translations"][i] == ["", ""], i
        assert n_best["scores"][i] == [0.0, export.LOWEST_SCORE], i
        assert aligned["source_length"][i] == 0, i
        assert aligned["target_length"][i] == 0, i
        assert set(aligned["source_tokens"][i]) == {""}, i
        assert not np.any(aligned["alignment"][i]), i
    # The 6,250-token sentence did not widen the batch: it is as wide as
    # its longest searched sentence.
    assert len(aligned["source_tokens"][0]) == SETTINGS["max_source_tokens"]

    # The normal sentences: as in a request of their own, and as the
    # Translator translates them.
    translator = dict(
        zip(
            SENTENCES + HOSTILE_TEXTS,
            session.expected["translate"],
            strict=True,
        )
    )
    translator_n_best = dict(
        zip(SENTENCES, session.expected["n_best"], strict=True)
    )
    for k, text in enumerate(NORMAL):
        i = MIXED.index(text)
        alone = calls[f"alone_{k}"]
        assert alone["status"] == ["ok"]
        assert [batch["translation"][i]] == alone["translation"], text
        assert batch["translation"][i] == translator[text].text, text
        np.testing.assert_allclose(
            [batch["score"][i]], alone["score"], atol=1e-4
        )
        np.testing.assert_allclose(
            batch["score"][i], translator[text].score, atol=1e-4
        )

        alone = calls[f"alone_n_best_{k}"]
        assert [n_best["translations"][i]] == alone["translations"], text
        hypotheses = translator_n_best[text]
        assert n_best["translations"][i][: len(hypotheses)] == [
            h.text for h in hypotheses
        ]
        np.testing.assert_allclose(
            [n_best["scores"][i]], alone["scores"], atol=1e-4
        )
        np.testing.assert_allclose(
            n_best["scores"][i][: len(hypotheses)],
            [h.score for h in hypotheses],
            atol=1e-4,
        )

        alone = calls[f"alone_align_{k}"]
        for key in ("translation", "source_length", "target_length"):
            assert [aligned[key][i]] == alone[key], (text, key)
        source_length = alone["source_length"][0]
        target_length = alone["target_length"][0]
        assert aligned["source_tokens"][i][:source_length] == (
            translator[text].source_tokens
        )
        target_tokens = aligned["target_tokens"][i][:target_length]
        assert target_tokens == alone["target_tokens"][0], text
        np.testing.assert_allclose(
            np.array(aligned["alignment"][i])[:target_length, :source_length],
            alone["alignment"][0],
            atol=1e-5,
        )

    # The hostile sentences that are searched: as alone (which
    # test_hostile_input_gives_defined_results compares with Translator).
    for name, text in HOSTILE.items():
        i = MIXED.index(text)
        alone = calls[f"hostile_{name}"]
        assert [batch["translation"][i]] == alone["translation"], name
        np.testing.assert_allclose(
            [batch["score"][i]], alone["score"], atol=1e-4
        )


def test_every_output_is_valid_json(served):
    """No inf or NaN anywhere: JSON (TF Serving's REST API) has neither."""
    answered = 0
    for key, result in served["calls"].items():
        if "error" in result:
            continue
        answered += 1
        json.dumps(result, allow_nan=False)  # Raises on inf or NaN.
        for name in ("score", "scores"):
            scores = np.array(result.get(name, []), "float32")
            assert np.all(np.isfinite(scores)), (key, name)
            # Real scores are log-probabilities (<= 0); the lowest float32
            # marks an empty n-best slot.
            assert np.all(scores <= 0.0), (key, name)
    assert answered > len(HOSTILE)
    # The n-best requests do have empty slots, scored LOWEST_SCORE.
    assert (
        export.LOWEST_SCORE in served["calls"]["n_best"]["scores"][len(PAIRS)]
    )


def test_client_requests_match_the_signatures(served):
    signatures = served["signatures"]
    for name, signature in signatures.items():
        scalars = {}
        if name == "translate_n_best":
            scalars = dict(beam_size=2, n_best=1, length_penalty=0.5)
        predict_request = client.grpc_request(
            ["Das Haus.", "Hallo"], "translator", name, version=1, **scalars
        )
        assert predict_request.model_spec.name == "translator"
        assert predict_request.model_spec.signature_name == name
        assert predict_request.model_spec.version.value == 1
        assert set(predict_request.inputs) == set(signature["inputs"])
        for key, (dtype, shape) in signature["inputs"].items():
            tensor = predict_request.inputs[key]
            assert tf.dtypes.as_dtype(tensor.dtype).name == dtype, key
            dims = [d.size for d in tensor.tensor_shape.dim]
            assert tf.TensorShape(shape).is_compatible_with(dims), key
        # The same bytes parse back into the same message.
        assert (
            type(predict_request).FromString(
                predict_request.SerializeToString()
            )
            == predict_request
        )

        body = client.rest_request(["Das."], name, **scalars)
        body = json.loads(json.dumps(body))
        assert body["signature_name"] == name
        if "instances" in body:  # Row format: every input is batch-major.
            shapes = [shape for _, shape in signature["inputs"].values()]
            assert all(shape[:1] == [None] for shape in shapes)
            for instance in body["instances"]:
                assert set(instance) == set(signature["inputs"])
            continue
        # Columnar format, for the scalar inputs of translate_n_best.
        columns = body["inputs"]
        assert set(columns) == set(signature["inputs"])
        for key, (dtype, shape) in signature["inputs"].items():
            assert np.ndim(columns[key]) == len(shape), key
            value = columns[key][0] if shape else columns[key]
            kind = {"string": str, "int32": int, "float32": float}[dtype]
            assert type(value) is kind, key


def test_client_sends_bytes_base64_encoded_over_rest():
    body = client.rest_request([b"Das \xff", "Haus"])
    first, second = body["instances"]
    assert base64.b64decode(first["text"]["b64"]) == b"Das \xff"
    assert second == {"text": "Haus"}


@contextlib.contextmanager
def stand_in_server(code, answer):
    """A REST server that answers every POST with `code` and `answer`.

    Yields its base URL and the list of `(path, JSON body)` it received.
    """
    received = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            length = int(self.headers["Content-Length"])
            received.append((self.path, json.loads(self.rfile.read(length))))
            body = json.dumps(answer).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", received
    finally:
        server.shutdown()
        server.server_close()


def test_client_reports_a_refused_request(capsys):
    """A stand-in REST server answers as TF Serving does over a limit."""
    # The served model's own message (test_limits_fail_with_clear_errors).
    error = (
        "assertion failed: [At most 1 sentences per request (max_batch); "
        "split the request. Received: sentences =] [2]"
    )
    with stand_in_server(400, {"error": error}) as (rest, received):
        arguments = ["--model", "demo", "--rest", rest, "Das.", "Haus."]
        assert client.main(arguments) == 1
    assert capsys.readouterr().err == (
        f"error: {rest}/v1/models/demo:predict answered HTTP 400: {error}\n"
    )
    assert received == [
        ("/v1/models/demo:predict", client.rest_request(["Das.", "Haus."]))
    ]


def served_outputs(served, key):
    """A loader result as the signature's outputs (columnar, as REST)."""
    return {k: v for k, v in served["calls"][key].items() if k != "seconds"}


def test_client_reads_each_sentence_of_every_response_format(served):
    statuses = served["calls"]["mixed"]["status"]
    outputs = served_outputs(served, "mixed_n_best")
    columnar = client.sentence_results({"outputs": outputs})
    assert [row["status"] for row in columnar] == statuses
    assert [row["translations"] for row in columnar] == outputs["translations"]
    # Row format: TF Serving already answers one object per sentence.
    assert client.sentence_results({"predictions": columnar}) == columnar
    # gRPC: NumPy arrays, strings as bytes.
    arrays = {
        "translations": np.array(
            [[t.encode() for t in row] for row in outputs["translations"]],
            dtype=object,
        ),
        "scores": np.array(outputs["scores"], "float32"),
        "status": np.array([t.encode() for t in statuses], dtype=object),
    }
    grpc = client.sentence_results(arrays)
    assert [row["status"] for row in grpc] == statuses
    assert [row["translations"] for row in grpc] == outputs["translations"]
    np.testing.assert_allclose(
        [row["scores"] for row in grpc], outputs["scores"], rtol=1e-6
    )


def test_client_flags_a_sentence_not_translated(served, capsys):
    """The served model's answer to a request with a too-long sentence."""
    outputs = served_outputs(served, "too_long")
    answer = {"predictions": client.sentence_results({"outputs": outputs})}
    sentences = ["Das ist gut.", TOO_LONG["nine_tokens"]]
    with stand_in_server(200, answer) as (rest, received):
        arguments = ["--model", "demo", "--rest", rest, *sentences]
        assert client.main(arguments) == client.EXIT_NOT_TRANSLATED
    out, err = capsys.readouterr()
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["sentence"] for line in lines] == sentences
    assert [line["status"] for line in lines] == ["ok", "too_long"]
    assert lines[0]["translation"] == outputs["translation"][0] != ""
    assert lines[1]["translation"] == ""
    assert err == (
        "sentence 1: too_long: not translated: more tokens than the "
        "model's max_source_tokens; split or shorten it\n"
    )
    assert received == [
        ("/v1/models/demo:predict", client.rest_request(sentences))
    ]


def test_client_rejects_bad_requests():
    with pytest.raises(ValueError, match="not one string"):
        client.rest_request("Das Haus.")
    with pytest.raises(ValueError, match="signature_name='translate'"):
        client.rest_request(["Das"], "translate")
    with pytest.raises(ValueError, match="translate_n_best needs"):
        client.grpc_request(["Das"], "m", "translate_n_best", beam_size=2)
    with pytest.raises(ValueError, match="translate_n_best only"):
        client.rest_request(["Das"], beam_size=2)


# === Pervasive Attention: the same signatures, another model family ===


def test_pervasive_attention_serves_like_translator(session):
    metadata = json.loads(
        (session.pervasive_path / export.METADATA_FILE).read_text()
    )
    assert metadata["model"] == "PervasiveAttention"
    # Exported by Translator.export: from an object, no preset's path.
    assert metadata["preset"] is None and metadata["checkpoint"] is None
    calls = session.served["calls"]
    served = calls["pervasive_translate"]
    expected = session.expected["pervasive_translate"]
    assert served["translation"] == [t.text for t in expected]
    np.testing.assert_allclose(
        served["score"], [t.score for t in expected], atol=1e-4
    )
    # The searches ran for many steps (the fixture's random weights emit
    # words, not EOS at once), with scores that differ by sentence.
    assert min(len(t.target_tokens) for t in expected if t.text) > 10
    assert len({round(t.score, 3) for t in expected}) == len(expected)
    # Not the RNNsearch model's translations.
    assert served["translation"] != calls["translate"]["translation"]
    # ["Das ist gut.", nine tokens]: the first as alone, the second not.
    too_long = calls["pervasive_too_long"]
    assert too_long["status"] == ["ok", "too_long"]
    alone = expected[SENTENCES.index("Das ist gut.")]
    assert too_long["translation"] == [alone.text, ""]
    np.testing.assert_allclose(too_long["score"], [alone.score, 0.0], atol=1e-4)


# === Versions and atomicity, with a stand-in for the (slow) build ===


@pytest.fixture
def fake_build(monkeypatch):
    """Replaces the SavedModel build by writing one marker file."""
    builds = []

    def write(run_dir, checkpoint, path, settings):
        assert isinstance(settings, export.ExportSettings)
        builds.append(path)
        (pathlib.Path(path) / "saved_model.pb").write_text(str(len(builds)))
        if settings.max_batch == 13:  # Stands for an interruption.
            raise KeyboardInterrupt

    monkeypatch.setattr(export, "write_preset_saved_model", write)
    monkeypatch.setattr(export, "_write_in_tensorflow_subprocess", write)
    return builds


def marker(path):
    return (path / "saved_model.pb").read_text()


def test_versions_count_up_and_are_not_overwritten(
    run_dir, tmp_path, fake_build
):
    output = tmp_path / "model"
    assert export.export_saved_model(run_dir, output) == output / "1"
    assert export.export_saved_model(run_dir, output) == output / "2"
    assert export.export_saved_model(run_dir, output, version=7).name == "7"
    assert export.export_saved_model(run_dir, output).name == "8"
    with pytest.raises(FileExistsError, match="--overwrite"):
        export.export_saved_model(run_dir, output, version=2)
    assert marker(output / "2") == "2"
    export.export_saved_model(run_dir, output, version=2, overwrite=True)
    assert marker(output / "2") == "5"
    assert sorted(p.name for p in output.iterdir()) == ["1", "2", "7", "8"]


def test_an_interrupted_export_leaves_no_version(run_dir, tmp_path, fake_build):
    output = tmp_path / "model"
    export.export_saved_model(run_dir, output)
    for version in (None, 1):
        with pytest.raises(KeyboardInterrupt):
            export.export_saved_model(
                run_dir, output, version=version, overwrite=True, max_batch=13
            )
    # The partial builds were removed; version 1 is untouched.
    assert [p.name for p in output.iterdir()] == ["1"]
    assert marker(output / "1") == "1"


def test_translator_export_builds_in_this_process_on_tensorflow(
    translator, tmp_path, monkeypatch
):
    """No subprocess and no preset written on TensorFlow; elsewhere a
    preset of the translator goes to the TensorFlow subprocess."""
    built, spawned = [], []

    def build(exported, path, settings, origin=None):
        built.append((exported, settings))
        (pathlib.Path(path) / "saved_model.pb").write_text("")

    def spawn(preset, checkpoint, path, settings):
        loaded = Translator.from_preset(preset)
        spawned.append((loaded, checkpoint, settings))
        (pathlib.Path(path) / "saved_model.pb").write_text("")

    monkeypatch.setattr(export, "write_saved_model", build)
    monkeypatch.setattr(export, "_write_in_tensorflow_subprocess", spawn)
    assert translator.export(tmp_path / "model") == tmp_path / "model" / "1"
    # Its own search, one hypothesis: what serving_default returns.
    search = SearchConfig(beam_size=5, n_best=1)
    if keras.backend.backend() == "tensorflow":
        assert spawned == [] and built[0][0] is translator
    else:
        assert built == []
        ((loaded, checkpoint, _),) = spawned
        assert checkpoint is None and loaded.search == translator.search
        built = [(loaded, spawned[0][2])]
    assert (
        built[0][1].search
        == search
        == dataclasses.replace(translator.search, n_best=1)
    )


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(version=0), ValueError, "version=0"),
        (dict(version="2"), ValueError, "version='2'"),
        (dict(max_batch=0), ValueError, "max_batch=0"),
        (dict(max_source_tokens=1.5), ValueError, "max_source_tokens=1.5"),
        (
            dict(search=dict(beam_size=9)),
            ValueError,
            "beam_size=9, max_beam_size=8",
        ),
        (
            dict(search=dict(length_penalty=-1.0)),
            ValueError,
            "length_penalty=-1.0",
        ),
        (dict(search=dict(max_length=0)), ValueError, "max_length=0"),
        (dict(search=dict(beam_size=2, n_best=2)), ValueError, "n_best=2"),
        (dict(checkpoint="first"), ValueError, "checkpoint='first'"),
    ],
)
def test_bad_arguments_raise_clear_errors(
    run_dir, tmp_path, fake_build, kwargs, error, message
):
    with pytest.raises(error, match=message):
        if "search" in kwargs:  # SearchConfig checks its own fields.
            kwargs["search"] = SearchConfig(**kwargs["search"])
        export.export_saved_model(run_dir, tmp_path / "model", **kwargs)
    assert fake_build == []


def test_search_must_be_a_search_config(run_dir, tmp_path, fake_build):
    with pytest.raises(ValueError, match="search={'beam_size': 2}"):
        export.export_saved_model(
            run_dir, tmp_path / "model", search={"beam_size": 2}
        )
    assert fake_build == []


def test_bad_paths_raise_clear_errors(run_dir, tmp_path, fake_build):
    with pytest.raises(FileNotFoundError, match="is not a preset"):
        export.export_saved_model(tmp_path, tmp_path / "model")
    (tmp_path / "file").write_text("")
    with pytest.raises(NotADirectoryError, match="must be a folder"):
        export.export_saved_model(run_dir, tmp_path / "file")


def test_a_damaged_run_fails_before_the_build(run_dir, tmp_path, fake_build):
    damaged = pathlib.Path(shutil.copytree(run_dir, tmp_path / "run"))
    model = damaged / presets.WEIGHTS
    model.write_bytes(model.read_bytes()[:1000])
    with pytest.raises(run_directory.RunDirectoryError, match="truncated"):
        export.export_saved_model(damaged, tmp_path / "model")
    assert fake_build == []
    assert not (tmp_path / "model").exists()


@pytest.mark.large
def test_a_wordpiece_source_needs_only_tf_text_ops(tmp_path):
    run_dir = tmp_path / "run"
    sources = [source for source, _ in PAIRS]
    source = WordPieceTokenizer.from_texts(sources * 10, 100)
    target = WordTokenizer.from_texts([target for _, target in PAIRS])
    model = RNNSearch(
        source.vocabulary_size,
        target.vocabulary_size,
        embedding_dim=8,
        hidden_dim=8,
        maxout_dim=4,
        initialization="glorot",
    )
    preprocessor = TranslationPreprocessor(source, target)
    Translator(model, preprocessor).save_to_preset(run_dir)
    # Subword pieces: more tokens per sentence than words.
    settings = {**LIMITS, "max_source_tokens": 32}
    path = export.export_saved_model(
        run_dir, tmp_path / "wordpiece", search=DEFAULT_SEARCH, **settings
    )
    served = load_and_call(
        path,
        {"translate": request("serving_default", sources + [""])},
        as_python_host=True,
    )
    assert served["unregistered"] == ["FastWordpieceTokenizeWithOffsets"]
    assert not set(served["ops"]) & BANNED_OPS
    translator = served_translator(model, source, target, 32)
    expected = translator.translate(sources + [""], DEFAULT_SEARCH)
    result = served["calls"]["translate"]
    assert result["translation"] == [t.text for t in expected]


def test_sentencepiece_runs_are_served_like_translator(tmp_path):
    """SentencePiece both sides (the default tokenizer), tokenized in the
    graph by tf-text's ops, served by docs/serving.md's Python host code
    without Keras or the `tensorflow_text` package."""
    run_dir = tmp_path / "run"
    sources = [source for source, _ in PAIRS]
    targets = [target for _, target in PAIRS]
    source = SentencePieceTokenizer.from_texts(sources * 10, 40)
    target = SentencePieceTokenizer.from_texts(
        targets * 10, 60, model_type="bpe"
    )
    keras.utils.set_random_seed(3)  # after the tokenizers: must not break them
    model = RNNSearch(
        source.vocabulary_size,
        target.vocabulary_size,
        embedding_dim=8,
        hidden_dim=8,
        maxout_dim=8,
        tie_embeddings=True,
        initialization="glorot",
    )
    for variable in model.weights:  # alignments that tell words apart
        if "score_vector" in variable.path:
            variable.assign(3.0 * np.random.default_rng(0).normal(size=8))
    preprocessor = TranslationPreprocessor(source, target)
    Translator(model, preprocessor).save_to_preset(run_dir)
    settings = {**LIMITS, "max_source_tokens": 32}
    path = export.export_saved_model(
        run_dir, tmp_path / "sentencepiece", search=DEFAULT_SEARCH, **settings
    )
    texts = sources + ["", "Das  Haus ist klein."]
    served = load_and_call(
        path,
        {"translate": request("serving_default", texts)},
        as_python_host=True,
    )
    # Only the tokenizer needs tf-text (stock TF Serving links it); the
    # detokenizer is core TensorFlow.
    assert set(served["unregistered"]) == {
        "SentencepieceOp",
        "SentencepieceTokenizeOp",
    }
    assert not set(served["ops"]) & BANNED_OPS
    translator = served_translator(model, source, target, 32)
    expected = translator.translate(texts, DEFAULT_SEARCH)
    result = served["calls"]["translate"]
    assert result["translation"] == [t.text for t in expected]
    np.testing.assert_allclose(
        result["score"], [t.score for t in expected], rtol=1e-4, atol=1e-5
    )
    assert result["status"][-2:] == ["empty", "ok"]
    assert served["imported"] == []  # tensorflow_text included


def test_a_failed_subprocess_export_raises_with_its_stderr(monkeypatch):
    runs = []

    def fail(command, **kwargs):
        runs.append(kwargs["env"]["KERAS_BACKEND"])
        return subprocess.CompletedProcess(command, 1, "", "ValueError: bad")

    monkeypatch.setattr(export.subprocess, "run", fail)
    with pytest.raises(
        RuntimeError, match="(?s)exit status 1.*ValueError: bad"
    ):
        export._write_in_tensorflow_subprocess(
            "run", "best", "path", EXPORT_SETTINGS
        )
    assert runs == ["tensorflow"]


def test_a_refused_model_in_the_subprocess_keeps_its_error(monkeypatch):
    message = "config.json asks to run Python code on loading"

    def refuse(command, **kwargs):
        stderr = "TF log line\n" + export._RUN_DIRECTORY_ERROR + message
        return subprocess.CompletedProcess(command, 3, "", stderr)

    monkeypatch.setattr(export.subprocess, "run", refuse)
    with pytest.raises(run_directory.RunDirectoryError) as caught:
        export._write_in_tensorflow_subprocess(
            "run", "best", "path", EXPORT_SETTINGS
        )
    assert str(caught.value) == message


def test_the_subprocess_gets_the_settings_intact(monkeypatch):
    """JSON only across the process boundary: the same settings back."""
    commands, builds = [], []

    def run(command, **kwargs):
        commands.append(command)
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(export.subprocess, "run", run)
    export._write_in_tensorflow_subprocess(
        "run", "best", "path", EXPORT_SETTINGS
    )
    ((*_, module, argument),) = commands
    assert module == "keras_bahdanau.export"
    monkeypatch.setattr(
        export,
        "write_preset_saved_model",
        lambda **build: builds.append(build),
    )
    assert export.main([argument]) == 0
    assert builds == [
        dict(
            preset="run",
            checkpoint="best",
            path="path",
            settings=EXPORT_SETTINGS,
        )
    ]


def test_settings_record_as_before():
    """`METADATA_FILE`'s settings: the search but n_best, and the limits."""
    record = json.loads(json.dumps(EXPORT_SETTINGS.to_json()))
    assert record == {
        "beam_size": 2,
        "length_penalty": 0.6,
        "coverage_penalty": 0.0,
        "max_length": None,
        "relative_max_length": [1, 4],
        "max_source_tokens": 8,
        "max_batch": 12,
        "max_beam_size": 3,
    }
    assert export.ExportSettings.from_json(record) == EXPORT_SETTINGS
    defaults = export.ExportSettings(None, 100, 64, 8)
    assert defaults.search == SearchConfig()
    assert "relative_max_length" not in defaults.to_json()
