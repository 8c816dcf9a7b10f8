import argparse
import csv
import importlib.util
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

import keras
import numpy as np
import pytest

from keras_bahdanau import __version__
from keras_bahdanau import records
from keras_bahdanau import run_directory as rd
from keras_bahdanau.commands import train as train_module

_ROOT = pathlib.Path(__file__).parents[1]
_spec = importlib.util.spec_from_file_location(
    "render", _ROOT / "results" / "render.py"
)
render = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(render)


def _environment():
    return {**os.environ, "KERAS_BACKEND": keras.backend.backend()}


# === keras_bahdanau/records.py ===


def test_write_record_holds_the_figures_and_the_environment(tmp_path):
    started = records.start()
    path = tmp_path / "new" / "folder" / "record.json"
    figures = {
        "bleu": np.float32(6.5),
        "steps": np.int64(3),
        "times": np.array([0.5, 0.25]),
        "diverged": float("nan"),
    }
    written = records.write_record(
        path, "unit_test", figures, started, config={"run_dir": tmp_path}
    )
    record = json.loads(path.read_text(encoding="utf-8"))
    assert record == written
    # One measurement: one row. NumPy numbers become JSON numbers; NaN
    # (no JSON) becomes null.
    assert record["rows"] == [
        {"bleu": 6.5, "steps": 3, "times": [0.5, 0.25], "diverged": None}
    ]
    assert record["format_version"] == 2
    assert record["kind"] == "unit_test"
    assert record["transcribed"] is False
    assert record["config"] == {"run_dir": str(tmp_path)}
    assert record["package_version"] == __version__
    assert record["backend"] == keras.backend.backend()
    assert record["versions"]["keras"] == keras.__version__
    assert record["versions"]["numpy"] == np.__version__
    machine = record["machine"]
    assert machine["cores"] == os.cpu_count()
    assert len(machine["load_average_start"]) == 3
    assert len(machine["load_average_end"]) == 3
    assert record["started_utc"] == started["started_utc"]
    assert record["started_utc"] <= record["ended_utc"]
    assert record["wall_seconds"] >= 0
    # Written atomically: no temporary file is left beside it.
    assert [p.name for p in path.parent.iterdir()] == ["record.json"]


def test_git_state_in_and_out_of_a_checkout(tmp_path, monkeypatch):
    state = records.git_state()
    if (_ROOT / ".git").exists() and shutil.which("git"):
        head = subprocess.run(
            ["git", "-C", str(_ROOT), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        assert state["commit"] == head
        assert state["dirty"] in (True, False)
    # Outside a checkout, and without git: both unknown, no error.
    assert records.git_state(tmp_path) == {"commit": None, "dirty": None}
    monkeypatch.setattr(records.shutil, "which", lambda name: None)
    assert records.git_state() == {"commit": None, "dirty": None}


def test_command_line_is_the_command_as_typed(monkeypatch):
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    script = str(_ROOT / "benchmarks" / "decode_throughput.py")
    monkeypatch.chdir(_ROOT)
    assert records.command_line([script, "--set", "a b"]) == (
        "KERAS_BACKEND=jax python benchmarks/decode_throughput.py --set 'a b'"
    )
    monkeypatch.delenv("KERAS_BACKEND")
    assert records.command_line(["/usr/bin/keras-bahdanau", "demo"]) == (
        "keras-bahdanau demo"
    )


def test_a_bad_record_path_stops_the_parser(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    records.add_record_argument(parser)
    with pytest.raises(SystemExit):
        parser.parse_args(["--record", str(tmp_path)])
    assert "names a directory" in capsys.readouterr().err
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    with pytest.raises(SystemExit):
        parser.parse_args(["--record", str(a_file / "record.json")])
    assert "cannot write into" in capsys.readouterr().err
    args = parser.parse_args(["--record", str(tmp_path / "a" / "r.json")])
    assert args.record == tmp_path / "a" / "r.json"


def test_records_imports_no_framework():
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from keras_bahdanau import records; "
            "records.build_record('k', {}); print(sorted({'keras', "
            "'tensorflow', 'jax', 'torch'} & set(sys.modules)))",
        ],
        capture_output=True,
        text=True,
        check=True,
        env=_environment(),
    ).stdout
    assert loaded.strip() == "[]"


def _finished_run(run_dir, tmp_path):
    """A copy of the tiny run directory, with the files of a finished run."""
    run = pathlib.Path(shutil.copytree(run_dir, tmp_path / "run"))
    results = {
        split: {
            "bleu": bleu,
            "chrf": 20.0,
            "bleu_signature": "nrefs:1",
            "chrf_signature": "nrefs:1",
            "sentences": 4,
        }
        for split, bleu in (("dev", 1.5), ("test", 2.5))
    }
    (run / rd.RESULTS).write_text(json.dumps(results))
    with open(run / rd.TRAINING_LOG, "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["epoch", "loss", "val_bleu"])
        writer.writerows([[0, 3.5, 0.5], [1, 3.25, 1.5]])
    (run / rd.EPOCH_TIMES).write_text(json.dumps({"0": 60.0, "1": 90.0}))
    return run, results


def test_train_command_writes_the_record_of_its_run(
    run_dir, tmp_path, monkeypatch
):
    run, results = _finished_run(run_dir, tmp_path)
    # The training itself is tested in tests/commands/train_test.py.
    trained = []
    monkeypatch.setattr(
        train_module, "train", lambda config: trained.append(config) or run
    )
    parser = argparse.ArgumentParser()
    train_module.add_arguments(parser)
    path = tmp_path / "train.json"
    args = parser.parse_args(["--set", f"run_dir={run}", "--record", str(path)])
    assert train_module.run(args) == 0
    record = json.loads(path.read_text(encoding="utf-8"))
    assert record["kind"] == "train"
    assert record["config"] == json.loads(json.dumps(trained[0]))
    (row,) = record["rows"]
    assert list(row) == list(records.TRAINING_FIELDS)
    for split in ("dev", "test"):
        assert row[split] == {
            **dict.fromkeys(records.SPLIT_FIELDS),
            **results[split],
        }
    assert row["epochs"] == 2
    assert row["training_minutes"] == 2.5  # 60 s + 90 s
    assert [epoch["val_bleu"] for epoch in row["log"]] == [0.5, 1.5]
    assert row["model"] == "rnnsearch"  # tests/run_fixture.py's, no size
    assert (
        row["parameters"]
        == json.loads((run / "training_config.json").read_text())["parameters"]
    )
    assert row["config_file"] is None  # No --config.
    assert row["epoch_seconds"] == [60.0, 90.0]
    # The command's use of the machine (the stubbed training: little).
    assert 0 <= row["cpu_seconds"] and 0 <= row["cpu_share"] <= 1
    assert row["peak_rss_mb"] > 0


def test_process_usage_counts_the_work_since_start():
    started = records.start()
    deadline = time.process_time() + 0.3
    while time.process_time() < deadline:  # 0.3 s of this thread's CPU
        pass
    usage = records.process_usage(started)
    wall = time.monotonic() - started["monotonic"]
    assert 0.3 <= usage["cpu_seconds"] <= 0.3 + 2 * wall
    assert usage["cpu_share"] == pytest.approx(
        usage["cpu_seconds"] / (wall * os.cpu_count()), rel=0.2
    )
    # Linux: the process's own peak, as /proc reports it (VmHWM, KiB).
    status = pathlib.Path("/proc/self/status")
    if status.is_file():
        (line,) = [
            line for line in status.read_text().splitlines()
            if line.startswith("VmHWM:")
        ]  # fmt: skip
        assert usage["peak_rss_mb"] >= int(line.split()[1]) / 1024 - 1


def _script(name, *arguments, cwd=None):
    result = subprocess.run(
        [sys.executable, str(_ROOT / name), *arguments],
        capture_output=True,
        text=True,
        timeout=600,
        env=_environment(),
        cwd=cwd,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_decode_throughput_records_its_lines(tmp_path):
    path = tmp_path / "decode.json"
    lines = _script(
        "benchmarks/decode_throughput.py",
        "--preset=rnnsearch_tiny",
        "--vocabulary-size=40",
        "--source-length=3",
        "--max-length=3",
        "--batch-sizes=2",
        "--beam-sizes=2",
        "--repeats=1",
        "--no-reference",
        f"--record={path}",
    )
    record = json.loads(path.read_text(encoding="utf-8"))
    assert record["kind"] == "decode_throughput"
    assert record["rows"] == lines
    assert record["command"].endswith(
        f"benchmarks/decode_throughput.py --preset=rnnsearch_tiny "
        f"--vocabulary-size=40 --source-length=3 --max-length=3 "
        f"--batch-sizes=2 --beam-sizes=2 --repeats=1 --no-reference "
        f"--record={path}"
    )


@pytest.mark.large  # Three processes load frameworks: a minute or more.
def test_train_throughput_records_the_parents_line_only(tmp_path):
    path = tmp_path / "train.json"
    (line,) = _script(
        "benchmarks/train_throughput.py",
        "--preset=rnnsearch_tiny",
        "--vocabulary-size=50",
        "--batch-size=2",
        "--length=3",
        "--warmup=1",
        "--steps=1",
        f"--record={path}",
    )
    record = json.loads(path.read_text(encoding="utf-8"))
    # The reference's child process got --record too, and wrote nothing.
    assert record["rows"] == [line]
    assert line["ratio_vs_pytorch"] is not None


# === results/render.py ===


def test_committed_pages_are_rendered_from_the_records():
    texts = render.rendered()
    assert set(texts) == {render.PAGE, render.README, render.SMALL_DATA}
    for path, text in texts.items():
        assert path.read_text(encoding="utf-8") == text, (
            f"{path.relative_to(_ROOT)} differs from the records in "
            "results/: run `python results/render.py`."
        )


def test_every_committed_record_is_complete_and_normalised():
    expected = set(records.build_record("k", {}))
    fields = {}
    for name, record in render.load_records().items():
        assert record["format_version"] == records.FORMAT_VERSION, name
        # reproduce_bahdanau.py's records add the steps asked for and the
        # alignments it plotted.
        assert set(record) - expected <= {"steps", "figure3"}, name
        assert expected <= set(record), name
        if record["transcribed"]:
            assert record["source"], name
        else:
            assert record["command"] and record["started_utc"], name
        # One row per measurement, the same fields in every row of a kind.
        for row in record["rows"]:
            kind = fields.setdefault(record["kind"], list(row))
            assert list(row) == kind, (name, set(row) ^ set(kind))
    assert fields["train"] == list(records.TRAINING_FIELDS)


def _write_records(folder, run_dir, tmp_path):
    run, _ = _finished_run(run_dir, tmp_path)
    records.write_record(
        folder / "demo.json",
        "demo",
        records.run_figures(run),
        records.start(),
        {"model": {"architecture": "rnnsearch", "preset": "rnnsearch_tiny"}},
    )
    # As the benchmark scripts write them.
    records.write_record(
        folder / "decode.json",
        "decode_throughput",
        {
            "measurements": [
                {
                    "backend": "jax",
                    "preset": "rnnsearch_small",
                    "beam_size": 5,
                    "batch_size": 64,
                    "target_words_per_s": 1000.0,
                    "pytorch_target_words_per_s": 800.0,
                    "ratio_vs_pytorch": 1.25,
                    "round_ratios": [1.2, 1.3],
                }
            ]
        },
    )
    records.write_record(
        folder / "old.json",
        "reproduce_bahdanau",
        [
            {
                "label": "RNNsearch-50",
                "steps": 10,
                "corpus": "bible_en_fr",
                "test": {"sentences": 4, "bleu": 12.5, "chrf": 30.0},
                "beam_size": 5,
                "no_unk": None,
                "test_bleu_by_length": [],
                "bleu_signature": None,
            }
        ],
        transcribed=True,
        source="docs of an earlier release",
    )


def test_render_page_and_table_from_records(run_dir, tmp_path):
    folder = tmp_path / "results"
    _write_records(folder, run_dir, tmp_path)
    found = render.load_records(folder)
    page = render.render_page(found)
    readme = render.render_summary(found)
    # The demo's dev / test BLEU, the ratio, the transcribed record's mark.
    assert "1.50 / 20.00" in page and "2.50 / 20.00" in page
    backend = keras.backend.backend()  # the record's, as written here
    assert f"| Main job (`make demo`), rnnsearch, {backend}, 2 epochs: dev " \
        "/ test BLEU | 1.50 / 2.50 | `demo.json` |" in readme  # fmt: skip
    assert "jax 1.25x" in readme and "1.25x" in page
    assert "| RNNsearch-50 | - | 10 | - | 12.50 |" in page
    assert "on bible_en_fr, 10 steps: test BLEU | RNNsearch-50 12.50 " in readme
    assert f"`old.json` {render.MARK}" in page
    assert render.TRANSCRIBED in page and render.TRANSCRIBED in readme
    assert "Source: docs of an earlier release" in page
    # A kind without records is left out; no records at all still renders.
    assert "Serving latency" not in page
    assert "No records yet." in render.render_page({})
    assert render.render_summary({}) == ""


def test_render_check_fails_on_a_stale_page(run_dir, tmp_path, monkeypatch):
    folder = tmp_path / "results"
    _write_records(folder, run_dir, tmp_path)
    readme, runs = tmp_path / "README.md", tmp_path / "runs.md"
    readme.write_text(
        "# x\n\n<!-- results:begin -->\nold\n<!-- results:end -->\n"
    )
    runs.write_text(
        "<!-- results:begin records: demo.json -->\n<!-- results:end -->\n"
    )
    monkeypatch.setattr(render, "RESULTS", folder)
    monkeypatch.setattr(render, "ROOT", tmp_path)
    monkeypatch.setattr(render, "README", readme)
    monkeypatch.setattr(render, "SMALL_DATA", runs)
    monkeypatch.setattr(render, "PAGE", tmp_path / "docs" / "results.md")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "results.md").write_text("")
    assert render.main(["--check"]) == 1
    assert render.main([]) == 0
    assert render.main(["--check"]) == 0
    assert "jax 1.25x" in readme.read_text(encoding="utf-8")
    # The training table of the records a marker names.
    assert "| `demo.json` | demo | rnnsearch |" in runs.read_text()
    runs.write_text("<!-- results:begin nothing -->\n<!-- results:end -->\n")
    with pytest.raises(SystemExit, match="Unknown marker 'nothing'"):
        render.main(["--check"])


def test_a_file_that_is_not_a_record_is_named(tmp_path):
    (tmp_path / "bad.json").write_text('{"kind": "x", "format_version": 2}')
    with pytest.raises(ValueError, match="bad.json is not a record of"):
        render.load_records(tmp_path)
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ValueError, match="bad.json is not JSON"):
        render.load_records(tmp_path)


def test_length_penalty_and_evaluate_records_have_sections(
    tmp_path, monkeypatch
):
    run = {
        "run_dir": "runs/tiny",
        "architecture": "rnnsearch",
        "sentences": 300,
        "beam_size": 5,
        "bleu_signature": "nrefs:1",
        "best_alpha": 0.6,
    }
    records.write_record(
        tmp_path / "penalty.json",
        "length_penalty",
        [
            {
                **run,
                "alpha": alpha,
                "bleu": bleu,
                "chrf": 30.0,
                "length_ratio": ratio,
            }  # fmt: skip
            for alpha, bleu, ratio in ((0.0, 5.5, 0.9125), (0.6, 6.25, 0.98))
        ],
    )
    search = {"beam_size": 5, "n_best": 1, "length_penalty": 0.6}
    records.write_record(
        tmp_path / "evaluate.json",
        "evaluate",
        [
            {
                "run": "tiny",
                "run_dir": "runs/tiny",
                "split": "test",
                "search": search,
                "bleu": 7.125,
                "chrf": 31.5,
                "sentences": 5,
                "seconds": 12.34,
            }
        ],
    )
    monkeypatch.setattr(render, "RESULTS", tmp_path)
    page = render.render_page(render.load_records())
    assert "Other records" not in page
    penalty = page[page.index("## Length penalty") :]
    assert "### `penalty.json`: `runs/tiny`" in penalty
    assert "rnnsearch, 300 dev sentences, beam 5; `nrefs:1`." in penalty
    assert "| 0.00 | 5.50 | 30.00 | 0.912 |" in penalty
    assert "| 0.60 (best) | 6.25 | 30.00 | 0.980 |" in penalty
    assert (
        "| `evaluate.json` | tiny | test | beam 5 | 0.60 | 7.12 | 31.50 | 5 "
        "| 12.3 |"
    ) in page
    assert render.render_summary(render.load_records()) == ""


def test_an_earlier_commits_main_job_shows_beside_this_ones_only(tmp_path):
    folder = tmp_path / "results"
    for name, run, bleu in (("now", None, 6.25), ("before", "previous", 5.5)):
        row = {
            "run": run,
            "epochs": 10,
            "epoch_seconds": [70.0, 80.0],
            "training_minutes": 14.0,
            "dev": {"bleu": bleu, "chrf": 20.0, "sentences": 9},
            "test": {"bleu": bleu, "chrf": 20.0, "sentences": 9},
            "cpu_share": 0.8,
            "peak_rss_mb": 2000.0,
        }
        records.write_record(folder / f"{name}.json", "demo", row)
    found = render.load_records(folder)
    page = render.render_page(found)
    training = page[: page.index("## The main job on each backend")]
    backends = page[page.index("## The main job on each backend") :]
    assert "`now.json`" in training and "`before.json`" not in training
    assert "| `before.json` | previous | " in backends
    assert "| `now.json` | - | " in backends
    summary = render.render_summary(found)
    assert "6.25" in summary and "`before.json`" not in summary


def test_small_data_records_have_their_own_section(tmp_path, monkeypatch):
    folder = tmp_path / "results"
    for name, section, bleu in (
        ("a", "Second", 1.25),
        ("b", "First", 2.5),
        ("train", None, 3.75),
    ):
        row = {
            "section": section,
            "run": name if section else None,  # a run of this release
            "change": "none",
            "dev": {"bleu": bleu, "sentences": 9},
            "log": [{"epoch": 1, "val_bleu": bleu, "val_loss": 4.5}],
        }
        records.write_record(
            folder / f"{name}.json",
            "train",
            row,
            transcribed=True,
            source="a page",
        )
    page_of_runs = tmp_path / "small_data.md"
    page_of_runs.write_text(
        "# Runs\n\n<!-- results:begin section: First -->\n"
        "<!-- results:end -->\n\n<!-- results:begin section: Second -->\n"
        "<!-- results:end -->\n"
    )
    monkeypatch.setattr(render, "SMALL_DATA", page_of_runs)
    found = render.load_records(folder)
    page = render.render_page(found)
    training = page[: page.index("## Small-data recipe")]
    small_data = page[page.index("## Small-data recipe") :]
    assert "3.75 / -" in training and "`a.json`" not in training
    # In the order of the page's markers; each run's log by epoch.
    assert small_data.index("### First") < small_data.index("### Second")
    assert "| `b.json` † | b | none | - | - | 2.50 / - | - / - | 9 / - |" in (
        small_data
    )
    assert f"| `a.json` {render.MARK} | - | 1.25 |" in small_data
    assert "epoch 2: val_loss 4.5" in small_data
    assert "`a.json`" not in render.render_summary(found)
    # The page's own markers: its sections' tables, without a heading.
    text = render.rendered(found)[page_of_runs]
    first = text[: text.index("section: Second")]
    assert "| `b.json` † | b |" in first and "### First" not in first
