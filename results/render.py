"""Renders docs/results.md and the README's results table from the records.

Every `*.json` file in this folder is a record that a measuring script
wrote with `--record PATH` (`keras_bahdanau/records.py`): its figures and
the environment they were measured in. This script turns them into
`docs/results.md` (every record: its tables, and where, when and how it
was measured) and into the table of README.md between the lines
`<!-- results:begin -->` and `<!-- results:end -->`.

Usage:

    python results/render.py          # rewrites both files
    python results/render.py --check  # exit status 1 if either differs

A kind of record that does not exist yet is left out. The records named
`small_data_*.json`, the runs that docs/small_data.md describes, have a
section of their own, under that page's headings. Records marked
`"transcribed": true` hold figures copied from the documentation of an
earlier release whose raw output was not kept; they are shown with a
mark and their `source`.
"""

import argparse
import json
import shlex
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent
ROOT = RESULTS.parent
PAGE = ROOT / "docs" / "results.md"
README = ROOT / "README.md"
BEGIN = "<!-- results:begin -->"
END = "<!-- results:end -->"
MARK = "†"
TRANSCRIBED = (
    f"{MARK} transcribed from the documentation of an earlier release; "
    "raw output not kept."
)
# Records of the runs that docs/small_data.md describes: their own section.
SMALL_DATA = "small_data_"
SMALL_DATA_PAGE = ROOT / "docs" / "small_data.md"
# The order of the sections, and of the kinds in them.
TRAINING_KINDS = ("demo", "train")
KINDS = (
    *TRAINING_KINDS,
    "reproduce_bahdanau",
    "compare_models",
    "decode_throughput",
    "train_throughput",
    "serving_latency",
    "length_penalty",
    "evaluate",
)


def load_records(folder=None):
    """`{file name: record}` of the records in `folder`, sorted by name.

    `folder` defaults to `RESULTS`, this script's folder.

    Raises:
        ValueError: a file is not JSON, or not a record (no `kind` or
            `figures`), naming the file.
    """
    found = {}
    for path in sorted(Path(folder or RESULTS).glob("*.json")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as error:
            raise ValueError(f"{path} is not JSON: {error}") from None
        if not isinstance(record, dict) or not {"kind", "figures"} <= set(
            record
        ):
            raise ValueError(
                f"{path} is not a record: it needs the fields 'kind' and "
                "'figures' (keras_bahdanau/records.py writes them)."
            )
        found[path.name] = record
    return found


def of_kind(found, *kinds):
    return {
        name: record
        for name, record in found.items()
        if record["kind"] in kinds
    }


# === Cells ===


def number(value, digits=2, suffix=""):
    """`value` with `digits` decimals (thousands separated); "-" if null."""
    if value is None:
        return "-"
    return f"{value:,.{digits}f}{suffix}"


def name_cell(name, record):
    """The record's file name, marked if transcribed."""
    return f"`{name}`" + (f" {MARK}" if record.get("transcribed") else "")


def table(titles, rows):
    """A Markdown table."""
    lines = [
        "| " + " | ".join(titles) + " |",
        "|" + "---|" * len(titles),
    ]
    lines += ["| " + " | ".join(map(str, row)) + " |" for row in rows]
    return lines


def scores(results, split):
    """The BLEU / chrF cell of a split of a run's `results`."""
    split = (results or {}).get(split) or {}
    return f"{number(split.get('bleu'))} / {number(split.get('chrf'))}"


def date(record):
    moment = record.get("started_utc") or record.get("ended_utc")
    return moment[:10] if moment else "date unknown"


def machine(record):
    """CPU model, cores, GPUs and the 1-minute load at start and end."""
    facts = record.get("machine") or {}
    parts = [facts.get("cpu_model") or "CPU unknown"]
    if facts.get("cores"):
        parts.append(f"{facts['cores']} cores")
    if facts.get("gpus"):
        parts.append("GPU: " + ", ".join(facts["gpus"]))
    start, end = facts.get("load_average_start"), facts.get("load_average_end")
    if start or end:
        load = [f"{x[0]:.2f}" if x else "?" for x in (start, end)]
        parts.append("load " + " -> ".join(load))
    return ", ".join(parts)


def software(record):
    """The backend, library versions, package version and commit."""
    versions = record.get("versions") or {}
    parts = [f"{record.get('backend') or 'backend unknown'} backend"]
    parts += [
        f"{name} {versions[name]}"
        for name in ("keras", "jax", "tensorflow", "torch")
        if versions.get(name)
    ]
    if record.get("package_version"):
        parts.append(f"keras_bahdanau {record['package_version']}")
    git = record.get("git") or {}
    if git.get("commit"):
        dirty = " with uncommitted changes" if git.get("dirty") else ""
        parts.append(f"commit {git['commit'][:7]}{dirty}")
    return ", ".join(parts)


def provenance(found):
    """Where, when and how each record of `found` was measured."""
    lines = []
    for name, record in found.items():
        wall = record.get("wall_seconds")
        took = "" if wall is None else f", {wall / 60:.1f} min"
        lines.append(
            f"- {name_cell(name, record)}: {date(record)}{took}; "
            f"{machine(record)}; {software(record)}."
        )
        if record.get("transcribed") and record.get("source"):
            lines.append(f"  Source: {record['source']}")
        if record.get("command"):
            lines.append(f"  `{record['command']}`")
    if any(record.get("transcribed") for record in found.values()):
        lines += ["", TRANSCRIBED]
    return lines


# === Sections ===


def describe(model):
    """A model config's architecture and preset, e.g. "rnnsearch_tiny"."""
    return model.get("preset") or model.get("architecture") or "-"


def config_flag(record):
    """` --config FILE` of a record's command, or ""."""
    words = shlex.split(record.get("command") or "")
    if "--config" in words[:-1]:
        return f" --config {words[words.index('--config') + 1]}"
    return ""


def training_section(found):
    rows = []
    for name, record in found.items():
        figures = record["figures"]
        model = (record.get("config") or {}).get("model") or {}
        results = figures.get("results") or {}
        dev, test = results.get("dev") or {}, results.get("test") or {}
        rows.append(
            [
                name_cell(name, record),
                f"{record['kind']}{config_flag(record)}",
                describe(model),
                number(figures.get("parameters"), 0),
                figures.get("epochs") or "-",
                number(figures.get("training_minutes"), 1),
                scores(results, "dev"),
                scores(results, "test"),
                f"{dev.get('sentences', '-')} / {test.get('sentences', '-')}",
                number(test.get("ms_per_sentence"), 1),
            ]
        )
    lines = [
        "## Training runs (`keras-bahdanau demo`, `keras-bahdanau train`)",
        "",
        "`make demo` runs `keras-bahdanau demo`, the main job. Dev and test",
        "BLEU / chrF of the best checkpoint (sacreBLEU), beam search.",
        "",
        *table(
            [
                "record",
                "command",
                "model",
                "parameters",
                "epochs",
                "train min",
                "dev BLEU / chrF",
                "test BLEU / chrF",
                "sentences dev / test",
                "test ms / sentence",
            ],
            rows,
        ),
        "",
    ]
    signatures = {
        ((record["figures"].get("results") or {}).get("test") or {}).get(
            "bleu_signature"
        )
        for record in found.values()
    } - {None}
    for signature in sorted(signatures):
        lines += [f"BLEU signature: `{signature}`.", ""]
    for name, record in found.items():
        epochs = [
            row.get("val_bleu")
            for row in record["figures"].get("log") or []
            if row.get("val_bleu") not in (None, "")
        ]
        if epochs:
            lines += [
                f"Dev BLEU of the selection sentences by epoch "
                f"({name_cell(name, record)}): "
                + " ".join(number(float(value)) for value in epochs)
                + ".",
                "",
            ]
    return lines


def corpus(record):
    """The corpus a run trained on, from its config (a file's folder)."""
    config = record.get("config") or {}
    if "data" not in config:  # One config per model.
        config = next(iter(config.values()), {}) if config else {}
    data = config.get("data") or {}
    if data.get("corpus") == "files" and data.get("source_file"):
        return Path(data["source_file"]).parent.name
    return data.get("corpus")


def _bucket_label(bucket):
    if bucket.get("max_length") is None:
        return f"{bucket['min_length']}+"
    return f"{bucket['min_length']}-{bucket['max_length']}"


def reproduction_section(found):
    lines = [
        "## The paper's experiment (`examples/reproduce_bahdanau.py`)",
        "",
        "Test BLEU like Table 1 of Bahdanau et al. (2015), on all test",
        "sentences and on those without an unknown word (No UNK), beside",
        "the paper's (WMT'14 English-French: compare the order of the rows,",
        "not the numbers); then test BLEU by source length in words",
        "(Figure 2's data). [docs/reproduction.md](reproduction.md) says",
        "what the script does and what the figures show.",
        "",
    ]
    for name, record in found.items():
        rows = record["figures"].get("rows") or []
        if not rows:
            continue
        lines += [f"### {name_cell(name, record)}: {corpus(record)}", ""]
        lines += table(
            [
                "model",
                "parameters",
                "steps",
                "train min",
                "BLEU all",
                "BLEU no UNK",
                "paper all",
                "paper no UNK",
                "chrF all",
                "ms/sentence",
            ],
            [
                [
                    row.get("label") or row.get("model"),
                    number(row.get("parameters"), 0),
                    number(row.get("steps"), 0),
                    number(
                        row["train_seconds"] / 60
                        if row.get("train_seconds") is not None
                        else row.get("train_minutes"),
                        1,
                    ),
                    number((row.get("test") or {}).get("bleu")),
                    number((row.get("no_unk") or {}).get("bleu")),
                    number((row.get("paper_bleu") or {}).get("all")),
                    number((row.get("paper_bleu") or {}).get("no_unk")),
                    number((row.get("test") or {}).get("chrf")),
                    number(row.get("decode_ms_per_sentence"), 1),
                ]
                for row in rows
            ],
        )
        first = rows[0]
        test = first.get("test") or {}
        no_unk = sorted(
            {(row.get("no_unk") or {}).get("sentences") for row in rows}
            - {None}
        )
        lines += [
            "",
            f"Test: {number(test.get('sentences'), 0)} sentences"
            + (
                f", {'/'.join(f'{n:,}' for n in no_unk)} of them without an"
                " unknown word"
                if no_unk
                else ""
            )
            + f"; beam {first.get('beam_size', '-')}"
            + (
                f"; BLEU signature `{first['bleu_signature']}`."
                if first.get("bleu_signature")
                else "."
            ),
            "",
        ]
        buckets = {}
        for row in rows:
            for bucket in row.get("test_bleu_by_length") or []:
                buckets.setdefault(
                    bucket["min_length"],
                    (_bucket_label(bucket), bucket.get("num_sentences")),
                )
        if buckets:
            labels = [buckets[key][0] for key in sorted(buckets)]
            lines += table(
                ["test BLEU by source length", *labels],
                [
                    [row.get("label") or row.get("model")]
                    + [
                        number(
                            {
                                _bucket_label(b): b.get("bleu")
                                for b in row.get("test_bleu_by_length") or []
                            }.get(label)
                        )
                        for label in labels
                    ]
                    for row in rows
                ],
            )
            counts = [buckets[key][1] for key in sorted(buckets)]
            if all(count is not None for count in counts):
                lines += [
                    "",
                    "Sentences per bucket: "
                    + ", ".join(
                        f"{label}: {count:,}"
                        for label, count in zip(labels, counts, strict=True)
                    )
                    + ".",
                ]
            lines.append("")
    return lines


def comparison_section(found):
    rows = []
    for name, record in found.items():
        for row in record["figures"].get("rows") or []:
            rows.append(
                [
                    name_cell(name, record),
                    row.get("architecture"),
                    number(row.get("parameters"), 0),
                    row.get("epochs", "-"),
                    number(
                        row["train_seconds"] / 60
                        if row.get("train_seconds") is not None
                        else None,
                        1,
                    ),
                    number((row.get("dev") or {}).get("bleu")),
                    number((row.get("test") or {}).get("bleu")),
                    number((row.get("test") or {}).get("chrf")),
                    number(row.get("decode_ms_per_sentence"), 1),
                    row.get("beam_size", "-"),
                ]
            )
    return [
        "## Three architectures (`examples/compare_models.py`)",
        "",
        *table(
            [
                "record",
                "model",
                "parameters",
                "epochs",
                "train min",
                "dev BLEU",
                "test BLEU",
                "test chrF",
                "ms/sentence",
                "beam",
            ],
            rows,
        ),
        "",
    ]


def _search(measurement):
    beam = measurement.get("beam_size", 1)
    return "greedy" if beam == 1 else f"beam {beam}"


def _ratios(values):
    return " ".join(f"{value:.2f}" for value in values or []) or "-"


def decoding_section(found):
    reference, compared = [], []
    for name, record in found.items():
        for m in record["figures"].get("measurements") or []:
            cells = [
                name_cell(name, record),
                m.get("backend"),
                m.get("preset"),
                _search(m),
                m.get("batch_size"),
            ]
            if m.get("ratio_vs_pytorch") is not None:
                reference.append(
                    cells
                    + [
                        number(m.get("target_words_per_s"), 0),
                        number(m.get("pytorch_target_words_per_s"), 0),
                        number(m.get("ratio_vs_pytorch"), 2, "x"),
                        _ratios(m.get("round_ratios")),
                        m.get("pytorch_threads", "-"),
                        number(m.get("pytorch_same_tokens")),
                    ]
                )
            if m.get("compare_preset"):
                compared.append(
                    cells
                    + [
                        m["compare_preset"],
                        number(m.get("seconds_per_batch"), 3),
                        number(m.get("compare_seconds_per_batch"), 3),
                        number(m.get("time_ratio_vs_compare"), 2, "x"),
                        _ratios(m.get("compare_round_ratios")),
                    ]
                )
    lines = [
        "## Decoding speed (`benchmarks/decode_throughput.py`)",
        "",
        "Target words per second of the package's compiled search against a",
        "plain-PyTorch search of the same equations with the same weights,",
        "timed in alternation in one run (`ratio_vs_pytorch`: above 1, the",
        "package is faster; `round_ratios`: the same per pair of runs, the",
        "machine's noise). Random weights, every hypothesis decodes",
        "`--max-length` steps. [benchmarks/README.md](../benchmarks/README.md)",
        "defines every field.",
        "",
    ]
    if reference:
        lines += table(
            [
                "record",
                "backend",
                "preset",
                "search",
                "batch",
                "words/s",
                "PyTorch words/s",
                "ratio_vs_pytorch",
                "round_ratios",
                "PyTorch threads",
                "same tokens",
            ],
            reference,
        )
        lines.append("")
    if compared:
        lines += table(
            [
                "record",
                "backend",
                "preset",
                "search",
                "batch",
                "compared with",
                "s/batch",
                "its s/batch",
                "time_ratio_vs_compare",
                "round ratios",
            ],
            compared,
        )
        lines.append("")
    return lines


def training_speed_section(found):
    rows = []
    for name, record in found.items():
        for m in record["figures"].get("measurements") or []:
            rows.append(
                [
                    name_cell(name, record),
                    m.get("backend"),
                    m.get("preset"),
                    f"{m.get('batch')} x {m.get('length')}",
                    m.get("precision"),
                    number(m.get("step_ms"), 0),
                    number(m.get("tokens_per_s"), 0),
                    number(m.get("pytorch_tokens_per_s"), 0),
                    number(m.get("ratio_vs_pytorch"), 2, "x"),
                    _ratios(m.get("round_ratios")),
                    number(m.get("peak_memory_mb"), 0),
                ]
            )
    return [
        "## Training speed (`benchmarks/train_throughput.py`)",
        "",
        "Target tokens per second of `model.fit` against a hand-written",
        "PyTorch loop of the same equations, in the same run.",
        "",
        *table(
            [
                "record",
                "backend",
                "preset",
                "batch x length",
                "precision",
                "ms/step",
                "tokens/s",
                "PyTorch tokens/s",
                "ratio_vs_pytorch",
                "round_ratios",
                "peak MiB",
            ],
            rows,
        ),
        "",
    ]


def serving_section(found):
    rows = []
    for name, record in found.items():
        for m in record["figures"].get("measurements") or []:
            rows.append(
                [
                    name_cell(name, record),
                    m.get("preset"),
                    _search(m),
                    m.get("batch_size"),
                    number(m.get("latency_ms"), 1),
                    f"{number(m.get('latency_ms_min'), 1)}-"
                    f"{number(m.get('latency_ms_max'), 1)}",
                    number(m.get("sentences_per_s"), 1),
                ]
            )
    return [
        "## Serving latency (`benchmarks/serving_latency.py`)",
        "",
        *table(
            [
                "record",
                "preset",
                "search",
                "batch",
                "median ms",
                "min-max ms",
                "sentences/s",
            ],
            rows,
        ),
        "",
    ]


# The figures of a small-data record, and of its log, that its tables show.
SHOWN = ("section", "run", "change", "results", "epochs", "best_epoch", "log")
LOGGED = ("epoch", "val_bleu", "val_chrf")


def split_small_data(found):
    """(the records of docs/small_data.md's runs, the others) of `found`."""
    small = {n: r for n, r in found.items() if n.startswith(SMALL_DATA)}
    return small, {n: r for n, r in found.items() if n not in small}


def _other_figures(figures):
    """The figures of a small-data record that its tables do not show."""
    parts = [
        f"{key} {json.dumps(value)}"
        for key, value in figures.items()
        if key not in SHOWN and value not in (None, [], {})
    ]
    parts += [
        f"epoch {row['epoch'] + 1}: "
        + ", ".join(f"{k} {v}" for k, v in row.items() if k not in LOGGED)
        for row in figures.get("log") or []
        if set(row) - set(LOGGED)
    ]
    return "; ".join(parts)


def _by_epoch(log):
    """Dev BLEU of each epoch of a log, with "/ chrF" where it was logged."""
    rows = {row["epoch"]: row for row in log}
    rows = [rows.get(epoch, {}) for epoch in range(max(rows) + 1)]
    return [
        " / ".join(number(row[key]) for key in LOGGED[1:] if key in row) or "-"
        for row in rows
    ]


def small_data_section(found):
    page = SMALL_DATA_PAGE.read_text(encoding="utf-8")
    groups = {}
    for name, record in found.items():
        section = record["figures"].get("section") or "Other runs"
        groups.setdefault(section, {})[name] = record
    lines = [
        "## Small-data recipe ([docs/small_data.md](small_data.md))",
        "",
        "The runs of docs/small_data.md, under its heading that shows them:",
        "dev and test scores of the best checkpoint on the whole splits,",
        "then dev BLEU on the first 300 dev sentences (the selection",
        "subset) after each epoch, with `/ chrF` where the page gives it.",
        "",
    ]
    # In the order of the page's headings; one it lacks goes last.
    for section in sorted(
        groups, key=lambda title: page.find(f"# {title}\n") % (len(page) + 1)
    ):
        group, rows, logs, others = groups[section], [], {}, []
        for name, record in group.items():
            figures = record["figures"]
            results = figures.get("results") or {}
            sentences = [
                (results.get(s) or {}).get("sentences") for s in ("dev", "test")
            ]
            rows.append(
                [
                    name_cell(name, record),
                    figures.get("run") or "-",
                    figures.get("change") or "-",
                    figures.get("epochs") or "-",
                    figures.get("best_epoch") or "-",
                    scores(results, "dev"),
                    scores(results, "test"),
                    " / ".join(str(count or "-") for count in sentences),
                ]
            )
            if figures.get("log"):
                logs[name_cell(name, record)] = _by_epoch(figures["log"])
            if _other_figures(figures):
                others.append(
                    f"- {name_cell(name, record)}: {_other_figures(figures)}."
                )
        titles = ["record", "run", "change", "epochs", "best epoch"]
        titles += ["dev BLEU / chrF", "test BLEU / chrF", "sentences"]
        lines += [f"### {section}", "", *table(titles, rows), ""]
        if logs:
            width = max(map(len, logs.values()))
            titles = ["dev BLEU (300) by epoch", *map(str, range(1, width + 1))]
            rows = [
                [cell, *cells] + ["-"] * (width - len(cells))
                for cell, cells in logs.items()
            ]
            lines += [*table(titles, rows), ""]
        if others:
            lines += ["Other figures of these records:", "", *others, ""]
    return lines


def length_penalty_section(found):
    lines = [
        "## Length penalty (`examples/tune_length_penalty.py`)",
        "",
        "Dev BLEU, chrF and length ratio (hypothesis words / reference",
        "words) of a run's best checkpoint at each GNMT length penalty",
        "alpha; the alpha of the best BLEU is marked (best).",
        "",
    ]
    for name, record in found.items():
        for run in record["figures"].get("runs") or []:
            rows = [
                [
                    number(row["alpha"])
                    + (" (best)" if row["alpha"] == run["best_alpha"] else ""),
                    number(row["bleu"]),
                    number(row["chrf"]),
                    number(row["length_ratio"], 3),
                ]
                for row in run["alphas"]
            ]
            lines += [
                f"### {name_cell(name, record)}: `{run['run_dir']}`",
                "",
                f"{run['architecture']}, {run['sentences']} dev sentences, "
                f"beam {run['beam_size']}; `{run['bleu_signature']}`.",
                "",
                *table(["alpha", "dev BLEU", "dev chrF", "length ratio"], rows),
                "",
            ]
    return lines


def evaluation_section(found):
    rows = []
    for name, record in found.items():
        for label, result in record["figures"].items():
            search = result.get("search") or {}
            buckets = result.get("by_length") or []
            # Every sentence falls in one bucket of source length.
            sentences = sum(bucket["num_sentences"] for bucket in buckets)
            rows.append(
                [
                    name_cell(name, record),
                    label,
                    result.get("split") or "-",
                    _search(search) if search else "-",
                    number(search.get("length_penalty")),
                    number(result.get("bleu")),
                    number(result.get("chrf")),
                    number(sentences or None, 0),
                    number(result.get("seconds"), 1),
                ]
            )
    titles = ["record", "run", "split", "search", "alpha", "BLEU", "chrF"]
    return [
        "## Evaluations (`keras-bahdanau evaluate --record`)",
        "",
        "BLEU and chrF of a run's best checkpoint on a split of its corpus",
        "(`-`: files given with `--source`); seconds of translating and",
        "scoring, the first batches' compilation included.",
        "",
        *table([*titles, "sentences", "seconds"], rows),
        "",
    ]


SECTIONS = (
    (TRAINING_KINDS, training_section),
    (("reproduce_bahdanau",), reproduction_section),
    (("compare_models",), comparison_section),
    (("decode_throughput",), decoding_section),
    (("train_throughput",), training_speed_section),
    (("serving_latency",), serving_section),
    (("length_penalty",), length_penalty_section),
    (("evaluate",), evaluation_section),
)


def render_page(found):
    """docs/results.md, from the records `found` (`load_records`)."""
    lines = [
        "# Results",
        "",
        "<!-- Rendered by `python results/render.py` from the records in",
        "results/; edit those, not this page. -->",
        "",
        "Every figure on this page comes from a JSON record in",
        "[results/](../results/), written by the script that measured it",
        "with `--record PATH` (`keras_bahdanau/records.py`): the figures,",
        "the command, the config, the package version and git commit, the",
        "backend and library versions, the machine (CPU model, cores, load",
        "average at the start and the end, GPU) and the times. Figures",
        "depend on the machine and its load: compare ratios measured in one",
        "run, not absolute figures of different records.",
        "",
    ]
    if any(record.get("transcribed") for record in found.values()):
        lines += [TRANSCRIBED, ""]
    small, rest = split_small_data(found)
    known = set()
    for kinds, section in SECTIONS:
        some = of_kind(rest, *kinds)
        known |= set(kinds)
        if some:
            lines += section(some)
    if small:
        lines += small_data_section(small)
    others = {n: r for n, r in rest.items() if r["kind"] not in known}
    if others:
        lines += [
            "## Other records",
            "",
            *(
                f"- {name_cell(n, r)}: kind `{r['kind']}`"
                for n, r in others.items()
            ),
            "",
        ]
    lines += ["## Where, when and how", "", *provenance(found)]
    if not found:
        lines += ["No records yet."]
    return "\n".join(lines).rstrip("\n") + "\n"


def render_readme_table(found):
    """The README's results table: the headline figure of each record."""
    _, found = split_small_data(found)
    rows = []
    # The main job first, then the other training runs.
    training = sorted(
        of_kind(found, *TRAINING_KINDS).items(),
        key=lambda item: item[1]["kind"] != "demo",
    )
    for name, record in training:
        figures = record["figures"]
        model = (record.get("config") or {}).get("model") or {}
        results = figures.get("results") or {}
        test = results.get("test") or {}
        epochs = figures.get("epochs")
        speed = test.get("ms_per_sentence")
        command = (
            "Main job (`make demo`)"
            if record["kind"] == "demo"
            else f"`train{config_flag(record)}`"
        )
        rows.append(
            [
                f"{command}, {describe(model)}"
                + (f", {epochs} epochs" if epochs else "")
                + ": dev / test BLEU"
                + ("; test ms per sentence, beam" if speed else ""),
                f"{number((results.get('dev') or {}).get('bleu'))} / "
                f"{number(test.get('bleu'))}"
                + (f"; {number(speed, 1)} ms" if speed else ""),
                name_cell(name, record),
            ]
        )
    for name, record in of_kind(found, "reproduce_bahdanau").items():
        figures = record["figures"]
        scores = [
            f"{row.get('label') or row.get('model')} "
            f"{number((row.get('test') or {}).get('bleu'))}"
            for row in figures.get("rows") or []
        ]
        if scores:
            rows.append(
                [
                    f"Paper's experiment on {corpus(record)}, "
                    f"{number(figures.get('steps'), 0)} steps: test BLEU",
                    ", ".join(scores),
                    name_cell(name, record),
                ]
            )
    decoding = {}
    for name, record in of_kind(found, "decode_throughput").items():
        for m in record["figures"].get("measurements") or []:
            if m.get("ratio_vs_pytorch") is not None:
                key = (m.get("preset"), _search(m), m.get("batch_size"))
                decoding.setdefault(key, []).append((name, record, m))
    for (preset, search, batch), found_here in decoding.items():
        rows.append(
            [
                f"Decoding words/s / plain PyTorch's, {preset}, {search}, "
                f"batch {batch}",
                ", ".join(
                    f"{m.get('backend')} {number(m['ratio_vs_pytorch'], 2)}x"
                    for _, _, m in found_here
                ),
                ", ".join(
                    dict.fromkeys(name_cell(n, r) for n, r, _ in found_here)
                ),
            ]
        )
    for name, record in of_kind(found, "train_throughput").items():
        for m in record["figures"].get("measurements") or []:
            if m.get("ratio_vs_pytorch") is not None:
                rows.append(
                    [
                        "Training tokens/s / hand-written PyTorch's, "
                        f"{m.get('preset')}, {m.get('backend')}",
                        number(m["ratio_vs_pytorch"], 2, "x"),
                        name_cell(name, record),
                    ]
                )
    lines = table(["result", "figure", "record"], rows) if rows else []
    if any(record.get("transcribed") for record in found.values()):
        lines += ["", TRANSCRIBED]
    return "\n".join(lines)


def replace_between(text, content, where):
    """`text` with the lines between `BEGIN` and `END` set to `content`."""
    begin, end = text.find(BEGIN), text.find(END)
    if begin < 0 or end < begin:
        raise ValueError(
            f"{where} needs the lines {BEGIN} and {END}, in that order, "
            "around the results table."
        )
    head = text[: begin + len(BEGIN)]
    return f"{head}\n{content}\n{text[end:]}"


def rendered(found=None):
    """`{path: text}`: docs/results.md and README.md as they should be."""
    found = load_records() if found is None else found
    readme = README.read_text(encoding="utf-8")
    return {
        PAGE: render_page(found),
        README: replace_between(readme, render_readme_table(found), README),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit status 1 if a file differs from its "
        "rendering",
    )
    args = parser.parse_args(argv)
    try:
        texts = rendered()
    except ValueError as error:
        raise SystemExit(f"render.py: {error}") from None
    stale = [
        path
        for path, text in texts.items()
        if not path.is_file() or path.read_text(encoding="utf-8") != text
    ]
    if args.check:
        for path in stale:
            print(
                f"{path.relative_to(ROOT)} differs from its rendering: run "
                "python results/render.py",
                file=sys.stderr,
            )
        return 1 if stale else 0
    for path in stale:
        path.write_text(texts[path], encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
