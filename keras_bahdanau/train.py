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
from pathlib import Path

import keras

from keras_bahdanau import distribution as kdist
from keras_bahdanau import run_directory as rd
from keras_bahdanau.callbacks import AtomicModelCheckpoint
from keras_bahdanau.callbacks import CheckpointError
from keras_bahdanau.callbacks import FiniteBackupAndRestore
from keras_bahdanau.callbacks import NonFiniteLoss

# The schema: every key a config may set, with its default.
DEFAULTS = {
    "run_dir": "runs/ding_de_en",
    "data": {
        # "ding_de_en", "files" (two aligned files) or "tsv".
        "corpus": "ding_de_en",
        "source_file": "",
        "target_file": "",
        "tsv_file": "",
        "max_length": 50,
        "max_train_pairs": 0,  # 0: all
        "lowercase": False,
    },
    "tokenizer": {
        "kind": "word",  # "word" or "wordpiece"
        "source_vocabulary_size": 30000,
        "target_vocabulary_size": 30000,
    },
    "model": {
        # "rnnsearch", "rnnencdec" or "pervasive_attention".
        "architecture": "rnnsearch",
        "preset": "rnnsearch_tiny",
        # Overrides of the preset; 0 / "" keep the preset's value.
        "embedding_dim": 0,
        "hidden_dim": 0,
        "maxout_dim": 0,
        "dropout": 0.0,
        "initialization": "paper",
    },
    "training": {
        "optimizer": "adadelta",  # the paper's; or "adam"
        "learning_rate": 0.0,  # 0: the optimizer's default
        "clipnorm": 1.0,
        "epochs": 10,
        "batch_size": 80,
        "precision": "float32",  # or "mixed_float16", "mixed_bfloat16"
        "patience": 3,  # early stopping on dev loss
        "seed": 1234,
        "backup_every_steps": 100,
    },
    "evaluation": {
        "beam_size": 5,
        "max_sentences": 0,  # 0: the whole dev/test split
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

CHOICES = {
    "data.corpus": ("ding_de_en", "files", "tsv"),
    "tokenizer.kind": ("word", "wordpiece"),
    "model.architecture": ("rnnsearch", "rnnencdec", "pervasive_attention"),
    "training.optimizer": ("adadelta", "adam"),
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
    config = _merge(DEFAULTS, raw)
    for key in ("epochs", "batch_size", "max_length", "backup_every_steps"):
        section = "data" if key == "max_length" else "training"
        if config[section][key] <= 0:
            raise ConfigError(
                f"{section}.{key} must be positive. "
                f"Received: {config[section][key]}"
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
    elif corpus == "files":
        for key in ("source_file", "target_file"):
            if not data[key] or not Path(data[key]).is_file():
                raise ConfigError(
                    f"data.{key} must name an existing file for corpus "
                    f"'files'. Received: {data[key]!r}"
                )
        pairs = kd.read_parallel_files(data["source_file"], data["target_file"])
        splits = kd.split_pairs(pairs)
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
            dropout=model_config["dropout"],
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


def _best_dev_loss(run_dir):
    path = Path(run_dir) / rd.TRAINING_LOG
    if not path.is_file():
        return math.inf
    with open(path, newline="") as file:
        losses = [float(row["val_loss"]) for row in csv.DictReader(file)]
    return min(losses, default=math.inf)


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

    tokenizers = {}
    for side, index, directory in (
        ("source", 0, rd.SOURCE_VOCABULARY),
        ("target", 1, rd.TARGET_VOCABULARY),
    ):
        path = run_dir / directory
        if resuming and path.is_dir():
            tokenizers[side] = kd.load_tokenizer(path)
        else:
            tokenizers[side] = kd.build_tokenizer(
                config["tokenizer"]["kind"],
                [pair[index] for pair in splits["train"]],
                config["tokenizer"][f"{side}_vocabulary_size"],
                lowercase=config["data"]["lowercase"],
            )
            tokenizers[side].save(path)

    datasets = {}
    for split in ("train", "dev"):
        datasets[split], report = kd.make_dataset(
            splits[split],
            tokenizers["source"],
            tokenizers["target"],
            batch_size=training["batch_size"],
            max_length=config["data"]["max_length"],
            shuffle=split == "train",
            seed=training["seed"],
            # Fixed batch shapes: XLA compiles once per length bucket. The
            # pairs left over differ each epoch, as the data is reshuffled.
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
        compile_model(model, optimizer, **kdist.compile_arguments(plan))
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
            model.fit(
                datasets["train"],
                validation_data=kdist.validation_data(plan, datasets["dev"]),
                epochs=training["epochs"],
                callbacks=[*_callbacks(run_dir, training), *callbacks],
                shuffle=False,  # the dataset shuffles itself each epoch
                verbose=1 if sys.stdout.isatty() else 2,  # bar on a terminal
            )
    if finished:
        print(f"Training in {run_dir} already finished; evaluating only.")
    # Outside the training scope: one device decodes.
    evaluate_run(run_dir, splits, config["evaluation"])
    return run_dir


def _callbacks(run_dir, training):
    best = AtomicModelCheckpoint(
        run_dir / rd.BEST_MODEL, monitor="val_loss", save_best_only=True
    )
    best.best = _best_dev_loss(run_dir)  # survive a resume
    return [
        NonFiniteLoss(),  # first: it stops a diverged step before any save
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
            monitor="val_loss", patience=training["patience"]
        ),
        keras.callbacks.TensorBoard(run_dir / rd.TENSORBOARD),
    ]


def evaluate_run(run_dir, splits, evaluation):
    """Dev and test BLEU/chrF of the best model, into `results.json`."""
    from keras_bahdanau.evaluation import evaluate
    from keras_bahdanau.translator import Translator

    # Whole sentences: no truncation at the training length limit.
    translator = Translator.from_run_dir(
        run_dir, checkpoint="best", max_source_length=None
    )
    results = {}
    for split in ("dev", "test"):
        pairs = splits[split][: evaluation["max_sentences"] or None]
        scores = evaluate(
            translator,
            [source for source, _ in pairs],
            [target for _, target in pairs],
            beam_size=evaluation["beam_size"],
        )
        results[split] = {
            key: scores[key]
            for key in ("bleu", "chrf", "bleu_signature", "chrf_signature")
        }
        results[split]["sentences"] = len(pairs)
        print(
            f"[{split}] BLEU {scores['bleu']:.2f}  chrF {scores['chrf']:.2f}"
            f"  ({len(pairs)} sentences, beam {evaluation['beam_size']}; "
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
