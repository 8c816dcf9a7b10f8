"""Writes a synthetic parallel corpus of any size from real sentence pairs.

Each pair is one to three (uniformly) pairs of the Ding dictionary's
German-English example sentences (`keras_bahdanau.data.ding_de_en`, all
three splits), drawn with replacement and joined by a space on both
sides: real words and real alignments, pairs of about 16 words on
average, a vocabulary that stops growing like a real corpus's would not.
The Ding data is GPL-2+ and fetched at run time: the corpus is written
where you say (keep it out of the repository: `data_cache/` is ignored)
and never committed.

The growth benchmark (`benchmarks/corpus_growth.py`) trains on it; the
issue that asked for streaming measured the in-memory pipeline the same
way.

Usage:

```
python benchmarks/make_corpus.py --pairs 10000000 \\
    --output data_cache/growth/10m            # train.de, train.en
python benchmarks/make_corpus.py --pairs 100000 --gzip --output ...
```
"""

import argparse
import gzip
import sys
from pathlib import Path

from keras_bahdanau.startup import start_tensorflow

# Before the Ding reader loads TensorFlow: without its C++ start-up log.
start_tensorflow()

import numpy as np

# Pairs are drawn and written in chunks: memory stays flat in --pairs.
CHUNK = 200_000
MAX_JOINED = 3


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, required=True)
    parser.add_argument(
        "--output", required=True, help="folder for train.de and train.en"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--gzip", action="store_true", help="write train.de.gz, train.en.gz"
    )
    args = parser.parse_args(argv)
    if args.pairs < 1:
        parser.error(f"--pairs must be positive. Received: {args.pairs}")
    return args


def ding_pairs():
    """Every Ding pair, train, dev and test, as two lists."""
    from keras_bahdanau.data import ding_de_en

    pairs = [pair for split in SPLITS for pair in ding_de_en(split)]
    return [s for s, _ in pairs], [t for _, t in pairs]


SPLITS = ("train", "dev", "test")


def write_corpus(path, pairs, seed=0, compress=False, sources=None):
    """Writes `pairs` joined pairs to `path/train.de` and `train.en`.

    Args:
        path: the folder (created).
        pairs: int, the number of lines of each file.
        seed: the draw's seed; the same seed writes the same files.
        compress: gzip the files (`.gz` names).
        sources: `(german, english)` lists to draw from (default: Ding).

    Returns:
        The `(source_path, target_path)` written.
    """
    german, english = sources or ding_pairs()
    german, english = np.array(german, object), np.array(english, object)
    rng = np.random.default_rng(seed)
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    suffix = ".gz" if compress else ""
    paths = path / f"train.de{suffix}", path / f"train.en{suffix}"
    opener = gzip.open if compress else open
    with (
        opener(paths[0], "wt", encoding="utf-8") as source,
        opener(paths[1], "wt", encoding="utf-8") as target,
    ):
        for start in range(0, pairs, CHUNK):
            count = min(CHUNK, pairs - start)
            joined = rng.integers(1, MAX_JOINED + 1, count)  # (count,)
            drawn = rng.integers(0, len(german), (count, MAX_JOINED))
            for file, texts in ((source, german), (target, english)):
                file.write(
                    "".join(
                        " ".join(texts[row[:k]]) + "\n"
                        for row, k in zip(drawn, joined, strict=True)
                    )
                )
    return paths


def main(argv=None):
    args = parse_arguments(argv)
    paths = write_corpus(args.output, args.pairs, args.seed, args.gzip)
    sizes = [f"{p} ({p.stat().st_size / 2**20:,.0f} MiB)" for p in paths]
    print(f"Wrote {args.pairs:,} pairs: {', '.join(sizes)}", file=sys.stderr)


if __name__ == "__main__":
    main()
