"""`keras-bahdanau export PRESET`: a TF Serving SavedModel of a preset."""

import pathlib

from keras_bahdanau import presets
from keras_bahdanau.commands.flags import PRESET_HELP
from keras_bahdanau.commands.flags import add_decoding_arguments
from keras_bahdanau.commands.flags import search_config
from keras_bahdanau.export import export_saved_model


def add_arguments(parser):
    parser.description = (
        "Write PRESET's model as a TF Serving SavedModel, "
        "OUTPUT/<version>/, with text-in/text-out signatures "
        "(serving_default, translate_n_best, align). Built on the "
        "TensorFlow backend whatever the current one. See docs/serving.md."
    )
    parser.add_argument("preset", metavar="PRESET", help=PRESET_HELP)
    parser.add_argument(
        "--output",
        help="model folder (TF Serving base path; default: "
        "saved_models/<name of PRESET>)",
    )
    parser.add_argument(
        "--version",
        type=int,
        help="version number (default: the highest existing one + 1)",
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="replace an existing version"
    )
    add_decoding_arguments(parser)  # --checkpoint, --beam-size, ...
    parser.add_argument(
        "--max-source-tokens",
        type=int,
        default=100,
        help="most tokens per sentence (more: status too_long)",
    )
    parser.add_argument(
        "--max-batch",
        type=int,
        default=64,
        help="most sentences per request (more: INVALID_ARGUMENT)",
    )
    parser.add_argument(
        "--max-beam-size",
        type=int,
        default=8,
        help="largest beam_size of translate_n_best",
    )


def run(args):
    output = args.output or pathlib.Path(
        "saved_models", pathlib.Path(args.preset).resolve().name
    )
    preset = presets.check_preset(args.preset, args.checkpoint)
    path = export_saved_model(
        args.preset,
        output,
        version=args.version,
        checkpoint=args.checkpoint,
        overwrite=args.overwrite,
        search=search_config(args, preset.settings["search"]),
        max_source_tokens=args.max_source_tokens,
        max_batch=args.max_batch,
        max_beam_size=args.max_beam_size,
    )
    print(path)
    return 0
