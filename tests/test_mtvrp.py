"""The multi-attribute VRP (RouteFinder's 48 variants) against an independent float64 judge.

The judge (:class:`Judge`) restates each attribute on its own terms, not the unit's: a route is the list
of its customers, and a customer may join it when the whole route then satisfies every attribute, checked
from scratch (the load at every point of the route, linehauls before backhauls, the clock along the route,
its length). Every feasible episode of tiny instances is enumerated for each attribute alone and for the
full combination; the unit's mask must allow exactly the judge's actions, and its rewards and ``tour_cost``
must equal the judge's cost."""
import math

import gymnasium as gym
import numpy as np
import pytest
import torch

import routing_gym  # noqa: F401  (registers the ids)
from routing_gym.problems import CVRP, step, tour_cost
from routing_gym.problems.mtvrp import MTVRP, VARIANTS, variant_names
from routing_gym.problems.mtvrp.generator import vehicle_capacity

TOL = 1e-5


# ---------------------------------------------------------------------------------------------- the judge
class Judge:
    """Plain float64 model of one instance (numpy arrays keyed as :class:`MTVRPInstance`, batch 1)."""

    def __init__(self, inst):
        g = {k: np.asarray(v.numpy() if hasattr(v, "numpy") else v, dtype=np.float64)[0] for k, v in inst._asdict().items()}
        self.locs, self.q, self.p = g["locs"], g["demand_linehaul"], g["demand_backhaul"]
        self.tw, self.s = g["time_windows"], g["service_time"]
        self.limit, self.open = float(g["distance_limit"][0]), bool(g["open_route"][0])
        self.mixed, self.speed = int(g["backhaul_class"][0]) == 2, float(g["speed"][0])
        self.m, self.n = int(g["num_depots"][0]), len(self.locs)

    def d(self, a, b):
        return math.hypot(*(self.locs[a] - self.locs[b]))

    def route_ok(self, depot, route):
        """Does the route depot -> route (-> depot unless open) satisfy C, B/MB, TW and L?"""
        q, p = [self.q[c] for c in route], [self.p[c] for c in route]
        total = sum(q)
        loads = [total] + [total - sum(q[:k + 1]) + sum(p[:k + 1]) for k in range(len(route))]
        if max(loads) > 1 + TOL:
            return False
        if not self.mixed and any(p[k] > 0 and q[k2] > 0 for k in range(len(route)) for k2 in range(k + 1, len(route))):
            return False  # B: a linehaul after a backhaul
        t, at, length = 0.0, depot, 0.0
        for c in route:
            arrive = t + self.d(at, c) / self.speed
            if arrive > self.tw[c, 1] + TOL:
                return False
            t, length, at = max(arrive, self.tw[c, 0]) + self.s[c], length + self.d(at, c), c
        if not self.open and t + self.d(at, depot) / self.speed > self.tw[depot, 1] + TOL:
            return False
        return length + (0.0 if self.open else self.d(at, depot)) <= self.limit + TOL

    def allowed(self, actions):
        """The actions allowed after ``actions``, and whether the episode is over."""
        served = {a for a in actions if a >= self.m}
        if len(served) == self.n - self.m:
            return set(), True
        at = actions[-1] if actions else 0
        depot, route = 0, []
        for a in actions:
            if a < self.m:
                depot, route = a, []
            else:
                route.append(a)
        customers = {c for c in range(self.m, self.n) if c not in served and self.route_ok(depot, route + [c])}
        if at >= self.m:
            return customers | {depot}, False
        before = actions[-2] if len(actions) >= 2 else 0  # the vehicle starts at depot 0
        moved = bool(actions) and before < self.m and at != before
        others = set() if moved else set(range(self.m)) - {at}
        return customers | others | ({at} if not customers | others else set()), False

    def cost(self, actions):
        """Length of the routes: from the previous node, nothing between depots nor on an open return."""
        total, prev, depot = 0.0, 0, 0
        for a in actions:
            if a < self.m:
                total += 0.0 if prev < self.m or self.open else self.d(prev, a)
                depot = a
            else:
                total += self.d(prev, a)
            prev = a
        return total + (0.0 if self.open or prev < self.m else self.d(prev, depot))


def enumerate_episodes(inst, limit=20000):
    """Every episode the judge allows, checking the unit's mask at each state on the way; yields
    (actions, unit return)."""
    judge = Judge(inst)

    def dfs(state, actions, ret):
        allowed, over = judge.allowed(actions)
        if over:
            assert bool(state.done[0]), actions
            yield actions, ret
            return
        assert not bool(state.done[0]), actions
        mask = set(torch.nonzero(state.mask[0]).flatten().tolist())
        assert mask == allowed, (actions, mask, allowed)
        for a in sorted(allowed):
            nxt, reward, invalid = step(MTVRP, state, torch.tensor([a]))
            assert not bool(invalid[0])
            yield from dfs(nxt, actions + [a], ret + float(reward[0]))

    count = 0
    for episode in dfs(MTVRP.reset(inst), [], 0.0):
        count += 1
        assert count <= limit
        yield episode


def tiny(variant, seed, num_nodes=4):
    """A generated instance of ``variant`` whose constraints bind: demands of tenths of the capacity, a
    backhaul where the variant has them, and a duration limit near its lower bound."""
    g = torch.Generator().manual_seed(seed)
    inst = MTVRP.generate(1, num_nodes, generator=g, variant=variant, num_depots=2)
    m = int(inst.num_depots[0, 0])
    units = torch.randint(2, 6, (1, num_nodes + 1), generator=g).float() / 10
    customer = torch.arange(num_nodes + 1) >= m
    pickup = (inst.demand_backhaul > 0) | ((torch.arange(num_nodes + 1) == m) & VARIANTS[variant].backhaul)
    q = torch.where(customer & ~pickup, units, 0.0)
    p = torch.where(customer & pickup, units, 0.0)
    limit = inst.distance_limit
    if VARIANTS[variant].limit:  # just above the longest depot -> customer -> depot trip
        d = torch.cdist(inst.locs[0, :m], inst.locs[0, m:])
        limit = torch.full_like(limit, 2 * float(d.max()) + 1e-4 + 0.4 * float(torch.rand(1, generator=g)))
    return MTVRP.instance_from(inst._replace(demand_linehaul=q, demand_backhaul=p, distance_limit=limit), batched=True)


SINGLE = ["CVRP", "OVRP", "VRPB", "VRPMB", "VRPL", "VRPTW", "MDCVRP"]
FULL = ["MDOVRPMBLTW", "MDVRPBLTW", "OVRPBLTW", "VRPMBLTW"]


def every_variant(default: list[str], names=tuple(VARIANTS)) -> list:
    """``names`` as parameters, those outside ``default`` marked slow (``pytest -m slow`` runs them)."""
    return [v if v in default else pytest.param(v, marks=pytest.mark.slow) for v in names]


@pytest.mark.parametrize("variant", every_variant(SINGLE + FULL))
def test_mtvrp__masks_and_costs_equal_the_judge_on_every_episode(variant):
    seen = 0
    for seed in range(3):
        inst = tiny(variant, seed)
        assert variant_names(inst) == [variant] or not VARIANTS[variant].backhaul  # tiny() keeps the variant
        judge = Judge(inst)
        for actions, ret in enumerate_episodes(inst):
            cost = judge.cost(actions)
            assert -ret == pytest.approx(cost, abs=1e-5)
            assert float(tour_cost(MTVRP, inst, torch.tensor([actions]))[0]) == pytest.approx(cost, abs=1e-5)
            seen += 1
    assert seen > 3


def test_mtvrp__a_constraint_cuts_episodes():
    """Each attribute binds on the tiny instances: L and TW leave fewer feasible episodes than the plain
    variant on the same data, B fewer than MB."""
    count = {v: sum(1 for _ in enumerate_episodes(tiny(v, 0))) for v in ("CVRP", "VRPL", "VRPTW", "VRPB", "VRPMB")}
    assert count["VRPL"] < count["CVRP"] and count["VRPTW"] < count["CVRP"]
    assert count["VRPB"] < count["VRPMB"]  # the same customers: mixed backhauls lift the order of B


def test_mtvrp__open_route_known_optimum():
    """Depot at a corner, customers on a line: the closed optimum drives back (2.0), the open one stops (1.0)."""
    data = {"locs": [[0.0, 0.0], [0.5, 0.0], [1.0, 0.0]], "demand_linehaul": [0.0, 0.5, 0.5]}
    for open_route, best in ((False, 2.0), (True, 1.0)):
        inst = MTVRP.instance_from({**data, "open_route": [open_route]})
        assert min(Judge(inst).cost(a) for a, _ in enumerate_episodes(inst)) == pytest.approx(best)


def test_mtvrp__backhaul_order_known_optimum():
    """A pickup (0.5) near the depot and a delivery (0.75) far away on a line: under B the pickup comes last
    on a shared route, under MB the delivery loaded at the depot plus the pickup would exceed the capacity;
    with a delivery of 0.5 MB allows the pickup first. The optimum is 2.0 either way."""
    data = {"locs": [[0.0, 0.0], [0.25, 0.0], [1.0, 0.0]], "demand_linehaul": [0.0, 0.0, 0.75],
            "demand_backhaul": [0.0, 0.5, 0.0]}
    for cls, q, orders in ((1, 0.75, {(1, 0, 2), (2, 0, 1), (2, 1)}), (1, 0.5, {(1, 0, 2), (2, 0, 1), (2, 1)}),
                           (2, 0.75, {(1, 0, 2), (2, 0, 1), (2, 1)}), (2, 0.5, {(1, 0, 2), (2, 0, 1), (2, 1), (1, 2)})):
        inst = MTVRP.instance_from({**data, "backhaul_class": [cls], "demand_linehaul": [0.0, 0.0, q]})
        episodes = {tuple(a): Judge(inst).cost(a) for a, _ in enumerate_episodes(inst)}
        assert set(episodes) == orders, (cls, q)
        assert min(episodes.values()) == pytest.approx(2.0)


def test_mtvrp__plain_variant_costs_equal_cvrp_on_the_same_data():
    g = torch.Generator().manual_seed(3)
    cvrp = CVRP.generate(32, 20, generator=g)
    inst = MTVRP.instance_from({"locs": cvrp.locs, "demand_linehaul": cvrp.demand}, batched=True)
    s_c, s_m = CVRP.reset(cvrp), MTVRP.reset(inst)
    tours = []
    while not bool(s_c.done.all()):
        assert torch.equal(s_c.mask, s_m.mask)
        a = torch.multinomial(s_c.mask.float(), 1, generator=g).squeeze(1)
        tours.append(a)
        s_c, r_c, _ = step(CVRP, s_c, a)
        s_m, r_m, _ = step(MTVRP, s_m, a)
        assert torch.equal(r_c, r_m)
    tours = torch.stack(tours, 1)
    assert torch.equal(tour_cost(CVRP, cvrp, tours), tour_cost(MTVRP, inst, tours))


def test_mtvrp__capacity_by_size_as_routefinder():
    assert [vehicle_capacity(n) for n in (10, 20, 50, 100, 1000)] == [30, 30, 40, 50, 230]


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_mtvrp__every_variant_generates_under_its_name(variant):
    inst = MTVRP.generate(8, 20, generator=torch.Generator().manual_seed(0), variant=variant)
    assert set(variant_names(inst)) == {variant}  # (with backhauls, 20 customers all linehaul has probability 1 %)
    MTVRP.instance_from(inst, batched=True)  # generated instances are valid


def test_mtvrp__mixed_batches_hold_every_variant():
    names = set(variant_names(MTVRP.generate(4000, 20, generator=torch.Generator().manual_seed(0), variant="mixed")))
    assert names == set(VARIANTS)
    names = set(variant_names(MTVRP.generate(1000, 20, generator=torch.Generator().manual_seed(0), variant="all")))
    assert len(names) == 16 and not any(n.startswith("MD") or "MB" in n for n in names)


def test_mtvrp__all_48_variants_reachable_by_id_and_by_option():
    for variant in VARIANTS:
        ids = [f"routing/{variant}-50"] if variant != "CVRP" else ["routing/CVRP-50"]
        env = gym.make("routing/MTVRP-v0", num_nodes=50, variant=variant)
        obs, _ = env.reset(seed=0)
        assert variant_names(env.unwrapped.state.instance) == [variant]
        for env_id in ids:
            env = gym.make(env_id)
            obs, _ = env.reset(seed=0)
            assert obs["locs"].shape == (51, 2)
            obs, reward, *_ = env.step(int(np.flatnonzero(obs["action_mask"])[0]))
            if variant != "CVRP":
                assert env.unwrapped._variant["variant"] == variant


@pytest.mark.parametrize("fields, match", [
    ({"demand_linehaul": [0.0, 1.5, 0.2]}, "demand_linehaul"),
    ({"demand_backhaul": [0.0, 0.2, 0.0]}, "demand_backhaul"),
    ({"time_windows": [[0, 1], [2, 1], [0, 1]]}, "time_windows"),
    ({"time_windows": [[0, 1], [0, 0.01], [0, 1]]}, "time_windows"),
    ({"distance_limit": [0.1]}, "distance_limit"),
    ({"open_route": [2]}, "open_route"),
    ({"backhaul_class": [3]}, "backhaul_class"),
    ({"num_depots": [3]}, "num_depots"),
    ({"speed": [0.0]}, "speed"),
    ({"service_time": [0.0, -1.0, 0.0]}, "service_time"),
    ({"color": [1]}, "color"),
])
def test_mtvrp__instance_from_names_the_bad_field(fields, match):
    data = {"locs": [[0.0, 0.0], [0.5, 0.5], [1.0, 0.0]], "demand_linehaul": [0.0, 0.2, 0.3], **fields}
    with pytest.raises(ValueError, match=match):
        MTVRP.instance_from(data)


def test_mtvrp__any_subset_of_attributes_and_observation_round_trip():
    inst = MTVRP.instance_from({"locs": [[0.0, 0.0], [1.0, 1.0], [0.5, 0.5], [0.2, 0.9]], "num_depots": 2,
                                "demand_linehaul": [0.0, 0.0, 0.4, 0.0], "demand_backhaul": [0.0, 0.0, 0.0, 0.3],
                                "time_windows": [[0, 4], [0, 4], [0.5, 1.0], [0, math.inf]]})
    assert variant_names(inst) == ["MDVRPBTW"]
    back = MTVRP.instance_from_observation(MTVRP.observe(MTVRP.reset(inst)))
    for a, b in zip(inst, back):
        assert torch.equal(a, b.to(a.dtype))


def own_cost(locs, feats, tour):
    """The judge's cost, for tests/test_problems.py's registry-wide rollout check."""
    fields = {"locs": np.asarray(locs)[None], **{k: np.asarray(v)[None] for k, v in feats.items()}}
    return Judge(MTVRP.Instance(**fields)).cost(list(tour))


PYVRP_VARIANTS = ["CVRP", "OVRP", "VRPMB", "VRPL", "VRPTW", "MDCVRP", "MDOVRPMBLTW", "VRPMBLTW", "OVRPLTW"]
EXPRESSIBLE = [v for v, f in VARIANTS.items() if not (f.backhaul and not f.mixed)]  # PyVRP has no B order


@pytest.mark.parametrize("variant", every_variant(PYVRP_VARIANTS, EXPRESSIBLE))
def test_mtvrp__pyvrp_cost_equals_our_tour_cost(variant):
    """PyVRP's routes replay feasibly through the unit and our ``tour_cost`` equals PyVRP's own distance."""
    pytest.importorskip("pyvrp")
    from agents.references.solvers import mtvrp_actions, pyvrp_mtvrp, SCALE

    inst = MTVRP.generate(2, 12, generator=torch.Generator().manual_seed(1), variant=variant)
    for b in range(2):
        one = MTVRP.Instance(*(f[b:b + 1] for f in inst))
        routes, distance = pyvrp_mtvrp({k: v[0].numpy() for k, v in one._asdict().items()}, 0.3, 0)
        actions = torch.tensor([mtvrp_actions(routes)])
        assert float(tour_cost(MTVRP, one, actions)[0]) == pytest.approx(distance / SCALE, abs=2e-5)


def test_mtvrp__pyvrp_refuses_linehauls_first_backhauls():
    pytest.importorskip("pyvrp")
    from agents.references.solvers import pyvrp_mtvrp

    inst = MTVRP.generate(1, 12, generator=torch.Generator().manual_seed(1), variant="VRPB")
    with pytest.raises(ValueError, match="class 1"):
        pyvrp_mtvrp({k: v[0].numpy() for k, v in inst._asdict().items()}, 0.1, 0)
