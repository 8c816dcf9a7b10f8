"""Decoding throughput of greedy and beam search on the current backend.

Builds a model from a preset with random weights and a small vocabulary,
and times the compiled search of `keras_bahdanau.decoding.compile_search`
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

FLOPs: for RNNsearch, `flop_per_word` counts the matrix products of the
search per target word it outputs (forward only, 2 FLOPs per
multiply-add): the encoder once per sentence, then `beam_size` hypotheses
through every decoder step (formula in `search_flop_per_sentence`);
`achieved_tflops` is that times the words per second, and `utilisation`
divides it by `--peak-tflops`. Beam bookkeeping (top-k over the beam
times the vocabulary) is not counted. Null for RNNencdec presets.

Memory: `peak_memory_mb` is the framework's GPU counter on a GPU, else
the peak RSS of the process (imports included), so on a CPU it is the
peak over all configurations run so far in this process.

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
from _memory import keras_device_and_peak_memory

from keras_bahdanau.decoding import SearchConfig
from keras_bahdanau.decoding import compile_search
from keras_bahdanau.models import RNNEncDec
from keras_bahdanau.models import RNNSearch
from keras_bahdanau.reserved import EOS_ID
from keras_bahdanau.reserved import NUM_RESERVED_IDS

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
    parser.add_argument(
        "--precision",
        choices=("float32", "mixed_bfloat16", "mixed_float16"),
        default="float32",
        help="Keras dtype policy of the model",
    )
    parser.add_argument(
        "--peak-tflops",
        type=float,
        help="the device's peak TFLOP/s, to report the utilisation",
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--allow-eos", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def search_flop_per_sentence(model, source_length, steps, beam_size):
    """Matrix-product FLOPs of one sentence's search (RNNsearch; else None).

    With m = embedding_dim, n = hidden_dim, a = attention_dim, l =
    maxout_dim, V = target vocabulary and Tx the source length:

        encoder, once:   Tx (12 n (m + n)      bidirectional GRU
                            + 4 n a            keys U_a h_j
                            + 12 n^2)          [C_z; C_r; C] h_j
                         + 2 n^2               s_0
        per hypothesis
        and step:        2 n a + 2 Tx a        W_a s, v_a^T tanh(...)
                         + 10 Tx n             alpha (C h) and alpha h
                         + 6 n (m + n)         [W; U] products of the GRU
                         + 4 l (3 n + m)       maxout readout
                         + 2 l V               output projection
    """
    if not isinstance(model, RNNSearch):
        return None
    m, n, l = model.embedding_dim, model.hidden_dim, model.maxout_dim  # noqa: E741
    a = model.attention_dim or n
    vocabulary, tx = model.target_vocabulary_size, source_length
    encoder = tx * (12 * n * (m + n) + 4 * n * a + 12 * n * n) + 2 * n * n
    step = (
        2 * n * a
        + 2 * tx * a
        + 10 * tx * n
        + 6 * n * (m + n)
        + 4 * l * (3 * n + m)
        + 2 * l * vocabulary
    )
    return encoder + beam_size * steps * step


def build_model(args):
    keras.utils.set_random_seed(args.seed)
    keras.mixed_precision.set_global_policy(args.precision)
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
        model, SearchConfig(beam_size=beam_size, max_length=args.max_length)
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
    # Every hypothesis runs until the longest output of the batch ends.
    steps = int(np.max(result.lengths))
    flop = search_flop_per_sentence(model, args.source_length, steps, beam_size)
    tflops = None if flop is None else flop * batch_size / seconds / 1e12
    device, peak_memory = keras_device_and_peak_memory()
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
        "precision": args.precision,
        "device": device,
        "decode_steps": steps,
        "flop_per_word": (
            None if flop is None else round(flop * batch_size / words)
        ),
        "achieved_tflops": None if tflops is None else round(tflops, 4),
        "peak_tflops": args.peak_tflops,
        "utilisation": (
            round(tflops / args.peak_tflops, 4)
            if tflops is not None and args.peak_tflops
            else None
        ),
        "peak_memory_mb": round(peak_memory, 1),
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
