"""Chooses the GNMT length penalty of trained runs on their dev split.

    python examples/tune_length_penalty.py runs/ding_de_en \
        runs/ding_de_en_pervasive --alphas 0 0.2 0.4 0.6 0.8 1.0 \
        --record results/length_penalty_ding_de_en.json

Translates each run's dev split (never its test split) with beam search
at every `alpha` of `--alphas` and prints dev BLEU, chrF and the
hypotheses' length relative to the references'. The default of
`evaluation.length_penalty` per architecture
(`keras_bahdanau.config.LENGTH_PENALTIES`) is the alpha with the best dev
BLEU, measured with this script (docs/results.md).

Reference:
    Wu et al., 2016, "Google's Neural Machine Translation System",
    arXiv:1609.08144, §7: `lp(Y) = (5 + |Y|)^alpha / 6^alpha`.
"""

import argparse

from keras_bahdanau.startup import start_tensorflow

# Before Keras loads TensorFlow: without its C++ start-up log.
start_tensorflow()

from keras_bahdanau import records
from keras_bahdanau import run_directory
from keras_bahdanau.data import load_corpus
from keras_bahdanau.decoding import SearchConfig
from keras_bahdanau.evaluation import evaluate
from keras_bahdanau.translator import Translator


def tune(run_dir, alphas, beam_size, max_sentences):
    """Dev scores of `run_dir` per alpha: a list of dicts."""
    config = run_directory.read_training_config(run_dir)
    pairs = load_corpus(config["data"])["dev"][: max_sentences or None]
    sources = [source for source, _ in pairs]
    references = [target for _, target in pairs]
    # Whole sentences, as `evaluate_run` translates dev and test.
    translator = Translator.from_preset(run_dir, max_source_length=None)
    reference_words = sum(len(reference.split()) for reference in references)
    rows = []
    for alpha in alphas:
        result = evaluate(
            translator,
            sources,
            references,
            SearchConfig(beam_size=beam_size, length_penalty=alpha),
            batch_size=64,
        )
        words = sum(
            len(hypothesis.split()) for hypothesis in result["hypotheses"]
        )
        rows.append(
            {
                "alpha": alpha,
                "bleu": result["bleu"],
                "chrf": result["chrf"],
                "length_ratio": words / reference_words,
            }
        )
        print(
            f"{run_dir}  alpha {alpha:.2f}  dev BLEU {result['bleu']:.2f}  "
            f"chrF {result['chrf']:.2f}  "
            f"length ratio {rows[-1]['length_ratio']:.3f}"
        )
    return {
        "run_dir": str(run_dir),
        "architecture": config["model"]["architecture"],
        "sentences": len(pairs),
        "beam_size": beam_size,
        "bleu_signature": result["bleu_signature"],
        "alphas": rows,
        "best_alpha": max(rows, key=lambda row: row["bleu"])["alpha"],
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    parser.add_argument(
        "--alphas",
        type=float,
        nargs="+",
        default=[0.0, 0.2, 0.4, 0.6, 0.8, 1.0],
    )
    parser.add_argument("--beam-size", type=int, default=5)
    parser.add_argument(
        "--max-sentences", type=int, default=0, help="dev sentences (0: all)"
    )
    records.add_record_argument(parser)
    args = parser.parse_args(argv)
    started = records.start()
    runs = [
        tune(run_dir, args.alphas, args.beam_size, args.max_sentences)
        for run_dir in args.run_dirs
    ]
    for run in runs:
        print(
            f"{run['run_dir']} ({run['architecture']}): "
            f"best alpha {run['best_alpha']}"
        )
    if args.record:
        # One row per measurement: per run and alpha.
        rows = [
            {**{k: v for k, v in run.items() if k != "alphas"}, **alpha}
            for run in runs
            for alpha in run["alphas"]
        ]
        records.write_record(args.record, "length_penalty", rows, started)
    return runs


if __name__ == "__main__":
    main()
