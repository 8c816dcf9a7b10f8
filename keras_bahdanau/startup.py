"""Starting a command: huge pages for its memory, TensorFlow quietly.

`use_huge_pages()`: the commands run with glibc's malloc asking for
transparent huge pages. XLA's CPU programs allocate their large buffers
afresh at every step (glibc serves those of more than 32 MB with `mmap`
and unmaps them when freed), and the kernel faults in each 4 kB page of
them, step after step; 2 MB pages need 512 times fewer faults
(docs/profile.md, "Page faults").

TensorFlow 2.21 writes a C++ log while it loads and looks for devices
(oneDNN, CUDA stubs, cuInit errors on a machine without a GPU) before
`TF_CPP_MIN_LOG_LEVEL` applies. Keras imports TensorFlow on every backend
(`keras.utils.set_random_seed` seeds it, `tf.data` feeds the models), so
the commands, examples and benchmark scripts call `start_tensorflow()`
before they import Keras.
"""

import importlib.util
import json
import os
import sys

# glibc's tunable (glibc 2.35 and later): malloc calls madvise(MADV_HUGEPAGE)
# on the memory it maps, so the kernel backs it with 2 MB pages.
_HUGE_PAGES = "glibc.malloc.hugetlb"
_THP_SETTING = "/sys/kernel/mm/transparent_hugepage/enabled"


def use_huge_pages(environ=None, execv=os.execv):
    """Runs this process again with glibc's malloc on transparent huge pages.

    glibc reads its tunables (`GLIBC_TUNABLES`) only when a process
    starts, so this sets `glibc.malloc.hugetlb=1` and executes the same
    command line again (`sys.orig_argv`: same process id, same open files,
    nothing read yet). It returns without doing so where that would not
    change anything: not Linux, a C library other than glibc 2.35 or
    later, transparent huge pages not in `madvise` mode (`always` gives
    them already, `never` not at all), or `glibc.malloc.hugetlb` already
    in `GLIBC_TUNABLES` (set it to 0 there to opt out).

    Args:
        environ: the environment to read and pass on (`os.environ`).
        execv: the function that replaces the process (`os.execv`).

    Returns:
        False when the process goes on as it is (otherwise it does not
        return).
    """
    environ = os.environ if environ is None else environ
    tunables = environ.get("GLIBC_TUNABLES", "")
    if not sys.platform.startswith("linux") or _HUGE_PAGES in tunables:
        return False
    if not getattr(sys, "orig_argv", None):  # embedded: no command line
        return False
    if not _glibc_at_least(2, 35) or _thp_mode() != "madvise":
        return False
    environ["GLIBC_TUNABLES"] = ":".join(
        part for part in (tunables, f"{_HUGE_PAGES}=1") if part
    )
    sys.stdout.flush()
    sys.stderr.flush()
    # The interpreter by its full path, so that it finds the same prefix
    # (a virtual environment's) whatever name it was started by.
    execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])
    return False  # Only reached with a stand-in `execv`.


def _glibc_at_least(major, minor):
    try:  # "glibc 2.36"; absent (ValueError) or None on other C libraries.
        name, version = os.confstr("CS_GNU_LIBC_VERSION").split()
        found = tuple(int(part) for part in version.split(".")[:2])
    except (AttributeError, OSError, ValueError):
        return False
    return name == "glibc" and found >= (major, minor)


def _thp_mode(path=_THP_SETTING):
    """The bracketed word of the kernel's THP setting, or None."""
    try:
        with open(path) as file:
            setting = file.read()
    except OSError:
        return None
    start, end = setting.find("["), setting.find("]")
    return setting[start + 1 : end] if 0 <= start < end else None


# Child processes (the benchmarks' references) inherit the level this
# module set; the marker tells them it was not the user's choice.
_MARKER = "KERAS_BAHDANAU_TF_CPP_MIN_LOG_LEVEL"


def start_tensorflow(torch_first=False):
    """Imports TensorFlow and finds its devices, without its start-up log.

    Unless the user set `TF_CPP_MIN_LOG_LEVEL` (then TensorFlow logs as it
    would), sets it to 3 (for child processes too) and points the process's
    stderr (file descriptor 2, where the C++ log goes) at /dev/null while
    TensorFlow loads; Python errors are raised after it is restored. Does
    nothing more than `import tensorflow` once TensorFlow is loaded.

    Args:
        torch_first: whether the process will run plain PyTorch beside
            Keras (the benchmarks' references): torch loads first (see
            `_import_torch_first`), as Keras's torch backend always does.
    """
    # Set by this function in a parent process, not by the user.
    ours = os.environ.get(_MARKER) == os.environ.get("TF_CPP_MIN_LOG_LEVEL")
    quiet = "TF_CPP_MIN_LOG_LEVEL" not in os.environ or ours
    if not quiet or "tensorflow" in sys.modules:
        _import_torch_first(torch_first)
        import tensorflow  # noqa: F401

        return
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = os.environ[_MARKER] = "3"
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
        _import_torch_first(torch_first)
        import tensorflow as tf

        tf.config.list_physical_devices()
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _import_torch_first(torch_first):
    """Imports torch before TensorFlow when the process will use it.

    Seen with PyPI's CUDA build of torch 2.13 on Python 3.12, on a machine
    without a GPU: loading Triton (which torch loads for `torch.compile`
    and its optimizers) after TensorFlow's libraries crashes the process
    (SIGSEGV); the other order works. `import keras` on the torch backend
    loads torch and Triton, not TensorFlow; `torch._dynamo` loads Triton
    where it is installed.
    """
    backend = os.environ.get("KERAS_BACKEND")
    if backend is None:
        home = os.environ.get("KERAS_HOME") or os.path.join(
            os.path.expanduser("~"), ".keras"
        )
        try:
            with open(os.path.join(home, "keras.json")) as file:
                backend = json.load(file).get("backend")
        except (OSError, ValueError, AttributeError):
            backend = None
    if "tensorflow" in sys.modules:
        return
    if backend == "torch":
        import keras  # noqa: F401
    elif torch_first and importlib.util.find_spec("torch") is not None:
        import torch._dynamo  # noqa: F401
