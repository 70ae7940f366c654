"""Other RL libraries' own code over our envs (TorchRL, Tianshou), and the examples, on tiny budgets."""
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

import routing_gym  # noqa: F401

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def example(name: str):
    """The module of ``examples/{name}.py`` (its ``main(argv)`` returns a summary dict)."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- TorchRL --------------------------------------------------------------------------------------
def test_torchrl__gym_env_by_id_passes_check_env_specs():
    """TorchRL's ``GymEnv`` passes ``frameskip`` and retries without it only on Python's wording of an
    unexpected keyword argument (before: our ``TypeError`` worded it otherwise and ``GymEnv`` failed)."""
    pytest.importorskip("torchrl")
    from torchrl.envs import GymEnv
    from torchrl.envs.utils import check_env_specs

    env = GymEnv("routing/TSP-20")
    check_env_specs(env)
    assert env.rollout(30, break_when_any_done=False)["next", "reward"].shape == (30, 1)  # resets as needed


@pytest.mark.parametrize("array_type", ["numpy", "torch"])
@pytest.mark.parametrize("problem", ["TSP", "CVRP", "OP"])
def test_torchrl__gym_wrapper_over_the_vector_env_passes_check_env_specs(problem, array_type):
    """TorchRL's ``GymWrapper`` reads the ``autoreset_mode`` attribute (before: AttributeError) and checks
    every observation against the declared spec (before, in torch mode: a bool ``action_mask`` against the
    int8 ``MultiBinary``); it resets finished sub-envs through ``reset_mask``."""
    pytest.importorskip("torchrl")
    from torchrl.envs import GymWrapper
    from torchrl.envs.utils import check_env_specs

    venv = gym.make_vec(f"routing/{problem}-v0", num_envs=4, num_nodes=5, vectorization_mode="vector_entry_point",
                        autoreset_mode="Disabled", array_type=array_type)
    env = GymWrapper(venv, categorical_action_encoding=True)
    check_env_specs(env)
    env.set_seed(0)
    rollout = env.rollout(40, break_when_any_done=False)  # random (masked) actions end episodes early
    done = rollout["next", "done"].squeeze(-1)
    assert done.sum() > 4  # several episodes per sub-env: TorchRL reset the finished ones
    restarted = rollout["num_steps"].squeeze(-1)[:, 1:][done[:, :-1]]
    assert (restarted == 0).all()


def test_torchrl__ppo_example_runs_on_a_tiny_budget():
    pytest.importorskip("torchrl")
    out = example("torchrl_ppo").main(["--total-steps", "512", "--num-envs", "8", "--num-steps", "32",
                                       "--minibatch-size", "64", "--update-epochs", "1", "--device", "cpu"])
    assert out["episodes"] > 0 and 2.0 < out["mean_cost"] < 7.0  # TSP-10 tours, every episode finished


# -- Tianshou -------------------------------------------------------------------------------------
@pytest.mark.parametrize("problem", ["CVRP", "OP"])
def test_tianshou__dqn_example_collects_into_its_replay_buffer(problem):
    """Tianshou's collector stores each step's info in its buffer (before: "ValueError: shape mismatch" on
    CVRP, OP, PCTSP, whose tours vary in length); its DQN masks through ``obs.mask``. Numba's compilation
    of Tianshou's buffer code is switched off: it takes longer than this whole run."""
    pytest.importorskip("tianshou")
    code = (f"import runpy, sys; sys.argv = ['tianshou_dqn.py', '--env-id', 'routing/{problem}-10', "
            "'--total-steps', '200', '--num-envs', '2', '--test-episodes', '4']; "
            f"runpy.run_path({str(EXAMPLES / 'tianshou_dqn.py')!r}, run_name='__main__')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "NUMBA_DISABLE_JIT": "1", "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr[-3000:]
    assert "greedy policy over 4 test episodes" in out.stdout


def test_tianshou__adapter_gives_obs_and_mask_and_dqn_never_takes_a_masked_action():
    pytest.importorskip("tianshou")
    from tianshou.algorithm.modelfree.dqn import DiscreteQLearningPolicy
    from tianshou.data import Batch

    dqn = example("tianshou_dqn")
    env = dqn.masked_for_tianshou(gym.make("routing/CVRP-10"))
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs) and set(obs) == {"obs", "mask"}
    policy = DiscreteQLearningPolicy(model=dqn.QNet(env.observation_space["obs"]), action_space=env.action_space)
    done = False
    while not done:
        batch = Batch(obs=Batch(obs=Batch({k: v[None] for k, v in obs["obs"].items()}), mask=obs["mask"][None]),
                      info=Batch())
        act = int(policy(batch).act[0])
        assert obs["mask"][act] == 1
        obs, _, done, _, info = env.step(act)
    assert info["invalid_action"] is False


# -- CleanRL style ------------------------------------------------------------------------------
@pytest.mark.parametrize("env_id", ["routing/TSP-10", "routing/CVRP-10"])
def test_cleanrl__ppo_example_runs_on_a_tiny_budget(env_id):
    out = example("cleanrl_ppo").main(["--env-id", env_id, "--total-steps", "512", "--num-envs", "8",
                                       "--num-steps", "32", "--update-epochs", "1", "--device", "cpu"])
    assert out["episodes"] > 0 and np.isfinite(out["mean_cost"])


# -- the documented way to read a tour --------------------------------------------------------------
def test_info_tour__unpadded_by_dropping_the_minus_ones_replays_to_the_cost():
    env = gym.make("routing/CVRP-10")
    obs, _ = env.reset(seed=0)
    done = False
    while not done:
        obs, _, done, _, info = env.step(int(np.flatnonzero(obs["action_mask"])[0]))
    tour = info["tour"][info["tour"] >= 0]
    core = env.unwrapped.problem
    assert float(routing_gym.problems.tour_cost(core, env.unwrapped.state.instance, torch.as_tensor(tour)[None])[0]) \
        == pytest.approx(info["cost"], abs=1e-5)
