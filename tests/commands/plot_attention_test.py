import pytest
from matplotlib import image

from keras_bahdanau import cli
from keras_bahdanau.decoding import SearchConfig
from tests.run_fixture import PAIRS

SOURCES = [source for source, _ in PAIRS]
# The search of `--beam-size 2 --max-length 10` (with `--n-best 2`).
SEARCH = SearchConfig(beam_size=2, n_best=2, max_length=10)


def test_plot_attention_command_draws_one_figure_per_sentence(
    run_dir, translator, tmp_path
):
    arguments = ["plot-attention", str(run_dir), "--beam-size", "2"]
    arguments += ["--max-length", "10", "--dpi", "40"]
    arguments += ["--sentence", SOURCES[3], "--sentence", ""]
    arguments += ["--output-dir", str(tmp_path)]
    with pytest.warns(UserWarning, match="Sentence 2 is empty"):
        assert cli.main(arguments) == 0
    assert [path.name for path in tmp_path.iterdir()] == ["attention_001.png"]
    expected = translator.translate(SOURCES[3], SEARCH)[0]
    rows, columns = len(expected.target_tokens), len(expected.source_tokens)
    # plot_attention's default size: 1.5 inch + 0.35 inch per word.
    height, width = (round((1.5 + 0.35 * n) * 40) for n in (rows, columns))
    png = image.imread(tmp_path / "attention_001.png")
    assert png.shape[:2] == (height, width)


def test_plot_attention_command_needs_a_sentence(run_dir, tmp_path):
    arguments = ["plot-attention", str(run_dir), "--output-dir", str(tmp_path)]
    with pytest.raises(ValueError, match="Nothing to plot"):
        cli.main(arguments)
