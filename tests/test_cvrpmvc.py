"""Fixed-fleet CVRP (routing_gym/problems/cvrpmvc.py, after RL4CO's CVRPMVCEnv) against a plain float64 model
of its rules: every feasible episode of tiny seeded instances enumerated, masks compared set for set, costs
(summed rewards and ``tour_cost``) recomputed; hand-checkable instances (a fleet that forces a longer
solution, a fleet no packing can keep); the generator; validation; CVRPLIB's k; PyVRP's tours."""
import math

import numpy as np
import pytest
import torch

from episodes import every_episode as judge_every_episode
from routing_gym.problems import CVRP, CVRPMVC, step, tour_cost
from routing_gym.problems.cvrpmvc import EXTRA_ROUTE_PENALTY, routes_beyond_fleet

SLACK = 1e-5  # the unit's float32 slack: per route on the load, per vehicle on the fleet bound


class Model:
    """The rules in float64, written from the module docstring: a customer when unserved and it fits the
    vehicle (load + demand <= 1); the depot when the vehicle is at a customer and the unserved demand fits in
    the vehicles left (R <= k - routes started), or when no customer fits; a return from a customer starts a
    route, 10 for each beyond k; the last customer served closes the route."""

    def __init__(self, locs, demand, k):
        self.locs, self.demand, self.k = np.asarray(locs, np.float64), np.asarray(demand, np.float64), int(k)
        self.n = len(self.locs)
        self.at, self.used, self.served, self.routes, self.length, self.penalty = 0, 0.0, set(), 1, 0.0, 0.0

    def d(self, i, j):
        return math.hypot(*(self.locs[i] - self.locs[j]))

    @property
    def done(self):
        return len(self.served) == self.n - 1

    def allowed(self):
        out = {j for j in range(1, self.n) if j not in self.served and self.used + self.demand[j] <= 1 + SLACK}
        remaining = sum(self.demand[j] for j in range(1, self.n) if j not in self.served)
        if (self.at != 0 and remaining <= self.k - self.routes + SLACK * self.k) or not out:
            out.add(0)
        return out

    def apply(self, a):
        self.length += self.d(self.at, a)
        if a == 0:
            self.routes += 1
            self.penalty += EXTRA_ROUTE_PENALTY * (self.routes > self.k)
            self.used = 0.0
        else:
            self.served.add(a)
            self.used += self.demand[a]
        self.at = a
        if self.done:
            self.length += self.d(a, 0)

    @property
    def cost(self):
        return self.length + self.penalty


def instance(locs, demand, k):
    return CVRPMVC.instance_from({"locs": locs, "demand": demand, "num_vehicles": k})


def every_episode(inst):
    """The shared judge (:func:`episodes.every_episode`) with :class:`Model` as the rules and its cost, and
    each episode's routes beyond the fleet as the model counts them; returns the episodes as (actions, model)."""
    args = (inst.locs[0].double().numpy(), inst.demand[0].double().numpy(), int(inst.num_vehicles[0]))

    def replay(actions):
        model = Model(*args)
        for a in actions:
            model.apply(a)
        return model

    episodes = [(actions, replay(actions))
                for actions, _ in judge_every_episode(CVRPMVC, inst, lambda: Model(*args), lambda a: replay(a).cost)]
    for actions, model in episodes:
        assert routes_beyond_fleet(actions, args[2]) == max(0, model.routes - args[2])
    return episodes


def seeded(seed, n, slack):
    """A tiny instance: Kool's draws (capacity 4, so that routes carry one to three customers) with k =
    ceil(total demand) + slack."""
    g = torch.Generator().manual_seed(seed)
    locs = torch.rand(n + 1, 2, generator=g)
    demand = torch.cat([torch.zeros(1), torch.randint(1, 4, (n,), generator=g).float() / 4])
    return instance(locs.numpy(), demand.numpy(), math.ceil(float(demand.double().sum()) - 1e-6) + slack)


@pytest.mark.parametrize("seed,n,slack", [(s, n, slack) for s in range(4) for n in (3, 4, 5) for slack in (0, 1)])
def test_cvrpmvc__every_episode_matches_the_model(seed, n, slack):
    episodes = every_episode(seeded(seed, n, slack))
    assert episodes and all(len(a) <= 2 * n - 1 for a, _ in episodes)


def test_cvrpmvc__the_fleet_bound_masks_returns_cvrp_allows():
    """k = 2 for a total of 1.5: after customer 1 (0.25) the depot is masked (1.25 left > 1 vehicle left) while
    customers 2 and 3 still fit; CVRP allows it there."""
    inst = instance([[0, 0], [1, 0], [0, 1], [1, 1]], [0, 0.25, 0.5, 0.75], 2)
    state, _, _ = step(CVRPMVC, CVRPMVC.reset(inst), torch.tensor([1]))
    assert state.mask[0].tolist() == [0, 0, 1, 1]
    cvrp = CVRP.reset(CVRP.instance_from({"locs": inst.locs[0], "demand": inst.demand[0]}))
    cvrp, _, _ = step(CVRP, cvrp, torch.tensor([1]))
    assert cvrp.mask[0].tolist() == [1, 0, 1, 1]


def test_cvrpmvc__a_tight_fleet_forces_a_longer_optimum_by_hand():
    """Depot (0.5, 0); demands 0.6 at (0, 0) and (1, 0), 0.4 at (0.45, 1) and (0.55, 1). Three vehicles: each
    0.6 alone and the two 0.4 together, 1 + 1 + (2 sqrt(1.0025) + 0.1). Two vehicles (total 2.0) must pair
    each 0.6 with a 0.4: at best 2 (0.5 + sqrt(1.2025) + sqrt(1.0025)), longer."""
    locs = [[0.5, 0.0], [0.0, 0.0], [1.0, 0.0], [0.45, 1.0], [0.55, 1.0]]
    demand = [0, 0.6, 0.6, 0.4, 0.4]
    best = {k: min(m.cost for _, m in every_episode(instance(locs, demand, k))) for k in (2, 3)}
    assert best[3] == pytest.approx(2 + 2 * math.sqrt(1.0025) + 0.1)
    assert best[2] == pytest.approx(2 * (0.5 + math.sqrt(1.2025) + math.sqrt(1.0025)))


def test_cvrpmvc__a_fleet_no_packing_keeps_ends_every_episode_with_the_penalty():
    """Three demands of 0.6 and k = 2: total 1.8 fits two vehicles, but no two demands share one. The bound
    masks each return (1.2 left > 1 vehicle); no customer fits either, so the depot is allowed, and the third
    route costs 10: every episode costs its length + 10."""
    locs = [[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
    episodes = every_episode(instance(locs, [0, 0.6, 0.6, 0.6], 2))
    assert len(episodes) == 6  # the three customers in any order, one per route
    for actions, model in episodes:
        assert actions.count(0) == 2 and model.routes == 3
        assert model.cost == pytest.approx(2 + 2 + 2 * math.sqrt(2) + EXTRA_ROUTE_PENALTY)


def test_cvrpmvc__generator_is_cvrps_draw_for_draw_with_one_spare_vehicle():
    a = CVRPMVC.generate(256, 20, generator=torch.Generator().manual_seed(3))
    b = CVRP.generate(256, 20, generator=torch.Generator().manual_seed(3))
    assert torch.equal(a.locs, b.locs) and torch.equal(a.demand, b.demand)
    units = (b.demand * 30).round().sum(1).long()  # capacity 30 at n = 20
    assert torch.equal(a.num_vehicles.long(), -(-units // 30) + 1)
    CVRPMVC.instance_from(a, batched=True)  # generated instances are valid


@pytest.mark.parametrize("k,match", [(1.5, "whole number"), (0, "whole number"), (4, "whole number"),
                                     (1, "cannot carry the total demand")])
def test_cvrpmvc__instance_from_names_num_vehicles(k, match):
    with pytest.raises(ValueError, match=f"'num_vehicles'.*{match}"):
        instance([[0, 0], [1, 0], [0, 1]], [0, 0.75, 0.5], k)
    with pytest.raises(ValueError, match="lacks field"):
        CVRPMVC.instance_from({"locs": [[0, 0], [1, 0]], "demand": [0, 0.5]})


def test_cvrpmvc__cvrplib_names_carry_k():
    from routing_gym.tsplib import fleet_size
    assert fleet_size("E-n51-k5.vrp") == 5
    assert fleet_size("/data/A-n32-k5.vrp") == 5
    assert fleet_size("X-n101-k25") is None and fleet_size("X-n101-k25.vrp") is None  # Uchoa et al.: no fleet
    assert fleet_size("P-n16-k8.vrp", comment="(Augerat et al, No of trucks: 8, Optimal value: 450)") == 8
    assert fleet_size("M-n101.vrp", comment="Min no of trucks: 10, Best value: 820") == 10
    assert fleet_size("eil51.tsp") is None and fleet_size("X-n101.vrp", comment="") is None


def test_cvrpmvc__a_cvrplib_file_becomes_a_fixed_fleet_instance(tmp_path):
    pytest.importorskip("vrplib")
    import shutil
    from pathlib import Path
    from routing_gym import tsplib
    data = Path(__file__).parent / "data"
    real = tsplib.load(data / "E-n22-k4.vrp")
    inst = tsplib.fleet_instance(real)
    assert int(inst.num_vehicles[0]) == 4 and torch.equal(inst.demand, real.instance.demand)
    renamed = tmp_path / "E-n22.vrp"  # no k in the name: the COMMENT's "Min no of trucks: 4"
    shutil.copy(data / "E-n22-k4.vrp", renamed)
    assert tsplib.fleet_size(renamed) == 4
    assert tsplib.fleet_instance(tsplib.load(data / "eil51.tsp")) is None


def test_cvrpmvc__pyvrp_tours_cost_what_pyvrp_says():
    pytest.importorskip("pyvrp")
    from agents.references.solvers import SCALE, pyvrp_fixed_fleet, solve
    inst = CVRPMVC.generate(3, 12, generator=torch.Generator().manual_seed(0))
    inst = inst._replace(num_vehicles=fleet_tight(inst))
    for b in range(3):
        data = {k: v[b].numpy() for k, v in inst._asdict().items()}
        routes, distance = pyvrp_fixed_fleet(data, time_limit=0.5, seed=0)
        assert len(routes) <= int(data["num_vehicles"])
        tour = [node for route in routes for node in route + [0]]
        cost = float(tour_cost(CVRPMVC, inst._replace(**{k: v[b:b + 1] for k, v in inst._asdict().items()}),
                               torch.tensor([tour]))[0])
        assert cost == pytest.approx(distance / SCALE, abs=1e-4 * len(tour))
    solved = solve(CVRPMVC, inst, "pyvrp", time_limit=0.5, progress=False)  # the dispatch entry
    assert all(routes_beyond_fleet(t.tolist(), k) == 0 for t, k in zip(solved.tours, inst.num_vehicles.tolist()))


def fleet_tight(inst):
    """The least fleet the loads allow (ceil of the total demand): PyVRP must then pack the routes."""
    return torch.ceil(inst.demand.double().sum(1) - 1e-6).float()


def test_cvrpmvc__compiled_env_matches_eager_through_the_penalty():
    """compile=True plays as eager, on an instance whose fleet no packing keeps (the penalty step included)."""
    import shutil
    import gymnasium as gym
    if not (shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")):
        pytest.skip("torch.compile on the CPU needs a C++ compiler")
    envs = [gym.make("routing/CVRPMVC-v0", num_nodes=3, compile=c) for c in (False, True)]
    tight = {"locs": np.array([[0, 0], [1, 0], [0, 1], [1, 1]], np.float32), "demand": np.array([0, 0.6, 0.6, 0.6],
             np.float32), "num_vehicles": np.float32(2)}
    for seed in range(3):
        options = {"instance": tight} if seed == 0 else None
        obs = [e.reset(seed=seed, options=options)[0] for e in envs]
        rng = np.random.default_rng(seed)
        done = False
        while not done:
            assert all(np.array_equal(obs[0][k], obs[1][k]) for k in obs[0])
            a = int(rng.choice(np.flatnonzero(obs[0]["action_mask"])))
            out = [e.step(a) for e in envs]
            obs = [o[0] for o in out]
            assert out[0][1] == pytest.approx(out[1][1], abs=1e-6)
            done = out[0][2]
        assert out[0][4]["cost"] == pytest.approx(out[1][4]["cost"], abs=1e-5)
        if seed == 0:
            assert out[0][4]["cost"] > EXTRA_ROUTE_PENALTY


def test_cvrpmvc__heuristics_respect_the_fleet():
    from agents.references.heuristics import applicable, heuristic_tours

    inst = CVRPMVC.generate(16, 20, generator=torch.Generator().manual_seed(3))
    assert "nearest" in applicable(CVRPMVC)
    for name in applicable(CVRPMVC):
        tours = heuristic_tours(CVRPMVC, inst, name)
        assert torch.isfinite(tour_cost(CVRPMVC, inst, tours)).all()
