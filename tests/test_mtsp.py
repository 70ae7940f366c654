"""mTSP (routing_gym/problems/mtsp.py, after RL4CO's MTSPEnv) against a plain float64 model of its rules, for both
objectives: every feasible episode of tiny seeded instances enumerated, masks compared set for set, costs (summed
rewards and ``tour_cost``) recomputed from the routes; a hand-checkable instance; the generator; validation; the
compiled env; heuristics."""
import math

import numpy as np
import pytest
import torch

from episodes import every_episode as episodes_of, route_lengths, routes_of
from routing_gym.problems import MTSP, step, tour_cost


def own_cost(locs, feats, tour):
    """The cost in float64 from the routes alone: the longest route (cost_type 0, "minmax") or their sum (1,
    "sum"); each route from the depot through its customers and back. (Also ``test_problems``' judge.)"""
    lengths = route_lengths(locs, tour)
    return max(lengths) if int(feats["cost_type"]) == 0 else sum(lengths)


class Model:
    """The rules in float64, from RL4CO's MTSPEnv: an unvisited customer; the depot when at a customer and
    another salesman is left (the depot closes this route and starts the next)."""

    def __init__(self, n, m):
        self.n, self.m, self.at, self.agent, self.visited = n, m, 0, 0, set()

    @property
    def done(self):
        return len(self.visited) == self.n - 1

    def allowed(self):
        out = set(range(1, self.n)) - self.visited
        if self.at != 0 and self.agent < self.m - 1:
            out.add(0)
        return out

    def apply(self, a):
        self.agent += a == 0
        self.visited |= {a} - {0}
        self.at = a


def instance(locs, m, cost_type):
    return MTSP.instance_from({"locs": locs, "num_agents": m, "cost_type": cost_type})


def every_episode(inst):
    """Every feasible episode of ``inst``, checked against :class:`Model` and :func:`own_cost`
    (``episodes.every_episode``); returns (actions, cost) pairs."""
    locs, n, m = inst.locs[0].double().numpy(), inst.locs.shape[1], int(inst.num_agents[0])
    feats = {"cost_type": float(inst.cost_type[0])}
    return episodes_of(MTSP, inst, lambda: Model(n, m), lambda actions: own_cost(locs, feats, actions))


@pytest.mark.parametrize("seed,n,m,cost_type", [(s, n, m, c) for s in range(2) for n in (3, 4, 5) for m in (1, 2, 3)
                                                 for c in ("minmax", "sum") if m <= n])
def test_mtsp__every_episode_matches_the_model(seed, n, m, cost_type):
    locs = torch.rand(n + 1, 2, generator=torch.Generator().manual_seed(seed)).numpy()
    episodes = every_episode(instance(locs, m, cost_type))
    # every split of every order into at most m non-empty routes: n! * sum_{r < m} C(n - 1, r)
    assert len(episodes) == math.factorial(n) * sum(math.comb(n - 1, r) for r in range(m))
    assert all(len(routes_of(a)) <= m and len(a) <= 2 * n - 1 for a, _ in episodes)


def test_mtsp__hand_checked_optima_of_both_objectives():
    """Depot in the middle of the unit square, customers at its corners. One salesman: the perimeter plus two
    half-diagonals, 3 + sqrt(2). Two: min-max pairs the corners of one side, 1 + sqrt(2) per route; min-sum
    keeps one salesman (merging routes never lengthens them). Four: each corner alone, sqrt(2)."""
    locs = [[0.5, 0.5], [0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]
    best = {(m, c): min(cost for _, cost in every_episode(instance(locs, m, c)))
            for m in (1, 2, 4) for c in ("minmax", "sum")}
    r2 = math.sqrt(2)
    assert best[1, "minmax"] == pytest.approx(3 + r2) and best[1, "sum"] == pytest.approx(3 + r2)
    assert best[2, "minmax"] == pytest.approx(1 + r2) and best[2, "sum"] == pytest.approx(3 + r2)
    assert best[4, "minmax"] == pytest.approx(r2) and best[4, "sum"] == pytest.approx(3 + r2)


def test_mtsp__minmax_rewards_are_the_increases_of_the_longest_route():
    locs = [[0.5, 0.5], [0.0, 0.5], [1.0, 0.5], [0.5, 0.0]]  # half-units from the depot
    state, rewards = MTSP.reset(instance(locs, 2, "minmax")), []
    for a in (1, 0, 2, 3):
        state, r, _ = step(MTSP, state, torch.tensor([a]))
        rewards.append(float(r[0]))
    # route 1: 0.5 out, 0.5 back (longest 1.0); route 2: 0.5, sqrt(0.5), 0.5 back: 1 + sqrt(0.5)
    assert rewards == pytest.approx([-0.5, -0.5, 0.0, -math.sqrt(0.5)])
    assert float(MTSP.observe(state)["max_subtour_length"][0, 0]) == pytest.approx(1 + math.sqrt(0.5))


def test_mtsp__generator_rl4co_defaults_and_the_cost_type_variant():
    inst = MTSP.generate(512, 20, generator=torch.Generator().manual_seed(0))
    assert inst.locs.shape == (512, 21, 2) and 0 <= inst.locs.min() and inst.locs.max() <= 1
    assert (inst.num_agents == 5).all() and (inst.cost_type == 0).all()
    assert (MTSP.generate(2, 3, cost_type="sum").num_agents == 3).all()  # min(5, n)
    assert (MTSP.generate(2, 8, cost_type="sum").cost_type == 1).all()
    with pytest.raises(ValueError, match="cost_type"):
        MTSP.generate(2, 8, cost_type="max")
    MTSP.instance_from(inst, batched=True)


@pytest.mark.parametrize("fields,match", [
    ({"num_agents": 0, "cost_type": "sum"}, "'num_agents' must be a whole number"),
    ({"num_agents": 3, "cost_type": "sum"}, "'num_agents' must be a whole number"),
    ({"num_agents": 1.5, "cost_type": "sum"}, "'num_agents' must be a whole number"),
    ({"num_agents": 2, "cost_type": "longest"}, "'cost_type' must be one of"),
    ({"num_agents": 2, "cost_type": 2}, "'cost_type' must be"),
    ({"num_agents": 2}, "lacks field"),
])
def test_mtsp__instance_from_names_the_field(fields, match):
    with pytest.raises(ValueError, match=match):
        MTSP.instance_from({"locs": [[0, 0], [1, 0], [0, 1]], **fields})


def test_mtsp__the_env_plays_both_objectives_and_compiles_as_eager():
    import shutil
    import gymnasium as gym
    compiles = bool(shutil.which("g++") or shutil.which("c++") or shutil.which("clang++"))
    for cost_type in ("minmax", "sum"):
        envs = [gym.make("routing/MTSP-v0", num_nodes=6, cost_type=cost_type, compile=c)
                for c in ((False, True) if compiles else (False,))]
        for seed in range(2):
            obs = [e.reset(seed=seed)[0] for e in envs]
            assert float(obs[0]["objective"][0]) == ("minmax", "sum").index(cost_type)
            rng = np.random.default_rng(seed)
            done, tour = False, []
            while not done:
                assert all(np.array_equal(obs[0][k], o[k]) for o in obs for k in obs[0])
                a = int(rng.choice(np.flatnonzero(obs[0]["action_mask"])))
                out = [e.step(a) for e in envs]
                obs = [o[0] for o in out]
                assert all(o[1] == pytest.approx(out[0][1], abs=1e-6) for o in out)
                done, tour = out[0][2], tour + [a]
            locs = envs[0].unwrapped.state.instance.locs[0].numpy()
            cost = own_cost(locs, {"cost_type": ("minmax", "sum").index(cost_type)}, tour)
            assert all(o[4]["cost"] == pytest.approx(cost, abs=1e-5) for o in out)


def test_mtsp__heuristics_respect_the_mask():
    from agents.references.heuristics import applicable, heuristic_tours

    inst = MTSP.generate(16, 20, generator=torch.Generator().manual_seed(3))
    assert "nearest" in applicable(MTSP)
    for name in applicable(MTSP):
        assert torch.isfinite(tour_cost(MTSP, inst, heuristic_tours(MTSP, inst, name))).all()
