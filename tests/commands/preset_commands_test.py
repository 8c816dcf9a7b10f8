"""One format: a trained run and a preset saved from a script are read
alike by every command, which translates as the API does.

A tiny model trains (in-process) with its own search, beam 3 and length
penalty 0.7, unlike `SearchConfig()`; `Translator.save_to_preset` copies
it. Each command runs on both folders without a search flag and must give
what `Translator.from_preset(folder)` gives with that search, typed here.
"""

import json
import pathlib

import numpy as np
import pytest
import tensorflow as tf
from matplotlib import image

from keras_bahdanau import cli
from keras_bahdanau import export
from keras_bahdanau.config import resolve_config
from keras_bahdanau.decoding import SearchConfig
from keras_bahdanau.metrics import corpus_scores
from keras_bahdanau.trainer import train
from keras_bahdanau.translator import Translator
from tests.run_fixture import TINY
from tests.run_fixture import reversal_corpus

# The run's own search, as its config sets it.
OWN = SearchConfig(beam_size=3, length_penalty=0.7)
SENTENCES = ["w1 w2 w3", "w4 w5", "", "w6 w7 w8 w9 w10"]
REFERENCES = ["w3 w2 w1", "w5 w4", "", "w10 w9 w8 w7 w6"]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """`{"run": a run directory, "saved": its save_to_preset copy}`."""
    folder = tmp_path_factory.mktemp("one_format")
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(12)]
    sources = [
        " ".join(rng.choice(words, rng.integers(2, 6))) for _ in range(80)
    ]
    config = resolve_config(
        None,
        TINY
        + reversal_corpus(folder, sources)
        + [
            "training.epochs=2",
            "training.batch_size=8",
            "evaluation.beam_size=3",
            "evaluation.length_penalty=0.7",
            f"run_dir={folder / 'run'}",
        ],
    )
    run = train(config)
    saved = Translator.from_preset(run).save_to_preset(folder / "saved")
    return {"run": run, "saved": saved}


@pytest.fixture(params=["run", "saved"])
def preset(request, folders):
    return folders[request.param]


def test_a_preset_searches_as_its_run_said(preset):
    assert Translator.from_preset(preset).search == OWN


def test_translate_gives_the_api_s_translations(preset, tmp_path, capsys):
    translator = Translator.from_preset(preset)
    (tmp_path / "in").write_text("\n".join(SENTENCES) + "\n")
    arguments = ["translate", str(preset), "--input", str(tmp_path / "in")]
    assert cli.main(arguments) == 0
    assert capsys.readouterr().out.splitlines() == [
        t.text for t in translator.translate(SENTENCES, OWN)
    ]
    # The scores show the length penalty: the preset's, not none.
    assert cli.main([*arguments, "--n-best", "2"]) == 0
    expected = translator.translate(
        SENTENCES, SearchConfig(beam_size=3, n_best=2, length_penalty=0.7)
    )
    assert capsys.readouterr().out.splitlines() == [
        f"{i} ||| {hypothesis.text} ||| {hypothesis.score:.6f}"
        for i, hypotheses in enumerate(expected)
        for hypothesis in hypotheses
    ]


def test_evaluate_scores_the_api_s_translations(preset, tmp_path, capsys):
    translator = Translator.from_preset(preset)
    pairs = [p for p in zip(SENTENCES, REFERENCES, strict=True) if p[0]]
    for index, name in enumerate(("src", "ref")):
        (tmp_path / name).write_text("".join(p[index] + "\n" for p in pairs))
    arguments = ["evaluate", str(preset), "--source", str(tmp_path / "src")]
    assert cli.main([*arguments, "--reference", str(tmp_path / "ref")]) == 0
    texts = [t.text for t in translator.translate([s for s, _ in pairs], OWN)]
    scores = corpus_scores(texts, [r for _, r in pairs])
    row = capsys.readouterr().out.splitlines()[1].split()
    assert row[1:] == [f"{scores['bleu']:.2f}", f"{scores['chrf']:.2f}", "3"]


def test_plot_attention_draws_the_api_s_alignments(preset, tmp_path, capsys):
    translator = Translator.from_preset(preset)
    arguments = ["plot-attention", str(preset), "--output-dir", str(tmp_path)]
    arguments += ["--sentence", SENTENCES[0], "--dpi", "20"]
    assert cli.main(arguments) == 0
    expected = translator.translate(SENTENCES[0], OWN)
    path = tmp_path / "attention_001.png"
    assert capsys.readouterr().out.splitlines() == [f"{path}\t{expected.text}"]
    # plot_attention's size: 1.5 inch + 0.35 inch per token, at 20 dpi.
    height, width = (
        round((1.5 + 0.35 * len(tokens)) * 20)
        for tokens in (expected.target_tokens, expected.source_tokens)
    )
    assert image.imread(path).shape[:2] == (height, width)


def test_export_serves_the_api_s_translations(folders, tmp_path, capsys):
    """The folder of `save_to_preset`, which the CLI did not read before."""
    preset = folders["saved"]
    output = tmp_path / "saved_model"
    assert cli.main(["export", str(preset), "--output", str(output)]) == 0
    version = pathlib.Path(capsys.readouterr().out.strip())
    assert version == output / "1"
    metadata = json.loads((version / export.METADATA_FILE).read_text())
    assert metadata["preset"] == str(preset.resolve())
    assert (
        metadata["settings"]["beam_size"],
        metadata["settings"]["length_penalty"],
    ) == (3, 0.7)
    served = tf.saved_model.load(str(version)).signatures["serving_default"]
    texts = served(text=tf.constant(SENTENCES))["translation"].numpy()
    translator = Translator.from_preset(preset)
    assert [text.decode() for text in texts] == [
        t.text for t in translator.translate(SENTENCES, OWN)
    ]
