"""Argument checks shared by the package, with errors that name the value.

A leaf module: it imports nothing of the package.
"""

import math


class InputError(ValueError):
    """Input text a command cannot use: reported in one line, exit 2."""


def is_int(value):
    """Whether `value` is a Python int (`True` and `False` are not)."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_int(name, value, minimum=1, allow_none=False, why=""):
    """Raises a `ValueError` unless `value` is an int >= `minimum`.

    Args:
        name: the argument's name, for the message.
        value: what was passed.
        minimum: the least value allowed.
        allow_none: whether None is allowed too.
        why: optional text appended to the requirement, e.g. "(it fixes
            the output shape)".

    Example:

    >>> check_int("beam_size", 0)
    Traceback (most recent call last):
    ...
    ValueError: `beam_size` must be an int >= 1. Received: beam_size=0
    """
    if allow_none and value is None:
        return
    if not is_int(value) or value < minimum:
        requirement = f"an int >= {minimum}" + (
            " or None" if allow_none else ""
        )
        raise ValueError(
            f"`{name}` must be {requirement}{' ' + why if why else ''}. "
            f"Received: {name}={value!r}"
        )


def check_number(name, value, minimum=0.0, why=""):
    """Raises a `ValueError` unless `value` is a finite number >= `minimum`."""
    number = is_int(value) or isinstance(value, float)
    if not (number and math.isfinite(value)):
        raise ValueError(
            f"`{name}` must be a finite number >= {minimum}. "
            f"Received: {name}={value!r}"
        )
    if value < minimum:
        raise ValueError(
            f"`{name}` must be >= {minimum}{' ' + why if why else ''}. "
            f"Received: {name}={value}"
        )


def check_choice(name, value, choices):
    """Raises a `ValueError` unless `value` is one of `choices`."""
    if value not in choices:
        raise ValueError(
            f"`{name}` must be one of {tuple(choices)}. "
            f"Received: {name}={value!r}"
        )
