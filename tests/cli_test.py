"""The `keras-bahdanau` command line as a user runs it, in a subprocess.

Each run starts Python, Keras and TensorFlow (about 10 s on 2 busy cores),
so each test makes one run and checks all it can on it.
"""

import os
import re
import subprocess
import sys

from keras_bahdanau import __version__
from keras_bahdanau.decoding import SearchConfig
from keras_bahdanau.translator import Translator
from tests.run_fixture import PAIRS

NOT_UTF8 = "invalid UTF-8 (invalid start byte at byte 0 of the line)"


def keras_bahdanau(*arguments, stdin=b"", environment=None):
    """Runs the command line on the tests' backend; a CompletedProcess."""
    env = dict(os.environ)
    # Not the user's: JAX sets it when the tests import it.
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)
    env.update(environment or {})
    return subprocess.run(
        [sys.executable, "-m", "keras_bahdanau.cli", *map(str, arguments)],
        input=stdin,
        capture_output=True,
        env=env,
        timeout=600,
    )


def error_lines(stderr):
    """stderr's lines from the command line itself, which must end it."""
    lines = stderr.decode("utf-8").splitlines()
    ours = [line for line in lines if line.startswith("keras-bahdanau")]
    assert ours, lines
    assert ours == lines[-len(ours) :]
    return ours


def test_invalid_utf8_on_stdin_stops_before_any_model_loads(tmp_path):
    # No run directory: loading a model first would fail differently.
    result = keras_bahdanau(
        "translate", tmp_path / "no_run", stdin=b"Das ist gut.\n\xff\n"
    )
    assert result.returncode == 2
    assert result.stdout == b""
    assert b"Traceback" not in result.stderr
    assert error_lines(result.stderr) == [
        f"keras-bahdanau translate: <stdin>, line 2: {NOT_UTF8}. Fix the "
        "input, or pass --errors replace to read undecodable bytes as "
        "U+FFFD."
    ]


def test_invalid_utf8_in_a_file_is_one_line(tmp_path):
    sources, references = tmp_path / "test.de", tmp_path / "test.en"
    sources.write_bytes(b"Das Haus ist klein.\nDas ist gut.\n\xffHaus\n")
    references.write_text("a\nb\nc\n", "utf-8")
    result = keras_bahdanau(
        "evaluate",
        tmp_path / "no_run",
        "--source",
        sources,
        "--reference",
        references,
    )
    assert result.returncode == 2
    assert b"Traceback" not in result.stderr
    [message] = error_lines(result.stderr)
    assert message.startswith(
        f"keras-bahdanau evaluate: {str(sources)!r}, line 3: {NOT_UTF8}."
    )


def test_errors_replace_translates_every_line(
    run_dir,
):
    # CRLF, empty lines, bad bytes, and a last line without its line end.
    stdin = b"Das Haus ist klein.\r\n\n\xff\xfe Haus\n\n"
    stdin += PAIRS[3][0].encode("utf-8")  # Die Katze schläft.
    arguments = ["--beam-size", "2", "--max-length", "10"]
    result = keras_bahdanau(
        "translate", run_dir, "--errors", "replace", *arguments, stdin=stdin
    )
    assert result.returncode == 0, result.stderr.decode()
    sentences = ["Das Haus ist klein.", "", "\ufffd\ufffd Haus", ""]
    sentences.append(PAIRS[3][0])
    expected = Translator.from_preset(run_dir).translate(
        sentences, SearchConfig(beam_size=2, max_length=10)
    )
    output = result.stdout.decode("utf-8")
    assert output == "".join(f"{t.text}\n" for t in expected)
    assert output.splitlines()[1] == output.splitlines()[3] == ""
    # TensorFlow's C++ start-up log (oneDNN, CUDA stubs, cuInit) is
    # dropped: the user did not set TF_CPP_MIN_LOG_LEVEL.
    stderr = result.stderr.decode("utf-8")
    for line in ("I0000", "E0000", "oneDNN", "cuda", "absl::InitializeLog"):
        assert line not in stderr, stderr


def test_tensorflow_logs_as_set_by_the_user(run_dir):
    result = keras_bahdanau(
        "translate",
        run_dir,
        stdin=b"Das Haus ist klein.\n",
        environment={"TF_CPP_MIN_LOG_LEVEL": "0"},
    )
    assert result.returncode == 0, result.stderr.decode()
    assert b"I0000" in result.stderr  # What TensorFlow 2.21 prints.


def test_config_errors_come_before_keras_and_tensorflow_load(tmp_path):
    # In a fresh process: which modules a bad config costs.
    script = (
        "import sys\n"
        "from keras_bahdanau import cli\n"
        "try:\n"
        "    cli.main(sys.argv[1:])\n"
        "except SystemExit as error:\n"
        "    print(error)\n"
        "heavy = ('keras', 'tensorflow', 'jax', 'torch')\n"
        "print(sorted(set(heavy) & set(sys.modules)))\n"
    )
    source = tmp_path / "missing.de"
    for arguments, message in [
        (["--config", tmp_path / "missing.toml"], "Config file not found"),
        (["--set", "training.epochs=0"], "training.epochs must be positive"),
        (["--set", "model.architecture=lstm"], "model.architecture must be"),
        (
            ["--corpus", "files", "--set", f"data.source_file={source}"],
            "data.source_file must name an existing file",
        ),
    ]:
        result = subprocess.run(
            [sys.executable, "-c", script, "train", *map(str, arguments)],
            capture_output=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr.decode()
        error, modules = result.stdout.decode("utf-8").splitlines()
        assert error.startswith("keras-bahdanau train: ")
        assert message in error
        assert modules == "[]"


def test_a_missing_run_directory_is_one_line(tmp_path):
    result = keras_bahdanau("translate", tmp_path / "no_run", stdin=b"x\n")
    assert result.returncode == 2
    assert b"Traceback" not in result.stderr
    assert error_lines(result.stderr) == [
        f"keras-bahdanau translate: No preset folder "
        f"{str(tmp_path / 'no_run')!r}: a preset is a folder of "
        "`Translator.save_to_preset` or a run directory of `keras-bahdanau "
        "train`. (A size name such as 'rnnsearch_tiny' builds an untrained "
        "model with `RNNSearch.from_preset`.)"
    ]


def test_version_is_printed_before_keras_and_tensorflow_load():
    # In a fresh process, as in the test above: `--version` stays cheap.
    script = (
        "import sys\n"
        "from keras_bahdanau import cli\n"
        "try:\n"
        "    cli.main(['--version'])\n"
        "except SystemExit as error:\n"
        "    print(error.code)\n"
        "heavy = ('keras', 'tensorflow', 'jax', 'torch')\n"
        "print(sorted(set(heavy) & set(sys.modules)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, timeout=60
    )
    assert result.returncode == 0, result.stderr.decode()
    version, code, modules = result.stdout.decode("utf-8").splitlines()
    assert version == f"keras-bahdanau {__version__}"
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)
    assert code == "0"
    assert modules == "[]"
    assert result.stderr == b""
