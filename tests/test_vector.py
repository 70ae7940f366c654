"""The native vector envs: make_vec, autoreset modes, array types, parity with the single env."""
import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode

import routing_gym  # noqa: F401
from routing_gym.vector import RoutingVectorEnv

PROBLEMS = tuple(p.label for p in routing_gym.PROBLEMS.values())  # every problem in the registry


def make_vec(problem, num_envs=4, n=10, **kwargs):
    return gym.make_vec(f"routing/{problem}-v0", num_envs=num_envs, vectorization_mode="vector_entry_point",
                        num_nodes=n, **kwargs)


def first_allowed(mask):
    return np.asarray(mask).astype(bool).argmax(axis=-1)


@pytest.mark.parametrize("env_id", [f"routing/{p}-{n}" for p in PROBLEMS for n in (20, 50, 100)])
def test_make_vec__every_registered_id(env_id):
    venv = gym.make_vec(env_id, num_envs=3, vectorization_mode="vector_entry_point")
    assert isinstance(venv, RoutingVectorEnv)
    obs, _ = venv.reset(seed=0)
    assert venv.observation_space.contains(obs)
    assert venv.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP


def test_make_vec__devices_and_max_episode_steps():
    assert make_vec("TSP", device=torch.device("cpu")).device == torch.device("cpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            make_vec("TSP", device="cuda:1")
    with pytest.raises(ValueError, match="autoreset_mode"):
        make_vec("TSP", autoreset_mode="sometimes")
    with pytest.raises(TypeError):
        make_vec("TSP", prize_type="unif")
    venv = make_vec("TSP", num_envs=2, max_episode_steps=3)
    obs, _ = venv.reset(seed=0)
    for t in range(3):
        obs, r, term, trunc, _ = venv.step(first_allowed(obs["action_mask"]))
    assert trunc.all() and not term.any()


@pytest.mark.parametrize("problem", PROBLEMS)
def test_parity__sub_env_i_is_the_single_env_seeded_with_seed_plus_i(problem):
    b, seed = 5, 11
    venv = make_vec(problem, num_envs=b, autoreset_mode=AutoresetMode.DISABLED)
    singles = [gym.make(f"routing/{problem}-v0", num_nodes=10) for _ in range(b)]
    vobs, _ = venv.reset(seed=seed)
    sobs = [env.reset(seed=seed + i)[0] for i, env in enumerate(singles)]
    rng = np.random.default_rng(0)
    done = np.zeros(b, bool)
    while not done.all():
        for i in range(b):
            if not done[i]:
                for key, value in sobs[i].items():
                    assert np.array_equal(vobs[key][i], value), (problem, i, key)
        actions = np.array([rng.choice(np.flatnonzero(o["action_mask"])) if not d else 0
                            for o, d in zip(sobs, done)])
        vobs, vr, vterm, vtrunc, _ = venv.step(actions)
        for i in np.flatnonzero(~done):
            sobs[i], r, term, trunc, _ = singles[i].step(int(actions[i]))
            assert vr[i] == r and vterm[i] == term and vtrunc[i] == trunc, (problem, i)
            done[i] = term
        assert np.isfinite(vr).all()


@pytest.mark.parametrize("problem", PROBLEMS)
def test_disabled__finished_sub_envs_stay_done_with_a_noop_mask(problem):
    venv = make_vec(problem, num_envs=6, autoreset_mode="Disabled", array_type="torch")
    obs, _ = venv.reset(seed=0)
    ever_done = torch.zeros(6, dtype=torch.bool)
    returns = torch.zeros(6, dtype=torch.float64)
    for _ in range(60):
        a = obs["action_mask"].float().multinomial(1, generator=torch.Generator().manual_seed(1)).squeeze(1)
        before = ever_done.clone()
        obs, r, term, trunc, info = venv.step(a)
        assert isinstance(r, torch.Tensor) and torch.isfinite(r).all()
        assert (r[before] == 0).all() and term[before].all()
        returns += r
        ever_done |= term
        assert (obs["action_mask"][ever_done].sum(dim=1) == 1).all()
    assert ever_done.all()
    assert torch.allclose(info["cost"], -returns.to(info["cost"].dtype))
    obs, _ = venv.reset(options={"reset_mask": np.array([True, False, True, False, False, False])})
    assert venv.unwrapped.state.done.tolist() == [False, True, False, True, True, True]


@pytest.mark.parametrize("problem", PROBLEMS)
def test_next_step__finished_sub_env_resets_on_the_next_step(problem):
    venv = make_vec(problem, num_envs=3)
    obs, _ = venv.reset(seed=0)
    costs = []
    for _ in range(80):
        obs, r, term, trunc, info = venv.step(first_allowed(obs["action_mask"]))
        if term.any():
            i = int(np.flatnonzero(term)[0])
            costs.append(info["cost"][i])
            assert info["_cost"][i] and isinstance(info["tour"][i], list)
            obs2, r2, term2, _, _ = venv.step(first_allowed(obs["action_mask"]))
            assert r2[i] == 0.0 and not term2[i]
            assert obs2["step"][i, 0] == 0  # a fresh episode
            obs = obs2
    assert costs and np.isfinite(costs).all()


def test_same_step__final_obs_and_info_then_reset_obs():
    venv = make_vec("CVRP", num_envs=2, autoreset_mode=AutoresetMode.SAME_STEP)
    obs, _ = venv.reset(seed=0)
    for _ in range(60):
        obs, r, term, trunc, info = venv.step(first_allowed(obs["action_mask"]))
        if term.any():
            i = int(np.flatnonzero(term)[0])
            assert info["_final_obs"][i] and info["final_obs"][i]["step"][0] > 0
            assert info["final_info"]["_cost"][i] and info["final_info"]["cost"][i] > 0
            assert obs["step"][i, 0] == 0
            return
    pytest.fail("no episode finished")


def test_torch_mode__tensors_on_device_and_tensor_actions():
    venv = make_vec("OP", num_envs=4, array_type="torch", prize_type="const")
    obs, _ = venv.reset(seed=0)
    assert obs["action_mask"].dtype == torch.bool and obs["locs"].device.type == "cpu"
    assert (obs["prize"][:, 1:] == 1).all()
    obs, r, term, trunc, _ = venv.step(obs["action_mask"].int().argmax(dim=1))
    assert r.dtype == torch.float32 and term.dtype == torch.bool


def test_reset__user_instances_batch_is_loaded_and_validated():
    venv = make_vec("TSP", num_envs=2, n=3)
    locs = np.array([[[0, 0], [1, 0], [1, 1]], [[0, 0], [0.5, 0], [0, 0.5]]], np.float32)
    obs, _ = venv.reset(options={"instances": {"locs": locs}})
    assert np.array_equal(obs["locs"], locs)
    with pytest.raises(ValueError, match="'locs' must lie in"):
        venv.reset(options={"instances": {"locs": locs * 3}})
    with pytest.raises(ValueError, match=r"must have shape \(2, 3, 2\)"):
        venv.reset(options={"instances": {"locs": locs[:1]}})


def test_step__bad_actions_are_refused():
    venv = make_vec("TSP", num_envs=2)
    venv.reset(seed=0)
    with pytest.raises(ValueError, match="shape"):
        venv.step(np.array([0, 1, 2]))
    with pytest.raises(ValueError, match="lie in"):
        venv.step(np.array([0, 10]))
    strict = make_vec("TSP", num_envs=2, invalid_action="raise")
    strict.reset(seed=0)
    strict.step(np.array([0, 0]))
    with pytest.raises(ValueError, match="sub-env 0: action 0 is masked"):
        strict.step(np.array([0, 1]))


@pytest.mark.parametrize("problem", PROBLEMS)
def test_sync_vector_env__over_single_envs_survives_episode_ends(problem):
    venv = gym.make_vec(f"routing/{problem}-v0", num_envs=2, vectorization_mode="sync", num_nodes=5)
    obs, _ = venv.reset(seed=0)
    ended = 0
    for _ in range(30):
        obs, r, term, trunc, info = venv.step(first_allowed(obs["action_mask"]))
        ended += int(term.sum())
    assert ended >= 2 and np.isfinite(r).all()
