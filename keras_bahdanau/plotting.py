"""Figures of the paper: alignments (Figure 3) and BLEU by length (Figure 2).

Every function builds a `matplotlib.figure.Figure` directly (Agg canvas), so
nothing touches pyplot's global state and plotting works without a display.
"""

import os

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

_FORMATS = (".png", ".svg", ".pdf")


def plot_attention(
    attention,
    source_tokens,
    target_tokens,
    path=None,
    figsize=None,
    dpi=100,
    title=None,
):
    """Plots an alignment matrix as in Figure 3 of the paper.

    Source words run across the top (x axis), target words down the left
    (y axis), one cell per word pair, in grayscale with black = 0 and
    white = 1 like the paper.

    Args:
        attention: array-like `(>= len(target_tokens), >= len(source_tokens))`
            of weights in [0, 1], e.g. `result.attention[i, 0]` of a search;
            extra rows/columns (padding) are cut off.
        source_tokens: list of str, the source words (including EOS if it
            was part of the encoder input and should be shown).
        target_tokens: list of str, the generated words.
        path: optional file name; the figure is saved there in the format
            given by its extension (`.png`, `.svg` or `.pdf`).
        figsize: `(width, height)` in inches; by default 0.35 inch per word
            plus room for the labels.
        dpi: dots per inch of the PNG.
        title: optional title.

    Returns:
        The `matplotlib.figure.Figure`.

    Example:

    >>> figure = plot_attention(
    ...     [[0.9, 0.1], [0.2, 0.8]], ["the", "cat"], ["le", "chat"])

    Reference: Bahdanau et al., 2015, Figure 3 and §5.2.1.
    """
    attention = np.asarray(attention, dtype="float32")
    rows, columns = len(target_tokens), len(source_tokens)
    if (
        attention.ndim != 2
        or attention.shape[0] < rows
        or (attention.shape[1] < columns)
    ):
        raise ValueError(
            "`attention` must have shape (>= len(target_tokens), "
            f">= len(source_tokens)) = (>= {rows}, >= {columns}). "
            f"Received: attention.shape={attention.shape}"
        )
    if rows == 0 or columns == 0:
        raise ValueError(
            "`source_tokens` and `target_tokens` must not be empty. "
            f"Received: {columns} source and {rows} target tokens"
        )
    _check_path(path)
    if figsize is None:
        figsize = (1.5 + 0.35 * columns, 1.5 + 0.35 * rows)
    figure = Figure(figsize=figsize, dpi=dpi, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    axes.imshow(
        attention[:rows, :columns],
        cmap="gray",
        vmin=0.0,
        vmax=1.0,
        interpolation="nearest",
        aspect="auto",
    )
    axes.xaxis.tick_top()
    axes.set_xticks(range(columns), source_tokens, rotation=90)
    axes.set_yticks(range(rows), target_tokens)
    axes.tick_params(length=0)
    if title:
        axes.set_title(title)
    _save(figure, path, dpi)
    return figure


def plot_bleu_by_length(
    results, path=None, figsize=(6.0, 4.0), dpi=100, title=None
):
    """Plots BLEU against sentence length, one line per system (Figure 2).

    Args:
        results: dict `label -> (bucket_lengths, bleu_scores)`, e.g.
            `{"RNNsearch-50": ([10, 20, 30], [28.1, 27.3, 26.0])}`; each
            length is the (upper end of the) sentence-length bucket.
        path: optional file name; the figure is saved there in the format
            given by its extension (`.png`, `.svg` or `.pdf`).
        figsize: `(width, height)` in inches.
        dpi: dots per inch of the PNG.
        title: optional title.

    Returns:
        The `matplotlib.figure.Figure`.

    Example:

    >>> figure = plot_bleu_by_length({
    ...     "RNNsearch-50": ([10, 20, 30], [28.1, 27.3, 26.0]),
    ...     "RNNencdec-50": ([10, 20, 30], [22.5, 19.0, 15.2])})

    Reference: Bahdanau et al., 2015, Figure 2 and §5.1.
    """
    if not isinstance(results, dict) or not results:
        raise ValueError(
            "`results` must be a non-empty dict label -> (lengths, bleu). "
            f"Received: {results!r}"
        )
    for label, series in results.items():
        if len(series) != 2 or len(series[0]) != len(series[1]):
            raise ValueError(
                f"`results[{label!r}]` must be a pair (lengths, bleu) of "
                f"equally long sequences. Received: {series!r}"
            )
    _check_path(path)
    figure = Figure(figsize=figsize, dpi=dpi, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    line_styles = ["-", "--", "-.", ":"]
    markers = ["o", "s", "^", "D", "v", "x"]
    for i, (label, (lengths, bleu)) in enumerate(results.items()):
        axes.plot(
            lengths,
            bleu,
            label=label,
            linestyle=line_styles[i % len(line_styles)],
            marker=markers[i % len(markers)],
        )
    axes.set_xlabel("Sentence length")
    axes.set_ylabel("BLEU score")
    axes.grid(True, alpha=0.3)
    axes.legend()
    if title:
        axes.set_title(title)
    _save(figure, path, dpi)
    return figure


def _check_path(path):
    if path is not None and (
        os.path.splitext(os.fspath(path))[1].lower() not in _FORMATS
    ):
        raise ValueError(
            f"`path` must end with one of {_FORMATS}. Received: path={path!r}"
        )


def _save(figure, path, dpi):
    if path is not None:
        figure.savefig(path, dpi=dpi)
