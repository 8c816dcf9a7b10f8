"""Decoding throughput of greedy and beam search on the current backend.

Builds a model from a preset (RNNsearch, RNNencdec or Pervasive
Attention) with random weights and a small vocabulary, and times the
compiled search of `keras_bahdanau.decoding.compile_search` (the one
`Translator` uses) on random source ids of a fixed length, for greedy
search and beam search at several batch sizes. Prints one JSON line per
configuration.

Every configuration runs once untimed first (warm-up: XLA compilation on
JAX and TensorFlow, reported as `warmup_s`), then `--repeats` timed runs;
`seconds_per_batch` is their median (seconds to the microsecond: tiny
models decode in milliseconds).

Reference (RNNsearch presets, unless `--no-reference`): in the same
process, a plain-PyTorch batched decoder of the same equations and search
rules (`_torch_decoder.TorchRNNSearchDecoder`: float32, CPU,
`torch.inference_mode()`), loaded with the same weights (copied from the
Keras model), decodes the same sources. Each timed run of ours is
followed by one of the reference, so both see the same state of a noisy
machine; `ratio_vs_pytorch` is our target words per second over the
reference's (above 1: ours is faster), `round_ratios` the same per pair
of runs. `pytorch_same_tokens` is the fraction of sentences whose best
output is the same token for token, `pytorch_max_score_difference` the
largest difference of their best scores (`log P(Y|X)`): a random model
of a preset is close to uniform, so two hypotheses often score the same
to within float32 rounding and either may come out first (then the
tokens differ while the scores agree); tests/benchmarks checks exact
token equality on models whose candidates are far apart.

Comparison (`--compare-with PRESET`): a second model of another preset
(e.g. RNNsearch next to Pervasive Attention), with the same vocabulary and
the same EOS rule, decodes the same sources in alternation with ours;
`time_ratio_vs_compare` is our seconds per batch over its, and both
parameter counts are printed (`params`, `compare_params`).

EOS: a random model says EOS whenever it happens to be likely, which
would make the number of decoding steps arbitrary. By default the
output bias of EOS is set to `EOS_BIAS` (-50), so no hypothesis ends
before `--max-length` tokens: EOS comes only at the last step, where the
search forces it, and every configuration runs exactly `--max-length`
steps. (A bias of -1e4 would do that too, but the forced EOS would then
put every final score near -1e4, where float32 resolves only 1e-3: the
beam's final ranking, and so `pytorch_same_tokens`, would be decided by
rounding.)
With `--allow-eos` the model keeps its random EOS. Either way the words
per second count the target words actually generated (EOS not counted).

FLOPs: for RNNsearch and Pervasive Attention, `flop_per_word` counts
the matrix products of the search per target word it outputs (forward
only, 2 FLOPs per multiply-add): the encoder once per sentence, then
`beam_size` hypotheses through every decoder step (formulas in
`search_flop_per_sentence`); `achieved_tflops` is that times the words
per second, and `utilisation` divides it by `--peak-tflops`. Beam
bookkeeping (top-k over the beam times the vocabulary) is not counted.
Null for RNNencdec.

Profile (`--profile`, torch backend): one more run of each search (ours,
the reference's) per configuration under `torch.profiler`, printed to
stderr: its op time (self CPU time, summed over threads) against its
wall time, and its 15 costliest ops. Where the two searches have the
same op time, the difference in wall time is spent outside the ops.

Memory: `peak_memory_mb` is the framework's GPU counter on a GPU, else
the peak RSS of the process (imports included, torch's too when the
reference runs), so on a CPU it is the peak over all configurations run
so far in this process.

Usage:

```
KERAS_BACKEND=jax python benchmarks/decode_throughput.py \\
    --preset rnnsearch_small --vocabulary-size 8000 --source-length 20 \\
    --max-length 20 --batch-sizes 1 8 64 --beam-sizes 1 5 --repeats 3
KERAS_BACKEND=jax python benchmarks/decode_throughput.py \\
    --preset pervasive_attention_paper --compare-with rnnsearch_small \\
    --vocabulary-size 8000 --batch-sizes 8 --beam-sizes 1 5
```
"""

import argparse
import json
import os
import statistics
import sys
import time

from keras_bahdanau.startup import start_tensorflow

# Before Keras loads TensorFlow: without its C++ start-up log.
start_tensorflow(torch_first=True)

import keras
import numpy as np
from _memory import keras_device_and_peak_memory

from keras_bahdanau import records
from keras_bahdanau.decoding import SearchConfig
from keras_bahdanau.decoding import compile_search
from keras_bahdanau.models import PervasiveAttention
from keras_bahdanau.models import RNNEncDec
from keras_bahdanau.models import RNNSearch
from keras_bahdanau.reserved import EOS_ID
from keras_bahdanau.reserved import NUM_RESERVED_IDS

# EOS's output bias: a random model then never says EOS before the last
# step, where the search forces it (see the module docstring).
EOS_BIAS = -50.0
MODELS = {
    **dict.fromkeys(RNNSearch.presets, RNNSearch),
    **dict.fromkeys(RNNEncDec.presets, RNNEncDec),
    **dict.fromkeys(PervasiveAttention.presets, PervasiveAttention),
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
        "--batch-sizes", type=int, nargs="+", default=[1, 8, 64]
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
    parser.add_argument(
        "--no-reference",
        action="store_true",
        help="skip the plain-PyTorch decoder (RNNsearch presets only)",
    )
    parser.add_argument(
        "--torch-threads",
        type=int,
        help="torch.set_num_threads for the reference and the torch "
        "backend (default: torch's)",
    )
    parser.add_argument(
        "--compare-with",
        choices=sorted(MODELS),
        help="another preset, timed on the same sources in alternation",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="torch backend: after each configuration, one more run of "
        "each search (ours, the reference's) under torch.profiler; its op "
        "time, wall time and costliest ops go to stderr",
    )
    parser.add_argument("--seed", type=int, default=0)
    records.add_record_argument(parser)
    args = parser.parse_args(argv)
    if args.profile and keras.backend.backend() != "torch":
        parser.error(
            "--profile needs KERAS_BACKEND=torch (torch.profiler). "
            f"Received: backend={keras.backend.backend()}"
        )
    for name in ("vocabulary_size", "source_length", "max_length", "repeats"):
        if getattr(args, name) <= 0:
            parser.error(
                f"--{name.replace('_', '-')} must be positive. Received: "
                f"{getattr(args, name)}"
            )
    if args.vocabulary_size <= NUM_RESERVED_IDS:
        parser.error(
            f"--vocabulary-size must be above {NUM_RESERVED_IDS} (the "
            f"reserved ids). Received: {args.vocabulary_size}"
        )
    return args


def search_flop_per_sentence(model, source_length, steps, beam_size):
    """Matrix-product FLOPs of one sentence's search (None for RNNencdec).

    RNNsearch, with m = embedding_dim, n = hidden_dim, a = attention_dim,
    l = maxout_dim, V = target vocabulary and Tx the source length:

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

    Pervasive Attention (Elbayad et al., 2018, arXiv:1808.03867, Sec. 3;
    `decode_step` runs one new target row of Tx cells through every
    layer), with f_l = ds + dt + l g the input channels of layer l = 0 ..
    L - 1, c = bottleneck_factor g, k the kernel size and C = f_0 + L g:

        encoder, once:   L 2 Tx ds c                 the source embedding's
                                                      share of the 1x1
                                                      convolutions
        per hypothesis
        and step:        L 2 dt c                    the target token's share
                         + sum_l 2 Tx (f_l - f_0) c  1x1 conv of the features
                                                      the layers added
                         + L 2 Tx (k // 2 + 1) k c g  causal k x k conv
                         + 2 Tx C                     attention pooling
                                                      score (if pooled so)
                         + 2 C' V                     output projection
                                                      (C' = C, 2C for
                                                      max+attention), or
                         + 2 C' dt + 2 dt V           tied: C' -> dt -> E^T

    With `input_channels=N` (f_0 = N) the encoder is the reduction's
    source term, 2 Tx ds N, and a step adds its token term, 2 dt N, and
    runs the 1x1 convolutions over whole rows: sum_l 2 Tx f_l c.

    The GLU activation (half the channels into each product) is not
    counted: None.
    """
    tx = source_length
    if isinstance(model, PervasiveAttention):
        if model.activation == "glu":
            return None
        g, layers = model.growth_rate, model.num_layers
        ds, dt = model.source_embedding_dim, model.target_embedding_dim
        c, k = model.bottleneck_factor * g, model.kernel_size
        reduced = model.input_channels
        f0 = reduced or ds + dt
        channels = f0 + layers * g
        if reduced is None:
            # ReLU: the embeddings' share of the 1x1 convolutions is a term
            # per source position and one per token (`decode_step`).
            encoder = layers * 2 * tx * ds * c
            step = layers * 2 * dt * c
            step += sum(2 * tx * index * g * c for index in range(layers))
        else:
            # The reduction's source and token terms, then whole rows.
            encoder = 2 * tx * ds * reduced
            step = 2 * dt * reduced
            step += sum(
                2 * tx * (reduced + index * g) * c for index in range(layers)
            )
        step += layers * 2 * tx * (k // 2 + 1) * k * c * g
        pooled = channels * len(model.pooling_mode.split("+"))
        if "attention" in model.pooling_mode:
            step += 2 * tx * channels
        vocabulary = model.target_vocabulary_size
        if model.tie_embeddings:
            step += 2 * pooled * dt + 2 * dt * vocabulary
        else:
            step += 2 * pooled * vocabulary
        return encoder + beam_size * steps * step
    if not isinstance(model, RNNSearch):
        return None
    m, n, l = model.embedding_dim, model.hidden_dim, model.maxout_dim  # noqa: E741
    a = model.attention_dim or n
    vocabulary = model.target_vocabulary_size
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


def build_model(args, preset):
    keras.utils.set_random_seed(args.seed)
    keras.mixed_precision.set_global_policy(args.precision)
    model = MODELS[preset].from_preset(
        preset,
        source_vocabulary_size=args.vocabulary_size,
        target_vocabulary_size=args.vocabulary_size,
    )
    if not args.allow_eos:
        bias = model.output_projection.bias
        values = keras.ops.convert_to_numpy(bias).copy()
        values[EOS_ID] = EOS_BIAS
        bias.assign(values)
    return model


def build_reference(model, args):
    """The plain-PyTorch decoder with `model`'s weights, or None."""
    if args.no_reference or not isinstance(model, RNNSearch):
        return None
    if args.precision != "float32":
        raise ValueError(
            "The PyTorch reference decodes in float32: pass --no-reference "
            f"with another precision. Received: --precision {args.precision}"
        )
    # Imported only when used: torch's memory counts in the peak RSS.
    from _torch_decoder import TorchRNNSearchDecoder

    return TorchRNNSearchDecoder.from_keras(model)


def keras_search(model, beam_size, max_length):
    """`source_ids -> (tokens (b, T), lengths (b,), scores (b,))` of the
    best output of each sentence."""
    run = compile_search(
        model, SearchConfig(beam_size=beam_size, max_length=max_length)
    )

    def search(source_ids):
        result = run(source_ids)  # Returns NumPy: the work is done.
        return result.token_ids[:, 0], result.lengths[:, 0], result.scores[:, 0]

    return search


def reference_search(reference, beam_size, max_length):
    def search(source_ids):
        if beam_size == 1:
            tokens, scores, lengths = reference.greedy_search(
                source_ids, max_length
            )
        else:
            tokens, scores, lengths = reference.beam_search(
                source_ids, beam_size, max_length
            )
        return tokens.numpy(), lengths.numpy(), scores.numpy()

    return search


def time_in_alternation(searches, source_ids, repeats):
    """Warm-up of each search, then `repeats` rounds of one run of each.

    Returns, per search name, its warm-up seconds, its timed seconds
    (one per round) and its last output.
    """
    results = {}
    for name, search in searches.items():
        start = time.perf_counter()
        search(source_ids)  # Warm-up: compiles on JAX and TensorFlow.
        results[name] = {"warmup": time.perf_counter() - start, "times": []}
    for _ in range(repeats):
        for name, search in searches.items():
            start = time.perf_counter()
            results[name]["output"] = search(source_ids)
            results[name]["times"].append(time.perf_counter() - start)
    return results


def benchmark(model, args, beam_size, batch_size, reference=None, other=None):
    source_ids = np.random.default_rng(args.seed).integers(
        NUM_RESERVED_IDS,
        args.vocabulary_size,
        size=(batch_size, args.source_length),
        dtype="int32",
    )
    load_start = os.getloadavg()
    searches = {"keras": keras_search(model, beam_size, args.max_length)}
    if reference is not None:
        searches["pytorch"] = reference_search(
            reference, beam_size, args.max_length
        )
    if other is not None:
        searches["compare"] = keras_search(other, beam_size, args.max_length)
    timed = time_in_alternation(searches, source_ids, args.repeats)
    if args.profile:
        profile(searches, source_ids, beam_size, batch_size)
    ours = timed["keras"]
    seconds = statistics.median(ours["times"])
    tokens, lengths, _ = ours["output"]
    words = int((lengths - 1).sum())  # EOS not counted.
    # Every hypothesis runs until the longest output of the batch ends.
    steps = int(np.max(lengths))
    flop = search_flop_per_sentence(model, args.source_length, steps, beam_size)
    tflops = None if flop is None else flop * batch_size / seconds / 1e12
    device, peak_memory = keras_device_and_peak_memory()
    record = {
        "backend": keras.backend.backend(),
        "preset": args.preset,
        "params": model.count_params(),
        "vocabulary_size": args.vocabulary_size,
        "source_length": args.source_length,
        "max_length": args.max_length,
        "eos": "allowed" if args.allow_eos else "only at max_length",
        "search": "greedy" if beam_size == 1 else "beam",
        "beam_size": beam_size,
        "batch_size": batch_size,
        "repeats": args.repeats,
        "seconds_per_batch": round(seconds, 6),
        "times_s": [round(t, 6) for t in ours["times"]],
        "warmup_s": round(ours["warmup"], 2),
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
    if reference is not None:
        record.update(reference_fields(reference, timed, batch_size))
    else:
        record["ratio_vs_pytorch"] = None
    if other is not None:
        record.update(compare_fields(other, args, timed))
    record["load_average_start"] = [round(x, 2) for x in load_start]
    record["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    return record


def profile(searches, source_ids, beam_size, batch_size):
    """One more run of each search under torch.profiler, to stderr.

    Per search: its op time (the ops' self CPU time, summed over threads)
    against its wall time, then its 15 costliest ops. The same op time in
    more wall time is time outside the ops: Python, Keras's op wrappers
    and PyTorch's dispatch.
    """
    import torch

    for name, search in searches.items():
        with torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU]
        ) as profiler:
            start = time.perf_counter()
            search(source_ids)
            wall_ms = (time.perf_counter() - start) * 1e3
        averages = profiler.key_averages()
        op_ms = sum(event.self_cpu_time_total for event in averages) / 1e3
        calls = sum(event.count for event in averages)
        print(
            f"profile: {name}, beam {beam_size}, batch {batch_size}: "
            f"{op_ms:.1f} ms of op time in {calls} op calls, "
            f"{wall_ms:.1f} ms of wall time (under the profiler)\n"
            + averages.table(sort_by="self_cpu_time_total", row_limit=15),
            file=sys.stderr,
            flush=True,
        )


def _round_ratios(numerators, denominators):
    return [
        round(a / b, 3) for a, b in zip(numerators, denominators, strict=True)
    ]


def reference_fields(reference, timed, batch_size):
    """The `pytorch_*` fields and the ratios of ours to the reference."""
    import torch

    ours, theirs = timed["keras"], timed["pytorch"]
    seconds = statistics.median(theirs["times"])
    tokens, lengths, scores = theirs["output"]
    words = int((lengths - 1).sum())
    our_tokens, our_lengths, our_scores = ours["output"]
    our_words_per_s = int((our_lengths - 1).sum()) / statistics.median(
        ours["times"]
    )
    same = np.all(tokens == our_tokens, axis=1)  # (batch,)
    return {
        "torch_version": torch.__version__,
        "pytorch_threads": torch.get_num_threads(),
        "pytorch_params": reference.parameter_count(),
        "pytorch_seconds_per_batch": round(seconds, 6),
        "pytorch_times_s": [round(t, 6) for t in theirs["times"]],
        "pytorch_warmup_s": round(theirs["warmup"], 2),
        "pytorch_sentences_per_s": round(batch_size / seconds, 2),
        "pytorch_target_words_per_s": round(words / seconds, 1),
        "pytorch_same_tokens": round(float(same.mean()), 4),
        # Where the tokens differ, a tie: the best scores still agree.
        "pytorch_max_score_difference": float(
            np.max(np.abs(scores - our_scores))
        ),
        "ratio_vs_pytorch": round(our_words_per_s / (words / seconds), 3),
        # Per round: the reference's time over ours (words are the same
        # when the tokens are).
        "round_ratios": _round_ratios(theirs["times"], ours["times"]),
    }


def compare_fields(other, args, timed):
    """The `compare_*` fields: the other preset's time and size."""
    ours, theirs = timed["keras"], timed["compare"]
    seconds = statistics.median(theirs["times"])
    _, lengths, _ = theirs["output"]
    return {
        "compare_preset": args.compare_with,
        "compare_params": other.count_params(),
        "compare_seconds_per_batch": round(seconds, 6),
        "compare_times_s": [round(t, 6) for t in theirs["times"]],
        "compare_warmup_s": round(theirs["warmup"], 2),
        "compare_target_words_per_s": round(
            int((lengths - 1).sum()) / seconds, 1
        ),
        "time_ratio_vs_compare": round(
            statistics.median(ours["times"]) / seconds, 3
        ),
        "compare_round_ratios": _round_ratios(ours["times"], theirs["times"]),
    }


def main(argv=None):
    started = records.start()
    args = parse_arguments(argv)
    if args.torch_threads is not None:
        # Torch's threads: the reference's, and the torch backend's.
        import torch

        torch.set_num_threads(args.torch_threads)
    model = build_model(args, args.preset)
    reference = build_reference(model, args)
    other = None
    if args.compare_with:
        other = build_model(args, args.compare_with)
    measurements = []
    for beam_size in args.beam_sizes:
        for batch_size in args.batch_sizes:
            record = benchmark(
                model, args, beam_size, batch_size, reference, other
            )
            print(json.dumps(record), flush=True)
            measurements.append(record)
    if args.record:
        records.write_record(
            args.record,
            "decode_throughput",
            {"measurements": measurements},
            started,
            argv=[__file__, *(sys.argv[1:] if argv is None else argv)],
        )


if __name__ == "__main__":
    main()
