"""A tiny run directory, laid out like `keras-bahdanau train` writes one.

Tests of everything that reads presets (translate, evaluate,
plot-attention, export) build one with `build_run_dir(path)`: a toy
German-English corpus, word tokenizers and a tiny `RNNSearch` saved as the
preset at the top (its weights the best checkpoint) and as
`last.weights.h5`, with the training config, in a couple of seconds.

`shared_run_dir()` builds one such directory for the whole test session
(random weights; tests must not modify it): the `run_dir` fixture of
`tests/conftest.py`, with `translator` (its `Translator`).
"""

import pathlib

import keras
import numpy as np

from keras_bahdanau import presets
from keras_bahdanau import run_directory
from keras_bahdanau.callbacks import inference_copy
from keras_bahdanau.config import resolve_config
from keras_bahdanau.data import build_tokenizer
from keras_bahdanau.data import make_dataset
from keras_bahdanau.decoding.config import run_search
from keras_bahdanau.models import PervasiveAttention
from keras_bahdanau.models import RNNSearch
from keras_bahdanau.preprocessor import TranslationPreprocessor
from keras_bahdanau.training import compile_model
from keras_bahdanau.translator import Translator


def reversal_corpus(directory, sources):
    """Writes `sources` and their word-reversed targets as a `files` corpus.

    Returns the config overrides that train on it.
    """
    directory = pathlib.Path(directory)
    (directory / "train.src").write_text("\n".join(sources) + "\n")
    (directory / "train.tgt").write_text(
        "\n".join(" ".join(s.split()[::-1]) for s in sources) + "\n"
    )
    return [
        "data.corpus=files",
        f"data.source_file={directory / 'train.src'}",
        f"data.target_file={directory / 'train.tgt'}",
    ]


# A run as small as `keras-bahdanau train` allows: the paper's recipe
# (word vocabularies, no regularisation) and sizes of 8; the training
# tests check the plumbing, the small-data recipe has tests of its own.
TINY = [
    "recipe=paper",
    "model.preset=",
    "model.embedding_dim=8",
    "model.hidden_dim=8",
    "model.maxout_dim=4",
    "training.optimizer=adam",
    "data.max_length=10",
    "evaluation.beam_size=2",
    "evaluation.max_sentences=4",
]
PAIRS = [
    ("Das Haus ist klein.", "The house is small."),
    ("Das Haus ist groß.", "The house is big."),
    ("Der Hund ist klein.", "The dog is small."),
    ("Die Katze schläft.", "The cat sleeps."),
    ("Der Hund schläft im Haus.", "The dog sleeps in the house."),
    ("Ich sehe die Katze.", "I see the cat."),
    ("Ich sehe den Hund.", "I see the dog."),
    ("Wir haben ein Haus.", "We have a house."),
    ("Die Katze ist groß.", "The cat is big."),
    ("Das ist gut.", "That is good."),
]
MAX_LENGTH = 12


def build_run_dir(path, fit_epochs=0, seed=0, architecture="rnnsearch"):
    """Writes a run directory with a tiny model into `path`.

    Args:
        path: the (existing or new) folder.
        fit_epochs: epochs of Adam on `PAIRS` (0: random Glorot weights
            and a random `v_a`, fine for testing the plumbing; a few dozen
            epochs make the model translate `PAIRS` roughly).
        seed: weight initialization seed.
        architecture: `"rnnsearch"` or `"pervasive_attention"` (2 layers,
            growth rate 4: smaller than any preset, so config.json names
            the architecture but not all of its sizes).

    Returns:
        `path` as a `pathlib.Path`.
    """

    path = pathlib.Path(path)
    path.mkdir(parents=True, exist_ok=True)
    source = build_tokenizer("word", [s for s, _ in PAIRS], 100)
    target = build_tokenizer("word", [t for _, t in PAIRS], 100)
    keras.utils.set_random_seed(seed)
    if architecture == "pervasive_attention":
        model = PervasiveAttention(
            source.vocabulary_size,
            target.vocabulary_size,
            source_embedding_dim=8,
            target_embedding_dim=8,
            growth_rate=4,
            num_layers=2,
            kernel_size=3,
            bottleneck_factor=2,
            dropout=0.0,
        )
        model_overrides = ["model.embedding_dim=8"]
    elif architecture == "rnnsearch":
        model = RNNSearch(
            source.vocabulary_size,
            target.vocabulary_size,
            embedding_dim=8,
            hidden_dim=8,
            maxout_dim=4,
            initialization="glorot",
        )
        model_overrides = [
            "model.embedding_dim=8",
            "model.hidden_dim=8",
            "model.maxout_dim=4",
            "model.initialization=glorot",
        ]
    else:
        raise ValueError(
            "`architecture` must be 'rnnsearch' or 'pervasive_attention'. "
            f"Received: architecture={architecture!r}"
        )
    # Glorot initialization keeps v_a = 0 (uniform alignments, as in the
    # paper); random v_a gives alignments that tell source words apart.
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        if "score_vector" in variable.path:
            variable.assign(3.0 * rng.normal(size=variable.shape))
        elif architecture == "pervasive_attention":
            # The same weights on every backend, batch-norm statistics
            # included: with Glorot weights and the initial statistics the
            # untrained model emits EOS at once on some backends.
            shape = tuple(variable.shape)
            if "moving_variance" in variable.path:
                value = rng.uniform(0.5, 2.0, shape)
            else:
                value = rng.normal(0.0, 0.5, shape)
            variable.assign(value.astype("float32"))
    if fit_epochs:
        dataset, _ = make_dataset(
            PAIRS, source, target, batch_size=len(PAIRS), seed=seed
        )
        compile_model(model, "adam", learning_rate=0.02)
        model.fit(dataset, epochs=fit_epochs, verbose=0)
    # The config `keras-bahdanau train` would have resolved and written.
    config = {
        **resolve_config(
            overrides=[
                f"run_dir={path}",
                # Word vocabularies and no regularisation, like the model.
                "recipe=paper",
                f"data.max_length={MAX_LENGTH}",
                "tokenizer.source_vocabulary_size=100",
                "tokenizer.target_vocabulary_size=100",
                f"model.architecture={architecture}",
                "model.preset=",
                *model_overrides,
                f"training.epochs={max(fit_epochs, 1)}",
                "training.optimizer=adam",
                "training.learning_rate=0.02",
                f"training.seed={seed}",
                # SearchConfig's default: tests compare the commands, which
                # take the run's alpha, with searches of their own.
                "evaluation.length_penalty=0",
            ]
        ),
        "parameters": model.count_params(),
    }
    run_directory.write_training_config(path, config)
    # The preset `train` writes at the top, and its two checkpoints.
    preprocessor = TranslationPreprocessor(source, target, MAX_LENGTH)
    search = run_search(config["evaluation"])
    presets.write_preset(path, Translator(model, preprocessor, search=search))
    for name in (presets.WEIGHTS, run_directory.LAST_WEIGHTS):
        inference_copy(model).save_weights(path / name)
    return path


_shared = {}


def shared_run_dir(tmp_path_factory):
    """`build_run_dir()` once per test session (pytest's tmp_path_factory)."""
    if "run_dir" not in _shared:
        _shared["run_dir"] = build_run_dir(tmp_path_factory.mktemp("run"))
    return _shared["run_dir"]
