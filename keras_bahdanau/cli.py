"""`keras-bahdanau`: one command line for the whole pipeline.

Each sub-command lives in the module of its concept and exposes
`add_arguments(parser)` and `run(args)`; modules are imported only when
their command runs, so `--help` is fast.

A command stopped by bad input (`InputError`, e.g. a line of `translate`'s
input that is not UTF-8) prints one line, `keras-bahdanau COMMAND:
message`, to stderr and exits with status 2.
"""

import argparse
import importlib
import sys

COMMANDS = {
    "train": ("keras_bahdanau.train", "train a model into a run directory"),
    "translate": ("keras_bahdanau.translator", "translate text with a run"),
    "evaluate": ("keras_bahdanau.evaluation", "BLEU/chrF of one or more runs"),
    "plot-attention": (
        "keras_bahdanau.translator:plot_attention_command",
        "draw alignment heatmaps (the paper's Figure 3)",
    ),
    "export": ("keras_bahdanau.export", "write a TF Serving SavedModel"),
    "demo": ("keras_bahdanau.demo", "the README's main job, end to end"),
}


class InputError(ValueError):
    """Input text a command cannot use: reported in one line, exit 2."""


def _load(target):
    module_name, _, attribute = target.partition(":")
    module = importlib.import_module(module_name)
    return getattr(module, attribute) if attribute else module


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(
        prog="keras-bahdanau",
        description="Attention-based NMT (Bahdanau et al., 2015) on Keras 3. "
        "Pick the backend with KERAS_BACKEND=jax|tensorflow|torch.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = next((a for a in argv if not a.startswith("-")), None)
    for name, (target, help_text) in COMMANDS.items():
        sub = commands.add_parser(name, help=help_text)
        if name == chosen:
            command = _load(target)
            command.add_arguments(sub)
            sub.set_defaults(run=command.run)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return args.run(args) or 0
    except InputError as error:
        print(f"keras-bahdanau {args.command}: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    # `python -m keras_bahdanau.cli` runs this file as `__main__`, a module
    # apart from `keras_bahdanau.cli`, whose `InputError` the commands
    # raise: run the package module's `main`.
    from keras_bahdanau.cli import main as package_main

    sys.exit(package_main())
