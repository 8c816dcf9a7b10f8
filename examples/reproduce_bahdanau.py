"""Reproduces Table 1 and Figures 2 and 3 of Bahdanau et al. on the Bible.

Bahdanau, Cho and Bengio (2015), "Neural Machine Translation by Jointly
Learning to Align and Translate" (arXiv:1409.0473), compare an encoder-
decoder without attention (RNNencdec; Cho et al., 2014, arXiv:1406.1078)
with their attention model (RNNsearch), each trained once on the sentence
pairs of at most 30 words and once on those of at most 50 (the suffixes
-30 and -50; section 4.2), on WMT'14 English-French with 30,000-word
shortlists (section 4.1). This script trains the same four models, and
Pervasive Attention (Elbayad et al., 2018, arXiv:1808.03867) on the pairs
of at most 50 words as a fifth row, on the Bible, English to French
(`data.corpus = "bible_en_fr"`: World English Bible -> Louis Segond 1910;
train 29,270 verses, dev Mark, test the 1,150 verses of Luke). It writes
to `--output-dir`:

* `table.txt` and `table.json` (and the table on stdout; the training
  logs go to stderr): like Table 1, test BLEU on all test verses and on
  those without an unknown word ("No UNK": no word outside the
  vocabularies in the source nor in the reference, as the run's
  tokenizers read them; `known_word_pairs`), the sacreBLEU signature,
  the paper's numbers beside ours, and test BLEU by source length in
  words (`--bucket-width`, `--num-buckets`);
* `figure2_bleu_by_length.png`: that BLEU against the source length, one
  curve per model, like Figure 2 (a point at the upper end of its
  bucket; the open last bucket, e.g. 41+, where its end would be);
* `figure3_alignment_NN.png`: RNNsearch-50's alignments (Figure 3) for
  the `--alignments` longest test verses of at most 50 tokens
  (RNNsearch-30's, at most 30, when -50 is not among `--models`);
* one run directory per model (`keras-bahdanau train`'s layout), e.g.
  `rnnsearch_50/`, with `test_translations.json`, its test translations.

The rows `rnnencdec_30`, `rnnsearch_30`, `rnnencdec_50` and
`rnnsearch_50` are the paper's four models, `pervasive_attention_50` the
fifth. The -30/-50 limit is `data.max_length`, in tokens: the word
tokenizer splits off punctuation, as the paper's tokenized corpus did.
All five share the recipe (`RECIPE`): word vocabularies of at most 30,000
words per language as in the paper (on the Bible every training word
fits, 13.8k English and 26.0k French, so an unknown word is one that
training never saw), batches of 80 pairs (the paper's), the best
checkpoint on the dev loss, and otherwise the package's small-data recipe
(Adam, dropout, label smoothing, tied embeddings; docs/small_data.md)
rather than the paper's Adadelta from N(0, 0.01^2), which needs far more
updates than a CPU budget allows (`--set recipe=paper` restores it). The
two RNNs have the same sizes (`rnnencdec_tiny` and `rnnsearch_tiny`:
embeddings 128, hidden 256, maxout 128), Pervasive Attention is
`pervasive_attention_tiny` (64-dimensional embeddings, 8 layers, its
output tied to the target embedding) with length buckets of 5 tokens, as
in `compare_models.py`. The test set is translated with beam search
(`--beam-size`) and no unknown-word replacement (the paper has none).

Budget: every model makes the same number of optimizer steps (`--steps`,
default 1,000), of batches of the same size, whatever the machine's load;
in those steps a -30 model (16.8k training pairs, 209 batches an epoch)
runs more epochs than a -50 one (27.3k pairs, 337 batches). `StepBudget`
stops training at the budget and counts the steps of every session, so
a resumed run stops at the same step; the table shows the steps each
model got, from `steps.json` in its run directory.

Nothing is lost when the script is killed: run the same command again.
An unfinished model resumes training from its last backup (every
`training.backup_every_steps` steps), a finished one is only evaluated,
and one already translated is read back from `test_translations.json`.
A finished run is never trained further: a larger budget needs another
`--output-dir`.

Usage (JAX is the fastest backend on a CPU, benchmarks/README.md):

    KERAS_BACKEND=jax python examples/reproduce_bahdanau.py
    python examples/reproduce_bahdanau.py --models rnnencdec_50 \\
        rnnsearch_50 --steps 300 --output-dir runs/reproduce_300
    # On a GPU, e.g. the paper's sizes and a larger budget:
    python examples/reproduce_bahdanau.py --steps 20000 \\
        --output-dir runs/reproduce_paper_size \\
        --set rnnencdec_30:model.preset=rnnencdec_30 \\
        --set rnnsearch_30:model.preset=rnnsearch_30 \\
        --set rnnencdec_50:model.preset=rnnencdec_50 \\
        --set rnnsearch_50:model.preset=rnnsearch_50 \\
        --set pervasive_attention_50:model.preset=pervasive_attention_paper \\
        --set model.tie_embeddings=false

Time of the default run on 2 CPU cores, an ESTIMATE (no full run was
timed): 40-60 steps of each model, timed after compilation, with JAX on
2 cores shared with a test suite, took 1.3 s a step for RNNsearch-30 and
1.6 for RNNsearch-50 at a 1-minute load average of about 2, 2.1 for
RNNencdec-50 and 2.8 for RNNsearch-50 at about 3.5, and 7.4 for
Pervasive Attention (its previous, untied configuration) at about 2.5.
At a load of 2, 1,000 steps would take about 15 minutes (RNNencdec-30,
extrapolated), 21, 19, 26 and 100-125 (that Pervasive Attention), some 3
hours for the five models, plus a few minutes each for compilation and
evaluation: 3 to 3.5 hours in all, and up to 6 on busier cores.
"""

import json
import sys
import textwrap
import time
from pathlib import Path

from keras_bahdanau.startup import start_tensorflow

# Before Keras loads TensorFlow: without its C++ start-up log.
start_tensorflow()

import comparison
import keras

from keras_bahdanau import records
from keras_bahdanau import run_directory as rd
from keras_bahdanau.config import DEFAULTS
from keras_bahdanau.config import resolve_config
from keras_bahdanau.data import load_corpus
from keras_bahdanau.data import load_tokenizer
from keras_bahdanau.decoding import SearchConfig
from keras_bahdanau.metrics import corpus_scores
from keras_bahdanau.plotting import plot_attention
from keras_bahdanau.plotting import plot_bleu_by_length
from keras_bahdanau.presets import VOCABULARIES
from keras_bahdanau.reserved import UNK_ID
from keras_bahdanau.run_directory import training_max_length
from keras_bahdanau.trainer import train
from keras_bahdanau.translator import Translator

# Row name -> (the paper's label, the overrides that make the model).
_NAMES = {
    "rnnencdec": "RNNencdec",
    "rnnsearch": "RNNsearch",
    "pervasive_attention": "PervasiveAttention",
}
MODELS = {
    f"{architecture}_{length}": (
        f"{_NAMES[architecture]}-{length}",
        (
            *comparison.ARCHITECTURES[architecture],
            f"data.max_length={length}",
        ),
    )
    for architecture, length in (
        ("rnnencdec", 30),
        ("rnnsearch", 30),
        ("rnnencdec", 50),
        ("rnnsearch", 50),
        ("pervasive_attention", 50),
    )
}
# Bahdanau et al. (2015), Table 1: test BLEU on all sentences and on those
# without unknown words (WMT'14 English-French, news-test-2014).
PAPER_BLEU = {
    "rnnencdec_30": (13.93, 24.19),
    "rnnsearch_30": (21.50, 31.44),
    "rnnencdec_50": (17.82, 26.71),
    "rnnsearch_50": (26.75, 34.16),
}
# Shared by every model, before `--set`.
RECIPE = (
    "data.corpus=bible_en_fr",
    "tokenizer.kind=word",
    "tokenizer.source_vocabulary_size=30000",
    "tokenizer.target_vocabulary_size=30000",
    "training.batch_size=80",
    # The best checkpoint on the dev loss, as in the paper's recipe: no
    # translation of 300 dev verses after every epoch.
    "training.selection=loss",
    # A constant learning rate: epochs differ between -30 and -50 models,
    # a decay on epoch ends would too.
    "training.lr_decay=0",
    "evaluation.replace_unknown=false",
    # `train`'s own evaluation (results.json), a check on the first 100
    # dev and test verses; the table translates the test set itself.
    "evaluation.max_sentences=100",
)
# Models whose alignments make Figure 3, by preference.
ALIGNMENT_MODELS = ("rnnsearch_50", "rnnsearch_30")
DEFAULT_STEPS = 1000
TRANSLATIONS = "test_translations.json"
STEPS = "steps.json"  # `StepBudget`'s record, in each run directory

# Table 1's columns: (title, cell of a row).
COLUMNS = (
    ("model", lambda row: row["label"]),
    ("parameters", lambda row: f"{row['parameters']:,}"),
    ("steps", lambda row: f"{row['steps']:,}"),
    ("train min", lambda row: f"{row['train_seconds'] / 60:.1f}"),
    ("BLEU all", lambda row: f"{row['test']['bleu']:.2f}"),
    ("BLEU no UNK", lambda row: _score(row["no_unk"]["bleu"])),
    ("paper all", lambda row: _score(row["paper_bleu"]["all"])),
    ("paper no UNK", lambda row: _score(row["paper_bleu"]["no_unk"])),
    ("chrF all", lambda row: f"{row['test']['chrf']:.2f}"),
    ("ms/sent", lambda row: f"{row['decode_ms_per_sentence']:.1f}"),
)


def _score(value):
    return "-" if value is None else f"{value:.2f}"


class StepBudget(keras.callbacks.Callback):
    """Stops `fit` once the optimizer has made `steps` steps in all.

    The count starts at the optimizer's `iterations` when `fit` starts,
    i.e. after `keras.callbacks.BackupAndRestore` (which must come first
    in the callbacks) restored them from a backup, so the steps of every
    session of a resumed run add up to `steps`. `fit` stops after the
    batch that reaches the budget: the epoch ends there, with its dev
    loss and checkpoints. A run killed after its last step and before
    `fit` ended makes one step more when it resumes.

    Args:
        steps: int >= 1, the optimizer steps of the whole run.
        record: optional path of a JSON file, `{"steps": N}`, rewritten at
            each epoch end with the steps made so far (`trained_steps`
            reads it: the checkpoints hold no optimizer).
    """

    def __init__(self, steps, record=None):
        super().__init__()
        if not isinstance(steps, int) or steps < 1:
            raise ValueError(f"`steps` must be an int >= 1. Received: {steps}")
        self.steps = steps
        self.record = record
        self._done = 0

    def on_train_begin(self, logs=None):
        self._done = int(
            keras.ops.convert_to_numpy(self.model.optimizer.iterations)
        )

    def on_train_batch_end(self, batch, logs=None):
        # One step per batch: `train` compiles with steps_per_execution=1.
        self._done += 1
        if self._done >= self.steps:
            self.model.stop_training = True

    def on_epoch_end(self, epoch, logs=None):
        # Before the backup that marks the epoch done (`train`'s callbacks
        # come first): a resumed run rewrites it.
        if self.record is not None:
            rd.atomic_write_text(self.record, json.dumps({"steps": self._done}))


def trained_steps(run_dir):
    """The optimizer steps of a run's last epoch end, every session's."""
    record = Path(run_dir) / STEPS
    if record.is_file():
        return json.loads(record.read_text(encoding="utf-8"))["steps"]
    # A run of a release whose checkpoints held the optimizer's state.
    model = keras.saving.load_model(run_dir / "last.keras", safe_mode=True)
    return int(keras.ops.convert_to_numpy(model.optimizer.iterations))


def known_word_pairs(source_tokenizer, target_tokenizer, pairs):
    """Which pairs have no unknown word in the source or the target.

    A word is unknown when the tokenizer maps it to `[UNK]` (outside the
    shortlist): Table 1's "No UNK" column scores only "the sentences
    without any unknown words in themselves and in the reference
    translations" (Bahdanau et al., 2015, Table 1).

    Args:
        source_tokenizer: the run's source `Tokenizer`.
        target_tokenizer: the run's target `Tokenizer`.
        pairs: list of `(source, reference)` strings.

    Returns:
        A list of bool, one per pair: True when neither side has `[UNK]`.
    """
    known = [True] * len(pairs)
    for side, tokenizer in enumerate((source_tokenizer, target_tokenizer)):
        rows = tokenizer.tokenize([pair[side] for pair in pairs]).to_list()
        known = [
            k and UNK_ID not in row for k, row in zip(known, rows, strict=True)
        ]
    return known


def parse_args(argv=None):
    parser = comparison.shared_parser(
        __doc__, "runs/reproduce_bahdanau", "model", MODELS, buckets=(5, 9)
    )
    parser.add_argument(
        "--steps",
        type=int,
        default=DEFAULT_STEPS,
        help="optimizer steps (batches of 80 pairs) of every model "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--beam-size",
        type=int,
        default=DEFAULTS["evaluation"]["beam_size"],
        help="beam of the test translations (default: %(default)s)",
    )
    parser.add_argument(
        "--max-sentences",
        type=int,
        default=0,
        help="score only the first N test verses (default: 0, all; "
        "results.json of each run: evaluation.max_sentences, 100)",
    )
    parser.add_argument(
        "--alignments",
        type=int,
        default=4,
        help="test verses whose alignments are plotted (default: %(default)s)",
    )
    args = parser.parse_args(argv)
    comparison.check_shared_arguments(parser, args, "model")
    comparison.check_at_least(parser, args, 1, ("steps", "beam_size"))
    comparison.check_at_least(parser, args, 0, ("max_sentences", "alignments"))
    return args


def overrides_for(name, args):
    """The `section.key=value` overrides of one model's run, in order."""
    return [
        *MODELS[name][1],
        *RECIPE,
        # Upper bounds that `StepBudget` reaches first (an epoch has at
        # least one step): neither the epochs nor early stopping end a
        # run before its budget.
        f"training.epochs={args.steps}",
        f"training.patience={args.steps}",
        *comparison.scoped_overrides(name, args.set, MODELS, "model"),
        f"run_dir={Path(args.output_dir) / name}",
    ]


def scored_pairs(config, args):
    """The test pairs of a run's corpus that the table scores."""
    return load_corpus(config["data"])["test"][: args.max_sentences or None]


def translations(config, pairs, args):
    """`(hypotheses, seconds)` of a run: trained and translated if needed.

    `test_translations.json` in the run directory keeps them, with the
    config, sources and beam they belong to; when all three match, the
    run is finished and translated: nothing runs again.
    """
    run_dir = Path(config["run_dir"])
    path = run_dir / TRANSLATIONS
    sources = [source for source, _ in pairs]
    key = {
        "config": json.loads(json.dumps(config)),
        "beam_size": args.beam_size,
        "sources": sources,
    }
    if path.is_file():
        saved = json.loads(path.read_text(encoding="utf-8"))
        if {name: saved.get(name) for name in key} == key:
            print(f"{run_dir}: trained and translated; read {path}.")
            return saved["hypotheses"], saved["decode_seconds"]
    # Trains (or resumes, or finds finished), then writes results.json.
    train(config, callbacks=[StepBudget(args.steps, run_dir / STEPS)])
    hypotheses, seconds = comparison.translate_timed(
        run_dir, sources, args.beam_size
    )
    rd.atomic_write_text(
        path,
        json.dumps(
            {**key, "hypotheses": hypotheses, "decode_seconds": seconds},
            indent=1,
        ),
    )
    return hypotheses, seconds


def reproduce(name, args):
    """One row of the table: trains or resumes the model, then scores it."""
    config = resolve_config(None, overrides_for(name, args))
    run_dir = Path(config["run_dir"])
    pairs = scored_pairs(config, args)
    hypotheses, seconds = translations(config, pairs, args)
    known = known_word_pairs(
        load_tokenizer(run_dir / VOCABULARIES["source"]),
        load_tokenizer(run_dir / VOCABULARIES["target"]),
        pairs,
    )
    no_unk = {"sentences": sum(known), "bleu": None, "chrf": None}
    if any(known):
        scores = corpus_scores(
            [h for h, k in zip(hypotheses, known, strict=True) if k],
            [t for (_, t), k in zip(pairs, known, strict=True) if k],
        )
        no_unk.update(bleu=scores["bleu"], chrf=scores["chrf"])
    paper = PAPER_BLEU.get(name, (None, None))
    return {
        "model": name,
        "label": MODELS[name][0],
        "max_length": training_max_length(config),
        "steps": trained_steps(run_dir),
        "batch_size": config["training"]["batch_size"],
        "beam_size": args.beam_size,
        **comparison.scores_row(
            run_dir,
            pairs,
            hypotheses,
            seconds,
            args.bucket_width,
            args.num_buckets,
        ),
        "no_unk": no_unk,
        "paper_bleu": {"all": paper[0], "no_unk": paper[1]},
        "corpus": corpus_name(config["data"]),
        "train_minutes": None,  # Transcribed records give minutes only.
    }


def corpus_name(data):
    """The corpus of a `[data]` table: its name, or its files' folder."""
    if data["corpus"] == "files":
        return Path(data["source_file"]).parent.name
    return data["corpus"]


def figure2(rows, path, args):
    """BLEU against source length, one curve per row (Figure 2)."""
    curves = {
        row["label"]: (
            [
                bucket["max_length"]
                or bucket["min_length"] + args.bucket_width - 1
                for bucket in row["test_bleu_by_length"]
            ],
            [bucket["bleu"] for bucket in row["test_bleu_by_length"]],
        )
        for row in rows
    }
    plot_bleu_by_length(
        curves,
        path,
        title=f"Test BLEU by source length, {args.steps:,} steps per model",
    )


def figure3(rows, args):
    """RNNsearch's alignments for long test verses (Figure 3).

    The model is the first of `ALIGNMENT_MODELS` among `rows`; the verses
    are the `args.alignments` with the most source tokens among those the
    model could have been trained on (at most its `data.max_length`).

    Returns:
        A list of dicts, one per figure: its `path`, the `model`, the
        verse's `test_index`, `source`, `reference` and `translation`.
    """
    row = next(
        (r for name in ALIGNMENT_MODELS for r in rows if r["model"] == name),
        None,
    )
    if row is None or not args.alignments:
        return []
    pairs = scored_pairs(rd.read_training_config(row["run_dir"]), args)
    translator = Translator.from_preset(row["run_dir"], max_source_length=None)
    lengths = (
        translator.source_tokenizer.tokenize([source for source, _ in pairs])
        .row_lengths()
        .numpy()
    )
    longest = sorted(
        (i for i, n in enumerate(lengths) if n <= row["max_length"]),
        key=lambda i: -lengths[i],
    )[: args.alignments]
    translated = translator.translate(
        [pairs[i][0] for i in longest],
        SearchConfig(beam_size=args.beam_size),
        return_attention=True,
    )
    figures = []
    for number, (i, translation) in enumerate(
        zip(longest, translated, strict=True), start=1
    ):
        path = Path(args.output_dir) / f"figure3_alignment_{number:02d}.png"
        plot_attention(
            translation.attention,
            translation.source_tokens,
            translation.target_tokens,
            path,
            title=f"{row['label']}, test verse {i + 1}",
        )
        figures.append(
            {
                "path": str(path),
                "model": row["model"],
                "test_index": i,
                "source": pairs[i][0],
                "reference": pairs[i][1],
                "translation": translation.text,
            }
        )
    return figures


def format_table(rows, steps, width, count):
    """Table 1 and the BLEU by length as plain text."""
    first = rows[0]
    labels = comparison.bucket_labels(width, count)
    table = comparison.render_table(
        [title for title, _ in COLUMNS],
        [[cell(row) for _, cell in COLUMNS] for row in rows],
    )
    no_unk = sorted({row["no_unk"]["sentences"] for row in rows})
    same_steps = all(row["steps"] == steps for row in rows)
    notes = (
        f"Test: {first['test']['sentences']} sentences, "
        + (
            f"{no_unk[0]}"
            if len(no_unk) == 1
            else "per model " + "/".join(map(str, no_unk))
        )
        + " of them without an unknown word in source and reference (No"
        f" UNK); beam {first['beam_size']}, {first['backend']} backend. "
        f"Budget: {steps:,} steps of {first['batch_size']} pairs per model"
        + (
            "."
            if same_steps
            else "; the runs with other steps were finished with another "
            "--steps in this --output-dir."
        )
        + " Paper: Bahdanau et al. (2015), Table 1, WMT'14 English-French, "
        "1000 hidden units, about 5 days of training each: compare the "
        "order of the rows, not the numbers."
    )
    table += [
        "",
        *textwrap.wrap(notes, 79),
        f"BLEU signature: {first['bleu_signature']}",
        "",
    ]
    table += comparison.render_table(
        ["test BLEU by source length"] + labels,
        [[row["label"]] + comparison.bucket_cells(row, labels) for row in rows],
    )
    table += [
        "",
        "Source length in words; "
        + comparison.bucket_counts(first, labels)
        + ".",
    ]
    return "\n".join(table)


def main(argv=None):
    recording = records.start()
    args = parse_args(argv)
    started = time.perf_counter()
    output_dir = Path(args.output_dir)
    rows = comparison.collect_rows(
        args.models, lambda name: reproduce(name, args), "reproduce_bahdanau.py"
    )
    figure2(rows, output_dir / "figure2_bleu_by_length.png", args)
    alignments = figure3(rows, args)
    table = format_table(rows, args.steps, args.bucket_width, args.num_buckets)
    rd.atomic_write_text(output_dir / "table.txt", table + "\n")
    figures = {"steps": args.steps, "rows": rows, "figure3": alignments}
    rd.atomic_write_text(
        output_dir / "table.json", json.dumps(figures, indent=2)
    )
    comparison.report(rows, table, args.json, started, "run")
    if args.record:
        records.write_record(
            args.record,
            "reproduce_bahdanau",
            rows,
            recording,
            config={
                name: resolve_config(None, overrides_for(name, args))
                for name in args.models
            },
            argv=[__file__, *(sys.argv[1:] if argv is None else argv)],
            steps=args.steps,
            figure3=alignments,
        )
    return rows


if __name__ == "__main__":
    main()
