import pathlib

from keras_bahdanau import cli
from keras_bahdanau.commands import export as export_command
from keras_bahdanau.decoding import SearchConfig


def test_command_line_defaults(run_dir, tmp_path, monkeypatch, capsys):
    calls = []

    def record(run_dir, output, **kwargs):
        calls.append((run_dir, output, kwargs))
        return pathlib.Path(output, "1")

    monkeypatch.setattr(export_command, "export_saved_model", record)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["export", str(run_dir)]) == 0
    ((_, output, kwargs),) = calls
    assert output == pathlib.Path("saved_models", run_dir.name)
    assert kwargs == dict(
        version=None,
        checkpoint="best",
        overwrite=False,
        search=SearchConfig(
            beam_size=5,
            length_penalty=0.0,
            coverage_penalty=0.0,
            max_length=None,
        ),
        max_source_tokens=100,
        max_batch=64,
        max_beam_size=8,
    )
    assert capsys.readouterr().out.strip() == str(output / "1")
