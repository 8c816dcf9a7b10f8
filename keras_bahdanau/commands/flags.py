"""The flags several commands share: the preset, its checkpoint, and the
search flags, which replace fields of the preset's own search."""

import dataclasses

from keras_bahdanau import presets
from keras_bahdanau.data.corpora import INPUT_ERRORS
from keras_bahdanau.translator import Translator

# The search flags: `SearchConfig`'s fields, their type and help.
_SEARCH_FLAGS = {
    "--beam-size": (int, "beams (default: the preset's)"),
    "--length-penalty": (float, "GNMT alpha (default: the preset's)"),
    "--coverage-penalty": (float, "GNMT beta (default: the preset's)"),
    "--max-length": (
        int,
        "most target tokens (default: the preset's; if it sets none, "
        "2 * source tokens + 10)",
    ),
}
PRESET_HELP = (
    "a preset: a run directory of `keras-bahdanau train` or a folder of "
    "Translator.save_to_preset"
)


def add_decoding_arguments(parser):
    """Adds `--checkpoint` and the search flags (`_SEARCH_FLAGS`)."""
    parser.add_argument(
        "--checkpoint",
        choices=tuple(presets.CHECKPOINTS),
        default="best",
        help="best: the preset's weights; last: a run directory's last epoch",
    )
    for flag, (kind, help_text) in _SEARCH_FLAGS.items():
        parser.add_argument(flag, type=kind, help=help_text)


def add_search_arguments(parser):
    """Adds the decoding flags, --batch-size, --max-source-length, --errors."""
    add_decoding_arguments(parser)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument(
        "--max-source-length",
        type=int,
        default=None,
        help="truncate longer sources, with a warning (default: the "
        "preset's, a run's training max_length; 0: no limit)",
    )
    parser.add_argument(
        "--errors",
        choices=INPUT_ERRORS,
        default="strict",
        help="input bytes that are not UTF-8: stop with an error naming "
        "the line (strict, the default) or read them as U+FFFD (replace)",
    )


def search_config(args, search, n_best=1):
    """`search` (a preset's `SearchConfig`) with the fields that the
    search flags set, and `n_best`: with no flag, the preset's own
    search, as `Translator.from_preset(...).translate` uses it."""
    names = [flag[2:].replace("-", "_") for flag in _SEARCH_FLAGS]
    changes = {name: getattr(args, name) for name in names}
    changes = {
        name: value for name, value in changes.items() if value is not None
    }
    return dataclasses.replace(search, **changes, n_best=n_best)


def translator_from_args(args, preset=None):
    """A `Translator` for `preset` (default `args.preset`) and the flags."""
    limit = args.max_source_length
    return Translator.from_preset(
        preset or args.preset,
        checkpoint=args.checkpoint,
        **({} if limit is None else {"max_source_length": limit or None}),
    )
