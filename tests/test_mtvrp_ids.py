"""Every one of the MTVRP's 48 ids as a user meets it: Gymnasium's env checker, a native vector env stepping
every autoreset episode to its end, and a rendered frame (a few by default, all with ``pytest -m slow``)."""
import os

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import routing_gym  # noqa: F401
from routing_gym.problems.mtvrp import VARIANTS

DEFAULT = ("CVRP", "VRPBLTW", "MDOVRPMBLTW")


@pytest.mark.parametrize("variant", [v if v in DEFAULT else pytest.param(v, marks=pytest.mark.slow)
                                     for v in VARIANTS])
def test_mtvrp_id__checked_stepped_in_a_vector_env_and_drawn(variant):
    env = gym.make(f"routing/{variant}-10", render_mode="rgb_array")
    check_env(env.unwrapped, skip_render_check=True)
    env.reset(seed=0)
    frame = env.render()
    assert frame.shape == (600, 600, 3) and frame.std() > 0
    env.close()
    venv = gym.make_vec(f"routing/{variant}-10", num_envs=4, vectorization_mode="vector_entry_point")
    obs, _ = venv.reset(seed=0)
    ended = np.zeros(4, dtype=bool)
    for _ in range(200):
        actions = np.array([np.flatnonzero(m)[0] for m in obs["action_mask"]])  # the first allowed node
        obs, reward, terminated, truncated, info = venv.step(actions)
        assert not np.any(info.get("invalid_action", False)) and np.isfinite(reward).all()
        ended |= terminated
        if ended.all():
            break
    assert ended.all()  # every sub-env finished an episode within the step bound
    venv.close()
