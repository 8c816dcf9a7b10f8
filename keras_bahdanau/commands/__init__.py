"""The `keras-bahdanau` commands: one module per command."""

import os
import sys

# TensorFlow 2.21 writes a C++ log while it loads and looks for devices
# (oneDNN, CUDA stubs, cuInit errors on a machine without a GPU), before
# TF_CPP_MIN_LOG_LEVEL applies: the commands drop it, unless the user set
# the variable (then TensorFlow logs as it would).
QUIET_TENSORFLOW = "TF_CPP_MIN_LOG_LEVEL" not in os.environ
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def start_tensorflow():
    """Imports TensorFlow and finds its devices, without its start-up log.

    The process's stderr (file descriptor 2, where the C++ log goes) points
    at /dev/null meanwhile; Python errors are raised after it is restored.
    Does nothing more than `import tensorflow` once TensorFlow is loaded or
    if the user set `TF_CPP_MIN_LOG_LEVEL`.
    """
    if not QUIET_TENSORFLOW or "tensorflow" in sys.modules:
        import tensorflow  # noqa: F401

        return
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
