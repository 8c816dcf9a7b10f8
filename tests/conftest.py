import os

# The tests run tiny models on a 2-core machine. Intra-op thread pools only
# add contention there: the torch backend ran the learning tests 11x faster
# with one thread when the cores were busy. Set before any backend import;
# subprocesses started by tests inherit it.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import atexit  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402

# Many tests build the same small model and compile the same programs; XLA
# compilation is most of the suite's time on JAX. JAX's persistent
# compilation cache (keyed by the program without its debug names), in a
# directory of this run, compiles each program once; pytest-xdist's
# workers and the subprocesses that tests start inherit the directory, and
# the process that made it removes it. A cache the user set is kept.
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    _compile_cache = tempfile.mkdtemp(prefix="keras_bahdanau_tests_")
    atexit.register(shutil.rmtree, _compile_cache, ignore_errors=True)
    os.environ["JAX_COMPILATION_CACHE_DIR"] = _compile_cache
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")

# What is left of compilation is mostly LLVM optimizing XLA's CPU code,
# which the tests' tiny programs do not run long enough to pay back: XLA's
# backend optimization level 0 (JAX and TensorFlow's XLA; the HLO passes,
# fusion included, still run, so the programs compute the same function up
# to float rounding, which the tests' tolerances are for).
# The tests' XLA programs compile about twice as fast. Kept if the user's
# XLA_FLAGS set a level.
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = " ".join(
        [os.environ.get("XLA_FLAGS", ""), "--xla_backend_optimization_level=0"]
    ).strip()

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from keras_bahdanau.translator import Translator  # noqa: E402
from tests.run_fixture import shared_run_dir  # noqa: E402

if keras.backend.backend() == "torch":
    import torch

    torch.set_num_threads(1)


def pytest_report_header(config):
    return f"keras backend: {keras.backend.backend()}"


@pytest.fixture(autouse=True)
def _seed():
    """Every test starts from the same seeds on every backend."""
    keras.utils.set_random_seed(1234)
    np.random.seed(1234)
    yield


@pytest.fixture
def backend():
    return keras.backend.backend()


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """The session's tiny run directory (`tests.run_fixture`); read only.

    A test module that needs another one defines its own `run_dir`.
    """
    return shared_run_dir(tmp_path_factory)


@pytest.fixture(scope="module")
def translator(run_dir):
    return Translator.from_preset(run_dir)
