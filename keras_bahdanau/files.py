"""Atomic file writes: a reader sees the old file or the new, never half.

Used for everything a run directory and a record hold
(`run_directory.atomic_write` and `atomic_write_text` are these).
"""

import contextlib
import os
from pathlib import Path


def atomic_write(path, write):
    """Writes a file so that `path` holds either the old file or the new.

    `write(temporary)` writes `.tmp-NAME` in the same directory (a rename
    across file systems is not atomic; `model.save` needs the suffix),
    which is synced to disk and renamed over `path`, or removed if
    anything fails (`OSError` raised, `path` unchanged).

    Example:

    >>> atomic_write("run/best.keras", model.save)
    """
    path = Path(path)
    temporary = path.with_name(f".tmp-{path.name}")
    try:
        write(temporary)
        with open(temporary, "rb") as file:
            os.fsync(file.fileno())
        os.replace(temporary, path)
    finally:
        with contextlib.suppress(OSError):
            temporary.unlink()


def atomic_write_text(path, text):
    """Writes `text` (UTF-8) to `path` with `atomic_write`."""
    atomic_write(path, lambda file: file.write_text(text, encoding="utf-8"))


__all__ = ["atomic_write", "atomic_write_text"]
