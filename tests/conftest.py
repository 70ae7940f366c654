"""Test-wide settings: pygame draws headless; torch uses one intra-op thread."""
import os

import pytest
import torch

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")


@pytest.fixture(autouse=True, scope="session")
def one_torch_thread():
    """The tests' tensors are small: one thread is faster, and far faster on a busy shared CPU (two
    OpenMP threads competing with other processes for two cores ran the trainer tests 4x slower)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
