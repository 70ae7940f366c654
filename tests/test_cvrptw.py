"""CVRPTW (routing_gym/problems/cvrptw.py) against a plain float64 model of its rules (RL4CO's CVRPTWEnv,
``rl4co/envs/routing/cvrptw/env.py``, plus the return to the depot in time): every feasible episode of tiny
instances enumerated, masks compared set for set, costs recomputed; a hand-checkable instance; RL4CO's
generator; validation; the compiled env; heuristics; PyVRP's tours costed by ``tour_cost``."""
import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from routing_gym.problems import CVRPTW, step, tour_cost
from routing_gym.problems.cvrptw import MAX_LOC, MAX_TIME

SLACK = 1e-5  # the unit's float32 slack on capacity and on closing times, applied here in float64


class Model:
    """The rules in float64: a customer is allowed when unserved, its demand fits, it is reached before its
    window closes and the depot is reached before the depot's window closes after its service; the depot
    unless the vehicle is there while a customer is allowed. Each route's clock starts at 0."""

    def __init__(self, inst):
        self.locs = inst.locs[0].double().numpy()
        self.demand = inst.demand[0].double().numpy()
        self.tw = inst.time_windows[0].double().numpy()
        self.service = inst.service_time[0].double().numpy()
        self.n = len(self.locs)
        self.at, self.time, self.used, self.served, self.length = 0, 0.0, 0.0, set(), 0.0

    def d(self, i, j):
        return math.hypot(*(self.locs[i] - self.locs[j]))

    def allowed(self):
        out = set()
        for j in range(1, self.n):
            arrival = self.time + self.d(self.at, j)
            start = max(arrival, self.tw[j, 0])
            if j not in self.served and self.used + self.demand[j] <= 1 + SLACK and arrival <= self.tw[j, 1] + SLACK \
                    and start + self.service[j] + self.d(j, 0) <= self.tw[0, 1] + SLACK:
                out.add(j)
        return out | ({0} if self.at != 0 or not out else set())

    def apply(self, j):
        self.length += self.d(self.at, j)
        if j == 0:
            self.time, self.used = 0.0, 0.0
        else:
            self.time = max(self.time + self.d(self.at, j), self.tw[j, 0]) + self.service[j]
            self.used += self.demand[j]
            self.served.add(j)
        self.at = j
        if self.done:
            self.length += self.d(j, 0)

    @property
    def done(self):
        return len(self.served) == self.n - 1


def every_episode(inst):
    """Follow the mask depth-first through every feasible episode, checking the mask against the model's
    allowed set at every step, and the summed rewards and ``tour_cost`` against the model's length.
    Returns [(actions, cost)]."""
    episodes = []

    def dfs(state, actions, ret):
        model = Model(inst)
        for a in actions:
            model.apply(a)
        if bool(state.done[0]):
            assert model.done and ret == pytest.approx(-model.length, abs=1e-5)
            episodes.append((actions, model.length))
            return
        allowed = set(state.mask[0].nonzero().flatten().tolist())
        assert allowed == model.allowed(), f"after {actions}"
        assert float(CVRPTW.observe(state)["current_time"][0, 0]) == pytest.approx(model.time, abs=1e-5)
        for a in sorted(allowed):
            nxt, r, invalid = step(CVRPTW, state, torch.tensor([a]))
            assert not invalid.item()
            dfs(nxt, actions + [a], ret + float(r[0]))

    dfs(CVRPTW.reset(inst), [], 0.0)
    width = max(len(a) for a, _ in episodes)
    tours = torch.tensor([a + [0] * (width - len(a)) for a, _ in episodes])
    costs = tour_cost(CVRPTW, CVRPTW.Instance(*(f.expand(len(episodes), *f.shape[1:]) for f in inst)), tours)
    assert costs.tolist() == pytest.approx([c for _, c in episodes], abs=1e-5)
    return episodes


def generated(n, seed, service=0.0):
    """A generated instance, its service times drawn U(0, service) where that keeps it valid."""
    g = torch.Generator().manual_seed(seed)
    inst = CVRPTW.generate(1, n, generator=g)
    if service:
        s = torch.rand(1, n + 1, generator=g) * service
        s[:, 0] = 0
        try:
            return CVRPTW.instance_from(inst._replace(service_time=s), batched=True)
        except ValueError:
            pass
    return inst


@pytest.mark.parametrize("n,seed,service", [(3, 0, 0.0), (4, 1, 0.0), (5, 2, 0.0), (3, 3, 0.5), (4, 4, 0.4),
                                            (5, 5, 0.3), (5, 6, 0.6)])
def test_cvrptw__mask_and_costs_match_the_model_on_every_episode(n, seed, service):
    episodes = every_episode(generated(n, seed, service))
    assert len(episodes) >= 1


def test_cvrptw__tight_windows_prune_episodes_as_the_model_does():
    """Half-width windows around a random arrival time: many orders become infeasible, none of the model's
    allowed sets differ."""
    g = torch.Generator().manual_seed(7)
    for _ in range(4):
        inst = CVRPTW.generate(1, 5, generator=g)
        d0 = torch.linalg.vector_norm(inst.locs[0] - inst.locs[0, :1], dim=-1)
        open_ = d0 + torch.rand(6, generator=g) * 0.8
        close = open_ + 0.4
        tw = torch.stack([open_, close], -1)
        tw[0] = torch.tensor([0.0, MAX_TIME])
        inst = CVRPTW.instance_from({"locs": inst.locs[0], "demand": inst.demand[0], "time_windows": tw,
                                     "service_time": torch.full((6,), 0.1) * (torch.arange(6) > 0)})
        full = len(every_episode(inst))
        loose = len(every_episode(inst._replace(time_windows=torch.tensor([[0.0, MAX_TIME]]).expand(1, 6, 2))))
        assert full < loose


def test_cvrptw__hand_checked_optimum_two_routes_forced_by_the_windows():
    """A at (0.6, 0) and B at (0, 0.6), both closing at 0.7: one route reaches the second after
    0.6 + 0.6 sqrt(2) > 0.7, so the optimum is two out-and-back routes, 4 * 0.6 = 2.4 (one route would cost
    1.2 + 0.6 sqrt(2) ~ 2.05). A opens at 0.65: the vehicle waits there and serves it 0.1 long."""
    inst = CVRPTW.instance_from({"locs": [[0, 0], [0.6, 0], [0, 0.6]], "demand": [0, 0.25, 0.25],
                                 "time_windows": [[0, 3.2], [0.65, 0.7], [0, 0.7]], "service_time": [0, 0.1, 0]})
    episodes = every_episode(inst)
    assert sorted(a for a, _ in episodes) == [[1, 0, 2], [2, 0, 1]]
    assert min(c for _, c in episodes) == pytest.approx(2.4, abs=1e-6)
    state, _, _ = step(CVRPTW, CVRPTW.reset(inst), torch.tensor([1]))
    assert float(state.time[0]) == pytest.approx(0.75)  # waited for 0.65, then served 0.1
    assert state.mask[0].tolist() == [1, 0, 0]


def test_cvrptw__the_depot_must_stay_reachable_after_the_service():
    """C is reached in time from A, but its service ends too late to return before the depot closes."""
    inst = CVRPTW.instance_from({"locs": [[0, 0], [0.5, 0], [0.5, 0.1]], "demand": [0, 0.1, 0.1],
                                 "time_windows": [[0, 1.4], [0, 1.0], [0, 1.0]], "service_time": [0, 0.3, 0.3]})
    state, _, _ = step(CVRPTW, CVRPTW.reset(inst), torch.tensor([1]))  # time 0.8; C: 0.9 + 0.3 + 0.51 > 1.4
    assert state.mask[0].tolist() == [1, 0, 0]
    every_episode(inst)


def test_cvrptw__generator_follows_rl4co():
    """RL4CO's CVRPTWGenerator in units of its max_loc: windows on its integer grid (1/150), between the
    depot distance and the horizon minus it, open < close; depot [0, 3.2]; service times 0; CVRP demands."""
    inst = CVRPTW.generate(512, 20, generator=torch.Generator().manual_seed(0))
    tw, d0 = inst.time_windows.double(), torch.linalg.vector_norm(inst.locs - inst.locs[:, :1], dim=-1).double()
    grid = tw * MAX_LOC
    assert torch.allclose(grid, grid.round(), atol=1e-3)
    assert (tw[:, 0] == torch.tensor([0.0, MAX_TIME], dtype=torch.float64).float().double()).all()
    assert (tw[:, 1:, 0] < tw[:, 1:, 1]).all()
    assert (tw[:, 1:, 0] >= (d0[:, 1:] * MAX_LOC).floor() / MAX_LOC - 1e-6).all()
    assert (tw[:, 1:, 1] <= MAX_TIME - d0[:, 1:] + 1e-6).all()
    assert (inst.service_time == 0).all()
    units = inst.demand[:, 1:] * 30
    assert torch.allclose(units, units.round(), atol=1e-4) and units.min() >= 1 and units.max() <= 9
    CVRPTW.instance_from(inst, batched=True)  # every generated instance is valid


@pytest.mark.parametrize("change,match", [
    (lambda d: d["time_windows"].__setitem__((1, 0), 0.9), r"'time_windows' must open no later than it closes"),
    (lambda d: d["time_windows"].__setitem__((0, 0), 0.1), r"'time_windows' must open at 0 at the depot"),
    (lambda d: d["time_windows"].__setitem__((1, 1), 3.5), r"'time_windows' must lie in \[0.0, 3.2"),
    (lambda d: d["service_time"].__setitem__(0, 0.1), r"'service_time' must be 0 at the depot"),
    (lambda d: d["service_time"].__setitem__(1, -0.1), r"'service_time' must lie in"),
    (lambda d: d["time_windows"].__setitem__((1, 1), 0.3), r"'time_windows' makes customer 1 unservable"),
    (lambda d: d["time_windows"].__setitem__((0, 1), 0.9), r"'time_windows' makes customer 1 unservable"),
    (lambda d: d.pop("service_time"), r"lacks field\(s\) \['service_time'\]"),
])
def test_cvrptw__instance_from_refuses_by_field(change, match):
    data = {"locs": np.array([[0, 0], [0.5, 0], [0, 0.5]]), "demand": np.array([0, 0.5, 0.5]),
            "time_windows": np.array([[0, 3.2], [0, 0.8], [0, 3.2]]), "service_time": np.array([0, 0.0, 0.0])}
    CVRPTW.instance_from(data)
    change(data)
    with pytest.raises(ValueError, match=match):
        CVRPTW.instance_from(data)


def test_cvrptw__heuristics_respect_the_windows():
    from agents.references.heuristics import applicable, heuristic_tours

    inst = CVRPTW.generate(16, 20, generator=torch.Generator().manual_seed(3))
    assert "nearest" in applicable(CVRPTW)
    for name in applicable(CVRPTW):
        assert torch.isfinite(tour_cost(CVRPTW, inst, heuristic_tours(CVRPTW, inst, name))).all()


def test_cvrptw__pyvrp_tours_cost_what_pyvrp_says():
    pytest.importorskip("pyvrp")
    from agents.references.heuristics import heuristic_tours
    from agents.references.solvers import SCALE, pyvrp_time_windows, routes_to_actions, solve

    inst = CVRPTW.generate(3, 10, generator=torch.Generator().manual_seed(2))
    for i in range(3):
        routes, distance = pyvrp_time_windows({k: v[i].numpy() for k, v in inst._asdict().items()}, 0.2, 0)
        one = CVRPTW.Instance(*(f[i:i + 1] for f in inst))
        ours = float(tour_cost(CVRPTW, one, torch.tensor([routes_to_actions("cvrptw", routes)]))[0])
        assert ours == pytest.approx(distance / SCALE, abs=len(routes_to_actions("cvrptw", routes)) / SCALE + 1e-5)
    out = solve(CVRPTW, inst, "pyvrp", time_limit=0.2, progress=False)
    assert (out.cost <= tour_cost(CVRPTW, inst, heuristic_tours(CVRPTW, inst, "nearest")) + 1e-6).all()


def test_cvrptw__dataset_round_trip(tmp_path):
    from routing_gym.data import load_dataset, save_dataset

    inst = CVRPTW.generate(4, 10, generator=torch.Generator().manual_seed(0))
    save_dataset(tmp_path / "cvrptw.npz", inst)
    back = load_dataset(tmp_path / "cvrptw.npz", "cvrptw")[0]
    assert all(torch.equal(a, b) for a, b in zip(inst, back))
