"""`keras-bahdanau evaluate PRESET [PRESET ...]`: BLEU and chrF of models."""

import json

from keras_bahdanau import evaluation
from keras_bahdanau import records
from keras_bahdanau.commands.flags import PRESET_HELP
from keras_bahdanau.commands.flags import add_search_arguments
from keras_bahdanau.commands.flags import search_config
from keras_bahdanau.commands.flags import translator_from_args
from keras_bahdanau.plotting import plot_bleu_by_length
from keras_bahdanau.run_directory import atomic_write_text


def add_arguments(parser):
    parser.description = (
        "Translate a test set with one or more presets; print sacreBLEU "
        "BLEU and chrF with their signatures, and BLEU by source length "
        "(the paper's Figure 2). The test set is --split of each run's "
        "training corpus (training_config.json) or the files "
        "--source/--reference."
    )
    parser.add_argument(
        "presets",
        nargs="+",
        metavar="PRESET",
        help=f"{PRESET_HELP} (several: compared on one test set)",
    )
    parser.add_argument(
        "--split",
        choices=("test", "dev"),
        default="test",
        help="split of the runs' corpus (default: test)",
    )
    parser.add_argument(
        "--source",
        help="source file, one sentence a line (UTF-8, see --errors)",
    )
    parser.add_argument("--reference", help="reference file, aligned")
    parser.add_argument(
        "--max-sentences",
        type=int,
        default=0,
        help="score only the first N sentences (0: all)",
    )
    parser.add_argument(
        "--bucket-width", type=int, default=10, help="words per length bucket"
    )
    parser.add_argument("--plot", help="plot BLEU by length to this file")
    parser.add_argument("--json", help="also write the scores to this file")
    add_search_arguments(parser)
    records.add_record_argument(parser)


def run(args):
    started = records.start()
    # Every test set is read and checked before any model loads.
    test_sets = evaluation.read_test_sets(
        args.presets,
        args.split,
        args.max_sentences,
        args.source,
        args.reference,
        args.errors,
    )
    # One model at a time: each is loaded as its turn comes.
    translators = (translator_from_args(args, p) for p in args.presets)
    scores = evaluation.compare_runs(
        test_sets,
        ((t, search_config(args, t.search)) for t in translators),
        bucket_width=args.bucket_width,
        batch_size=args.batch_size,
    )
    print(evaluation.format_report(scores))
    if args.plot:
        plot_bleu_by_length(evaluation.length_curves(scores), path=args.plot)
        print(f"BLEU by length plotted in {args.plot}")
    if args.json:
        atomic_write_text(args.json, json.dumps(scores, indent=2) + "\n")
    if args.record:
        split = None if args.source else args.split
        rows = [
            {"run": label, "run_dir": str(preset), "split": split, **row}
            for (label, row), preset in zip(
                scores.items(), args.presets, strict=True
            )
        ]
        records.write_record(args.record, "evaluate", rows, started)
    return 0
