import os

import keras
import numpy as np
import pytest


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
    return os.environ.get("KERAS_BACKEND", keras.backend.backend())
