"""`keras-bahdanau translate PRESET`: one sentence per line, translated."""

import contextlib
import sys

from keras_bahdanau.commands.flags import PRESET_HELP
from keras_bahdanau.commands.flags import add_search_arguments
from keras_bahdanau.commands.flags import search_config
from keras_bahdanau.commands.flags import translator_from_args
from keras_bahdanau.data import read_dictionary
from keras_bahdanau.data import read_lines


def add_arguments(parser):
    parser.description = (
        "Translate one sentence per line from --input (default: stdin) to "
        "--output (default: stdout): one output line per input line, an "
        "empty input line giving an empty line. With --n-best N > 1 the "
        "output is Moses' n-best format `i ||| translation ||| score` (i: "
        "0-based input line), up to N lines per input line, best first. "
        "The whole input is read and checked to be UTF-8 before the model "
        "loads (see --errors)."
    )
    parser.add_argument("preset", metavar="PRESET", help=PRESET_HELP)
    parser.add_argument("--input", help="input file (default: stdin)")
    parser.add_argument("--output", help="output file (default: stdout)")
    add_search_arguments(parser)
    parser.add_argument(
        "--n-best", type=int, default=1, help="hypotheses per sentence"
    )
    parser.add_argument(
        "--replace-unknown",
        action="store_true",
        help="replace [UNK] by the most attended source word",
    )
    parser.add_argument(
        "--dictionary",
        help="with --replace-unknown: a file of `source<TAB>target` word "
        "pairs used to translate the copied source words",
    )


def run(args):
    # All input first: bad input fails at once, before the model loads.
    sentences = read_lines(args.input, args.errors)
    dictionary = None
    if args.dictionary:
        dictionary = read_dictionary(args.dictionary, args.errors)
    translator = translator_from_args(args)
    search = search_config(args, translator.search, n_best=args.n_best)
    with (
        open(args.output, "w", encoding="utf-8")
        if args.output
        else contextlib.nullcontext(sys.stdout)
    ) as output:
        # Chunks of several batches: sorting by length pays off, yet the
        # output of a long input streams. (A bad --batch-size is refused
        # by `translate`.)
        chunk_size = 8 * max(args.batch_size, 1)
        for start in range(0, len(sentences), chunk_size):
            results = translator.translate(
                sentences[start : start + chunk_size],
                search,
                replace_unknown=args.replace_unknown,
                dictionary=dictionary,
                batch_size=args.batch_size,
            )
            for index, hypotheses in enumerate(results, start):
                if search.n_best == 1:
                    output.write(hypotheses.text + "\n")
                else:
                    for hypothesis in hypotheses:
                        output.write(
                            f"{index} ||| {hypothesis.text} ||| "
                            f"{hypothesis.score:.6f}\n"
                        )
            output.flush()
    return 0
