import pathlib

from keras_bahdanau import cli
from keras_bahdanau.commands import export as export_command
from keras_bahdanau.decoding import SearchConfig
from keras_bahdanau.translator import Translator


def test_command_line_defaults(translator, tmp_path, monkeypatch, capsys):
    """Without search flags, the preset's own search (not the defaults)."""
    calls = []

    def record(preset, output, **kwargs):
        calls.append((preset, output, kwargs))
        return pathlib.Path(output, "1")

    own = SearchConfig(beam_size=3, length_penalty=0.4, max_length=9)
    preset = Translator(
        translator.model, translator.preprocessor, search=own
    ).save_to_preset(tmp_path / "mine")
    monkeypatch.setattr(export_command, "export_saved_model", record)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["export", str(preset)]) == 0
    assert cli.main(["export", str(preset), "--beam-size", "2"]) == 0
    (_, output, kwargs), (_, _, flagged) = calls
    assert output == pathlib.Path("saved_models", "mine")
    assert kwargs == dict(
        version=None,
        checkpoint="best",
        overwrite=False,
        search=SearchConfig(beam_size=3, length_penalty=0.4, max_length=9),
        max_source_tokens=100,
        max_batch=64,
        max_beam_size=8,
    )
    assert flagged["search"] == SearchConfig(
        beam_size=2, length_penalty=0.4, max_length=9
    )
    assert capsys.readouterr().out.splitlines()[0] == str(output / "1")
