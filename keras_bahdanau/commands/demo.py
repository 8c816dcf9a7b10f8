"""`keras-bahdanau demo`: the README's main job, end to end.

Trains a small RNNsearch on Ding de-en with the built-in config
`ding_de_en` (keras_bahdanau/configs/ding_de_en.toml), prints dev and
test BLEU, translates a few test sentences, draws their alignments like the
paper's Figure 3, and exports a SavedModel for TF Serving. Run it again
after a kill and it resumes training where it stopped.
"""

from pathlib import Path

from keras_bahdanau import records
from keras_bahdanau import run_directory as rd
from keras_bahdanau.config import ConfigError
from keras_bahdanau.config import add_override_argument
from keras_bahdanau.config import resolve_config
from keras_bahdanau.evaluation import translate_examples
from keras_bahdanau.export import export_saved_model
from keras_bahdanau.trainer import train

NUM_EXAMPLES = 5


def demo_config(overrides=()):
    """The built-in config `ding_de_en`, with `section.key=value` overrides."""
    return resolve_config("ding_de_en", overrides)


def add_arguments(parser):
    add_override_argument(
        parser, "override a setting of the built-in demo config"
    )
    parser.add_argument(
        "--saved-model",
        default="saved_models/ding_de_en",
        help="where the SavedModel goes (a new version each run)",
    )
    records.add_record_argument(parser)


def run(args):
    started = records.start()
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

    plots = run_dir / "attention"
    examples = translate_examples(run_dir, config, NUM_EXAMPLES, plots)
    print("\nTranslations of test sentences:")
    for example in examples:
        print(f"  source:      {example['source']}")
        print(f"  reference:   {example['reference']}")
        print(f"  translation: {example['translation']}\n")
    print(f"Alignment plots: {plots}/test_*.png")
    version = export_saved_model(run_dir, args.saved_model)
    print(f"SavedModel for TF Serving: {version}")
    if args.record:
        row = {
            **records.run_figures(run_dir),
            "translations": examples,
            **records.process_usage(started),
        }
        records.write_record(args.record, "demo", row, started, config)
    return 0
