"""`keras-bahdanau plot-attention PRESET`: alignment heatmaps (Figure 3)."""

import warnings
from pathlib import Path

from keras_bahdanau.commands.flags import PRESET_HELP
from keras_bahdanau.commands.flags import add_search_arguments
from keras_bahdanau.commands.flags import search_config
from keras_bahdanau.commands.flags import translator_from_args
from keras_bahdanau.data import read_lines
from keras_bahdanau.plotting import plot_attention


def add_arguments(parser):
    parser.description = (
        "Translate sentences and draw their alignments as heatmaps "
        "(Figure 3 of the paper): one file attention_NNN.FORMAT per "
        "sentence, numbered from 001 in input order. Empty sentences are "
        "skipped with a warning."
    )
    parser.add_argument("preset", metavar="PRESET", help=PRESET_HELP)
    parser.add_argument(
        "--sentence",
        action="append",
        default=[],
        help="a sentence to translate (repeatable)",
    )
    parser.add_argument("--input", help="a file of sentences, one per line")
    parser.add_argument(
        "--output-dir", required=True, help="folder for the figures"
    )
    parser.add_argument("--format", choices=("png", "svg"), default="png")
    parser.add_argument("--dpi", type=int, default=100, help="PNG resolution")
    add_search_arguments(parser)


def run(args):
    sentences = list(args.sentence)
    if args.input:
        sentences += read_lines(args.input, args.errors)
    if not sentences:
        raise ValueError("Nothing to plot: pass --sentence or --input.")
    translator = translator_from_args(args)
    translations = translator.translate(
        sentences,
        search_config(args, translator.search),
        return_attention=True,
        batch_size=args.batch_size,
    )
    output_dir = Path(args.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    for number, translation in enumerate(translations, 1):
        if not translation.source_tokens:
            warnings.warn(
                f"Sentence {number} is empty: no alignment to plot.",
                stacklevel=2,
            )
            continue
        path = output_dir / f"attention_{number:03d}.{args.format}"
        plot_attention(
            translation.attention,
            translation.source_tokens,
            translation.target_tokens,
            path=path,
            dpi=args.dpi,
        )
        print(f"{path}\t{translation.text}")
    return 0
