"""Training as a library: `train(config)`, a config in, a run directory out.

```python
from keras_bahdanau.config import resolve_config
from keras_bahdanau.trainer import train

run_dir = train(resolve_config("ding_de_en", ["training.epochs=2"]))
```

The config (`keras_bahdanau.config.resolve_config`) is checked before
training starts: an unknown key, a missing file, an unwritable run
directory or an empty corpus raise a `ConfigError` naming the problem. A
run killed at any point (even SIGKILL) continues from its last backup when
`train` is called again with the same config (every
`training.backup_every_steps` steps and at each epoch end); a finished run
is only evaluated. `[distribution]` trains on several devices
(`keras_bahdanau.distribution`, `docs/distributed.md`).
`keras-bahdanau train` is this function behind a command line.
"""

import csv
import json
import math
import sys
import warnings
from pathlib import Path

from keras_bahdanau.config import DEFAULTS
from keras_bahdanau.config import ConfigError
from keras_bahdanau.config import config_errors

# Only the config at the top: the command checks it before Keras,
# TensorFlow and a backend load (seconds), which `train` and its helpers
# import inside.

# training.selection: the logged value that selects the best epoch, and how.
_SELECTION = {"bleu": ("val_bleu", "max"), "loss": ("val_loss", "min")}


def _check_writable(run_dir):
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
        # May grow on resume; jit_compile changes speed only.
        if key not in ("epochs", "patience", "max_minutes", "jit_compile")
    }
    return {
        # A run may resume on other devices: the batch is global.
        **{key: config.get(key) for key in DEFAULTS if key != "distribution"},
        "training": training,
    }


def _check_same_run(run_dir, config):
    """A run directory holds one experiment: refuse a different config."""
    from keras_bahdanau import run_directory as rd

    saved = rd.read_training_config(run_dir)
    if saved is None:
        return False
    if not (Path(run_dir) / rd.TRAINING_CONFIG).is_file():
        raise ConfigError(
            f"{run_dir} holds a run of keras_bahdanau 0.2.0, which this "
            "version translates with but does not resume. Use another "
            "--run-dir."
        )
    if _comparable(saved) != _comparable(config):
        raise ConfigError(
            f"{run_dir} already holds a run with a different config. Use "
            "another --run-dir, or delete that directory to start over."
        )
    return True


def _best_logged(log, monitor, mode):
    """The best `monitor` value in the CSV `log` (for a resume)."""
    worst = -math.inf if mode == "max" else math.inf
    if not log.is_file():
        return worst
    with open(log, newline="") as file:
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
    import keras

    from keras_bahdanau import data as kd
    from keras_bahdanau import distribution as kdist
    from keras_bahdanau import presets
    from keras_bahdanau import run_directory as rd
    from keras_bahdanau.decoding.config import run_search
    from keras_bahdanau.evaluation import evaluate_run
    from keras_bahdanau.models.factory import build_model
    from keras_bahdanau.preprocessor import TranslationPreprocessor
    from keras_bahdanau.training import compile_model
    from keras_bahdanau.training import jit_compile_argument
    from keras_bahdanau.training import make_optimizer
    from keras_bahdanau.translator import Translator

    training = config["training"]
    strategy = config["distribution"]["strategy"]
    if training["jit_compile"] == "true" and strategy == "mirrored":
        # Keras turns XLA off under tf.distribute ("auto"); forced on, it
        # would take Keras's train function, whose one trace for all lengths
        # XLA cannot compile (`TranslationModel.make_train_function`).
        raise ConfigError(
            "training.jit_compile=true does not work with "
            "distribution.strategy=mirrored; use 'auto' or 'false'."
        )
    # Before anything runs on the backend: device counts are fixed then.
    with config_errors("[distribution]", ValueError):
        plan = kdist.prepare(config["distribution"], training["batch_size"])
    run_dir = Path(config["run_dir"])
    resuming = _check_same_run(run_dir, config)
    _check_writable(run_dir)
    with config_errors("[data]", OSError, ValueError):
        # A large corpus's training pairs stay on disk, streamed.
        corpus = kd.open_corpus(
            config["data"],
            config["tokenizer"]["sample_sentences"],
            training["seed"],
        )
    splits = corpus.splits
    keras.utils.set_random_seed(training["seed"])
    keras.mixed_precision.set_global_policy(training["precision"])

    preprocessor = TranslationPreprocessor(
        *_tokenizers(run_dir, config, corpus.sample, resuming)
    )
    datasets, reports = {}, {}
    buckets = config["data"]["buckets"] or None  # dev: train's widths
    for split in ("train", "dev"):
        # The report is printed below; make_dataset's warning of the same
        # text (for library users) would say it twice.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="make_dataset: ")
            datasets[split], reports[split] = preprocessor.make_dataset(
                splits[split],
                batch_size=training["batch_size"],
                max_length=config["data"]["max_length"],
                shuffle=split == "train",
                seed=training["seed"],
                # Fixed batch shapes: XLA compiles once per length bucket.
                # The pairs left over differ each epoch (reshuffled).
                drop_remainder=split == "train",
                bucket_width=config["data"]["bucket_width"],
                buckets=buckets,
                **(
                    {"shuffle_buffer": config["data"]["shuffle_buffer"]}
                    if split == "train" and corpus.streamed
                    else {}
                ),
            )
        buckets = buckets and list(reports[split].bucket_widths)
        print(f"[{split}] {reports[split]}")
    # A stream's epoch: about one pass, as its sample estimates it.
    stream = reports["train"] if corpus.streamed else None
    corpus.drop_sample()

    sizes = [tokenizer.vocabulary_size for tokenizer in preprocessor.tokenizers]
    with config_errors("[distribution]", ValueError):
        kdist.check_vocabulary_sizes(plan, *sizes)
    # fit() deletes the backup when it ends; a last model without one is a
    # finished run (e.g. killed during the final evaluation): evaluate only.
    finished = (run_dir / rd.LAST_WEIGHTS).is_file() and not (
        run_dir / rd.BACKUP
    ).exists()
    with kdist.training_scope(plan):
        with config_errors(
            "[model] cannot build the model:", TypeError, ValueError
        ):
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
            jit_compile=jit_compile_argument(training["jit_compile"], strategy),
            **kdist.compile_arguments(plan),
        )
        # BackupAndRestore needs a built model and optimizer.
        model.optimizer.build(model.trainable_variables)
        # Not from the training data: an iteration would move its shuffling.
        kdist.build_compiled_model(plan, model, datasets["dev"])

        rd.write_training_config(
            run_dir, {**config, "parameters": model.count_params()}
        )
        # The preset at the top; the checkpoints write its weights. Its
        # sources are cut at the training length, as in training.
        preset = TranslationPreprocessor(
            *preprocessor.tokenizers, config["data"]["max_length"]
        )
        search = run_search(config["evaluation"])
        presets.write_preset(run_dir, Translator(model, preset, search=search))
        print(
            f"{config['model']['architecture']} with "
            f"{model.count_params():,} parameters on the "
            f"{keras.backend.backend()} backend, "
            f"{plan.describe(training['batch_size'])}; run directory {run_dir}"
        )
        # Each host of a multi-host run takes its share of every batch.
        shard = kdist.data_shard(plan)
        validation = kd.shard_batches(
            kdist.validation_data(plan, datasets["dev"]), *shard
        )
        if not finished:
            _announce_resume(run_dir, streamed=corpus.streamed)
            model.fit(
                kd.shard_batches(datasets["train"], *shard),
                validation_data=validation,
                epochs=training["epochs"],
                steps_per_epoch=stream and stream.steps_per_epoch,
                callbacks=[
                    *_callbacks(run_dir, config, model, preprocessor, splits),
                    # After the backup's restore: it starts the stream at
                    # the restored step.
                    *_stream_callbacks(run_dir, stream),
                    *callbacks,
                ],
                shuffle=False,  # the dataset shuffles itself each epoch
                verbose=1 if sys.stdout.isatty() else 2,  # bar on a terminal
            )
        if training["average_last"]:
            _average_last(
                run_dir, config, model, preprocessor, splits, validation
            )
    if finished:
        print(f"Training in {run_dir} already finished; evaluating only.")
    # Outside the training scope: one device decodes.
    evaluate_run(run_dir, splits, config["evaluation"])
    return run_dir


def _stream_callbacks(run_dir, stream):
    """A stream's `StreamCallback`, keeping its first pass in the run."""
    from keras_bahdanau import data as kd

    if stream is None:
        return []
    return [kd.StreamCallback(stream, Path(run_dir) / kd.STREAM_FILE)]


def _announce_resume(run_dir, streamed=False):
    """Says where a killed run resumes, before fit() restores its backup.

    Keras restarts an interrupted epoch: from the pairs it started with
    (held in memory), or, streamed, from the stream's next pairs
    (`StreamCallback` says where).
    """
    from keras_bahdanau import run_directory as rd
    from keras_bahdanau.callbacks import BACKUP_METADATA

    metadata = Path(run_dir) / rd.BACKUP / BACKUP_METADATA
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
    if not batch:
        where = ", from its start."
    elif streamed:
        where = (
            f", from its start as Keras counts its {batch + 1} steps done "
            "again; the corpus stream goes on after the last pair trained."
        )
    else:
        where = (
            f", from its start again: Keras restarts an interrupted epoch, "
            f"with the weights of its step {batch + 1}."
        )
    print(f"Resuming {run_dir} from its backup: epoch {epoch + 1}{where}")


def _tokenizers(run_dir, config, pairs, resuming):
    """`(source, target)` tokenizers of the run: learnt from `pairs` (the
    corpus's sample), or read on resume."""
    from keras_bahdanau import data as kd
    from keras_bahdanau.presets import VOCABULARIES

    settings = config["tokenizer"]
    tokenizers = {}
    for side, index, directory in (
        ("source", 0, VOCABULARIES["source"]),
        ("target", 1, VOCABULARIES["target"]),
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
            with config_errors("[tokenizer]", ValueError):
                tokenizers[side] = kd.build_tokenizer(
                    settings["kind"],
                    texts,
                    settings[f"{side}_vocabulary_size"],
                    lowercase=config["data"]["lowercase"],
                    threads=settings["threads"],
                )
        tokenizers[side].save(path)
    return tokenizers["source"], tokenizers["target"]


def _callbacks(run_dir, config, model, preprocessor, splits):
    import keras

    from keras_bahdanau import run_directory as rd
    from keras_bahdanau.callbacks import AtomicModelCheckpoint
    from keras_bahdanau.callbacks import DevScores
    from keras_bahdanau.callbacks import EpochWeights
    from keras_bahdanau.callbacks import FiniteBackupAndRestore
    from keras_bahdanau.callbacks import NonFiniteLoss
    from keras_bahdanau.callbacks import TimeBudget
    from keras_bahdanau.presets import WEIGHTS

    training = config["training"]
    monitor, mode = _SELECTION[training["selection"]]
    selection = []
    if training["selection"] == "bleu":
        selection.append(
            DevScores(*_dev_translation(config, model, preprocessor, splits))
        )
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
        run_dir / WEIGHTS,
        monitor=monitor,
        mode=mode,
        save_best_only=True,
        include_optimizer=False,  # the backup has it, for resuming
    )
    # The best so far survives a resume.
    best.best = _best_logged(run_dir / rd.TRAINING_LOG, monitor, mode)
    return [
        NonFiniteLoss(),  # first: it stops a diverged step before any save
        # Before everything that reads the epoch's logs.
        *selection,
        best,
        AtomicModelCheckpoint(
            run_dir / rd.LAST_WEIGHTS, include_optimizer=False
        ),
        *(
            [EpochWeights(run_dir / rd.EPOCH_WEIGHTS, training["average_last"])]
            if training["average_last"]
            else []
        ),
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
        *(
            [TimeBudget(run_dir / rd.EPOCH_TIMES, training["max_minutes"])]
            if training["max_minutes"]
            else []
        ),
        keras.callbacks.TensorBoard(run_dir / rd.TENSORBOARD),
    ]


def _dev_translation(config, model, preprocessor, splits):
    """`DevScores`'s `(translate, references)` of the selection sentences.

    `translate()` uses `model`'s current weights and the run's beam.
    """
    from keras_bahdanau.decoding.config import run_search
    from keras_bahdanau.translator import Translator

    evaluation = config["evaluation"]
    pairs = splits["dev"][: evaluation["selection_sentences"] or None]
    translator = Translator(model, preprocessor)

    def translate():
        translations = translator.translate(
            [source for source, _ in pairs],
            run_search(evaluation),
            batch_size=64,
        )
        return [translation.text for translation in translations]

    return translate, [target for _, target in pairs]


def _average_last(run_dir, config, model, preprocessor, splits, validation):
    """Checkpoint averaging: the last epochs' mean, kept if it scores better.

    Averages the weights `EpochWeights` kept (`training.average_last`
    epochs; `callbacks.average_weights`), scores the average on the
    selection criterion (dev BLEU of the selection sentences, or the dev
    loss) and, if it beats the best epoch's logged score, saves it as
    the preset's weights. `averaging.json` records both scores and the
    choice; the epochs' files are removed after it is written. A run
    killed during this step repeats it; one that wrote the record skips
    it.
    """
    from keras_bahdanau import run_directory as rd
    from keras_bahdanau.callbacks import average_weights
    from keras_bahdanau.callbacks import epoch_weight_files
    from keras_bahdanau.callbacks import inference_copy
    from keras_bahdanau.callbacks import save_atomically
    from keras_bahdanau.metrics import corpus_scores
    from keras_bahdanau.presets import WEIGHTS

    record = run_dir / rd.AVERAGING
    if record.is_file():
        return
    paths = epoch_weight_files(run_dir / rd.EPOCH_WEIGHTS)
    paths = paths[-config["training"]["average_last"] :]
    if len(paths) < 2:
        print("Checkpoint averaging: fewer than 2 epochs were kept; skipped.")
        return
    monitor, mode = _SELECTION[config["training"]["selection"]]
    best = _best_logged(run_dir / rd.TRAINING_LOG, monitor, mode)
    average_weights(model, paths)
    if monitor == "val_bleu":
        translate, references = _dev_translation(
            config, model, preprocessor, splits
        )
        value = corpus_scores(translate(), references)["bleu"]
    else:
        value = model.evaluate(validation, return_dict=True, verbose=0)["loss"]
    selected = value > best if mode == "max" else value < best
    if selected:
        save_atomically(inference_copy(model), run_dir / WEIGHTS)
    epochs = [int(path.name.split("_")[1].split(".")[0]) for path in paths]
    summary = {
        "epochs": epochs,
        "monitor": monitor,
        "average": value,
        "best_epoch": best,
        "best_model": "average" if selected else "best epoch",
    }
    rd.atomic_write_text(record, json.dumps(summary, indent=2))
    for path in paths:
        path.unlink()
    print(
        f"Average of epochs {epochs[0]}-{epochs[-1]}: {monitor} {value:.4g}, "
        f"the best epoch's {best:.4g}; {WEIGHTS} holds "
        + ("the average." if selected else "the best epoch.")
    )
