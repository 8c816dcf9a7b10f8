"""Decoding throughput of greedy and beam search on the current backend.

Builds a model from a preset with random weights and a small vocabulary,
and times the compiled search of `keras_bahdanau.translator.compile_search`
(the one `Translator` uses) on random source ids of a fixed length, for
greedy search and beam search at several batch sizes. Prints one JSON line
per configuration.

Every configuration runs once untimed first (warm-up: XLA compilation on
JAX and TensorFlow, reported as `warmup_s`), then `--repeats` timed runs;
`seconds_per_batch` is their median.

EOS: a random model says EOS whenever it happens to be likely, which
would make the number of decoding steps arbitrary. By default the
output bias of EOS is set to -1e4, so no hypothesis ends before
`--max-length` tokens: EOS comes only at the last step, where the search
forces it, and every configuration runs exactly `--max-length` steps.
With `--allow-eos` the model keeps its random EOS. Either way the words
per second count the target words actually generated (EOS not counted).

Usage:

```
KERAS_BACKEND=jax python benchmarks/decode_throughput.py
KERAS_BACKEND=torch python benchmarks/decode_throughput.py \\
    --batch-sizes 1 16 64 --beam-sizes 1 5 12
```
"""

import argparse
import json
import statistics
import time

import keras
import numpy as np

from keras_bahdanau.models import RNNEncDec
from keras_bahdanau.models import RNNSearch
from keras_bahdanau.models.translation_model import EOS_ID
from keras_bahdanau.models.translation_model import NUM_RESERVED_IDS
from keras_bahdanau.translator import compile_search

MODELS = {
    **dict.fromkeys(RNNSearch.presets, RNNSearch),
    **dict.fromkeys(RNNEncDec.presets, RNNEncDec),
}


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--preset", choices=sorted(MODELS), default="rnnsearch_tiny"
    )
    parser.add_argument("--vocabulary-size", type=int, default=1000)
    parser.add_argument("--source-length", type=int, default=20)
    parser.add_argument(
        "--max-length",
        type=int,
        default=30,
        help="target tokens per hypothesis (EOS included): decode steps",
    )
    parser.add_argument(
        "--batch-sizes", type=int, nargs="+", default=[1, 8, 32]
    )
    parser.add_argument(
        "--beam-sizes",
        type=int,
        nargs="+",
        default=[1, 5],
        help="1 is greedy search",
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--allow-eos", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def build_model(args):
    keras.utils.set_random_seed(args.seed)
    model = MODELS[args.preset].from_preset(
        args.preset,
        source_vocabulary_size=args.vocabulary_size,
        target_vocabulary_size=args.vocabulary_size,
    )
    if not args.allow_eos:
        bias = model.output_projection.bias
        values = keras.ops.convert_to_numpy(bias).copy()
        values[EOS_ID] = -1e4
        bias.assign(values)
    return model


def benchmark(model, args, beam_size, batch_size):
    search = compile_search(
        model, beam_size=beam_size, max_length=args.max_length
    )
    source_ids = np.random.default_rng(args.seed).integers(
        NUM_RESERVED_IDS,
        args.vocabulary_size,
        size=(batch_size, args.source_length),
        dtype="int32",
    )
    start = time.perf_counter()
    search(source_ids)  # Warm-up: compiles on JAX and TensorFlow.
    warmup = time.perf_counter() - start
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        result = search(source_ids)  # Returns NumPy: the work is done.
        times.append(time.perf_counter() - start)
    seconds = statistics.median(times)
    words = int((result.lengths[:, 0] - 1).sum())  # EOS not counted.
    return {
        "backend": keras.backend.backend(),
        "preset": args.preset,
        "vocabulary_size": args.vocabulary_size,
        "source_length": args.source_length,
        "max_length": args.max_length,
        "eos": "allowed" if args.allow_eos else "only at max_length",
        "search": "greedy" if beam_size == 1 else "beam",
        "beam_size": beam_size,
        "batch_size": batch_size,
        "repeats": args.repeats,
        "seconds_per_batch": round(seconds, 4),
        "warmup_s": round(warmup, 2),
        "sentences_per_s": round(batch_size / seconds, 2),
        "target_words_per_sentence": round(words / batch_size, 2),
        "target_words_per_s": round(words / seconds, 1),
    }


def main(argv=None):
    args = parse_arguments(argv)
    model = build_model(args)
    for beam_size in args.beam_sizes:
        for batch_size in args.batch_sizes:
            print(
                json.dumps(benchmark(model, args, beam_size, batch_size)),
                flush=True,
            )


if __name__ == "__main__":
    main()
