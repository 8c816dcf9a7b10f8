"""Starting TensorFlow without its C++ start-up log.

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
