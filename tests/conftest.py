import sys
from pathlib import Path

import pytest
import torch

from attnbench import silence_stack_warnings

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(autouse=True)
def _stack_warnings():
    """pytest gives each test the filters it started with, not those ``import attnbench`` set during collection."""
    silence_stack_warnings()


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture
def one_thread():
    """One intra-op thread, for tests of tiny tensors: more threads only add start-up cost, and stall on a
    busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
