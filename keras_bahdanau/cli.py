"""`keras-bahdanau`: one command line for the whole pipeline.

Each sub-command is a module of `keras_bahdanau.commands` that exposes
`add_arguments(parser)` and `run(args)`; a module is imported only when its
command runs, so `--help` is fast.

A command stopped by bad input (`InputError`, e.g. a line of `translate`'s
input that is not UTF-8, or a damaged run directory) or by a missing file
(`FileNotFoundError`, e.g. a run directory that is not one) prints one
line, `keras-bahdanau COMMAND: message`, to stderr and exits with status
2. TensorFlow's C++ start-up log is dropped (`commands.start_tensorflow`).
`keras-bahdanau --version` prints the version without loading Keras. Run
as a program, the command first starts again with glibc's malloc on
transparent huge pages where the machine offers them
(`startup.use_huge_pages`).
"""

import argparse
import importlib
import sys

from keras_bahdanau import __version__
from keras_bahdanau.commands import start_tensorflow
from keras_bahdanau.startup import use_huge_pages
from keras_bahdanau.validation import InputError

# Each command and its help; "plot-attention" runs the module
# keras_bahdanau.commands.plot_attention, and so on.
COMMANDS = {
    "train": "train a model into a run directory",
    "translate": "translate text with a preset or run",
    "evaluate": "BLEU/chrF of one or more presets or runs",
    "plot-attention": "draw alignment heatmaps (the paper's Figure 3)",
    "export": "write a TF Serving SavedModel",
    "demo": "the README's main job, end to end",
}

# Commands that check their arguments before TensorFlow loads (in seconds)
# and call `start_tensorflow` themselves.
LATE_TENSORFLOW = ("train",)


def main(argv=None):
    if argv is None:  # the program, not a call from Python
        use_huge_pages()
        argv = sys.argv[1:]
    parser = argparse.ArgumentParser(
        prog="keras-bahdanau",
        description="Attention-based NMT (Bahdanau et al., 2015) on Keras 3. "
        "Pick the backend with KERAS_BACKEND=jax|tensorflow|torch.",
    )
    parser.add_argument(
        "--version", action="version", version=f"keras-bahdanau {__version__}"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = next((a for a in argv if not a.startswith("-")), None)
    for name, help_text in COMMANDS.items():
        sub = commands.add_parser(name, help=help_text)
        if name == chosen:
            # Only the chosen command's imports (TensorFlow, data, models)
            # are paid for.
            module = f"keras_bahdanau.commands.{name.replace('-', '_')}"
            if name not in LATE_TENSORFLOW:
                start_tensorflow()
            command = importlib.import_module(module)
            command.add_arguments(sub)
            sub.set_defaults(run=command.run)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return args.run(args) or 0
    except (InputError, FileNotFoundError) as error:
        print(f"keras-bahdanau {args.command}: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
