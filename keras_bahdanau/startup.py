"""Starting TensorFlow without its C++ start-up log.

TensorFlow 2.21 writes a C++ log while it loads and looks for devices
(oneDNN, CUDA stubs, cuInit errors on a machine without a GPU) before
`TF_CPP_MIN_LOG_LEVEL` applies. Keras imports TensorFlow on every backend
(`keras.utils.set_random_seed` seeds it, `tf.data` feeds the models), so
the commands, examples and benchmark scripts call `start_tensorflow()`
before they import Keras.
"""

import os
import sys

# Child processes (the benchmarks' references) inherit the level this
# module set; the marker tells them it was not the user's choice.
_MARKER = "KERAS_BAHDANAU_TF_CPP_MIN_LOG_LEVEL"


def start_tensorflow():
    """Imports TensorFlow and finds its devices, without its start-up log.

    Unless the user set `TF_CPP_MIN_LOG_LEVEL` (then TensorFlow logs as it
    would), sets it to 3 (for child processes too) and points the process's
    stderr (file descriptor 2, where the C++ log goes) at /dev/null while
    TensorFlow loads; Python errors are raised after it is restored. Does
    nothing more than `import tensorflow` once TensorFlow is loaded.
    """
    # Set by this function in a parent process, not by the user.
    ours = os.environ.get(_MARKER) == os.environ.get("TF_CPP_MIN_LOG_LEVEL")
    quiet = "TF_CPP_MIN_LOG_LEVEL" not in os.environ or ours
    if not quiet or "tensorflow" in sys.modules:
        import tensorflow  # noqa: F401

        return
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = os.environ[_MARKER] = "3"
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
        import tensorflow as tf

        tf.config.list_physical_devices()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
