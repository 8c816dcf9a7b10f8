"""The flags several commands share; the search ones default to SearchConfig."""

from keras_bahdanau import run_directory
from keras_bahdanau.data.corpora import INPUT_ERRORS
from keras_bahdanau.decoding import SearchConfig
from keras_bahdanau.translator import Translator


def add_decoding_arguments(parser):
    """Adds `--checkpoint` and the search flags, `SearchConfig`'s fields."""
    parser.add_argument(
        "--checkpoint", choices=run_directory.CHECKPOINTS, default="best"
    )
    defaults = SearchConfig()
    for flag, kind, help_text in (
        ("--beam-size", int, None),
        ("--length-penalty", float, "GNMT alpha"),
        ("--coverage-penalty", float, "GNMT beta"),
        (
            "--max-length",
            int,
            "most target tokens (default: 2 * source tokens + 10)",
        ),
    ):
        default = getattr(defaults, flag[2:].replace("-", "_"))
        if flag == "--length-penalty":
            default = None
            help_text += " (default: the run's evaluation.length_penalty)"
        parser.add_argument(flag, type=kind, default=default, help=help_text)


def add_search_arguments(parser):
    """Adds the decoding flags, --batch-size, --max-source-length, --errors."""
    add_decoding_arguments(parser)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument(
        "--max-source-length",
        type=int,
        default=None,
        help="truncate longer sources, with a warning (default: the "
        "run's training max_length; 0: no limit)",
    )
    parser.add_argument(
        "--errors",
        choices=INPUT_ERRORS,
        default="strict",
        help="input bytes that are not UTF-8: stop with an error naming "
        "the line (strict, the default) or read them as U+FFFD (replace)",
    )


def search_config(args, run_dir, n_best=1):
    """The `SearchConfig` of the `add_decoding_arguments` flags for a run.

    Without `--length-penalty`, the run's `evaluation.length_penalty` (0
    for a run whose config has none).
    """
    length_penalty = args.length_penalty
    if length_penalty is None:
        evaluation = run_directory.read_config(run_dir).get("evaluation", {})
        length_penalty = evaluation.get("length_penalty", 0.0)
    return SearchConfig(
        beam_size=args.beam_size,
        n_best=n_best,
        length_penalty=length_penalty,
        coverage_penalty=args.coverage_penalty,
        max_length=args.max_length,
    )


def translator_from_args(args, run_dir=None):
    """A `Translator` for `run_dir` (default `args.run_dir`) and the flags."""
    limit = args.max_source_length
    return Translator.from_run_dir(
        run_dir or args.run_dir,
        checkpoint=args.checkpoint,
        max_source_length="auto" if limit is None else (limit or None),
    )
