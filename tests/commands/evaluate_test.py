import json
import shutil

import pytest
from matplotlib import image

from keras_bahdanau import cli
from keras_bahdanau import evaluation
from keras_bahdanau.decoding import SearchConfig
from keras_bahdanau.translator import Translator
from tests.run_fixture import PAIRS


def test_evaluate_command_compares_runs_and_plots_bleu_by_length(
    run_dir, tmp_path, capsys
):
    other_run = shutil.copytree(run_dir, tmp_path / "other_run")
    sources, references = tmp_path / "test.de", tmp_path / "test.en"
    sources.write_text("".join(s + "\n" for s, _ in PAIRS), "utf-8")
    references.write_text("".join(t + "\n" for _, t in PAIRS), "utf-8")
    arguments = ["evaluate", str(run_dir), str(other_run)]
    arguments += ["--source", str(sources), "--reference", str(references)]
    arguments += ["--beam-size", "2", "--max-length", "10"]
    arguments += ["--bucket-width", "4", "--plot", str(tmp_path / "b.png")]
    arguments += ["--json", str(tmp_path / "scores.json")]
    arguments += ["--record", str(tmp_path / "record.json")]
    assert cli.main(arguments) == 0
    output = capsys.readouterr().out

    translator = Translator.from_preset(run_dir)
    result = evaluation.evaluate(
        translator,
        [s for s, _ in PAIRS],
        [t for _, t in PAIRS],
        SearchConfig(beam_size=2, max_length=10),
        bucket_width=4,
    )
    rows = {
        words[0]: words[1:]
        for words in map(str.split, output.split("\n"))
        if words
    }
    for name in (run_dir.name, "other_run"):
        assert rows[name] == [
            f"{result['bleu']:.2f}",
            f"{result['chrf']:.2f}",
            str(len(PAIRS)),
        ]
    assert f"BLEU signature: {result['bleu_signature']}" in output
    assert f"chrF signature: {result['chrf_signature']}" in output
    assert "version:" in result["bleu_signature"]
    # Sources of 3-4 words in 1-4, the 5-word one in 5-8.
    assert [b["num_sentences"] for b in result["by_length"]] == [9, 1]
    assert rows["1-4"][0] == "9"
    assert rows["5-8"] == ["1", *[f"{result['by_length'][1]['bleu']:.2f}"] * 2]
    assert image.imread(tmp_path / "b.png").shape[:2] == (400, 600)
    scores = json.loads((tmp_path / "scores.json").read_text("utf-8"))
    assert scores["other_run"]["bleu"] == result["bleu"]
    assert scores["other_run"]["by_length"] == result["by_length"]
    assert scores["other_run"]["seconds"] > 0
    record = json.loads((tmp_path / "record.json").read_text("utf-8"))
    assert record["kind"] == "evaluate"
    row = record["rows"][1]
    assert row["run"] == "other_run" and row["run_dir"] == str(other_run)
    assert row["bleu"] == result["bleu"] and row["split"] is None
    assert row["sentences"] == len(PAIRS)
    assert row["search"]["beam_size"] == 2
    assert row["search"]["max_length"] == 10


def test_evaluate_command_uses_the_split_of_the_runs_corpus(
    run_dir, monkeypatch, capsys
):
    splits = {"dev": PAIRS[:2], "test": PAIRS[2:5]}
    monkeypatch.setattr(evaluation, "load_corpus", lambda data: splits)
    arguments = ["evaluate", str(run_dir), "--split", "dev"]
    assert cli.main([*arguments, "--beam-size", "2", "--max-length", "10"]) == 0
    output = capsys.readouterr().out
    assert output.splitlines()[1].split()[-1] == "2"  # Sentences.
    with pytest.raises(ValueError, match="both --source and --reference"):
        cli.main(["evaluate", str(run_dir), "--source", "x.de"])


def test_evaluate_command_reads_bad_bytes_as_u_fffd_if_asked(
    run_dir, tmp_path, capsys
):
    sources, references = tmp_path / "test.de", tmp_path / "test.en"
    sources.write_bytes(b"Das Haus ist \xffklein.\nDas ist gut.\n")
    references.write_text("The house is small.\nThat is good.\n", "utf-8")
    arguments = ["evaluate", str(run_dir), "--errors", "replace"]
    arguments += ["--source", str(sources), "--reference", str(references)]
    assert cli.main([*arguments, "--beam-size", "2", "--max-length", "10"]) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[-1] == "2"
