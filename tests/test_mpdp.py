"""mPDP (routing_gym/problems/mpdp.py, after RL4CO's MPDPEnv) against a plain float64 model of its rules, for both
objectives: every feasible episode of tiny seeded instances enumerated, masks compared set for set, costs (summed
rewards and ``tour_cost``) recomputed from the routes; a hand-checkable instance; the generator; validation; the
env; heuristics."""
import math

import numpy as np
import pytest
import torch

from episodes import every_episode as episodes_of, route_lengths, routes_of
from routing_gym.problems import MPDP, step, tour_cost


def own_cost(locs, feats, tour):
    """The cost in float64 from the routes alone: the longest route (objective 0, "minmax") or their sum (1,
    "minsum"); each route from the depot through its nodes and back. (Also ``test_problems``' judge.)"""
    lengths = route_lengths(locs, tour)
    return max(lengths) if float(np.asarray(feats["objective"]).reshape(-1)[0]) == 0 else sum(lengths)


class Model:
    """The rules, from RL4CO's MPDPEnv: pickups 1..h, delivery of i is i + h. An unvisited pickup; an unvisited
    delivery whose pickup this vehicle made; the depot when at a customer, nothing on board and another vehicle
    is left."""

    def __init__(self, n, m):
        self.h, self.m, self.at, self.agent, self.visited, self.on_board = (n - 1) // 2, m, 0, 0, set(), set()

    @property
    def done(self):
        return len(self.visited) == 2 * self.h

    def allowed(self):
        out = {p for p in range(1, self.h + 1) if p not in self.visited}
        out |= {p + self.h for p in self.on_board}
        if self.at != 0 and not self.on_board and self.agent < self.m - 1:
            out.add(0)
        return out

    def apply(self, a):
        if a == 0:
            self.agent += 1
        elif a <= self.h:
            self.on_board.add(a)
        else:
            assert a - self.h in self.on_board
            self.on_board.remove(a - self.h)
        self.visited |= {a} - {0}
        self.at = a


def instance(locs, m, objective):
    return MPDP.instance_from({"locs": locs, "num_agents": m, "objective": objective})


def every_episode(inst):
    """Every feasible episode of ``inst``, checked against :class:`Model` and :func:`own_cost`
    (``episodes.every_episode``); returns (actions, cost) pairs."""
    locs, n, m = inst.locs[0].double().numpy(), inst.locs.shape[1], int(inst.num_agents[0])
    feats = {"objective": float(inst.objective[0, 0])}
    return episodes_of(MPDP, inst, lambda: Model(n, m), lambda actions: own_cost(locs, feats, actions))


@pytest.mark.parametrize("seed,n,m,objective", [(s, n, m, o) for s in range(2) for n in (2, 4, 6) for m in (1, 2, 3)
                                                 for o in ("minmax", "minsum") if m <= n // 2])
def test_mpdp__every_episode_matches_the_model(seed, n, m, objective):
    locs = torch.rand(n + 1, 2, generator=torch.Generator().manual_seed(seed)).numpy()
    episodes = every_episode(instance(locs, m, objective))
    assert all(len(routes_of(a)) <= m and len(a) <= n + m - 1 for a, _ in episodes)
    # one vehicle: the orders of n nodes with each delivery after its pickup, n! / 2^(n/2)
    if m == 1:
        assert len(episodes) == math.factorial(n) // 2 ** (n // 2)
    # two pairs, two vehicles: 6 single-route orders, plus the orders that empty the vehicle after the first
    # pair (1 3 | 2 4, 2 4 | 1 3, and each of these as one route too): 6 + 2
    if (n, m) == (4, 2):
        assert len(episodes) == 8


def test_mpdp__hand_checked_optima_of_both_objectives():
    """Depot in the middle; pickups 1, 2 at the bottom corners, their deliveries 3, 4 at the top corners above
    them. One vehicle: the perimeter plus two half-diagonals, 0 -> 1 -> 2 -> 4 -> 3 -> 0 = 3 + sqrt(2) (1 -> 3 ->
    2 -> 4 crosses a diagonal: 2 + 2 sqrt(2)). Two vehicles: min-max gives each a side, 0 -> 1 -> 3 -> 0 =
    1 + sqrt(2); min-sum keeps one route (two sides cost 2 + 2 sqrt(2))."""
    locs = [[0.5, 0.5], [0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]  # pickups 1, 2; deliveries 3, 4
    r2 = math.sqrt(2)
    best = {(m, o): min(cost for _, cost in every_episode(instance(locs, m, o)))
            for m in (1, 2) for o in ("minmax", "minsum")}
    assert best[1, "minmax"] == pytest.approx(3 + r2) and best[1, "minsum"] == pytest.approx(3 + r2)
    assert best[2, "minmax"] == pytest.approx(1 + r2) and best[2, "minsum"] == pytest.approx(3 + r2)


def test_mpdp__a_vehicle_returns_only_empty_and_the_last_one_finishes():
    locs = [[0.5, 0.5], [0.1, 0.1], [0.9, 0.1], [0.1, 0.9], [0.9, 0.9]]
    state = MPDP.reset(instance(locs, 2, "minmax"))
    assert state.mask[0].tolist() == [0, 1, 1, 0, 0]  # no depot at the start, no delivery before its pickup
    state, _, _ = step(MPDP, state, torch.tensor([1]))
    assert state.mask[0].tolist() == [0, 0, 1, 1, 0]  # carrying pickup 1: no depot
    state, _, _ = step(MPDP, state, torch.tensor([3]))
    assert state.mask[0].tolist() == [1, 0, 1, 0, 0]  # empty again: the depot closes the route
    state, _, _ = step(MPDP, state, torch.tensor([0]))
    assert state.mask[0].tolist() == [0, 0, 1, 0, 0] and int(state.agent[0]) == 1
    state, _, _ = step(MPDP, state, torch.tensor([2]))
    assert state.mask[0].tolist() == [0, 0, 0, 0, 1]  # the last vehicle may not return
    obs = MPDP.observe(state)
    assert float(obs["agents_left"][0, 0]) == 0.0


def test_mpdp__generator_rl4co_defaults_and_the_objective_variant():
    inst = MPDP.generate(2048, 20, generator=torch.Generator().manual_seed(0))
    assert inst.locs.shape == (2048, 21, 2) and 0 <= inst.locs.min() and inst.locs.max() <= 1
    assert set(inst.num_agents.long().tolist()) == set(range(2, 11)) and (inst.objective == 0).all()
    assert set(MPDP.generate(64, 6).num_agents.long().tolist()) <= {2, 3}  # capped at n/2
    assert (MPDP.generate(4, 2).num_agents == 1).all()
    assert (MPDP.generate(2, 8, objective="minsum").objective == 1).all()
    with pytest.raises(ValueError, match="objective"):
        MPDP.generate(2, 8, objective="sum")
    with pytest.raises(ValueError, match="multiple of 2"):
        MPDP.generate(2, 7)
    MPDP.instance_from(inst, batched=True)


@pytest.mark.parametrize("fields,match", [
    ({"num_agents": 0, "objective": "minsum"}, "'num_agents' must be a whole number"),
    ({"num_agents": 3, "objective": "minsum"}, "'num_agents' must be a whole number"),
    ({"num_agents": 1.5, "objective": "minsum"}, "'num_agents' must be a whole number"),
    ({"num_agents": 2, "objective": "longest"}, "'objective' must be one of"),
    ({"num_agents": 2, "objective": 2}, "'objective' must be"),
    ({"num_agents": 2}, "lacks field"),
])
def test_mpdp__instance_from_names_the_field(fields, match):
    with pytest.raises(ValueError, match=match):
        MPDP.instance_from({"locs": [[0, 0], [1, 0], [0, 1], [1, 1], [0.5, 0.5]], **fields})


def test_mpdp__instance_from_refuses_an_odd_customer_count():
    with pytest.raises(ValueError, match="'locs' must hold the depot and an even number"):
        MPDP.instance_from({"locs": [[0, 0], [1, 0], [0, 1], [1, 1]], "num_agents": 1, "objective": "minmax"})


def test_mpdp__the_env_plays_both_objectives():
    import gymnasium as gym
    for objective in ("minmax", "minsum"):
        env = gym.make("routing/MPDP-v0", num_nodes=8, objective=objective)
        for seed in range(2):
            obs, _ = env.reset(seed=seed)
            assert float(obs["objective"][0]) == ("minmax", "minsum").index(objective)
            rng = np.random.default_rng(seed)
            done, tour = False, []
            while not done:
                a = int(rng.choice(np.flatnonzero(obs["action_mask"])))
                obs, _, done, _, info = env.step(a)
                tour.append(a)
            locs = env.unwrapped.state.instance.locs[0].numpy()
            cost = own_cost(locs, {"objective": ("minmax", "minsum").index(objective)}, tour)
            assert info["cost"] == pytest.approx(cost, abs=1e-5)


def test_mpdp__heuristics_respect_the_mask():
    from agents.references.heuristics import applicable, heuristic_tours

    inst = MPDP.generate(16, 20, generator=torch.Generator().manual_seed(3))
    assert "nearest" in applicable(MPDP)
    for name in applicable(MPDP):
        assert torch.isfinite(tour_cost(MPDP, inst, heuristic_tours(MPDP, inst, name))).all()


def test_mpdp__no_solver_reference():
    from agents.references.solvers import solve

    with pytest.raises(ValueError, match="MPDP"):
        solve("mpdp", MPDP.generate(1, 4), "pyvrp")
