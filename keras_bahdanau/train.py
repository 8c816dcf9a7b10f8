"""`keras-bahdanau train`: config file in, run directory out.

The config is TOML (see `examples/ding_de_en.toml`); any key can be
overridden on the command line with `--set section.key=value`, and the most
used ones have their own flags. Everything is checked before training
starts: an unknown key, a missing file, an unwritable run directory or an
empty corpus stop the command with a message naming the problem.

A run killed at any point (even SIGKILL) continues from its last backup
when the same command is started again (`FiniteBackupAndRestore`, a
`keras.callbacks.BackupAndRestore`, every `training.backup_every_steps`
steps and at each epoch end).

Faults stop training with a message and leave the files written before
intact (`keras_bahdanau/callbacks.py`): a NaN or Inf loss (naming the
step), NaN or Inf weights about to be saved, and a checkpoint that cannot
be written (disk full, run directory gone; checkpoints are replaced
atomically). `[distribution]` trains on several devices
(`keras_bahdanau/distribution.py`, `docs/distributed.md`).
"""

import copy
import csv
import json
import math
import sys
import tomllib
import warnings
from pathlib import Path

import keras

from keras_bahdanau import distribution as kdist
from keras_bahdanau import run_directory as rd
from keras_bahdanau.callbacks import AtomicModelCheckpoint
from keras_bahdanau.callbacks import CheckpointError
from keras_bahdanau.callbacks import DevScores
from keras_bahdanau.callbacks import FiniteBackupAndRestore
from keras_bahdanau.callbacks import NonFiniteLoss
from keras_bahdanau.models.translation_model import REGULARIZATION

# The schema: every key a config may set, with its default. The defaults
# are the "small_data" recipe; RECIPES["paper"] is the paper's.
DEFAULTS = {
    "run_dir": "runs/ding_de_en",
    # "small_data" (these defaults) or "paper" (RECIPES["paper"] on top).
    "recipe": "small_data",
    "data": {
        # "ding_de_en", "bible_en_fr" (World English Bible -> Louis Segond
        # 1910), "files" (aligned files) or "tsv".
        "corpus": "ding_de_en",
        "source_file": "",
        "target_file": "",
        # "files" with these: explicit dev and test sets; without them the
        # pairs of source_file/target_file are split by hash.
        "dev_source_file": "",
        "dev_target_file": "",
        "test_source_file": "",
        "test_target_file": "",
        "tsv_file": "",
        "max_length": 50,
        "max_train_pairs": 0,  # 0: all
        "lowercase": False,
    },
    "tokenizer": {
        # "word", "wordpiece", or SentencePiece "unigram" or "bpe".
        "kind": "unigram",
        "source_vocabulary_size": 4000,
        "target_vocabulary_size": 4000,
        # One vocabulary learnt from both languages (the source size).
        "joint": False,
    },
    "model": {
        # "rnnsearch", "rnnencdec" or "pervasive_attention".
        "architecture": "rnnsearch",
        "preset": "rnnsearch_tiny",
        # Overrides of the preset; 0 / "" keep the preset's value.
        "embedding_dim": 0,
        "hidden_dim": 0,
        "maxout_dim": 0,
        # Regularisation (see RNNSearch); all 0 in the paper.
        "dropout": 0.2,  # on the readout t_i
        "embedding_dropout": 0.1,
        "word_dropout": 0.1,
        "hidden_dropout": 0.1,
        "recurrent_dropout": 0.0,
        "tie_embeddings": True,
        "initialization": "glorot",
    },
    "training": {
        "optimizer": "adam",  # or "adadelta", the paper's
        "learning_rate": 0.002,  # 0: the optimizer's default
        "clipnorm": 1.0,
        "label_smoothing": 0.1,
        "epochs": 10,
        "batch_size": 64,
        "precision": "float32",  # or "mixed_float16", "mixed_bfloat16"
        # "bleu": the best checkpoint, early stopping and learning-rate
        # decay follow dev BLEU; "loss": dev loss.
        "selection": "bleu",
        "patience": 3,  # early stopping, in epochs
        # Learning rate times lr_decay after lr_patience epochs without
        # progress on the selection criterion; 0: constant.
        "lr_decay": 0.5,
        "lr_patience": 2,
        "seed": 1234,
        "backup_every_steps": 100,
    },
    "evaluation": {
        "beam_size": 5,
        "max_sentences": 0,  # 0: the whole dev/test split
        # Dev sentences translated after each epoch for selection on BLEU
        # (the first N of the dev split; 0: all).
        "selection_sentences": 300,
        # Unknown words replaced by their most attended source word
        # (word-level tokenizers only).
        "replace_unknown": True,
    },
    "distribution": {
        # "none", "data_parallel" or "model_parallel" (JAX), "mirrored"
        # (TensorFlow); training.batch_size stays the global batch.
        "strategy": "none",
        "devices": 0,  # 0: all; on a CPU-only host, N splits the CPU
        "model_shards": 0,  # model_parallel: devices per vocabulary; 0: all
    },
}

FLAGS = {
    "--run-dir": "run_dir",
    "--corpus": "data.corpus",
    "--tokenizer": "tokenizer.kind",
    "--architecture": "model.architecture",
    "--preset": "model.preset",
    "--optimizer": "training.optimizer",
    "--epochs": "training.epochs",
    "--batch-size": "training.batch_size",
    "--precision": "training.precision",
    "--distribution": "distribution.strategy",
    "--devices": "distribution.devices",
}

# The paper's recipe (section 4.2, appendix B): word shortlists of 30,000,
# N(0, 0.01^2) initialisation, no regularisation, Adadelta, batches of 80,
# early stopping on the dev loss.
RECIPES = {
    "small_data": {},
    "paper": {
        "tokenizer": {
            "kind": "word",
            "source_vocabulary_size": 30000,
            "target_vocabulary_size": 30000,
        },
        "model": {**REGULARIZATION, "initialization": "paper"},
        "training": {
            "optimizer": "adadelta",
            "learning_rate": 0.0,
            "label_smoothing": 0.0,
            "batch_size": 80,
            "selection": "loss",
            "lr_decay": 0.0,
        },
    },
}

CHOICES = {
    "recipe": tuple(RECIPES),
    "data.corpus": ("ding_de_en", "bible_en_fr", "files", "tsv"),
    "tokenizer.kind": ("word", "wordpiece", "unigram", "bpe"),
    "model.architecture": ("rnnsearch", "rnnencdec", "pervasive_attention"),
    "training.optimizer": ("adadelta", "adam"),
    "training.selection": ("bleu", "loss"),
    "training.precision": ("float32", "mixed_float16", "mixed_bfloat16"),
    "distribution.strategy": kdist.STRATEGIES,
}


class ConfigError(ValueError):
    """A config that cannot run; the message names the key and the fix."""


def _merge(defaults, overrides, prefix=""):
    merged = copy.deepcopy(defaults)
    for key, value in overrides.items():
        name = f"{prefix}{key}"
        if key not in defaults:
            raise ConfigError(
                f"Unknown config key {name!r}. Known keys here: "
                f"{sorted(defaults)}"
            )
        if isinstance(defaults[key], dict):
            if not isinstance(value, dict):
                raise ConfigError(f"{name!r} must be a table (section).")
            merged[key] = _merge(defaults[key], value, f"{name}.")
        else:
            merged[key] = _coerce(name, defaults[key], value)
    return merged


def _coerce(name, default, value):
    """Converts `value` to the type of `default` (strings come from CLI)."""
    kind = type(default)
    if isinstance(value, str) and kind is not str:
        if kind is bool:
            if value.lower() not in ("true", "false"):
                raise ConfigError(f"{name} must be true or false: {value!r}")
            return value.lower() == "true"
        try:
            value = kind(value)
        except ValueError:
            raise ConfigError(
                f"{name} must be a {kind.__name__}. Received: {value!r}"
            ) from None
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if type(value) is not kind:
        raise ConfigError(
            f"{name} must be a {kind.__name__}. Received: {value!r}"
        )
    if name in CHOICES and value not in CHOICES[name]:
        raise ConfigError(
            f"{name} must be one of {CHOICES[name]}. Received: {value!r}"
        )
    return value


def _nested(dotted, value):
    *sections, key = dotted.split(".")
    tree = {key: value}
    for section in reversed(sections):
        tree = {section: tree}
    return tree


def _deep_update(tree, update):
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(tree.get(key), dict):
            _deep_update(tree[key], value)
        else:
            tree[key] = value


def resolve_config(config_path=None, overrides=()):
    """The config from a TOML file plus `section.key=value` overrides."""
    raw = {}
    if config_path is not None:
        path = Path(config_path)
        if not path.is_file():
            raise ConfigError(f"Config file not found: {path}")
        try:
            raw = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as error:
            raise ConfigError(f"{path} is not valid TOML: {error}") from None
    for override in overrides:
        key, sep, value = override.partition("=")
        if not sep:
            raise ConfigError(
                f"Overrides look like section.key=value. Received: {override!r}"
            )
        _deep_update(raw, _nested(key.strip(), value.strip()))
    recipe = raw.get("recipe", DEFAULTS["recipe"])
    if recipe not in RECIPES:
        raise ConfigError(
            f"recipe must be one of {tuple(RECIPES)}. Received: {recipe!r}"
        )
    config = _merge(_merge(DEFAULTS, RECIPES[recipe]), raw)
    for key in ("epochs", "batch_size", "max_length", "backup_every_steps"):
        section = "data" if key == "max_length" else "training"
        if config[section][key] <= 0:
            raise ConfigError(
                f"{section}.{key} must be positive. "
                f"Received: {config[section][key]}"
            )
    for section, key in (
        ("training", "label_smoothing"),
        ("training", "lr_decay"),
    ):
        if not 0.0 <= config[section][key] < 1.0:
            raise ConfigError(
                f"{section}.{key} must be in [0, 1). "
                f"Received: {config[section][key]}"
            )
    if config["training"]["lr_patience"] < 1:
        raise ConfigError(
            "training.lr_patience must be positive. "
            f"Received: {config['training']['lr_patience']}"
        )
    if config["evaluation"]["selection_sentences"] < 0:
        raise ConfigError(
            "evaluation.selection_sentences must be 0 (all) or positive. "
            f"Received: {config['evaluation']['selection_sentences']}"
        )
    for key in ("devices", "model_shards"):
        if config["distribution"][key] < 0:
            raise ConfigError(
                f"distribution.{key} must be 0 (all) or positive. "
                f"Received: {config['distribution'][key]}"
            )
    return config


def load_corpus(data):
    """`{"train": pairs, "dev": pairs, "test": pairs}` for a data config."""
    try:
        return _load_corpus(data)
    except (OSError, ValueError) as error:
        if isinstance(error, ConfigError):
            raise
        raise ConfigError(f"[data] {error}") from None


def _load_corpus(data):
    from keras_bahdanau import data as kd

    corpus = data["corpus"]
    if corpus == "ding_de_en":
        splits = {s: kd.ding_de_en(s) for s in ("train", "dev", "test")}
    elif corpus == "bible_en_fr":
        splits = {s: kd.bible(s) for s in ("train", "dev", "test")}
    elif corpus == "files":
        given = [
            split
            for split in ("dev", "test")
            if data[f"{split}_source_file"] or data[f"{split}_target_file"]
        ]
        keys = ["source_file", "target_file"] + [
            f"{split}_{side}_file"
            for split in given
            for side in ("source", "target")
        ]
        for key in keys:
            if not data[key] or not Path(data[key]).is_file():
                raise ConfigError(
                    f"data.{key} must name an existing file for corpus "
                    f"'files'. Received: {data[key]!r}"
                )
        pairs = kd.read_parallel_files(data["source_file"], data["target_file"])
        if given == ["dev", "test"]:
            splits = {"train": pairs}
        elif not given:
            splits = kd.split_pairs(pairs)
        else:
            raise ConfigError(
                "corpus 'files' takes both a dev and a test set "
                "(data.dev_source_file, data.dev_target_file, "
                "data.test_source_file, data.test_target_file) or neither "
                f"(a hash split of source_file/target_file). Received: only "
                f"{given[0]}."
            )
        for split in given:
            splits[split] = kd.read_parallel_files(
                data[f"{split}_source_file"], data[f"{split}_target_file"]
            )
    else:
        if not data["tsv_file"] or not Path(data["tsv_file"]).is_file():
            raise ConfigError(
                "data.tsv_file must name an existing file for corpus 'tsv'. "
                f"Received: {data['tsv_file']!r}"
            )
        splits = kd.split_pairs(kd.read_tsv(data["tsv_file"]))
    for name, pairs in splits.items():
        if not pairs:
            raise ConfigError(
                f"The {name} split of corpus {corpus!r} is empty: the corpus "
                "is too small to split into train/dev/test."
            )
    if data["max_train_pairs"]:
        splits["train"] = splits["train"][: data["max_train_pairs"]]
    return splits


def build_model(model_config, source_size, target_size):
    from keras_bahdanau import models

    architecture = model_config["architecture"]
    sizes = {
        key: model_config[key]
        for key in ("embedding_dim", "hidden_dim", "maxout_dim")
        if model_config[key]
    }
    kwargs = dict(
        source_vocabulary_size=source_size, target_vocabulary_size=target_size
    )
    if architecture == "pervasive_attention":
        cls = models.PervasiveAttention
        if set(sizes) - {"embedding_dim"}:
            raise ConfigError(
                "pervasive_attention has no hidden_dim or maxout_dim; set "
                "model.preset (or model.embedding_dim) instead."
            )
        if "embedding_dim" in sizes:
            kwargs.update(
                source_embedding_dim=sizes["embedding_dim"],
                target_embedding_dim=sizes["embedding_dim"],
            )
        kwargs["dropout"] = model_config["dropout"]
    else:
        cls = {"rnnsearch": models.RNNSearch, "rnnencdec": models.RNNEncDec}[
            architecture
        ]
        kwargs.update(
            sizes,
            **{key: model_config[key] for key in REGULARIZATION},
            initialization=model_config["initialization"],
        )
    try:
        if model_config["preset"]:
            return cls.from_preset(model_config["preset"], **kwargs)
        return cls(**kwargs)
    except (TypeError, ValueError) as error:
        raise ConfigError(f"[model] cannot build the model: {error}") from None


def _check_writable(run_dir):
    run_dir = Path(run_dir)
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        probe = run_dir / ".write_test"
        probe.write_text("ok")
        probe.unlink()
    except OSError as error:
        raise ConfigError(
            f"The run directory {run_dir} is not writable: {error}"
        ) from None


def _comparable(config):
    """The parts of a config that must match to resume a run."""
    training = {
        key: value
        for key, value in config.get("training", {}).items()
        if key not in ("epochs", "patience")  # may grow on resume
    }
    return {
        # A run may resume on other devices: the batch is global.
        **{key: config.get(key) for key in DEFAULTS if key != "distribution"},
        "training": training,
    }


def _check_same_run(run_dir, config):
    """A run directory holds one experiment: refuse a different config."""
    path = Path(run_dir) / rd.CONFIG
    if not path.is_file():
        return False
    saved = json.loads(path.read_text(encoding="utf-8"))
    if _comparable(saved) != _comparable(config):
        raise ConfigError(
            f"{run_dir} already holds a run with a different config. Use "
            "another --run-dir, or delete that directory to start over."
        )
    return True


def _best_logged(run_dir, monitor, mode):
    """The best `monitor` value in the run's CSV log (for a resume)."""
    worst = -math.inf if mode == "max" else math.inf
    path = Path(run_dir) / rd.TRAINING_LOG
    if not path.is_file():
        return worst
    with open(path, newline="") as file:
        values = [float(row[monitor]) for row in csv.DictReader(file)]
    return (max if mode == "max" else min)(values, default=worst)


def train(config, callbacks=()):
    """Trains per `config` (from `resolve_config`); returns the run dir.

    Args:
        config: a resolved config.
        callbacks: Keras callbacks to run after the built-in ones (which
            checkpoint, back up, log and stop early).

    Raises:
        ConfigError: the config cannot run; nothing was trained.
        FloatingPointError: the loss or the weights became NaN or Inf.
        CheckpointError: a checkpoint could not be written.
        The checkpoints written before such an error are kept.
    """
    from keras_bahdanau import data as kd
    from keras_bahdanau.training import compile_model
    from keras_bahdanau.training import make_optimizer

    training = config["training"]
    try:
        # Before anything runs on the backend: device counts are fixed then.
        plan = kdist.prepare(config["distribution"], training["batch_size"])
    except ValueError as error:
        raise ConfigError(f"[distribution] {error}") from None
    run_dir = Path(config["run_dir"])
    resuming = _check_same_run(run_dir, config) if run_dir.exists() else False
    _check_writable(run_dir)
    splits = load_corpus(config["data"])
    keras.utils.set_random_seed(config["training"]["seed"])
    keras.mixed_precision.set_global_policy(config["training"]["precision"])

    tokenizers = _tokenizers(run_dir, config, splits["train"], resuming)

    datasets = {}
    for split in ("train", "dev"):
        # The report is printed below; make_dataset's warning of the same
        # text (for library users) would say it twice.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="make_dataset: ")
            datasets[split], report = kd.make_dataset(
                splits[split],
                tokenizers["source"],
                tokenizers["target"],
                batch_size=training["batch_size"],
                max_length=config["data"]["max_length"],
                shuffle=split == "train",
                seed=training["seed"],
                # Fixed batch shapes: XLA compiles once per length bucket.
                # The pairs left over differ each epoch (reshuffled).
                drop_remainder=split == "train",
            )
        print(f"[{split}] {report}")

    sizes = (
        tokenizers["source"].vocabulary_size,
        tokenizers["target"].vocabulary_size,
    )
    try:
        kdist.check_vocabulary_sizes(plan, *sizes)
    except ValueError as error:
        raise ConfigError(f"[distribution] {error}") from None
    # fit() deletes the backup when it ends; a last model without one is a
    # finished run (e.g. killed during the final evaluation): evaluate only.
    finished = (run_dir / rd.LAST_MODEL).is_file() and not (
        run_dir / rd.BACKUP
    ).exists()
    with kdist.training_scope(plan):
        model = build_model(config["model"], *sizes)
        optimizer = make_optimizer(
            training["optimizer"],
            training["learning_rate"] or None,
            training["clipnorm"] or None,
        )
        compile_model(
            model,
            optimizer,
            label_smoothing=training["label_smoothing"],
            **kdist.compile_arguments(plan),
        )
        # BackupAndRestore needs a built model and optimizer.
        model.optimizer.build(model.trainable_variables)
        # Not from the training data: an iteration would move its shuffling.
        kdist.build_compiled_model(plan, model, datasets["dev"])

        rd.write_config(run_dir, {**config, "parameters": model.count_params()})
        print(
            f"{config['model']['architecture']} with "
            f"{model.count_params():,} parameters on the "
            f"{keras.backend.backend()} backend, "
            f"{plan.describe(training['batch_size'])}; run directory {run_dir}"
        )
        if not finished:
            _announce_resume(run_dir)
            model.fit(
                datasets["train"],
                validation_data=kdist.validation_data(plan, datasets["dev"]),
                epochs=training["epochs"],
                callbacks=[
                    *_callbacks(run_dir, config, model, tokenizers, splits),
                    *callbacks,
                ],
                shuffle=False,  # the dataset shuffles itself each epoch
                verbose=1 if sys.stdout.isatty() else 2,  # bar on a terminal
            )
    if finished:
        print(f"Training in {run_dir} already finished; evaluating only.")
    # Outside the training scope: one device decodes.
    evaluate_run(run_dir, splits, config["evaluation"])
    return run_dir


def _announce_resume(run_dir):
    """Says where a killed run resumes, before fit() restores its backup."""
    metadata = Path(run_dir) / rd.BACKUP / "training_metadata.json"
    if not metadata.is_file():
        return
    try:
        # Written by keras.callbacks.BackupAndRestore: the epoch (0-based)
        # and the batch within it of the last backup.
        state = json.loads(metadata.read_text(encoding="utf-8"))
        epoch, batch = int(state["epoch"]), int(state["batch"])
    except (OSError, ValueError, KeyError, TypeError):
        print(f"Resuming {run_dir} from its backup.")
        return
    print(
        f"Resuming {run_dir} from its backup: epoch {epoch + 1}"
        + (f", from batch {batch} of it." if batch else ", from its start.")
    )


def _tokenizers(run_dir, config, pairs, resuming):
    """The run's source and target tokenizers: learnt, or read on resume."""
    from keras_bahdanau import data as kd

    settings = config["tokenizer"]
    tokenizers = {}
    for side, index, directory in (
        ("source", 0, rd.SOURCE_VOCABULARY),
        ("target", 1, rd.TARGET_VOCABULARY),
    ):
        path = run_dir / directory
        if resuming and path.is_dir():
            tokenizers[side] = kd.load_tokenizer(path)
            continue
        if settings["joint"] and side == "target":
            tokenizers[side] = tokenizers["source"]
        else:
            texts = [pair[index] for pair in pairs]
            if settings["joint"]:
                texts += [target for _, target in pairs]
            try:
                tokenizers[side] = kd.build_tokenizer(
                    settings["kind"],
                    texts,
                    settings[f"{side}_vocabulary_size"],
                    lowercase=config["data"]["lowercase"],
                )
            except ValueError as error:
                raise ConfigError(f"[tokenizer] {error}") from None
        tokenizers[side].save(path)
    return tokenizers


def _selection(training):
    """The logged value that selects the best epoch, and its mode."""
    if training["selection"] == "bleu":
        return "val_bleu", "max"
    return "val_loss", "min"


def _callbacks(run_dir, config, model, tokenizers, splits):
    from keras_bahdanau.translator import Translator

    training, evaluation = config["training"], config["evaluation"]
    monitor, mode = _selection(training)
    selection = []
    if training["selection"] == "bleu":
        pairs = splits["dev"][: evaluation["selection_sentences"] or None]
        translator = Translator(
            model, tokenizers["source"], tokenizers["target"]
        )

        def translate():
            translations = translator.translate(
                [source for source, _ in pairs],
                beam_size=evaluation["beam_size"],
                batch_size=64,
            )
            return [translation.text for translation in translations]

        selection.append(DevScores(translate, [t for _, t in pairs]))
    if training["lr_decay"]:
        selection.append(
            keras.callbacks.ReduceLROnPlateau(
                monitor=monitor,
                mode=mode,
                factor=training["lr_decay"],
                patience=training["lr_patience"],
                verbose=1,
            )
        )
    best = AtomicModelCheckpoint(
        run_dir / rd.BEST_MODEL,
        monitor=monitor,
        mode=mode,
        save_best_only=True,
    )
    best.best = _best_logged(run_dir, monitor, mode)  # survive a resume
    return [
        NonFiniteLoss(),  # first: it stops a diverged step before any save
        # Before everything that reads the epoch's logs.
        *selection,
        best,
        AtomicModelCheckpoint(run_dir / rd.LAST_MODEL),
        keras.callbacks.CSVLogger(run_dir / rd.TRAINING_LOG, append=True),
        # After the checkpoints and the log: a backup that says "epoch e is
        # done" comes after everything epoch e wrote.
        FiniteBackupAndRestore(
            run_dir / rd.BACKUP,
            save_freq=training["backup_every_steps"],
            double_checkpoint=True,
        ),
        keras.callbacks.EarlyStopping(
            monitor=monitor, mode=mode, patience=training["patience"]
        ),
        keras.callbacks.TensorBoard(run_dir / rd.TENSORBOARD),
    ]


def evaluate_run(run_dir, splits, evaluation):
    """Dev and test BLEU/chrF of the best model, into `results.json`."""
    from keras_bahdanau.data import WordTokenizer
    from keras_bahdanau.evaluation import evaluate
    from keras_bahdanau.translator import Translator

    # Whole sentences: no truncation at the training length limit.
    translator = Translator.from_run_dir(
        run_dir, checkpoint="best", max_source_length=None
    )
    # Off for subwords, which have (almost) no [UNK] and no word to copy.
    replace_unknown = evaluation["replace_unknown"] and all(
        isinstance(tokenizer, WordTokenizer)
        for tokenizer in (
            translator.source_tokenizer,
            translator.target_tokenizer,
        )
    )
    results = {}
    for split in ("dev", "test"):
        pairs = splits[split][: evaluation["max_sentences"] or None]
        scores = evaluate(
            translator,
            [source for source, _ in pairs],
            [target for _, target in pairs],
            beam_size=evaluation["beam_size"],
            replace_unknown=replace_unknown,
        )
        results[split] = {
            key: scores[key]
            for key in ("bleu", "chrf", "bleu_signature", "chrf_signature")
        }
        results[split]["sentences"] = len(pairs)
        print(
            f"[{split}] BLEU {scores['bleu']:.2f}  chrF {scores['chrf']:.2f}"
            f"  ({len(pairs)} sentences, beam {evaluation['beam_size']}"
            f"{', unknown words replaced' if replace_unknown else ''}; "
            f"{scores['bleu_signature']})"
        )
    rd.atomic_write_text(run_dir / rd.RESULTS, json.dumps(results, indent=2))
    return results


def add_arguments(parser):
    parser.add_argument("--config", help="TOML config (see examples/)")
    for flag, key in FLAGS.items():
        parser.add_argument(flag, dest=key, help=f"sets {key}")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override any config key; repeatable",
    )


def run(args):
    overrides = [
        f"{key}={getattr(args, key)}"
        for key in FLAGS.values()
        if getattr(args, key) is not None
    ] + args.set
    try:
        config = resolve_config(args.config, overrides)
        train(config)
    except (ConfigError, CheckpointError, FloatingPointError) as error:
        raise SystemExit(f"keras-bahdanau train: {error}") from None
    return 0
