"""Test-wide settings: pygame draws headless; torch uses one intra-op thread; SB3 logs into the session's temporary
folder. Fixtures: ``kool_weights``."""
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


@pytest.fixture(autouse=True, scope="session")
def sb3_logs_in_tmp(tmp_path_factory):
    """SB3's ``learn()`` without a log folder makes a new empty ``SB3-<date>`` folder in the system's temporary
    folder at every call (``stable_baselines3.common.logger.configure``); the tests point it at one folder of
    their own (``SB3_LOGDIR``), which pytest cleans up."""
    before = os.environ.get("SB3_LOGDIR")
    os.environ["SB3_LOGDIR"] = str(tmp_path_factory.mktemp("sb3"))
    yield
    if before is None:
        os.environ.pop("SB3_LOGDIR", None)
    else:
        os.environ["SB3_LOGDIR"] = before


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
