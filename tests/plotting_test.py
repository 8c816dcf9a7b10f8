import numpy as np
import pytest
from matplotlib import image
from matplotlib._pylab_helpers import Gcf
from matplotlib.figure import Figure

from keras_bahdanau.plotting import plot_attention
from keras_bahdanau.plotting import plot_bleu_by_length

SOURCE = ["the", "agreement", "was", "signed", "<eos>"]
TARGET = ["l'", "accord", "a", "été", "signé", "<eos>"]


def test_plot_attention_draws_the_paper_figure_3_layout(tmp_path):
    attention = np.random.default_rng(0).dirichlet(np.ones(7), size=8)
    figure = plot_attention(
        attention,
        SOURCE,
        TARGET,
        path=tmp_path / "alignment.png",
        figsize=(4, 3),
        dpi=50,
    )
    assert isinstance(figure, Figure)
    assert Gcf.get_all_fig_managers() == []  # pyplot saw nothing.
    axes = figure.axes[0]
    heatmap = axes.images[0]
    np.testing.assert_allclose(
        heatmap.get_array(), attention[:6, :5], rtol=1e-6
    )  # One cell per word pair; padding rows/columns cut off.
    assert heatmap.get_cmap().name == "gray"  # Black = 0, white = 1.
    assert heatmap.get_clim() == (0.0, 1.0)
    assert [t.get_text() for t in axes.get_xticklabels()] == SOURCE
    assert [t.get_text() for t in axes.get_yticklabels()] == TARGET
    assert axes.xaxis.get_ticks_position() == "top"
    png = image.imread(tmp_path / "alignment.png")
    assert png.shape[:2] == (150, 200)  # figsize * dpi, (height, width).

    plot_attention(attention, SOURCE, TARGET, path=tmp_path / "a.svg")
    assert (tmp_path / "a.svg").read_text().lstrip().startswith("<?xml")


def test_plot_attention_default_size_grows_with_the_sentence(tmp_path):
    figure = plot_attention(np.eye(6), SOURCE, TARGET, dpi=40)
    width, height = figure.get_size_inches()
    assert height > width  # 6 target words, 5 source words.
    figure.savefig(tmp_path / "a.png")
    png = image.imread(tmp_path / "a.png")
    assert png.shape[:2] == (round(height * 40), round(width * 40))


def test_plot_bleu_by_length(tmp_path):
    results = {
        "RNNsearch-50": ([10, 20, 30, 40], [28.0, 27.5, 26.9, 26.1]),
        "RNNencdec-50": ([10, 20, 30, 40], [24.0, 20.2, 16.0, 12.3]),
    }
    figure = plot_bleu_by_length(
        results, path=tmp_path / "bleu.png", figsize=(5, 3), dpi=60
    )
    axes = figure.axes[0]
    assert [line.get_label() for line in axes.lines] == list(results)
    np.testing.assert_array_equal(
        axes.lines[1].get_ydata(), results["RNNencdec-50"][1]
    )
    assert axes.get_xlabel() == "Sentence length"
    assert axes.get_ylabel() == "BLEU score"
    assert image.imread(tmp_path / "bleu.png").shape[:2] == (180, 300)
    plot_bleu_by_length(results, path=tmp_path / "bleu.svg")
    assert "RNNsearch-50" in (tmp_path / "bleu.svg").read_text()
    assert Gcf.get_all_fig_managers() == []


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda p: plot_attention(np.ones((2, 2)), SOURCE, TARGET),
            r"attention.shape=\(2, 2\)",
        ),
        (lambda p: plot_attention(np.ones((1, 1)), [], ["a"]), "not be empty"),
        (
            lambda p: plot_attention(
                np.ones((1, 1)), ["a"], ["b"], p / "a.jpg"
            ),
            "a.jpg",
        ),
        (lambda p: plot_bleu_by_length({}), "non-empty dict"),
        (
            lambda p: plot_bleu_by_length({"x": ([1, 2], [3])}),
            "results\\['x'\\]",
        ),
        (
            lambda p: plot_bleu_by_length({"x": ([1], [3])}, p / "b.txt"),
            "b.txt",
        ),
    ],
)
def test_bad_arguments_raise_a_clear_error(tmp_path, call, message):
    with pytest.raises(ValueError, match=message):
        call(tmp_path)
