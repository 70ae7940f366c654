"""Test-wide settings: pygame draws headless; torch uses one intra-op thread. Fixtures: ``kool_weights``."""
import os
from pathlib import Path

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


KOOL_WEIGHTS_VARIABLE = "ROUTING_GYM_KOOL_WEIGHTS"


@pytest.fixture(scope="session")
def kool_weights() -> Path:
    """The folder of the paper's published weights (its ``tsp_20/``, ``cvrp_20/``, ... each holding
    ``args.json`` and ``epoch-99.pt``), or a skip that says how to provide it.

    These are third-party files, not part of the repository: the folder named by the environment
    variable ``ROUTING_GYM_KOOL_WEIGHTS``, else ``../shared/reference-models/kool2019`` beside the
    repository where a development checkout keeps them.
    """
    given = os.environ.get(KOOL_WEIGHTS_VARIABLE)
    folder = Path(given) if given else Path(__file__).resolve().parents[2] / "shared" / "reference-models" / "kool2019"
    if not folder.is_dir():
        pytest.skip(f"the paper's weights are not available ({folder} is not a folder): to run this test, set "
                    f"{KOOL_WEIGHTS_VARIABLE} to a copy of the pretrained/ folder of "
                    "https://github.com/wouterkool/attention-learn-to-route (tsp_20/, cvrp_20/, ...)")
    return folder
