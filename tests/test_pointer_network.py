"""More policies (issue 10): the Pointer Network (agents/policies/pointer_network.py), the distance-biased
Attention Model (AttentionModelConfig.distance_bias), supervised training and the Pointer Network text
format (agents/training/supervised.py)."""
from __future__ import annotations

import copy
import dataclasses
import math

import gymnasium as gym
import numpy as np
import pytest
import torch

import routing_gym  # noqa: F401  (registers the envs)
from agents.inference.rollout import make_env, rollout
from agents.policies.attention_model import AttentionModel, AttentionModelConfig, SelfAttention
from agents.policies.pointer_network import PointerNetwork, PointerNetworkConfig
from agents.references.exact import brute_force, label_tsp
from agents.training.config import TrainConfig
from agents.training.reinforce import Trainer
from agents.training.supervised import (SupervisedConfig, parse_ptrnet_line, read_ptrnet, teacher_forcing_nll,
                                        train_supervised, write_ptrnet)
from routing_gym.problems import TSP, get_problem, tour_cost

PROBLEMS = tuple(routing_gym.PROBLEMS)  # every problem in the registry
SMALL_AM = {"embed_dim": 32, "n_heads": 4, "n_layers": 1, "ff_hidden": 64}


def pointer(problem: str, seed: int = 0) -> PointerNetwork:
    torch.manual_seed(seed)
    return PointerNetwork(PointerNetworkConfig(problem=problem, embed_dim=32))


def biased(problem: str, seed: int = 0) -> AttentionModel:
    torch.manual_seed(seed)
    return AttentionModel(AttentionModelConfig(problem=problem, distance_bias=True, **SMALL_AM))


def plain(problem: str, seed: int = 0) -> AttentionModel:
    torch.manual_seed(seed)
    return AttentionModel(AttentionModelConfig(problem=problem, **SMALL_AM))


POLICIES = {"pointer": pointer, "distance_bias": biased}
NETWORKS = dict(POLICIES, attention=plain)  # every network the trainer builds


def reset_env(problem: str, num_nodes: int, batch: int, seed: int = 0):
    env = make_env(problem, num_nodes, batch).unwrapped
    instances = get_problem(problem).generate(batch, num_nodes, generator=torch.Generator().manual_seed(seed))
    obs, _ = env.reset(options={"instances": instances})
    return env, instances, obs


# -- shapes, masks, the recurrent state ---------------------------------------------------------------
@pytest.mark.parametrize("make", NETWORKS.values(), ids=NETWORKS.keys())
@pytest.mark.parametrize("problem", PROBLEMS)
def test_log_probs__minus_inf_exactly_at_masked_nodes(make, problem):
    model = make(problem)
    env, _, obs = reset_env(problem, 8, 12)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        cache = model.precompute(obs)
        while not bool(env.state.done.all()):
            logp, cache = model.log_probs(cache, obs)
            mask = obs["action_mask"].bool()  # int8 in the env, as its space declares
            assert logp.shape == mask.shape == (12, get_problem(problem).num_nodes_total(8))
            assert torch.equal(torch.isneginf(logp), ~mask)
            assert torch.isfinite(logp[mask]).all()
            torch.testing.assert_close(logp.exp().sum(dim=1), torch.ones(12))
            obs, *_ = env.step(torch.multinomial(logp.exp(), 1, generator=generator).squeeze(1))


@pytest.mark.parametrize("make", POLICIES.values(), ids=POLICIES.keys())
@pytest.mark.parametrize("problem", ("tsp", "cvrp"))
def test_rollout__finite_log_likelihood_equal_to_the_teacher_forced_one(make, problem):
    model = make(problem)
    env, instances, _ = reset_env(problem, 8, 16)
    out = rollout(model, env, instances, strategy="sample", generator=torch.Generator().manual_seed(2))
    assert torch.isfinite(out.log_likelihood).all() and (out.log_likelihood < 0).all()
    out.log_likelihood.sum().backward()  # gradients flow
    nll = teacher_forcing_nll(model, problem, instances, out.actions)
    torch.testing.assert_close(nll, -out.log_likelihood)
    # fresh precompute calls start fresh episodes: two greedy rollouts agree
    with torch.no_grad():
        a, b = rollout(model, env, instances), rollout(model, env, instances)
    assert torch.equal(a.actions, b.actions) and torch.equal(a.cost, b.cost)


def test_pointer__repeated_call_on_one_observation_does_not_advance_the_state():
    model = pointer("tsp")
    env, _, obs = reset_env("tsp", 6, 4)
    with torch.no_grad():
        start = model.precompute(obs)
        first, cache = model.log_probs(start, obs)
        again, cache = model.log_probs(cache, obs)  # the returned cache on the same observation: no step
        torch.testing.assert_close(again, first)
        obs, *_ = env.step(first.argmax(dim=1))
        second, cache = model.log_probs(cache, obs)
        again, cache = model.log_probs(cache, obs)
        torch.testing.assert_close(again, second)
        assert torch.equal(cache.seen, torch.ones(4, dtype=torch.long))
        assert torch.equal(start.seen, torch.full((4,), -1))  # the caches passed in were left alone
        with pytest.raises(ValueError, match="first observation"):
            model.precompute(obs)


@pytest.mark.parametrize("make", NETWORKS.values(), ids=NETWORKS.keys())
@pytest.mark.parametrize("problem", ("tsp", "cvrp"))
def test_log_probs__returns_the_next_cache_and_never_modifies_its_inputs(make, problem):
    """The policy protocol: a step is a function of (cache, obs); stepping twice from one cache gives the
    same log-probabilities and caches, and the cache and observation passed in keep their values."""
    model = make(problem).eval()
    env, _, obs = reset_env(problem, 6, 5)
    with torch.no_grad():
        cache = model.precompute(obs)
        for _ in range(3):
            before = copy.deepcopy((cache, obs))
            logp, following = model.log_probs(cache, obs)
            logp_again, following_again = model.log_probs(cache, obs)
            torch.testing.assert_close(logp_again, logp)
            assert_trees_equal(following_again, following)
            assert_trees_equal((cache, obs), before)
            obs, *_ = env.step(logp.argmax(dim=1))
            cache = following


def assert_trees_equal(a, b):
    if isinstance(a, torch.Tensor):
        assert torch.equal(a, b)
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_trees_equal(x, y)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            assert_trees_equal(a[k], b[k])
    else:  # a dataclass
        assert_trees_equal(dataclasses.astuple(a), dataclasses.astuple(b))


def test_distance_bias__off_by_default_and_default_parameters_unchanged():
    plain = AttentionModel(AttentionModelConfig(problem="tsp", **SMALL_AM))
    with_bias = biased("tsp")
    extra = set(with_bias.state_dict()) - set(plain.state_dict())
    assert not any("distance_bias" in k for k in plain.state_dict())
    assert extra and all(".distance_bias." in k for k in extra)
    assert set(plain.state_dict()) <= set(with_bias.state_dict())


def test_distance_bias__key_padding_mask_hides_padded_keys():
    torch.manual_seed(0)
    attention = SelfAttention(16, 4)
    h = torch.randn(2, 5, 16)
    pad = torch.tensor([[False, False, False, True, True], [False] * 5])
    bias = torch.randn(2, 4, 5, 5)
    out = attention(h, bias, pad)
    changed = h.clone()
    changed[0, 3:] += 10.0  # padded nodes' content must not reach the others
    out2 = attention(changed, bias, pad)
    torch.testing.assert_close(out2[0, :3], out[0, :3])
    torch.testing.assert_close(out2[1], out[1])
    torch.testing.assert_close(attention(h, bias, None)[1], out[1])  # no padding in row 1: the same


# -- the single Gymnasium env -------------------------------------------------------------------------
@pytest.mark.parametrize("make", POLICIES.values(), ids=POLICIES.keys())
@pytest.mark.parametrize("problem", ("tsp", "cvrp"))
def test_predict__acts_in_the_single_env(make, problem):
    model = make(problem)
    env = gym.make(f"routing/{problem.upper()}-v0", num_nodes=7)
    obs, _ = env.reset(seed=5)
    state, done, steps = None, False, 0
    while not done:
        action, state = model.predict(obs, state)
        assert obs["action_mask"][action] == 1
        obs, _, terminated, truncated, info = env.step(action)
        done, steps = terminated or truncated, steps + 1
    assert not info.get("invalid_action", False) and math.isfinite(info["cost"])
    assert steps == (info["tour"] >= 0).sum()  # the tour, padded with -1


def test_pointer_predict__same_actions_as_the_greedy_vector_rollout():
    model = pointer("tsp")
    env = gym.make("routing/TSP-v0", num_nodes=7)
    obs, _ = env.reset(seed=3)
    instance = TSP.instance_from({"locs": obs["locs"]})
    state, done = None, False
    while not done:
        action, state = model.predict(obs, state)
        obs, _, done, _, info = env.step(action)
    expected = rollout(model, make_env("tsp", 7, 1), instance).actions[0]
    assert info["tour"][info["tour"] >= 0].tolist() == expected.tolist()


# -- training -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("policy, model", [("attention", dict(SMALL_AM, distance_bias=True)),
                                           ("pointer", {"embed_dim": 32})])
def test_trainer__one_small_epoch_and_resume(tmp_path, policy, model):
    config = TrainConfig(problem="tsp", num_nodes=6, epochs=1, epoch_size=64, batch_size=32, eval_size=64,
                         val_size=64, lr=1e-3, out_dir=str(tmp_path / "run"), policy=policy, model=model, seed=1)
    trainer = Trainer(config)
    rows = trainer.fit(progress=False, log=False)
    assert math.isfinite(rows[0]["val_cost"])
    resumed = Trainer.resume(tmp_path / "run" / "last.pt", epochs=2)
    assert type(resumed.policy) is type(trainer.policy) and resumed.policy.config == trainer.policy.config
    for (name, p), q in zip(trainer.policy.state_dict().items(), resumed.policy.state_dict().values()):
        assert torch.equal(p, q), name


def test_supervised__labels_optimal_and_loss_decreases():
    instances = TSP.generate(64, 8, generator=torch.Generator().manual_seed(0))
    tours = label_tsp(instances.locs)
    # the labels are optimal tours: their cost is the brute-force optimum
    torch.testing.assert_close(tour_cost(TSP, instances, tours)[:4], brute_force(instances.locs[:4]))
    model = pointer("tsp")
    history = train_supervised(model, "tsp", instances, tours, SupervisedConfig(epochs=6, batch_size=16, lr=3e-3))
    assert history[-1] < history[0] - 1.0, history
    assert all(b < a for a, b in zip(history, history[1:])), history


# -- the Pointer Network text format ------------------------------------------------------------------
def test_ptrnet_format__round_trips(tmp_path):
    g = torch.Generator().manual_seed(0)
    locs = torch.rand(5, 6, 2, generator=g)
    tours = torch.stack([torch.randperm(6, generator=g) for _ in range(5)])
    write_ptrnet(tmp_path / "tsp6.txt", locs, tours)
    got_locs, got_tours = read_ptrnet(tmp_path / "tsp6.txt")
    assert torch.equal(got_locs, locs) and torch.equal(got_tours, tours)
    first = (tmp_path / "tsp6.txt").read_text().splitlines()[0].split()
    assert first[12] == "output" and first[13] == first[-1] == str(int(tours[0, 0]) + 1) and len(first) == 13 + 7


def test_ptrnet_format__hand_written_line():
    locs, tour = parse_ptrnet_line("0.1 0.2 0.3 0.4 0.5 0.6 output 1 3 2 1")
    np.testing.assert_array_equal(locs, np.array([[0.1, 0.2], [0.3, 0.4], [0.5, 0.6]], dtype=np.float32))
    np.testing.assert_array_equal(tour, [0, 2, 1])


@pytest.mark.parametrize("line, message", [
    ("0.1 0.2 0.3 0.4 1 2 1", "'output' exactly once"),
    ("0.1 0.2 0.3 output 1 2 1", "even number"),
    ("0.1 0.2 0.3 0.4 output 1 2", "closed tour of 3"),
    ("0.1 0.2 0.3 0.4 output 1 1 1", "each of the nodes 1..2 once"),
    ("0.1 0.2 0.3 0.4 output 1 3 1", "each of the nodes 1..2 once"),
    ("0.1 0.2 0.3 x output 1 2 1", "not a number"),
])
def test_ptrnet_format__malformed_lines_raise_naming_the_line(tmp_path, line, message):
    path = tmp_path / "bad.txt"
    path.write_text("0.5 0.5 0.25 0.25 output 1 2 1\n" + line + "\n")
    with pytest.raises(ValueError, match=rf"bad\.txt, line 2: .*{message}"):
        read_ptrnet(path)
