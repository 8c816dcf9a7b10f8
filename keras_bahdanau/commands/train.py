"""`keras-bahdanau train`: config file in, run directory out.

Parses the flags into a config (`keras_bahdanau.config.resolve_config`),
checked before Keras and TensorFlow load, then runs
`keras_bahdanau.trainer.train`. A config that cannot run, a checkpoint
that cannot be written or a loss that became NaN stop the command with
one line naming the problem. A killed run continues from its last backup
when the same command is started again.
"""

from keras_bahdanau import records
from keras_bahdanau.config import FLAGS
from keras_bahdanau.config import ConfigError
from keras_bahdanau.config import add_override_argument
from keras_bahdanau.config import resolve_config
from keras_bahdanau.startup import start_tensorflow
from keras_bahdanau.trainer import train


def add_arguments(parser):
    parser.add_argument("--config", help="TOML config (see examples/)")
    for flag, key in FLAGS.items():
        parser.add_argument(flag, dest=key, help=f"sets {key}")
    add_override_argument(parser, "override any config key; repeatable")
    records.add_record_argument(parser)


def run(args):
    started = records.start()
    overrides = [
        f"{key}={getattr(args, key)}"
        for key in FLAGS.values()
        if getattr(args, key) is not None
    ] + args.set
    try:
        config = resolve_config(args.config, overrides)
    except ConfigError as error:
        raise SystemExit(f"keras-bahdanau train: {error}") from None
    start_tensorflow()
    from keras_bahdanau.callbacks import CheckpointError

    try:
        run_dir = train(config)
    except (ConfigError, CheckpointError, FloatingPointError) as error:
        raise SystemExit(f"keras-bahdanau train: {error}") from None
    if args.record:
        row = {
            **records.run_figures(run_dir, args.config),
            **records.process_usage(started),
        }
        records.write_record(args.record, "train", row, started, config)
    return 0
