"""Renders docs/results.md and the tables of other pages from the records.

Every `*.json` file here is a record (`keras_bahdanau/records.py`): rows,
one per measurement, and where, when and how they were measured. This
renders docs/results.md, all of them, and between the lines `<!--
results:begin NAME -->` and `<!-- results:end -->` of README.md and
docs/small_data.md the table NAME names: none, the README's summary;
`section: TITLE`, the runs of docs/small_data.md under that title;
`records: A.json ...`, those training runs. The tables are data,
`tables.toml`. Records marked `"transcribed": true` hold figures copied
from the documentation of an earlier release (raw output not kept).

    python results/render.py          # rewrites the three files
    python results/render.py --check  # exit status 1 if one differs
"""

import argparse
import json
import re
import statistics
import string
import sys
import tomllib
from pathlib import Path

RESULTS = Path(__file__).resolve().parent
ROOT = RESULTS.parent
PAGE = ROOT / "docs" / "results.md"
README, SMALL_DATA = ROOT / "README.md", ROOT / "docs" / "small_data.md"
MARKER = re.compile(r"(results:begin ?(.*?) -->\n).*?(<!-- results:end)", re.S)
SPECS = tomllib.loads((RESULTS / "tables.toml").read_text(encoding="utf-8"))
MARK = "†"
TRANSCRIBED = (
    f"{MARK} transcribed from the documentation of an earlier release; "
    "raw output not kept."
)
FORMAT_VERSION = 2  # keras_bahdanau.records.FORMAT_VERSION


def load_records(folder=None):
    """`{file name: record}` of the records in `folder` (default: this
    script's), by name; a `ValueError` names a file that is not one."""
    found = {}
    for path in sorted(Path(folder or RESULTS).glob("*.json")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as error:
            raise ValueError(f"{path} is not JSON: {error}") from None
        rows = record.get("rows") if isinstance(record, dict) else None
        if not (
            record.get("format_version") == FORMAT_VERSION
            and "kind" in record
            and isinstance(rows, list)
            and all(isinstance(row, dict) for row in rows)
        ):
            raise ValueError(
                f"{path} is not a record of format {FORMAT_VERSION}: it "
                "needs `format_version`, `kind` and `rows` (a list of "
                "objects), as keras_bahdanau/records.py writes them."
            )
        found[path.name] = record
    return found


class _Cells(string.Formatter):
    """`str.format` in which a missing field (or one in it) is null and
    null is `-`; a list is its items, space-separated."""

    def get_field(self, name, args, kwargs):
        first, *keys = re.split(r"\]?\[", name.rstrip("]"))
        value = kwargs.get(first)
        for key in keys:
            key = int(key) if key.isdigit() else key
            value = value.get(key) if isinstance(value, dict) else None
        return value, first

    def format_field(self, value, spec):
        if value is None:
            return "-"
        if isinstance(value, list):
            return " ".join(format(item, spec) for item in value) or "-"
        return format(value, spec)


def cell(template, row):
    """`template` over `row`; `-` if it has one field and that is null."""
    fields = [f for _, f, _, _ in string.Formatter().parse(template) if f]
    if len(fields) == 1 and _Cells().get_field(fields[0], (), row)[0] is None:
        return "-"
    return _Cells().format(template, **row)


def table(columns, rows):
    """A Markdown table; `columns`: `"title: template | ..."`."""
    pairs = [column.split(": ", 1) for column in columns.split(" | ")]
    lines = ["| " + " | ".join(title for title, _ in pairs) + " |"]
    lines.append("|" + "---|" * len(pairs))
    for row in rows:
        lines.append("| " + " | ".join(cell(c, row) for _, c in pairs) + " |")
    return lines


def rows_of(found, spec):
    """The rows of `spec`'s kinds (and its `if`, `unless`), each with its
    record's fields, `name`, `record` (its cell) and derived fields."""
    rows = []
    for name, record in found.items():
        for row in record["rows"] if record["kind"] in spec["kinds"] else ():
            row = {**record, **row, "name": name}
            search = row.get("search") or {}
            beam = row.get("beam_size") or search.get("beam_size")
            config, seconds = row.get("config_file"), row.get("train_seconds")
            row["record"] = f"`{name}`" + f" {MARK}" * bool(
                row.get("transcribed")
            )
            row["command"] = row["kind"] + f" --config {config}" * bool(config)
            row["search_label"] = (
                "greedy" if beam in (1, None) else f"beam {beam}"
            )
            epochs = row.get("epoch_seconds")
            row["epoch_s"] = statistics.median(epochs) if epochs else None
            minutes = row.get("train_minutes")
            row["train_min"] = minutes if seconds is None else seconds / 60
            best = row.get("alpha") == row.get("best_alpha")
            row["best"] = " (best)" * best
            if row.get(spec.get("if", "kind")) is not None and (
                row.get(spec.get("unless", "")) is None
            ):
                rows.append(row)
    return rows


def groups(rows, spec, alone=False):
    """`rows` by the values of `spec`'s `group` fields, in order; without
    them, one group (`alone`: one per row)."""
    grouped = {}
    for i, row in enumerate(rows):
        key = tuple(row[f] for f in spec.get("group", ())) or alone * i
        grouped.setdefault(key, []).append(row)
    return list(grouped.values())


def training(rows):
    """BLEU signatures, dev BLEU of each epoch."""
    lines = [""]
    signatures = {row["test"]["bleu_signature"] for row in rows} - {None}
    for signature in sorted(signatures):
        lines += [f"BLEU signature: `{signature}`.", ""]
    for row in rows:
        bleu = [e["val_bleu"] for e in row["log"] or [] if "val_bleu" in e]
        if bleu:
            values = " ".join(f"{value:,.2f}" for value in bleu)
            by_epoch = "Dev BLEU of the selection sentences by epoch"
            lines += [f"{by_epoch} ({row['record']}): {values}.", ""]
    return lines


def reproduction(rows):
    """The test sets, then test BLEU by source length (Figure 2's data)."""
    first, buckets, known = rows[0], {}, set()
    for row in rows:
        known.add((row["no_unk"] or {}).get("sentences"))
        row["by_length"] = {}
        for b in row["test_bleu_by_length"] or []:
            end, start = b["max_length"], b["min_length"]
            label = f"{start}-{end}" if end else f"{start}+"
            buckets.setdefault(start, (label, b["num_sentences"]))
            row["by_length"][label] = b["bleu"]
    known = "/".join(f"{n:,}" for n in sorted(known - {None}))
    test = f"Test: {first['test']['sentences']:,} sentences"
    test += f", {known} of them without an unknown word" if known else ""
    test += f"; beam {first['beam_size']}"
    if first["bleu_signature"]:
        test += f"; BLEU signature `{first['bleu_signature']}`"
    lines, counts = ["", test + ".", ""], [buckets[k] for k in sorted(buckets)]
    if counts:
        cells = " | ".join(f"{b}: {{by_length[{b}]:,.2f}}" for b, _ in counts)
        lines += table(f"test BLEU by source length: {{label}} | {cells}", rows)
        each = ", ".join(f"{label}: {count:,}" for label, count in counts)
        lines += ["", f"Sentences per bucket: {each}.", ""]
    return lines


def small_data(rows):
    """Dev BLEU (300) by epoch (`/ chrF` where given), other figures."""
    logged, lines = [row for row in rows if row["log"]], [""]
    for row in logged:
        row["by_epoch"] = {
            e["epoch"] + 1: " / ".join(
                f"{e[k]:,.2f}" for k in ("val_bleu", "val_chrf") if k in e
            )
            for e in row["log"]
        }
    if logged:
        width = max(max(row["by_epoch"]) for row in logged)
        epochs = (f"{n}: {{by_epoch[{n}]}}" for n in range(1, width + 1))
        columns = "dev BLEU (300) by epoch: {record} | " + " | ".join(epochs)
        lines += table(columns, logged) + [""]
    others = [f"- {r['record']}: {_other(r)}." for r in rows if _other(r)]
    if others:
        lines += ["Other figures of these records:", "", *others, ""]
    return lines


def _other(row):
    """The figures of a small-data row that its tables do not show."""
    shown = ("parameters", "training_minutes", "averaging")
    figures = {**{k: row[k] for k in shown}, **(row["other"] or {})}
    parts = [
        f"{k} {json.dumps(v)}" for k, v in figures.items() if v is not None
    ]
    for e in row["log"] or []:
        rest = [f"{k} {v}" for k, v in e.items() if k not in _LOGGED]
        parts += [f"epoch {e['epoch'] + 1}: {', '.join(rest)}"] if rest else []
    return "; ".join(parts)


_LOGGED = ("epoch", "val_bleu", "val_chrf")
AFTER = {"training": training, "reproduction": reproduction}
AFTER["small_data"] = small_data


def render_table(spec, rows):
    """`spec`'s table of `rows`, one per group, and what follows it."""
    lines = []
    for grouped in groups(rows, spec):
        for name in ("heading", "lead"):
            if spec.get(name):
                lines += [cell(spec[name], grouped[0]), ""]
        lines += table(spec["columns"], grouped)
        lines += AFTER[spec["after"]](grouped) if "after" in spec else [""]
    return lines


def render_page(found):
    """docs/results.md, from the records `found` (`load_records`)."""
    lines = SPECS["page"].split("\n")
    if any(record.get("transcribed") for record in found.values()):
        lines += [TRANSCRIBED, ""]
    # The small-data sections, in the order of their page's markers.
    order = re.findall(r"begin section: (.+?) -->", SMALL_DATA.read_text())
    order = {section: i for i, section in enumerate(order)}
    for spec in SPECS["table"]:
        rows = rows_of(found, spec)
        rows.sort(key=lambda row: order.get(row.get("section"), len(order)))
        if rows:
            lines += [spec["title"], ""] if "title" in spec else []
            lines += render_table(spec, rows)
    known = {kind for spec in SPECS["table"] for kind in spec["kinds"]}
    others = [n for n, r in found.items() if r["kind"] not in known]
    if others:
        lines += ["## Other records", ""]
        lines += [f"- `{n}`: kind `{found[n]['kind']}`" for n in others] + [""]
    lines += ["## Where, when and how", "", *provenance(found)]
    return "\n".join(lines).rstrip("\n") + "\n"


def provenance(found):
    """Where, when and how each record of `found` was measured."""
    lines = []
    for name, record in found.items():
        get, machine = record.get, record.get("machine") or {}
        git, versions = get("git") or {}, get("versions") or {}
        loads = [machine.get(f"load_average_{at}") for at in ("start", "end")]
        load = " -> ".join(f"{x[0]:.2f}" if x else "?" for x in loads)
        gpus = ", ".join(machine.get("gpus") or [])
        where = [machine.get("cpu_model") or "CPU unknown"]
        where += [f"{machine.get('cores')} cores"] * bool(machine.get("cores"))
        where += [f"GPU: {gpus}"] * bool(gpus) + [f"load {load}"] * any(loads)
        how = [f"{get('backend') or 'backend unknown'} backend"]
        libraries = ("keras", "jax", "tensorflow", "torch")
        how += [f"{n} {versions[n]}" for n in libraries if versions.get(n)]
        version, commit = get("package_version"), git.get("commit") or ""
        how += [f"keras_bahdanau {version}"] * bool(version)
        dirty = " with uncommitted changes" * bool(git.get("dirty"))
        how += [f"commit {commit[:7]}{dirty}"] * bool(commit)
        moment, wall = (
            get("started_utc") or get("ended_utc"),
            get("wall_seconds"),
        )
        when = moment[:10] if moment else "date unknown"
        when += "" if wall is None else f", {wall / 60:.1f} min"
        mark = f" {MARK}" * bool(get("transcribed"))
        where, how = ", ".join(where), ", ".join(how)
        lines.append(f"- `{name}`{mark}: {when}; {where}; {how}.")
        if get("transcribed") and get("source"):
            lines.append(f"  Source: {get('source')}")
        lines += [f"  `{get('command')}`"] * bool(get("command"))
    if any(record.get("transcribed") for record in found.values()):
        lines += ["", TRANSCRIBED]
    return lines or ["No records yet."]


def render_summary(found):
    """The README's results table: the headline figures of the records."""
    lines = []
    for spec in SPECS["summary"]:
        for grouped in groups(rows_of(found, spec), spec, alone=True):
            label = cell(spec["label"], grouped[0])
            figure = ", ".join(cell(spec["figure"], row) for row in grouped)
            extra = spec.get("optional")
            if extra and cell(extra[1], grouped[0]) != "-":
                label += extra[0]
                figure += cell(extra[1], grouped[0])
            names = ", ".join(dict.fromkeys(row["record"] for row in grouped))
            lines.append(f"| {label} | {figure} | {names} |")
    if lines:
        lines = ["| result | figure | record |", "|---|---|---|", *lines]
    small = {n for n, r in found.items() if any(map(_is_small, r["rows"]))}
    if any(r.get("transcribed") for n, r in found.items() if n not in small):
        lines += ["", TRANSCRIBED]
    return "\n".join(lines)


def _is_small(row):
    return row.get("section") is not None


def render_marked(name, found):
    """The table of a page's marker `<!-- results:begin NAME -->`."""
    kind, _, value = name.partition(": ")
    if not kind:
        return render_summary(found)
    if kind == "records":  # Training runs, whichever their section.
        spec = {**SPECS["table"][0], "unless": ""}
        rows = rows_of({n: found[n] for n in value.split()}, spec)
    elif kind == "section":
        spec = {**SPECS["table"][-1], "group": (), "heading": None}
        rows = [r for r in rows_of(found, spec) if r["section"] == value]
    else:
        raise ValueError(f"Unknown marker {name!r}: none, section or records")
    return "\n".join(render_table(spec, rows)).strip("\n")


def rendered(found=None):
    """`{path: text}`: the three files as they should be."""
    found = load_records() if found is None else found
    texts = {PAGE: render_page(found)}
    for path in (README, SMALL_DATA):
        texts[path] = MARKER.sub(
            lambda m: f"{m[1]}{render_marked(m[2], found)}\n{m[3]}",
            path.read_text(encoding="utf-8"),
        )
    return texts


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing")
    check = parser.parse_args(argv).check
    try:
        texts = rendered()
    except (ValueError, KeyError) as error:
        raise SystemExit(f"render.py: {error!r}") from None
    stale = [
        path
        for path, text in texts.items()
        if not path.is_file() or path.read_text(encoding="utf-8") != text
    ]
    for path in stale:
        name = path.relative_to(ROOT)
        if check:
            print(
                f"{name} is stale: run python results/render.py",
                file=sys.stderr,
            )
        else:
            path.write_text(texts[path], encoding="utf-8")
            print(f"wrote {name}")
    return 1 if stale and check else 0


if __name__ == "__main__":
    sys.exit(main())
