import io
import sys

from keras_bahdanau import cli
from keras_bahdanau.decoding import SearchConfig
from keras_bahdanau.translator import Translator
from tests.run_fixture import PAIRS

SOURCES = [source for source, _ in PAIRS]
# The search of `--beam-size 2 --max-length 10` (with `--n-best 2`).
SEARCH = SearchConfig(beam_size=2, n_best=2, max_length=10)


def test_translate_command_reads_stdin_and_writes_n_best_lists(
    run_dir, translator, monkeypatch, capsys
):
    sentences = [SOURCES[0], "", SOURCES[3]]
    stdin = io.BytesIO("\n".join(sentences).encode("utf-8"))
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(stdin, "utf-8"))
    arguments = ["translate", str(run_dir), "--beam-size", "2"]
    arguments += ["--n-best", "2", "--max-length", "10"]
    assert cli.main(arguments) == 0
    expected = translator.translate(sentences, SEARCH)
    assert capsys.readouterr().out.splitlines() == [
        f"{i} ||| {hypothesis.text} ||| {hypothesis.score:.6f}"
        for i, hypotheses in enumerate(expected)
        for hypothesis in hypotheses
    ]


def test_translate_command_reads_and_writes_files(
    run_dir, translator, tmp_path
):
    (tmp_path / "input.de").write_text(f"{SOURCES[0]}\n\n", encoding="utf-8")
    arguments = ["--input", str(tmp_path / "input.de")]
    arguments += ["--output", str(tmp_path / "output.en")]
    arguments += ["--beam-size", "2", "--max-length", "10"]
    assert cli.main(["translate", str(run_dir), *arguments]) == 0
    expected = translator.translate(SOURCES[0], SEARCH)[0].text
    assert (tmp_path / "output.en").read_text("utf-8") == f"{expected}\n\n"


def test_translate_command_refuses_invalid_utf8_before_loading_the_model(
    run_dir, tmp_path, monkeypatch, capsys
):
    def load(*args, **kwargs):
        raise AssertionError("The model was loaded before the input.")

    monkeypatch.setattr(Translator, "from_preset", load)
    path = tmp_path / "input.de"
    path.write_bytes(SOURCES[0].encode() + b"\n\nDas ist \xc3(\n")
    arguments = ["translate", str(run_dir), "--input", str(path)]
    assert cli.main(arguments) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"keras-bahdanau translate: {str(path)!r}, line 3: invalid UTF-8 "
        "(invalid continuation byte at byte 8 of the line). Fix the input, "
        "or pass --errors replace to read undecodable bytes as U+FFFD."
    ]


def test_a_bad_dictionary_line_is_one_line_naming_it(run_dir, tmp_path, capsys):
    (tmp_path / "input.de").write_text("Das ist gut.\n", encoding="utf-8")
    dictionary = tmp_path / "words.tsv"
    dictionary.write_text("Haus\thouse\nrot red\n", encoding="utf-8")
    arguments = [
        "translate",
        str(run_dir),
        "--input",
        str(tmp_path / "input.de"),
    ]
    arguments += ["--replace-unknown", "--dictionary", str(dictionary)]
    assert cli.main(arguments) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"keras-bahdanau translate: {str(dictionary)!r}, line 2: expected "
        "`source<TAB>target`. Received: 'rot red'"
    ]
