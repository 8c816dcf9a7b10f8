"""The train config: resolution of a TOML file and overrides.

Configs are TOML (see `examples/ding_de_en.toml`); `resolve_config` checks
every key and value against `keras_bahdanau.config_schema` (re-exported
here), so that a bad config stops before training. This module imports
nothing of Keras, TensorFlow or a backend, so that `keras-bahdanau train`
reports a bad config at once, before they load (seconds).
"""

import contextlib
import copy
import tomllib
from pathlib import Path

from keras_bahdanau.config_schema import CHOICES
from keras_bahdanau.config_schema import DEFAULT_PRESETS
from keras_bahdanau.config_schema import DEFAULTS
from keras_bahdanau.config_schema import FLAGS  # noqa: F401
from keras_bahdanau.config_schema import LENGTH_PENALTIES
from keras_bahdanau.config_schema import MODEL_KEYS
from keras_bahdanau.config_schema import RANGES
from keras_bahdanau.config_schema import RECIPES


class ConfigError(ValueError):
    """A config that cannot run; the message names the key and the fix."""


@contextlib.contextmanager
def config_errors(prefix, *errors):
    """Re-raises `errors` as a `ConfigError` "`prefix` message" (a `with`)."""
    try:
        yield
    except ConfigError:
        raise
    except errors as error:
        raise ConfigError(f"{prefix} {error}") from None


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
    if isinstance(value, str) and kind is bool:
        if value.lower() not in ("true", "false"):
            raise ConfigError(f"{name} must be true or false: {value!r}")
        value = value.lower() == "true"
    elif isinstance(value, str) and kind is not str:
        with contextlib.suppress(ValueError):  # then refused below
            value = kind(value)
    if kind is float and type(value) is int:
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


def resolve_config(config_path=None, overrides=()):
    """The config from a TOML file plus `section.key=value` overrides.

    A config file may start from another: `base = "NAME"` names a built-in
    config (`CONFIGS`, e.g. "ding_de_en", the main job) or a TOML file
    (relative to the file), whose settings it then changes. A file that
    sets another `model.architecture` than its base's starts its `[model]`
    table afresh.

    The resolved `[model]` table holds what the model is built with: the
    keys its architecture does not take (`MODEL_KEYS`) are None, as are
    Pervasive Attention's keys the config leaves to the preset; the
    preset and `evaluation.length_penalty` default per architecture
    (`DEFAULT_PRESETS`, `LENGTH_PENALTIES`).

    Args:
        config_path: a TOML file with the sections of `DEFAULTS`, the name
            of a built-in config, or None.
        overrides: `"section.key=value"` strings, typed like the default.

    Returns:
        `DEFAULTS` updated by the recipe's, the file's and the overrides'
        settings, in this order.

    Raises:
        ConfigError: a missing or invalid file, an unknown key, a `[model]`
            key the architecture does not take, or a value of the wrong
            type or out of range (`CHOICES`, `RANGES`).
    """
    raw = {} if config_path is None else _read_config(config_path)
    for override in overrides:
        key, sep, value = override.partition("=")
        if not sep:
            raise ConfigError(
                f"Overrides look like section.key=value. Received: {override!r}"
            )
        change = value.strip()  # "a.b=c" -> {"a": {"b": "c"}}
        for name in reversed(key.strip().split(".")):
            change = {name: change}
        raw = _update(raw, change)
    default = DEFAULTS["recipe"]
    recipe = _coerce("recipe", default, raw.get("recipe", default))
    config = _merge(_merge(DEFAULTS, RECIPES[recipe]), raw)
    _resolve_model(config, raw.get("model", {}), RECIPES[recipe].get("model"))
    if "length_penalty" not in raw.get("evaluation", {}):
        architecture = config["model"]["architecture"]
        config["evaluation"]["length_penalty"] = LENGTH_PENALTIES[architecture]
    for name, (allowed, rule) in RANGES.items():
        section, key = name.split(".")
        value = config[section][key]
        if value is not None and not allowed(value):
            raise ConfigError(f"{name} must be {rule}. Received: {value}")
    for key, value in config["data"].items():
        if key.endswith("_file") and value and not Path(value).is_file():
            raise ConfigError(
                f"[data] data.{key} must name an existing file for corpus "
                f"{config['data']['corpus']!r}. Received: {value!r}"
            )
    return config


# The built-in configs: name -> file.
CONFIGS = {
    path.stem: path
    for path in sorted((Path(__file__).parent / "configs").glob("*.toml"))
}


def add_override_argument(parser, help):
    """Adds `--set SECTION.KEY=VALUE` (repeatable) to an argparse parser:
    the `overrides` of `resolve_config`, in `args.set`."""
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help=help,
    )


def _read_config(config_path, seen=()):
    """The settings of a TOML file or built-in config, its base's first."""
    path = Path(config_path)
    if not path.is_file() and str(config_path) in CONFIGS:
        path = CONFIGS[str(config_path)]
    if not path.is_file():
        raise ConfigError(
            f"Config file not found: {config_path} (nor a built-in config: "
            f"{sorted(CONFIGS)})"
        )
    if path.resolve() in seen:
        raise ConfigError(f"{path}: its `base` configs form a cycle.")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path} is not valid TOML: {error}") from None
    base = raw.pop("base", None)
    if base is None:
        return raw
    if not isinstance(base, str) or not base:
        raise ConfigError(f"{path}: base must be a config name or file.")
    relative = path.parent / base
    settings = _read_config(
        relative if relative.is_file() else base, (*seen, path.resolve())
    )
    model = raw.get("model", {})
    if model.get("architecture", "rnnsearch") != settings.get("model", {}).get(
        "architecture", "rnnsearch"
    ):
        settings.pop("model", None)
    return _update(settings, raw)


def _update(settings, changes):
    """`settings` with `changes` written over it, table by table."""
    merged = dict(settings)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            value = _update(merged[key], value)
        merged[key] = value
    return merged


def check_model_keys(architecture, keys):
    """Raises a `ConfigError` (a `ValueError`) naming the first of the
    `[model]` `keys` that `architecture` does not take (`MODEL_KEYS`)."""
    takes = MODEL_KEYS[architecture]
    for key in keys:
        if key not in takes:
            raise ConfigError(
                f"model.{key} does not apply to architecture "
                f"{architecture!r}, which takes {list(takes)}; remove it."
            )


def _resolve_model(config, explicit, recipe):
    """Fills `config["model"]` in place for its architecture (see
    `resolve_config`); `explicit` and `recipe` are the `[model]` settings
    of the config and of the recipe."""
    model = config["model"]
    architecture = model["architecture"]
    takes = MODEL_KEYS[architecture]
    check_model_keys(architecture, set(explicit) - {"architecture", "preset"})
    if "preset" not in explicit:
        model["preset"] = DEFAULT_PRESETS[architecture]
    keep = set(explicit)
    if architecture != "pervasive_attention":
        keep |= set(takes)  # the recipe's values, like any default
    else:
        keep |= set(recipe or ()) & set(takes)
    for key in model:
        if key not in ("architecture", "preset") and key not in keep:
            model[key] = None
