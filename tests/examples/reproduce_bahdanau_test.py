"""examples/reproduce_bahdanau.py on a toy corpus, and on the Bible (large)."""

import json
import pathlib

import keras
import numpy as np
import pytest
import reproduce_bahdanau as reproduce  # examples/, see conftest.py
import sacrebleu
from matplotlib import image

from keras_bahdanau import presets
from keras_bahdanau import run_directory as rd
from keras_bahdanau.config import ConfigError
from keras_bahdanau.config import resolve_config
from keras_bahdanau.data import WordTokenizer
from keras_bahdanau.reserved import RESERVED_TOKENS
from tests.run_fixture import reversal_corpus

MODELS = ("rnnencdec_30", "rnnsearch_50")
# The toy test set: two verses with a word no training pair has.
TEST_SOURCES = ["w1 w2 w3", "w4 w5 w6 w7 w8", "w9 novel w0 w1", "w2 w3",
                "w5 w6 w7", "w1 w2 w3 w4 w5 other w6"]  # fmt: skip
KNOWN = [True, True, False, True, True, False]


def _corpus(tmp_path):
    """Word-reversal pairs of 1 to 8 words; `TEST_SOURCES` as test set."""
    rng = np.random.default_rng(1)
    sources = [" ".join(f"w{i}" for i in rng.integers(0, 10, n))
               for n in rng.integers(1, 9, 160)]  # fmt: skip
    overrides = reversal_corpus(tmp_path, sources)
    for split, texts in (("dev", sources[:6]), ("test", TEST_SOURCES)):
        for side, lines in (("source", texts),
                            ("target", [" ".join(t.split()[::-1])
                                        for t in texts])):  # fmt: skip
            path = tmp_path / f"{split}.{side}"
            path.write_text("\n".join(lines) + "\n")
            overrides.append(f"data.{split}_{side}_file={path}")
    return overrides


def _arguments(tmp_path, models, steps=3):
    """`main()`'s options: tiny models, a few steps, short searches."""
    arguments = ["--output-dir", str(tmp_path / "out"), "--models", *models,
                 "--steps", str(steps), "--beam-size", "2",
                 "--bucket-width", "2", "--num-buckets", "4",
                 "--alignments", "2"]  # fmt: skip
    overrides = [
        *_corpus(tmp_path),
        "training.batch_size=16",
        "training.backup_every_steps=1",
        "model.tie_embeddings=false",
        "model.preset=",
        "model.embedding_dim=8",
        "model.hidden_dim=8",
        "model.maxout_dim=4",
    ]
    for override in overrides:
        arguments += ["--set", override]
    return arguments


def _sessions(run_dir):
    """The TensorBoard event files of a run: one per training session."""
    return sorted((run_dir / rd.TENSORBOARD / "train").glob("events.*"))


def _check_rows(rows, output_dir, steps):
    assert [row["model"] for row in rows] == list(MODELS)
    assert [row["label"] for row in rows] == ["RNNencdec-30", "RNNsearch-50"]
    assert [row["max_length"] for row in rows] == [30, 50]
    references = [" ".join(s.split()[::-1]) for s in TEST_SOURCES]
    for row in rows:
        run_dir = output_dir / row["model"]
        assert row["run_dir"] == str(run_dir)
        model, *_ = presets.load_preset(run_dir)
        assert row["parameters"] == model.count_params()
        assert row["steps"] == steps
        assert row["test"]["sentences"] == len(TEST_SOURCES)
        assert row["no_unk"]["sentences"] == sum(KNOWN)
        saved = json.loads((run_dir / reproduce.TRANSLATIONS).read_text())
        hypotheses = saved["hypotheses"]
        assert saved["sources"] == TEST_SOURCES
        for scores, keep in ((row["test"], [True] * 6), (row["no_unk"], KNOWN)):
            expected = sacrebleu.corpus_bleu(
                [h for h, k in zip(hypotheses, keep, strict=True) if k],
                [[r for r, k in zip(references, keep, strict=True) if k]],
            )
            assert scores["bleu"] == pytest.approx(expected.score)
        assert sum(b["num_sentences"] for b in row["test_bleu_by_length"]) == 6
    assert rows[0]["paper_bleu"] == {"all": 13.93, "no_unk": 24.19}
    assert rows[1]["paper_bleu"] == {"all": 26.75, "no_unk": 34.16}


def _check_outputs(output_dir, rows, printed):
    table = (output_dir / "table.txt").read_text()
    assert printed.startswith(table)
    lines = table.split("\n")
    assert lines[0].split()[:4] == ["model", "parameters", "steps", "train"]
    for line, row in zip(lines[1:3], rows, strict=True):
        cells = line.split()
        assert cells[:3] == [row["label"], f"{row['parameters']:,}", "3"]
        assert cells[4:6] == [
            f"{row['test']['bleu']:.2f}",
            f"{row['no_unk']['bleu']:.2f}",
        ]
    notes = " ".join(table.split())  # Wrapped at 79 columns.
    assert "6 sentences, 4 of them without an unknown word" in notes
    assert "Budget: 3 steps of 16 pairs per model." in notes
    (by_length,) = [line for line in lines if line.startswith("test BLEU by")]
    assert by_length.split()[-4:] == ["1-2", "3-4", "5-6", "7+"]
    saved = json.loads((output_dir / "table.json").read_text())
    assert saved["steps"] == 3
    assert saved["rows"] == json.loads(json.dumps(rows))
    # Figure 3: the two longest test verses, from RNNsearch-50.
    assert [f["test_index"] for f in saved["figure3"]] == [5, 1]
    assert {f["model"] for f in saved["figure3"]} == {"rnnsearch_50"}
    paths = [output_dir / "figure2_bleu_by_length.png"] + [
        pathlib.Path(f["path"]) for f in saved["figure3"]
    ]
    assert paths[1:] == [
        output_dir / f"figure3_alignment_0{i}.png" for i in (1, 2)
    ]
    for path in paths:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        height, width, _ = image.imread(path).shape
        assert height > 100 and width > 100


def test_table_figures_and_resume(tmp_path, capsys):
    arguments = _arguments(tmp_path, MODELS)
    rows = reproduce.main(arguments)
    output_dir = tmp_path / "out"
    _check_rows(rows, output_dir, steps=3)
    _check_outputs(output_dir, rows, capsys.readouterr().out)
    # Run again: nothing is trained or translated again.
    files = {
        name: (_sessions(output_dir / name),
               (output_dir / name / rd.LAST_WEIGHTS).stat().st_mtime_ns)
        for name in MODELS
    }  # fmt: skip
    again = reproduce.main(arguments)
    assert again == rows
    for name in MODELS:
        assert files[name] == (
            _sessions(output_dir / name),
            (output_dir / name / rd.LAST_WEIGHTS).stat().st_mtime_ns,
        )
    assert "trained and translated; read" in capsys.readouterr().err


class _Killed(Exception):
    pass


def test_a_killed_run_resumes_to_the_same_steps(tmp_path, monkeypatch):
    class KilledAtStep2(reproduce.StepBudget):
        def on_train_batch_end(self, batch, logs=None):
            super().on_train_batch_end(batch, logs)
            if self._done == 2:  # After the backup of step 2.
                raise _Killed

    arguments = _arguments(tmp_path, MODELS[:1], steps=4)
    with monkeypatch.context() as patch:
        patch.setattr(reproduce, "StepBudget", KilledAtStep2)
        with pytest.raises(_Killed):
            reproduce.main(arguments)
    run_dir = tmp_path / "out" / MODELS[0]
    assert not (run_dir / reproduce.TRANSLATIONS).exists()
    (row,) = reproduce.main(arguments)
    # Two sessions, 2 + 2 steps: the budget counts both.
    assert len(_sessions(run_dir)) == 2
    assert row["steps"] == reproduce.trained_steps(run_dir) == 4


def _iterations(model):
    return int(keras.ops.convert_to_numpy(model.optimizer.iterations))


def test_step_budget_stops_fit_at_the_budget():
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    x, y = np.ones((40, 2)), np.ones((40, 1))
    model.fit(x, y, batch_size=4, epochs=5, verbose=0,
              callbacks=[reproduce.StepBudget(13)])  # fmt: skip
    assert _iterations(model) == 13
    # A second `fit` counts the steps already made.
    model.fit(x, y, batch_size=4, epochs=5, verbose=0,
              callbacks=[reproduce.StepBudget(17)])  # fmt: skip
    assert _iterations(model) == 17
    with pytest.raises(ValueError, match="Received: 0"):
        reproduce.StepBudget(0)


def test_known_word_pairs_flags_unknown_words_on_either_side():
    source = WordTokenizer([*RESERVED_TOKENS, "the", "cat", "sleeps", "."])
    target = WordTokenizer([*RESERVED_TOKENS, "le", "chat", "dort", "."])
    pairs = [
        ("the cat sleeps.", "le chat dort."),  # every word known
        ("the dog sleeps.", "le chat dort."),  # "dog": source unknown
        ("the cat sleeps.", "le chien dort."),  # "chien": target unknown
        ("the dog sleeps.", "le chien dort."),  # both
        ("", ""),  # no word, no unknown word
    ]
    known = reproduce.known_word_pairs(source, target, pairs)
    assert known == [True, False, False, False, True]


def test_overrides_recipe_then_user_then_run_dir():
    args = reproduce.parse_args(
        ["--output-dir", "out", "--steps", "7", "--set",
         "training.batch_size=8", "--set", "rnnsearch_30:model.hidden_dim=16"]
    )  # fmt: skip
    search = resolve_config(None, reproduce.overrides_for("rnnsearch_30", args))
    encdec = resolve_config(None, reproduce.overrides_for("rnnencdec_50", args))
    cases = ((search, "rnnsearch", 30), (encdec, "rnnencdec", 50))
    for config, architecture, length in cases:
        assert config["model"]["architecture"] == architecture
        assert config["data"]["max_length"] == length
        assert config["data"]["corpus"] == "bible_en_fr"
        assert config["tokenizer"]["kind"] == "word"
        assert config["training"]["batch_size"] == 8  # --set wins
        assert config["training"]["epochs"] == 7
        assert config["training"]["patience"] == 7
        assert config["run_dir"] == str(
            pathlib.Path("out") / f"{architecture}_{length}"
        )
    assert search["model"]["hidden_dim"] == 16
    assert encdec["model"]["hidden_dim"] == 0  # the preset's
    pervasive = resolve_config(
        None, reproduce.overrides_for("pervasive_attention_50", args)
    )
    assert pervasive["model"]["architecture"] == "pervasive_attention"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--steps", "0"], "--steps must be at least 1"),
        (["--beam-size", "0"], "--beam-size must be at least 1"),
        (["--max-sentences", "-1"], "--max-sentences must be at least 0"),
        (["--models", "rnnsearch_50", "rnnsearch_50"], "names a model twice"),
        (["--models", "rnnsearch_70"], "invalid choice: 'rnnsearch_70'"),
    ],
)
def test_bad_options_are_rejected(argv, message, capsys):
    with pytest.raises(SystemExit):
        reproduce.parse_args(argv)
    assert message in capsys.readouterr().err


def test_a_scope_must_name_a_model():
    args = reproduce.parse_args(["--set", "rnnsearch:model.hidden_dim=8"])
    with pytest.raises(ConfigError, match="names no model"):
        reproduce.overrides_for("rnnsearch_50", args)


@pytest.mark.large
def test_the_real_configuration_on_the_bible(tmp_path, capsys):
    output_dir = tmp_path / "out"
    rows = reproduce.main(
        ["--output-dir", str(output_dir), "--steps", "2",
         "--max-sentences", "8", "--alignments", "1",
         "--set", "evaluation.max_sentences=8"]
    )  # fmt: skip
    assert [row["model"] for row in rows] == list(reproduce.MODELS)
    for row in rows:
        assert row["steps"] == 2
        assert row["test"]["sentences"] == 8
        config = rd.read_training_config(row["run_dir"])
        assert config["data"]["corpus"] == "bible_en_fr"
        assert config["tokenizer"]["kind"] == "word"
    saved = json.loads((output_dir / "table.json").read_text())
    assert saved["figure3"][0]["model"] == "rnnsearch_50"
    for name in ("figure2_bleu_by_length.png", "figure3_alignment_01.png"):
        assert (output_dir / name).read_bytes()[:4] == b"\x89PNG"
    assert "PervasiveAttention-50" in capsys.readouterr().out
