"""`keras-bahdanau evaluate RUN_DIR [RUN_DIR ...]`: BLEU and chrF of runs."""

import dataclasses
import json
import time
import warnings
from pathlib import Path

from keras_bahdanau import records
from keras_bahdanau import run_directory
from keras_bahdanau.commands.flags import add_search_arguments
from keras_bahdanau.commands.flags import search_config
from keras_bahdanau.commands.flags import translator_from_args
from keras_bahdanau.config import config_errors
from keras_bahdanau.data import load_corpus
from keras_bahdanau.data import read_parallel_files
from keras_bahdanau.evaluation import evaluate
from keras_bahdanau.plotting import plot_bleu_by_length
from keras_bahdanau.validation import InputError


def add_arguments(parser):
    parser.description = (
        "Translate a test set with one or more runs; print sacreBLEU BLEU "
        "and chrF with their signatures, and BLEU per source-length bucket "
        "(the paper's Figure 2). The test set is --split of each run's "
        "training corpus (config.json) or the files --source/--reference."
    )
    parser.add_argument(
        "run_dirs", nargs="+", metavar="RUN_DIR", help="run directories"
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
    parser.add_argument(
        "--plot", help="draw BLEU by length into this .png/.svg/.pdf file"
    )
    parser.add_argument(
        "--json", help="also write all scores (no hypotheses) to this file"
    )
    add_search_arguments(parser)
    records.add_record_argument(parser)


def run(args):
    started = records.start()
    if bool(args.source) != bool(args.reference):
        raise ValueError(
            "Pass both --source and --reference, or neither (then --split "
            f"of the runs' corpus is used). Received: --source={args.source}"
            f", --reference={args.reference}"
        )
    labels = _labels(args.run_dirs)
    # Every test set is read and checked before any model loads.
    test_sets = _test_sets(args)
    results, searches = {}, {}
    for run_dir, label, pairs in zip(
        args.run_dirs, labels, test_sets, strict=True
    ):
        translator = translator_from_args(args, run_dir)
        searches[label] = search_config(args, run_dir)
        began = time.perf_counter()
        results[label] = evaluate(
            translator,
            [source for source, _ in pairs],
            [target for _, target in pairs],
            searches[label],
            bucket_width=args.bucket_width,
            batch_size=args.batch_size,
        )
        # Translating and scoring, the first batches' compilation included.
        results[label]["seconds"] = round(time.perf_counter() - began, 2)
    print(_format_report(results, args))
    if args.plot:
        plot_bleu_by_length(
            {
                label: (
                    [bucket["max_length"] for bucket in result["by_length"]],
                    [bucket["bleu"] for bucket in result["by_length"]],
                )
                for label, result in results.items()
            },
            path=args.plot,
        )
        print(f"BLEU by length plotted in {args.plot}")
    scores = {
        label: {k: v for k, v in result.items() if k != "hypotheses"}
        for label, result in results.items()
    }
    if args.json:
        run_directory.atomic_write_text(
            args.json, json.dumps(scores, indent=2) + "\n"
        )
    if args.record:
        figures = {
            label: {
                **scores[label],
                "run_dir": str(run_dir),
                "split": None if args.source else args.split,
                "search": dataclasses.asdict(searches[label]),
            }
            for run_dir, label in zip(args.run_dirs, labels, strict=True)
        }
        records.write_record(args.record, "evaluate", figures, started)
    return 0


def _labels(run_dirs):
    """Short run names for tables and plots: folder names if unique."""
    names = [Path(run_dir).resolve().name for run_dir in run_dirs]
    if len(set(names)) == len(names):
        return names
    paths = [str(Path(run_dir).resolve()) for run_dir in run_dirs]
    if len(set(paths)) < len(paths):
        raise ValueError(
            f"A run directory is given twice. Received: {list(run_dirs)}"
        )
    return paths


def _test_sets(args):
    """The test pairs of each run, up to --max-sentences.

    The same files for every run with --source/--reference; else the
    --split of each run's corpus, whose sources must be the same.
    """
    limit = args.max_sentences if args.max_sentences > 0 else None
    if args.source:
        try:
            pairs = read_parallel_files(
                args.source, args.reference, errors=args.errors
            )
        except ValueError as error:  # Unreadable, not UTF-8, unaligned.
            raise InputError(str(error)) from None
        return [pairs[:limit]] * len(args.run_dirs)
    test_sets, corpora = [], {}
    for run_dir in args.run_dirs:
        config = run_directory.read_config(run_dir)
        if "data" not in config:
            raise ValueError(
                f"{run_dir}/config.json names no training corpus (no `data` "
                "section). Pass --source and --reference."
            )
        key = json.dumps(config["data"], sort_keys=True)
        if key not in corpora:
            with config_errors("[data]", OSError, ValueError):
                corpora[key] = load_corpus(config["data"])
        pairs = corpora[key][args.split][:limit]
        sources = [source for source, _ in pairs]
        if test_sets and sources != [source for source, _ in test_sets[0]]:
            raise ValueError(
                f"{run_dir} was trained on another corpus than "
                f"{args.run_dirs[0]}, so their {args.split} sets differ. "
                "Compare them on the same files with --source/--reference."
            )
        test_sets.append(pairs)
    return test_sets


def _format_report(results, args):
    width = max(len("run"), *(len(label) for label in results))
    lines = [
        f"{'run':<{width}}  {'BLEU':>6}  {'chrF':>6}  sentences",
        *(
            f"{label:<{width}}  {r['bleu']:6.2f}  {r['chrf']:6.2f}  "
            f"{len(r['hypotheses'])}"
            for label, r in results.items()
        ),
    ]
    signatures = {
        (r["bleu_signature"], r["chrf_signature"]) for r in results.values()
    }
    if len(signatures) > 1:  # Only with different sacreBLEU versions.
        warnings.warn("The runs' sacreBLEU signatures differ.", stacklevel=2)
    for bleu_signature, chrf_signature in sorted(signatures):
        lines += [
            f"BLEU signature: {bleu_signature}",
            f"chrF signature: {chrf_signature}",
        ]
    first = next(iter(results.values()))
    lines += [
        "",
        f"BLEU by source length (words), beam size {args.beam_size}:",
        f"{'words':>7}  {'sentences':>9}  "
        + "  ".join(f"{label:>{max(len(label), 6)}}" for label in results),
    ]
    for i, bucket in enumerate(first["by_length"]):
        span = f"{bucket['min_length']}-{bucket['max_length']}"
        lines.append(
            f"{span:>7}  {bucket['num_sentences']:>9}  "
            + "  ".join(
                f"{r['by_length'][i]['bleu']:>{max(len(label), 6)}.2f}"
                for label, r in results.items()
            )
        )
    return "\n".join(lines)
