"""`keras-bahdanau demo`: the README's main job, end to end.

Trains a small RNNsearch on Ding de-en with `examples/ding_de_en.toml`'s
settings (built in below, so the command needs no checkout), prints dev and
test BLEU, translates a few test sentences, draws their alignments like the
paper's Figure 3, and exports a SavedModel for TF Serving. Run it again
after a kill and it resumes training where it stopped.
"""

from pathlib import Path

from keras_bahdanau import run_directory as rd
from keras_bahdanau.commands.train import train
from keras_bahdanau.config import ConfigError
from keras_bahdanau.config import resolve_config
from keras_bahdanau.data import load_corpus
from keras_bahdanau.decoding import SearchConfig
from keras_bahdanau.export import export_saved_model
from keras_bahdanau.plotting import plot_attention
from keras_bahdanau.translator import Translator

# The settings of examples/ding_de_en.toml (a test keeps them equal), as
# `resolve_config` overrides.
DEMO_CONFIG = (
    "run_dir=runs/ding_de_en",
    "recipe=small_data",
    "data.corpus=ding_de_en",
    "data.max_length=50",
    "tokenizer.kind=unigram",
    "tokenizer.source_vocabulary_size=4000",
    "tokenizer.target_vocabulary_size=4000",
    "model.architecture=rnnsearch",
    "model.preset=rnnsearch_tiny",
    "model.dropout=0.2",
    "model.embedding_dropout=0.1",
    "model.word_dropout=0.0",
    "model.hidden_dropout=0.1",
    "model.tie_embeddings=true",
    "model.initialization=glorot",
    "training.optimizer=adam",
    "training.learning_rate=0.002",
    "training.label_smoothing=0.1",
    "training.epochs=10",
    "training.max_minutes=14",
    "training.batch_size=32",
    "training.selection=bleu",
    "training.patience=3",
    "training.backup_every_steps=50",
    "evaluation.beam_size=5",
    "evaluation.selection_sentences=300",
)
NUM_EXAMPLES = 5


def demo_config(overrides=()):
    """The resolved demo config, with `section.key=value` overrides."""
    return resolve_config(None, [*DEMO_CONFIG, *overrides])


def add_arguments(parser):
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override a setting of the built-in demo config",
    )
    parser.add_argument(
        "--saved-model",
        default="saved_models/ding_de_en",
        help="where the SavedModel goes (a new version each run)",
    )


def run(args):
    try:
        config = demo_config(args.set)
        run_dir = Path(config["run_dir"])
        if (run_dir / rd.RESULTS).is_file():
            print(f"{run_dir} is already trained; reusing it.")
            print((run_dir / rd.RESULTS).read_text())
        else:
            train(config)
    except ConfigError as error:
        raise SystemExit(f"keras-bahdanau demo: {error}") from None

    test_pairs = load_corpus(config["data"])["test"][:NUM_EXAMPLES]
    translations = Translator.from_run_dir(run_dir).translate(
        [source for source, _ in test_pairs],
        SearchConfig(beam_size=config["evaluation"]["beam_size"]),
        return_attention=True,
    )
    plots = run_dir / "attention"
    plots.mkdir(exist_ok=True)
    print("\nTranslations of test sentences:")
    for i, ((source, reference), translation) in enumerate(
        zip(test_pairs, translations, strict=True)
    ):
        print(f"  source:      {source}\n  reference:   {reference}")
        print(f"  translation: {translation.text}\n")
        plot_attention(
            translation.attention,
            translation.source_tokens,
            translation.target_tokens,
            path=plots / f"test_{i}.png",
        )
    print(f"Alignment plots: {plots}/test_*.png")
    version = export_saved_model(run_dir, args.saved_model)
    print(f"SavedModel for TF Serving: {version}")
    return 0
