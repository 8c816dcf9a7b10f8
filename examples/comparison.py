"""The helpers shared by compare_models.py and reproduce_bahdanau.py.

Not a script: the two example scripts import it (`import comparison`;
Python puts a script's directory first on `sys.path`) after they call
`keras_bahdanau.startup.start_tensorflow()`, as it imports Keras. It
holds the overrides that make each architecture (`ARCHITECTURES`), the
shared command-line options (`shared_parser`), scoped `--set` overrides,
the training time read from TensorBoard, BLEU by source length, the
table's cells and the report.
"""

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path

import keras

from keras_bahdanau import records
from keras_bahdanau import run_directory as rd
from keras_bahdanau.config import ConfigError
from keras_bahdanau.decoding import SearchConfig
from keras_bahdanau.metrics import bleu_by_length
from keras_bahdanau.metrics import corpus_scores
from keras_bahdanau.translator import Translator

# The overrides that make each model; applied after the config file.
ARCHITECTURES = {
    "rnnencdec": (
        "model.architecture=rnnencdec",
        "model.preset=rnnencdec_tiny",
    ),
    "rnnsearch": (
        "model.architecture=rnnsearch",
        "model.preset=rnnsearch_tiny",
    ),
    "pervasive_attention": (
        "model.architecture=pervasive_attention",
        "model.preset=pervasive_attention_tiny",
        # The grid pads both axes: buckets of 5 tokens pad less of it.
        "data.bucket_width=5",
    ),
}


def shared_parser(doc, output_dir, model, names, buckets=(5, 5)):
    """A parser with the options the two comparison scripts share.

    Described by the first line of `doc`; the options `--{model}s` (the
    models to run, of `names`; default all), `--output-dir` (default
    `output_dir`), `--set` (scoped by a `model` name), `--bucket-width`
    and `--num-buckets` (defaults `buckets`), `--json` and `--record`;
    `check_shared_arguments` checks them.
    """
    parser = argparse.ArgumentParser(
        description=doc.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        f"--{model}s",
        nargs="+",
        choices=tuple(names),
        default=list(names),
        metavar=model.upper(),
        help=f"the models to run, of {', '.join(names)} (default: all)",
    )
    parser.add_argument(
        "--output-dir",
        default=output_dir,
        help="one run directory per model goes here (default: %(default)s)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar=f"[{model.upper()}:]SECTION.KEY=VALUE",
        help="override a config key for every model, or for one; repeatable",
    )
    width, count = buckets
    last = (count - 1) * width
    parser.add_argument(
        "--bucket-width",
        type=int,
        default=width,
        help="words per source-length bucket (default: %(default)s)",
    )
    parser.add_argument(
        "--num-buckets",
        type=int,
        default=count,
        help="length buckets; the last one is open-ended (default: "
        f"%(default)s, i.e. 1-{width}, ..., {last - width + 1}-{last}, "
        f"{last + 1}+)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object per model instead of the table",
    )
    records.add_record_argument(parser)
    return parser


def check_at_least(parser, args, minimum, names):
    """Stops with a usage error if an option of `names` is below `minimum`."""
    for name in names:
        if getattr(args, name) < minimum:
            parser.error(
                f"--{name.replace('_', '-')} must be at least {minimum}. "
                f"Received: {getattr(args, name)}"
            )


def check_shared_arguments(parser, args, model):
    """Stops with a usage error on a bad shared option or a repeated model.

    `model` is the word `shared_parser` was given for the models.
    """
    check_at_least(parser, args, 1, ("bucket_width", "num_buckets"))
    names = getattr(args, f"{model}s")
    if len(set(names)) < len(names):
        parser.error(f"--{model}s names a model twice: {names}")


def scoped_overrides(name, overrides, names, kind="architecture"):
    """The `--set` overrides of model `name`: shared ones, then its own.

    An override `NAME:section.key=value` applies to model `NAME` only
    (one of `names`, else a `ConfigError` that calls it a `kind`); the
    others apply to every model. `run_dir` may not be set: each model's
    run directory is `--output-dir/NAME`.
    """
    shared, scoped = [], []
    for override in overrides:
        key = override.partition("=")[0]
        if ":" in key:
            target, _, override = override.partition(":")
            if target not in names:
                raise ConfigError(
                    f"--set {target}:... names no {kind}; use one of "
                    f"{sorted(names)}. Received: {target!r}"
                )
            if target == name:
                scoped.append(override)
            key = override.partition("=")[0]
        else:
            shared.append(override)
        if key.strip() == "run_dir":
            raise ConfigError(
                f"The run directories are --output-dir/{kind.upper()}; set "
                "--output-dir instead of run_dir."
            )
    return [*shared, *scoped]


def training_time(run_dir):
    """`(seconds, epochs)` spent in `fit`, from the TensorBoard events.

    Each training session (a first run, or a resume after a kill) writes
    its own event file: its training time runs from the file's first event
    (written when `fit` starts) to its last `epoch_loss` event (the end of
    its last complete epoch, dev loss included). Work a killed session
    did after its last complete epoch is not counted, nor a record it left
    half written.
    """
    import tensorflow as tf  # TensorBoard's event files: any backend.

    seconds, epochs = 0.0, 0
    directory = Path(run_dir) / rd.TENSORBOARD / "train"
    for path in sorted(directory.glob("events.out.tfevents.*")):
        start, epoch_ends = None, []
        try:
            for record in tf.data.TFRecordDataset(str(path)):
                event = tf.compat.v1.Event.FromString(record.numpy())
                start = event.wall_time if start is None else start
                if any(v.tag == "epoch_loss" for v in event.summary.value):
                    epoch_ends.append(event.wall_time)
        except tf.errors.DataLossError:
            pass  # The session was killed while writing its last event.
        if epoch_ends:
            seconds += epoch_ends[-1] - start
            epochs += len(epoch_ends)
    if not epochs:
        raise FileNotFoundError(
            f"No finished epoch is logged in {directory}: cannot time the "
            "training of this run."
        )
    return seconds, epochs


def length_buckets(sources, hypotheses, references, width, count):
    """Corpus BLEU per source-length bucket; the last bucket is open.

    Buckets `1..width`, `width+1..2*width`, ... (whitespace words, as
    `bleu_by_length` counts them); the last of the `count` buckets takes
    every sentence of `(count - 1) * width + 1` words or more
    (`max_length` None). Empty buckets are left out.
    """
    longest_closed = (count - 1) * width
    closed = [len(s.split()) <= longest_closed for s in sources]
    buckets = []
    if any(closed):
        buckets = bleu_by_length(
            *(
                [text for text, keep in zip(texts, closed, strict=True) if keep]
                for texts in (sources, hypotheses, references)
            ),
            bucket_width=width,
        )
    if not all(closed):
        tail_hypotheses, tail_references = (
            [text for text, keep in zip(texts, closed, strict=True) if not keep]
            for texts in (hypotheses, references)
        )
        buckets.append(
            {
                "min_length": longest_closed + 1,
                "max_length": None,
                "num_sentences": len(tail_hypotheses),
                "bleu": corpus_scores(tail_hypotheses, tail_references)["bleu"],
            }
        )
    return buckets


def translate_timed(run_dir, sources, beam_size):
    """`(hypotheses, seconds)`: the run's best model translating `sources`.

    Sentences are translated in full, not cut at the training length, as
    `train` translates them. The compiled searches of `train`'s
    evaluation are shared by every model of the same architecture and
    shapes (`decoding.compile_search`), so after it the time is that of
    decoding, not compilation.
    """
    translator = Translator.from_preset(run_dir, max_source_length=None)
    start = time.perf_counter()
    hypotheses = [
        translation.text
        for translation in translator.translate(
            sources, SearchConfig(beam_size=beam_size)
        )
    ]
    return hypotheses, time.perf_counter() - start


def scores_row(run_dir, pairs, hypotheses, decode_seconds, width, count):
    """A model's size, training time and scores on the test `pairs`.

    The parameters are those `train` wrote in the run's training config;
    the time is `training_time`'s; BLEU and chrF are `corpus_scores` of
    `hypotheses` against the targets of `pairs`, overall and by source
    length (`length_buckets` with `width` and `count`).
    """
    sources = [source for source, _ in pairs]
    references = [target for _, target in pairs]
    scores = corpus_scores(hypotheses, references)
    train_seconds, epochs = training_time(run_dir)
    return {
        "parameters": rd.read_training_config(run_dir)["parameters"],
        "epochs": epochs,
        "train_seconds": train_seconds,
        "seconds_per_epoch": train_seconds / epochs,
        "test": {
            "sentences": len(pairs),
            "bleu": scores["bleu"],
            "chrf": scores["chrf"],
        },
        "decode_seconds": decode_seconds,
        "decode_ms_per_sentence": 1000 * decode_seconds / len(pairs),
        "test_bleu_by_length": length_buckets(
            sources, hypotheses, references, width, count
        ),
        "bleu_signature": scores["bleu_signature"],
        "chrf_signature": scores["chrf_signature"],
        "backend": keras.backend.backend(),
        "run_dir": str(run_dir),
    }


def _label(bucket):
    if bucket["max_length"] is None:
        return f"{bucket['min_length']}+"
    return f"{bucket['min_length']}-{bucket['max_length']}"


def bucket_labels(width, count):
    """The labels of `length_buckets`' buckets: "1-5", ..., "21+"."""
    return [
        _label(
            {
                "min_length": i * width + 1,
                "max_length": (i + 1) * width if i < count - 1 else None,
            }
        )
        for i in range(count)
    ]


def bucket_cells(row, labels):
    """A row's test BLEU per length bucket, "-" for an empty bucket."""
    bleu = {_label(b): b["bleu"] for b in row["test_bleu_by_length"]}
    return [f"{bleu[label]:.2f}" if label in bleu else "-" for label in labels]


def bucket_counts(row, labels):
    """The test sentences per length bucket of a row, as text."""
    counts = {_label(b): b["num_sentences"] for b in row["test_bleu_by_length"]}
    return "sentences per bucket: " + ", ".join(
        f"{label}: {counts.get(label, 0)}" for label in labels
    )


def render_table(titles, lines):
    """Cells in aligned columns: the first left-aligned, the others right."""
    widths = [
        max(len(title), *(len(cells[i]) for cells in lines))
        for i, title in enumerate(titles)
    ]
    return [
        "  ".join(
            f"{cell:<{w}}" if i == 0 else f"{cell:>{w}}"
            for i, (cell, w) in enumerate(zip(cells, widths, strict=True))
        )
        for cells in [titles, *lines]
    ]


def report(rows, table, as_json, started, what):
    """Prints `table`, or one JSON line per row, and the wall time.

    The wall time since `started` (`time.perf_counter()`) of this `what`
    goes to stdout after the table, to stderr after JSON lines.
    """
    if as_json:
        for row in rows:
            print(json.dumps(row))
    else:
        print(table)
    minutes = (time.perf_counter() - started) / 60
    print(
        f"Wall time of this {what}: {minutes:.1f} min.",
        file=sys.stderr if as_json else sys.stdout,
    )


def collect_rows(names, row_of, script):
    """`[row_of(name) for name in names]`, training logs sent to stderr.

    stdout is for the table or the JSON lines; a `ConfigError` stops the
    script with its message, prefixed by `script`.
    """
    try:
        with contextlib.redirect_stdout(sys.stderr):
            return [row_of(name) for name in names]
    except ConfigError as error:
        raise SystemExit(f"{script}: {error}") from None
