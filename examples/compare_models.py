"""Compares RNNencdec, RNNsearch and Pervasive Attention on the same data.

Trains each architecture with the machinery of `keras-bahdanau train` (one
run directory per model under `--output-dir`), then translates the dev and
test splits with beam search and prints one table: parameters, training
time (total and per epoch), dev and test BLEU and chrF, the decoding time
per test sentence, and test BLEU by source-sentence length, in the buckets
1-5, 6-10, 11-15, 16-20 and 21+ words (the paper's Figure 2 compares
RNNencdec and RNNsearch this way). Pervasive Attention (Elbayad et al.,
2018) has no recurrent decoder state: each decoding step computes one new
row of its source x target grid, from the rows it caches.

The base config is `examples/ding_de_en.toml` (the Ding German-English
example sentences); the models are `rnnencdec_tiny`, `rnnsearch_tiny` and
`pervasive_attention_tiny` (the tied 2D network of
`examples/ding_de_en_pervasive.toml`, with its length buckets of 5
tokens; see `ARCHITECTURES` in `comparison.py`); the table gives each
one's parameters. To fit the time budget of a 2-core CPU, each model
trains for 2 epochs and is evaluated on the first 100 dev and test
sentences (`DEFAULT_OVERRIDES`). `--set section.key=value` overrides a
config key for every model; `--set ARCHITECTURE:section.key=value` for
one model only (e.g. `--set pervasive_attention:model.num_layers=12`, as
Pervasive Attention has no `hidden_dim` or `maxout_dim`).

Nothing is lost when the comparison is killed: run again with the same
options, an unfinished model resumes training where it stopped and a
finished one is only evaluated (`keras_bahdanau.trainer.train` does
both; a finished run is never trained further, so more epochs need another
`--output-dir`). The training time is read from each run's TensorBoard
event files, so it adds up the epochs of every session that trained the
model.

Usage:

    python examples/compare_models.py
    python examples/compare_models.py --set training.epochs=1 \\
        --output-dir runs/compare_models_epochs1
    python examples/compare_models.py --set data.max_train_pairs=3000 \\
        --output-dir runs/compare_small
    python examples/compare_models.py --architectures rnnsearch \\
        pervasive_attention --beam-size 2 --max-sentences 200 --json

The training logs go to stderr; stdout holds only the table (or, with
`--json`, one JSON object per model).

The table's training and decoding times are wall times of this run;
`--record PATH` keeps them with the machine and its load.
"""

import json
import sys
import time
from pathlib import Path

from keras_bahdanau.startup import start_tensorflow

# Before Keras loads TensorFlow: without its C++ start-up log.
start_tensorflow()

import comparison

from keras_bahdanau import records
from keras_bahdanau import run_directory as rd
from keras_bahdanau.config import resolve_config
from keras_bahdanau.data import load_corpus
from keras_bahdanau.trainer import train

DEFAULT_CONFIG = Path(__file__).with_name("ding_de_en.toml")

# The comparison's budget on a 2-core CPU; `--set` overrides these too.
DEFAULT_OVERRIDES = ("training.epochs=2", "evaluation.max_sentences=100")

# The table's columns before the length buckets: (title, cell of a row).
COLUMNS = (
    ("model", lambda row: row["architecture"]),
    ("parameters", lambda row: f"{row['parameters']:,}"),
    ("epochs", lambda row: str(row["epochs"])),
    ("train min", lambda row: f"{row['train_seconds'] / 60:.1f}"),
    ("s/epoch", lambda row: f"{row['seconds_per_epoch']:.0f}"),
    ("dev BLEU", lambda row: f"{row['dev']['bleu']:.2f}"),
    ("dev chrF", lambda row: f"{row['dev']['chrf']:.2f}"),
    ("test BLEU", lambda row: f"{row['test']['bleu']:.2f}"),
    ("test chrF", lambda row: f"{row['test']['chrf']:.2f}"),
    ("ms/sent", lambda row: f"{row['decode_ms_per_sentence']:.1f}"),
)


def parse_args(argv=None):
    parser = comparison.shared_parser(
        __doc__, "runs/compare_models", "architecture", comparison.ARCHITECTURES
    )
    parser.add_argument(
        "--config",
        default=str(DEFAULT_CONFIG),
        help="base TOML config (default: examples/ding_de_en.toml)",
    )
    parser.add_argument(
        "--beam-size", type=int, help="sets evaluation.beam_size"
    )
    parser.add_argument(
        "--max-sentences",
        type=int,
        help="sets evaluation.max_sentences: translate only the first N "
        "dev and test sentences (0: all)",
    )
    args = parser.parse_args(argv)
    comparison.check_shared_arguments(parser, args, "architecture")
    return args


def overrides_for(architecture, args):
    """The `section.key=value` overrides of one model's run, in order."""
    evaluation = [
        f"evaluation.{key}={value}"
        for key, value in (
            ("beam_size", args.beam_size),
            ("max_sentences", args.max_sentences),
        )
        if value is not None
    ]
    return [
        *comparison.ARCHITECTURES[architecture],
        *DEFAULT_OVERRIDES,
        *comparison.scoped_overrides(
            architecture, args.set, comparison.ARCHITECTURES
        ),
        *evaluation,
        f"run_dir={Path(args.output_dir) / architecture}",
    ]


def compare(architecture, args):
    """Trains (or resumes, or finds finished) one model; scores it."""
    config = resolve_config(args.config, overrides_for(architecture, args))
    # Trains, then translates dev and test and writes results.json.
    run_dir = train(config)
    results = json.loads((run_dir / rd.RESULTS).read_text(encoding="utf-8"))
    evaluation = config["evaluation"]
    pairs = load_corpus(config["data"])["test"]
    pairs = pairs[: evaluation["max_sentences"] or None]
    # The test split again, as `train` translated it, for the hypotheses
    # and the time.
    hypotheses, decode_seconds = comparison.translate_timed(
        run_dir, [source for source, _ in pairs], evaluation["beam_size"]
    )
    return {
        "architecture": architecture,
        "beam_size": evaluation["beam_size"],
        "dev": {
            key: results["dev"][key] for key in ("sentences", "bleu", "chrf")
        },
        **comparison.scores_row(
            run_dir,
            pairs,
            hypotheses,
            decode_seconds,
            args.bucket_width,
            args.num_buckets,
        ),
    }


def format_table(rows, width, count):
    """The comparison as a plain-text table (one line per model)."""
    labels = comparison.bucket_labels(width, count)
    table = comparison.render_table(
        [title for title, _ in COLUMNS] + labels,
        [
            [cell(row) for _, cell in COLUMNS]
            + comparison.bucket_cells(row, labels)
            for row in rows
        ],
    )
    first = rows[0]
    table += [
        "",
        f"Beam {first['beam_size']}, {first['backend']} backend; "
        f"{first['dev']['sentences']} dev and {first['test']['sentences']} "
        "test sentences. ms/sent: decoding time per test sentence.",
        "Last columns: test BLEU by source length (words); "
        + comparison.bucket_counts(first, labels)
        + ".",
        f"BLEU signature: {first['bleu_signature']}",
        f"chrF signature: {first['chrf_signature']}",
    ]
    return "\n".join(table)


def main(argv=None):
    recording = records.start()
    args = parse_args(argv)
    started = time.perf_counter()
    rows = comparison.collect_rows(
        args.architectures,
        lambda architecture: compare(architecture, args),
        "compare_models.py",
    )
    test_sets = {(r["test"]["sentences"], r["dev"]["sentences"]) for r in rows}
    if len(test_sets) > 1:
        raise SystemExit(
            "compare_models.py: the models were evaluated on different "
            f"numbers of dev/test sentences ({sorted(test_sets)}): an "
            "architecture-scoped --set changed the data. Set data keys for "
            "every model."
        )
    table = format_table(rows, args.bucket_width, args.num_buckets)
    comparison.report(rows, table, args.json, started, "comparison")
    if args.record:
        records.write_record(
            args.record,
            "compare_models",
            rows,
            recording,
            config={
                name: resolve_config(args.config, overrides_for(name, args))
                for name in args.architectures
            },
            argv=[__file__, *(sys.argv[1:] if argv is None else argv)],
        )
    return rows


if __name__ == "__main__":
    main()
