"""Peak memory of the benchmark processes (shared by the scripts here)."""

import resource
import sys


def peak_rss_mb():
    """Peak resident set size of this process so far, in MiB.

    On Linux, `VmHWM` of /proc/self/status: `getrusage`'s `ru_maxrss`
    would count the parent's peak in a child process, because the peak is
    carried across fork and exec. Elsewhere `ru_maxrss`.
    """
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 2**10  # kB
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports KiB, macOS bytes.
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


def keras_device_and_peak_memory():
    """The device and the framework's peak memory in MiB.

    On a GPU this is the memory the framework allocated at most; on a CPU
    there is no such counter in JAX and TensorFlow, so it is the peak RSS
    of the process (which includes the framework's own footprint).
    """
    import keras

    backend = keras.backend.backend()
    # Each framework has its own GPU memory counter.
    if backend == "jax":
        import jax

        device = jax.devices()[0]
        if device.platform != "cpu":
            stats = device.memory_stats()
            return device.device_kind, stats["peak_bytes_in_use"] / 2**20
    elif backend == "tensorflow":
        import tensorflow as tf

        if tf.config.list_logical_devices("GPU"):
            info = tf.config.experimental.get_memory_info("GPU:0")
            return "gpu", info["peak"] / 2**20
    elif backend == "torch":
        import torch

        if torch.cuda.is_available():
            name = torch.cuda.get_device_name()
            return name, torch.cuda.max_memory_allocated() / 2**20
    return "cpu", peak_rss_mb()
