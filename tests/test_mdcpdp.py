"""MDCPDP (routing_gym/problems/mdcpdp.py, after RL4CO's MDCPDPEnv) against a plain float64 model of its rules:
every feasible episode of tiny seeded instances enumerated for each reward mode and problem mode, masks compared
set for set, costs (summed rewards and ``tour_cost``) recomputed from the routes; a hand-checkable instance; the
generator; validation; the env; heuristics."""
import math

import numpy as np
import pytest
import torch

from episodes import every_episode as episodes_of
from routing_gym.problems import MDCPDP, step, tour_cost

D = 5  # depots


def routes_of(tour):
    """The routes of a finished tour as (depot, customers) pairs: a route starts at a depot chosen between
    routes and ends at its return to that depot (or at the last step)."""
    routes, on_road = [], False
    for a in (int(x) for x in tour):
        if a < D and not on_road:
            routes.append((a, []))
            on_road = True
        elif a < D:
            on_road = False
        else:
            routes[-1][1].append(a)
    return routes


def own_cost(locs, feats, tour):
    """The cost in float64 from the routes alone (also ``test_problems``' judge). Each route: its depot, its
    customers, back to its depot (free in open mode); a delivery's arrival time is its route's length up to it.
    Reward mode 0: (1 - w) total length + w total arrival time at the deliveries; 1: total length; 2: longest."""
    locs = np.asarray(locs, np.float64)
    scalar = lambda k: float(np.asarray(feats[k]).reshape(-1)[0])  # noqa: E731
    mode, w, open_ = int(scalar("reward_mode")), scalar("lateness_weight"), scalar("problem_mode") == 1
    half = (len(locs) - D) // 2
    d = lambda a, b: math.hypot(*(locs[a] - locs[b]))  # noqa: E731
    lengths, arrivals = [], 0.0
    for depot, nodes in routes_of(tour):
        t, at = 0.0, depot
        for c in nodes:
            t += d(at, c)
            at = c
            if c >= D + half:
                arrivals += t
        lengths.append(t if open_ else t + d(at, depot))
    if mode == 0:
        return (1 - w) * sum(lengths) + w * arrivals
    return sum(lengths) if mode == 1 else max(lengths)


class Model:
    """The rules, from RL4CO's MDCPDPEnv: between routes an unused depot; on the road an unvisited pickup while
    fewer than the depot's capacity orders are on board, the delivery of an order on board, and the own depot
    when at a customer with nothing on board and an unused depot left."""

    def __init__(self, n, capacity):
        self.h, self.cap = (n - D) // 2, capacity
        self.used, self.visited, self.on_board, self.depot, self.at, self.on_road = set(), set(), set(), None, None, False

    @property
    def done(self):
        return len(self.visited) == 2 * self.h

    def allowed(self):
        if not self.on_road:
            return set(range(D)) - self.used
        out = {self.depot + 0} if (self.at >= D and not self.on_board and len(self.used) < D) else set()
        if len(self.on_board) < self.cap[self.depot]:
            out |= {p for p in range(D, D + self.h) if p not in self.visited}
        return out | {p + self.h for p in self.on_board}

    def apply(self, a):
        if a < D and not self.on_road:
            self.used.add(a)
            self.depot, self.on_road = a, True
        elif a < D:
            assert a == self.depot
            self.on_road = False
        elif a < D + self.h:
            self.on_board.add(a)
            self.visited.add(a)
        else:
            self.on_board.remove(a - self.h)
            self.visited.add(a)
        self.at = a


def instance(locs, capacity=(3,) * D, w=1.0, reward_mode="lateness", problem_mode="close"):
    return MDCPDP.instance_from({"locs": locs, "capacity": list(capacity), "lateness_weight": w,
                                 "reward_mode": reward_mode, "problem_mode": problem_mode})


def every_episode(inst):
    """Every feasible episode of ``inst``, checked against :class:`Model` and :func:`own_cost`
    (``episodes.every_episode``); returns (actions, cost) pairs."""
    locs, n = inst.locs[0].double().numpy(), inst.locs.shape[1]
    feats = {k: v[0].numpy() for k, v in inst._asdict().items() if k != "locs"}
    cap = [int(c) for c in inst.capacity[0]]
    return episodes_of(MDCPDP, inst, lambda: Model(n, cap), lambda actions: own_cost(locs, feats, actions))


MODES = [("lateness", "close", 1.0), ("lateness", "open", 0.5), ("lateness", "close", 0.0), ("minsum", "close", 1.0),
         ("minsum", "open", 1.0), ("minmax", "close", 1.0), ("minmax", "open", 1.0)]


@pytest.mark.parametrize("seed,n,capacity,modes", [(s, n, c, m) for s in range(2) for n in (2, 4)
                                                   for c in ((3, 3, 3, 3, 3), (1, 2, 1, 2, 1)) for m in MODES])
def test_mdcpdp__every_episode_matches_the_model(seed, n, capacity, modes):
    reward_mode, problem_mode, w = modes
    locs = torch.rand(n + D, 2, generator=torch.Generator().manual_seed(seed)).numpy()
    episodes = every_episode(instance(locs, capacity, w, reward_mode, problem_mode))
    assert all(len(a) <= n + 2 * min(D, n // 2) - 1 for a, _ in episodes)
    if n == 2:  # a depot, the pickup, its delivery
        assert len(episodes) == D
    if n == 4 and capacity[0] == 3:  # 6 single-route orders per depot, plus 1 3 | 2 4 and 2 4 | 1 3 over 5 * 4 depots
        assert len(episodes) == D * 6 + 2 * D * (D - 1)


def test_mdcpdp__hand_checked_optima():
    """Depots 0..3 at the corners, depot 4 at (0.5, 0.8); one pair: pickup 5 at (0.5, 0), delivery 6 at (0.5, 1).
    From a bottom corner: 0.5 to the pickup, 1 to the delivery (arrival 1.5), sqrt(1.25) back (length 2.618).
    From depot 4: 0.8, 1 (arrival 1.8), 0.2 back (length 2.0). So lateness (w = 1) picks a corner, 1.5; min-sum
    and min-max depot 4, 2.0; open min-sum a corner, 1.5; w = 0.5 depot 4, (2.0 + 1.8) / 2 = 1.9."""
    locs = [[0, 0], [1, 0], [0, 1], [1, 1], [0.5, 0.8], [0.5, 0.0], [0.5, 1.0]]
    best = lambda **kw: min(every_episode(instance(locs, **kw)), key=lambda e: e[1])  # noqa: E731
    assert best() == ([0, 5, 6], pytest.approx(1.5)) or best() == ([1, 5, 6], pytest.approx(1.5))
    assert best(reward_mode="minsum") == ([4, 5, 6], pytest.approx(2.0))
    assert best(reward_mode="minmax") == ([4, 5, 6], pytest.approx(2.0))
    assert best(reward_mode="minsum", problem_mode="open")[1] == pytest.approx(1.5)
    assert best(w=0.5) == ([4, 5, 6], pytest.approx(1.9))
    assert best(w=0.0)[1] == pytest.approx(2.0)  # w = 0: the total length


def test_mdcpdp__capacity_forces_deliveries_and_routes_return_empty():
    locs = [[0, 0], [1, 0], [0, 1], [1, 1], [0.5, 0.5], [0.1, 0.1], [0.2, 0.2], [0.3, 0.3], [0.4, 0.4]]
    state = MDCPDP.reset(instance(locs, capacity=(1, 3, 3, 3, 3)))
    assert state.mask[0].tolist() == [1] * 5 + [0] * 4  # a vehicle must leave first
    state, r, _ = step(MDCPDP, state, torch.tensor([0]))
    assert float(r[0]) == 0 and state.mask[0].tolist() == [0] * 5 + [1, 1, 0, 0]  # no going home empty-handed
    state, _, _ = step(MDCPDP, state, torch.tensor([5]))
    assert state.mask[0].tolist() == [0] * 5 + [0, 0, 1, 0]  # full (capacity 1): only the delivery
    state, _, _ = step(MDCPDP, state, torch.tensor([7]))
    assert state.mask[0].tolist() == [1] + [0] * 4 + [0, 1, 0, 0]  # empty: home, or the next pickup
    state, _, _ = step(MDCPDP, state, torch.tensor([0]))
    assert state.mask[0].tolist() == [0, 1, 1, 1, 1, 0, 0, 0, 0]  # depot 0's vehicle is used
    obs = MDCPDP.observe(state)
    assert float(obs["remaining_capacity"][0, 0]) == 0 and int(obs["current_depot"][0]) == 0


def test_mdcpdp__the_last_vehicle_cannot_go_home_early():
    """Six pairs (pickups 5..10, deliveries 11..16): depots 0..3 each serve one pair and return; depot 4's vehicle,
    the last, serves pair 9 / 15 and, empty at a customer with pair 10 / 16 left, may not return."""
    state = MDCPDP.reset(instance(np.random.default_rng(0).random((17, 2))))
    for k in range(4):
        for a in (k, 5 + k, 11 + k, k):
            assert bool(state.mask[0, a])
            state, _, _ = step(MDCPDP, state, torch.tensor([a]))
    for a in (4, 9, 15):
        state, _, _ = step(MDCPDP, state, torch.tensor([a]))
    assert state.mask[0].nonzero().flatten().tolist() == [10]


def test_mdcpdp__generator_rl4co_defaults_and_variants():
    inst = MDCPDP.generate(256, 20, generator=torch.Generator().manual_seed(0))
    assert inst.locs.shape == (256, 25, 2) and 0 <= inst.locs.min() and inst.locs.max() <= 1
    assert (inst.capacity == 3).all() and inst.capacity.shape == (256, 5) and (inst.lateness_weight == 1).all()
    assert (inst.reward_mode == 0).all() and (inst.problem_mode == 0).all()
    other = MDCPDP.generate(2, 4, reward_mode="minmax", problem_mode="open")
    assert (other.reward_mode == 2).all() and (other.problem_mode == 1).all()
    g = torch.Generator().manual_seed(5)
    customers = torch.rand(1, 20, 2, generator=g)
    assert torch.equal(MDCPDP.generate(1, 20, generator=torch.Generator().manual_seed(5)).locs[0, 5:], customers[0])
    with pytest.raises(ValueError, match="reward_mode"):
        MDCPDP.generate(2, 4, reward_mode="lateness_square")
    with pytest.raises(ValueError, match="multiple of 2"):
        MDCPDP.generate(2, 5)
    MDCPDP.instance_from(inst, batched=True)
    assert MDCPDP.num_nodes_total(20) == 25 and MDCPDP.size_of(inst) == 20


@pytest.mark.parametrize("fields,match", [
    ({"capacity": [0, 3, 3, 3, 3]}, "'capacity' must hold whole numbers"),
    ({"capacity": [1.5, 3, 3, 3, 3]}, "'capacity' must hold whole numbers"),
    ({"capacity": [3, 3, 3]}, "'capacity' must have shape"),
    ({"lateness_weight": 1.5}, "'lateness_weight' must lie in"),
    ({"reward_mode": "lateness_square"}, "'reward_mode' must be one of"),
    ({"problem_mode": 2}, "'problem_mode' must be one of"),
    ({"dist_mode": "L1"}, "unknown field"),
])
def test_mdcpdp__instance_from_names_the_field(fields, match):
    data = {"locs": np.full((7, 2), 0.5), "capacity": [3] * 5, "lateness_weight": 1.0, **fields}
    with pytest.raises(ValueError, match=match):
        MDCPDP.instance_from(data)


def test_mdcpdp__instance_from_refuses_an_odd_customer_count():
    with pytest.raises(ValueError, match="'locs' must hold the 5 depots and an even number"):
        MDCPDP.instance_from({"locs": np.full((8, 2), 0.5), "capacity": [3] * 5, "lateness_weight": 1.0})


def test_mdcpdp__the_env_plays_every_mode():
    import gymnasium as gym
    for reward_mode in ("lateness", "minsum", "minmax"):
        for problem_mode in ("close", "open"):
            env = gym.make("routing/MDCPDP-v0", num_nodes=8, reward_mode=reward_mode, problem_mode=problem_mode)
            obs, _ = env.reset(seed=1)
            rng = np.random.default_rng(1)
            done, tour = False, []
            while not done:
                a = int(rng.choice(np.flatnonzero(obs["action_mask"])))
                obs, _, done, _, info = env.step(a)
                tour.append(a)
            inst = env.unwrapped.state.instance
            feats = {k: v[0].numpy() for k, v in inst._asdict().items() if k != "locs"}
            assert info["cost"] == pytest.approx(own_cost(inst.locs[0].numpy(), feats, tour), abs=1e-5)


def test_mdcpdp__heuristics_respect_the_mask():
    from agents.references.heuristics import applicable, heuristic_tours

    inst = MDCPDP.generate(16, 20, generator=torch.Generator().manual_seed(3))
    assert "nearest" in applicable(MDCPDP)
    for name in applicable(MDCPDP):
        assert torch.isfinite(tour_cost(MDCPDP, inst, heuristic_tours(MDCPDP, inst, name))).all()


def test_mdcpdp__no_solver_reference():
    from agents.references.solvers import solve

    with pytest.raises(ValueError, match="MDCPDP"):
        solve("mdcpdp", MDCPDP.generate(1, 4), "pyvrp")
