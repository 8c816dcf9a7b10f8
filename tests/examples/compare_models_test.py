import json
import pathlib
import re

import compare_models  # examples/, see conftest.py
import numpy as np
import pytest

from keras_bahdanau import presets
from keras_bahdanau import run_directory as rd
from keras_bahdanau.config import ConfigError
from keras_bahdanau.config import resolve_config
from tests.run_fixture import reversal_corpus

ARCHITECTURES = ("rnnencdec", "rnnsearch", "pervasive_attention")
TINY_RNN = ("model.preset=", "model.embedding_dim=8", "model.hidden_dim=8",
            "model.maxout_dim=4")  # fmt: skip


def _corpus(tmp_path, n=200):
    """Sources of 1 to 8 words; targets reversed."""
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(12)]
    sources = [
        " ".join(rng.choice(words, rng.integers(1, 9))) for _ in range(n)
    ]
    return reversal_corpus(tmp_path, sources)


def _compare(tmp_path, architectures, *options):
    """`main()` on the toy corpus with tiny models; returns its rows."""
    overrides = _corpus(tmp_path) + [
        # Over the base config (examples/ding_de_en.toml): word
        # vocabularies for the toy corpus, untied (maxout 4, embedding 8).
        "tokenizer.kind=word",
        "model.tie_embeddings=false",
        "training.epochs=1",
        "training.batch_size=16",
        *(f"{a}:{o}" for a in ("rnnencdec", "rnnsearch") for o in TINY_RNN),
        # The smallest preset; the config has no key for fewer layers.
        "pervasive_attention:model.embedding_dim=8",
    ]
    arguments = ["--output-dir", str(tmp_path / "runs"),
                 "--architectures", *architectures, *options]  # fmt: skip
    for override in overrides:
        arguments += ["--set", override]
    # Short sentences and buckets: short searches compile faster.
    arguments += ["--beam-size", "2", "--max-sentences", "4",
                  "--bucket-width", "2", "--num-buckets", "4"]  # fmt: skip
    return compare_models.main(arguments)


def _check_rows(rows, architectures, output_dir):
    assert [row["architecture"] for row in rows] == list(architectures)
    for row in rows:
        run_dir = output_dir / row["architecture"]
        assert row["run_dir"] == str(run_dir)
        model, *_ = presets.load_preset(run_dir)
        assert row["parameters"] == model.count_params()
        assert row["epochs"] == 1
        assert 0 < row["train_seconds"] == row["seconds_per_epoch"]
        assert row["beam_size"] == 2
        results = json.loads((run_dir / rd.RESULTS).read_text())
        for split in ("dev", "test"):
            assert row[split]["sentences"] == 4
            for metric in ("bleu", "chrf"):
                assert 0 <= row[split][metric] <= 100
                # Translated again, the test split gives train's scores.
                assert row[split][metric] == pytest.approx(
                    results[split][metric]
                )
        assert row["decode_ms_per_sentence"] == pytest.approx(
            1000 * row["decode_seconds"] / 4
        )
        buckets = row["test_bleu_by_length"]
        assert sum(b["num_sentences"] for b in buckets) == 4
        assert all(0 <= b["bleu"] <= 100 for b in buckets)


def _check_table(table, rows):
    lines = table.split("\n")
    assert lines[0].split()[:3] == ["model", "parameters", "epochs"]
    assert lines[0].split()[-4:] == ["1-2", "3-4", "5-6", "7+"]
    for line, row in zip(lines[1 : 1 + len(rows)], rows, strict=True):
        cells = line.split()
        assert cells[:3] == [
            row["architecture"],
            f"{row['parameters']:,}",
            str(row["epochs"]),
        ]
        assert cells[7] == f"{row['test']['bleu']:.2f}"
    assert lines[1 + len(rows)] == ""
    (line,) = [line for line in lines if "sentences per bucket:" in line]
    counts = re.findall(r"(\S+): (\d+)", line.partition("bucket:")[2])
    assert [label for label, _ in counts] == ["1-2", "3-4", "5-6", "7+"]
    assert sum(int(count) for _, count in counts) == 4


def test_one_model_end_to_end(tmp_path, capsys):
    rows = _compare(tmp_path, ["rnnencdec"])
    _check_rows(rows, ["rnnencdec"], tmp_path / "runs")
    _check_table(capsys.readouterr().out, rows)


@pytest.mark.large
def test_three_models_end_to_end(tmp_path, capsys):
    rows = _compare(tmp_path, ARCHITECTURES, "--json")
    printed = [json.loads(line) for line in capsys.readouterr().out.split("\n")
               if line]  # fmt: skip
    assert printed == json.loads(json.dumps(rows))
    _check_rows(rows, ARCHITECTURES, tmp_path / "runs")
    # Different architectures, different sizes: not a copied count.
    assert len({row["parameters"] for row in rows}) == 3
    _check_table(compare_models.format_table(rows, width=2, count=4), rows)


def test_overrides_scoped_to_one_architecture():
    args = compare_models.parse_args(
        ["--output-dir", "out", "--beam-size", "3", "--set",
         "training.epochs=7", "--set", "rnnsearch:model.hidden_dim=16"]
    )  # fmt: skip
    search = compare_models.overrides_for("rnnsearch", args)
    encdec = compare_models.overrides_for("rnnencdec", args)
    assert "model.hidden_dim=16" in search
    assert "model.hidden_dim=16" not in encdec
    # The user's overrides win over the script's defaults.
    config = resolve_config(None, search)
    assert config["training"]["epochs"] == 7
    assert config["evaluation"]["max_sentences"] == 100  # the default
    assert config["model"]["preset"] == "rnnsearch_tiny"
    assert search[-2:] == [
        "evaluation.beam_size=3",
        f"run_dir={pathlib.Path('out') / 'rnnsearch'}",
    ]


@pytest.mark.parametrize(
    "override, message",
    [
        ("transformer:model.hidden_dim=8", "names no architecture"),
        ("run_dir=elsewhere", "set --output-dir"),
        ("rnnsearch:run_dir=elsewhere", "set --output-dir"),
    ],
)
def test_bad_overrides_are_rejected(override, message):
    args = compare_models.parse_args(["--set", override])
    with pytest.raises(ConfigError, match=message):
        compare_models.overrides_for("rnnsearch", args)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--bucket-width", "0"], "--bucket-width must be at least 1"),
        (["--num-buckets", "0"], "--num-buckets must be at least 1"),
        (["--architectures", "rnnsearch", "rnnsearch"], "names a model twice"),
        (["--architectures", "transformer"], "invalid choice: 'transformer'"),
    ],
)
def test_bad_options_are_rejected(argv, message, capsys):
    with pytest.raises(SystemExit):
        compare_models.parse_args(argv)
    assert message in capsys.readouterr().err
