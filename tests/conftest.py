import os

# The tests run tiny models on a 2-core machine. Intra-op thread pools only
# add contention there: the torch backend ran the learning tests 11x faster
# with one thread when the cores were busy. Set before any backend import;
# subprocesses started by tests inherit it.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

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
