"""Edges of the env API that users hit: valid input in unusual layouts is accepted, bad input and bad
order of calls end in one clear error, and envs pickle. Every test iterates the registry where the
behaviour is generic."""
import pickle

import gymnasium as gym
import numpy as np
import pytest
import torch

import routing_gym

NAMES = sorted(routing_gym.PROBLEMS)


def vec(name, num_envs=3, **kwargs):
    problem = routing_gym.get_problem(name)
    return gym.make_vec(f"routing/{problem.label}-v0", num_envs=num_envs, vectorization_mode="vector_entry_point",
                        num_nodes=problem.valid_num_nodes(6), **kwargs)


def first_instance(name):
    """A valid user instance (numpy arrays keyed as the instance) of the problem."""
    problem = routing_gym.get_problem(name)
    inst = problem.generate(1, problem.valid_num_nodes(6), generator=torch.Generator().manual_seed(0))
    return problem, {k: v[0].numpy() for k, v in inst._asdict().items()}


@pytest.mark.parametrize("name", NAMES)
def test_instance__negative_strides_big_endian_and_grad_tensors_are_accepted(name):
    problem, data = first_instance(name)
    env = gym.make(f"routing/{problem.label}-v0", num_nodes=problem.valid_num_nodes(6))
    ref, _ = env.reset(options={"instance": data})
    layouts = {
        "negative strides": {k: v[::-1].copy()[::-1] if v.ndim else v for k, v in data.items()},
        "big-endian": {k: v.astype(v.dtype.newbyteorder(">")) for k, v in data.items()},
        "requires_grad": {k: torch.tensor(v, requires_grad=v.dtype.kind == "f") for k, v in data.items()},
    }
    for label, variant in layouts.items():
        obs, _ = env.reset(options={"instance": variant})
        for key in ref:
            np.testing.assert_array_equal(obs[key], ref[key], err_msg=f"{label}: {key}")


def test_vector__negative_stride_actions_and_reset_mask_are_accepted():
    env = vec("tsp")
    env.reset(seed=0)
    obs, *_ = env.step(np.array([2, 1, 0])[::-1])
    assert list(obs["current_node"]) == [0, 1, 2]
    obs, _ = env.reset(options={"reset_mask": np.array([True, True, False])[::-1]})  # rows 1 and 2
    assert list(obs["current_node"]) == [0, 0, 0] and list(obs["num_steps"][:, 0]) == [1, 0, 0]


def test_vector__all_false_reset_mask_resets_nothing_even_with_a_seed():
    env = vec("cvrp")
    first, _ = env.reset(seed=0)
    env.step(np.array([1, 1, 1]))
    obs, _ = env.reset(seed=5, options={"reset_mask": np.zeros(3, bool)})
    np.testing.assert_array_equal(obs["locs"], first["locs"])
    assert list(obs["current_node"]) == [1, 1, 1]


def test_vector__a_device_this_machine_lacks_is_a_value_error():
    for device in ("mps", "cuda:7") if not torch.cuda.is_available() else ("mps",):
        with pytest.raises(ValueError, match="device"):
            vec("tsp", device=device)


def test_vector__huge_max_episode_steps_means_never():
    env = vec("tsp", max_episode_steps=10**30)
    env.reset(seed=0)
    _, _, terminated, truncated, _ = env.step(np.array([0, 1, 2]))
    assert not truncated.any() and not terminated.any()


@pytest.mark.parametrize("seed", [[True, False, True], True])
def test_seeds__bools_are_refused_as_gymnasium_refuses_floats(seed):
    env = vec("tsp")
    with pytest.raises(gym.error.Error, match="Seed must be a python integer"):
        env.reset(seed=seed)
    with pytest.raises(gym.error.Error, match="Seed must be a python integer"):
        gym.make("routing/TSP-10").reset(seed=True)


def test_seeds__beyond_int64_are_taken():
    env = vec("tsp")
    obs, _ = env.reset(seed=2**70)
    single, _ = gym.make("routing/TSP-v0", num_nodes=6).reset(seed=2**70)
    np.testing.assert_array_equal(obs["locs"][0], single["locs"])


def test_render__before_reset_says_reset_needed():
    env = gym.make("routing/TSP-10", render_mode="rgb_array").unwrapped
    with pytest.raises(gym.error.ResetNeeded, match="reset"):
        env.render()
    with pytest.raises(gym.error.ResetNeeded, match="reset"):
        vec("tsp", render_mode="rgb_array").render()


@pytest.mark.parametrize("compile", [False, True])
def test_pickle__single_and_vector_envs_round_trip(compile):
    env = gym.make("routing/CVRP-v0", num_nodes=5, compile=compile).unwrapped
    obs, _ = env.reset(seed=3)
    clone = pickle.loads(pickle.dumps(env))
    assert clone.compile is compile
    a = int(np.flatnonzero(obs["action_mask"])[0])
    mine, theirs = env.step(a), clone.step(a)
    np.testing.assert_array_equal(mine[0]["action_mask"], theirs[0]["action_mask"])
    assert mine[1] == theirs[1]
    venv = vec("cvrp", compile=compile)
    venv.reset(seed=1)
    copy = pickle.loads(pickle.dumps(venv))
    actions = np.array([1, 2, 3])
    np.testing.assert_array_equal(venv.step(actions)[0]["action_mask"], copy.step(actions)[0]["action_mask"])


def test_info__cost_is_a_numpy_float_and_invalid_action_a_python_bool():
    """``cost`` a numpy float64 (a Python float too), which TorchRL's info readers take; ``invalid_action`` the
    contract's Python bool (Jumanji's convention, ``info["invalid_action"] is True``)."""
    env = gym.make("routing/TSP-10")
    env.reset(seed=0)
    for a in range(10):
        *_, info = env.step(a)
    assert isinstance(info["cost"], np.float64) and isinstance(info["cost"], float)
    assert info["invalid_action"] is False
    env.reset(seed=0)
    env.step(0)
    *_, info = env.step(0)  # masked: node 0 is visited
    assert info["invalid_action"] is True


def test_vector__call_and_get_attr_as_gymnasium_vector_envs_offer():
    env = vec("cvrp")
    env.reset(seed=0)
    masks = env.call("action_masks")
    assert len(masks) == 3 and all(m.shape == (7,) and m.dtype == bool for m in masks)
    np.testing.assert_array_equal(np.stack(masks), env.action_masks())
    assert env.get_attr("num_nodes") == (6, 6, 6)
