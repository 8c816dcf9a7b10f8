"""`keras-bahdanau demo`: the README's main job, end to end.

Trains a small RNNsearch on Ding de-en with `examples/ding_de_en.toml`'s
settings (built in below, so the command needs no checkout), prints dev and
test BLEU, translates a few test sentences, draws their alignments like the
paper's Figure 3, and exports a SavedModel for TF Serving. Run it again
after a kill and it resumes training where it stopped.
"""

from pathlib import Path

from keras_bahdanau import run_directory as rd

# The same settings as examples/ding_de_en.toml (a test keeps them equal).
DEMO_CONFIG = {
    "run_dir": "runs/ding_de_en",
    "recipe": "small_data",
    "data": {"corpus": "ding_de_en", "max_length": 50},
    "tokenizer": {
        "kind": "unigram",
        "source_vocabulary_size": 4000,
        "target_vocabulary_size": 4000,
    },
    "model": {
        "architecture": "rnnsearch",
        "preset": "rnnsearch_tiny",
        "dropout": 0.2,
        "embedding_dropout": 0.1,
        "word_dropout": 0.1,
        "hidden_dropout": 0.1,
        "tie_embeddings": True,
        "initialization": "glorot",
    },
    "training": {
        "optimizer": "adam",
        "learning_rate": 0.002,
        "label_smoothing": 0.1,
        "epochs": 8,
        "batch_size": 64,
        "selection": "bleu",
        "patience": 3,
        "backup_every_steps": 50,
    },
    "evaluation": {"beam_size": 5, "selection_sentences": 300},
}
NUM_EXAMPLES = 5


def demo_config(overrides=()):
    """The resolved demo config, with `section.key=value` overrides."""
    from keras_bahdanau.train import resolve_config

    settings = [
        f"{section}.{key}={value}"
        for section, values in DEMO_CONFIG.items()
        if isinstance(values, dict)
        for key, value in values.items()
    ]
    top = [f"{key}={DEMO_CONFIG[key]}" for key in ("run_dir", "recipe")]
    return resolve_config(None, [*top, *settings, *overrides])


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
    from keras_bahdanau import train as training
    from keras_bahdanau.export import export_saved_model
    from keras_bahdanau.plotting import plot_attention
    from keras_bahdanau.translator import Translator

    try:
        config = demo_config(args.set)
        run_dir = Path(config["run_dir"])
        if (run_dir / rd.RESULTS).is_file():
            print(f"{run_dir} is already trained; reusing it.")
            print((run_dir / rd.RESULTS).read_text())
        else:
            training.train(config)
    except training.ConfigError as error:
        raise SystemExit(f"keras-bahdanau demo: {error}") from None

    test_pairs = training.load_corpus(config["data"])["test"][:NUM_EXAMPLES]
    translator = Translator.from_run_dir(run_dir)
    translations = translator.translate(
        [source for source, _ in test_pairs],
        beam_size=config["evaluation"]["beam_size"],
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
