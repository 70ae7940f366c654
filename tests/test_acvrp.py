"""ACVRP (CVRP on a cost matrix): an independent float64 judge of every feasible episode of tiny instances, a
hand-checkable optimum where the direction matters, CVRPLIB EXPLICIT files, and PyVRP's tours."""
import itertools

import numpy as np
import pytest
import torch

from episodes import every_episode, routes_of
from routing_gym.problems import ACVRP, tour_cost

CAPACITY_SLACK = 1e-5


def judge_cost(matrix, tour) -> float:
    """The routes' cost by the matrix (row = from), each from the depot and back, in float64."""
    m = np.asarray(matrix, np.float64)
    return float(sum(m[a, b] for route in routes_of(tour) if route for a, b in zip([0, *route], [*route, 0])))


def own_cost(locs, feats, tour) -> float:
    """The judge ``tests/test_problems.py``'s rollout test reads (``locs`` is None: no coordinates)."""
    return judge_cost(feats["cost_matrix"], tour)


class Rules:
    """CVRP's rules, written plainly: a customer when unserved and it fits; the depot unless the vehicle is at
    it while a customer fits (never first, never twice in a row); done when every customer is served."""

    def __init__(self, demand):
        self.demand = [float(d) for d in demand]
        self.served, self.load, self.at = set(), 0.0, 0

    @property
    def done(self) -> bool:
        return len(self.served) == len(self.demand) - 1

    def apply(self, a: int) -> None:
        if a == 0:
            self.load = 0.0
        else:
            self.served.add(a)
            self.load += self.demand[a]
        self.at = 0 if self.done else a

    def allowed(self) -> set:
        fits = {i for i in range(1, len(self.demand))
                if i not in self.served and self.load + self.demand[i] <= 1.0 + CAPACITY_SLACK}
        return fits | ({0} if self.at != 0 or not fits else set())


def tiny(seed: int, n: int):
    g = np.random.default_rng(seed)
    matrix = g.random((n + 1, n + 1)) * (1 - np.eye(n + 1))  # asymmetric, no triangle inequality needed
    demand = np.concatenate([[0.0], g.choice([0.25, 0.5, 0.75], n)])
    return ACVRP.instance_from({"cost_matrix": matrix, "demand": demand}), matrix, demand


@pytest.mark.parametrize("seed,n", [(s, n) for s in range(3) for n in (2, 3, 4)])
def test_acvrp__every_episode_matches_the_plain_rules_and_the_matrix_cost(seed, n):
    inst, matrix, demand = tiny(seed, n)
    episodes = every_episode(ACVRP, inst, lambda: Rules(demand), lambda tour: judge_cost(matrix, tour))
    assert len(episodes) >= 2


def test_acvrp__the_cheap_direction_wins_by_hand():
    m = np.full((4, 4), 0.9)
    np.fill_diagonal(m, 0.0)
    m[0, 1] = m[1, 2] = m[2, 3] = m[3, 0] = 0.1  # one cheap cycle 0 -> 1 -> 2 -> 3 -> 0
    inst = ACVRP.instance_from({"cost_matrix": m, "demand": [0, 0.3, 0.3, 0.3]})
    costs = {order: float(tour_cost(ACVRP, inst, torch.tensor([[*order, 0]]))[0])
             for order in itertools.permutations((1, 2, 3))}
    assert min(costs, key=costs.get) == (1, 2, 3) and costs[(1, 2, 3)] == pytest.approx(0.4)
    assert costs[(3, 2, 1)] == pytest.approx(3.6)  # the same cycle backwards


@pytest.mark.parametrize("data,match", [
    ({"cost_matrix": np.ones((3, 3)), "demand": [0, 0.5, 0.5]}, "zero diagonal"),
    ({"cost_matrix": np.zeros((3, 3)), "demand": [0, 1.5, 0.5]}, "exceeds the capacity"),
    ({"cost_matrix": np.zeros((3, 3)), "demand": [0, 0.5]}, "demand"),
    ({"cost_matrix": np.zeros((3, 3))}, "lacks field"),
])
def test_acvrp__instance_from_names_the_bad_field(data, match):
    with pytest.raises(ValueError, match=match):
        ACVRP.instance_from(data)


EXPLICIT = """NAME : tiny-n5-k2
COMMENT : (a test file, Optimal value: {opt})
TYPE : CVRP
DIMENSION : 5
EDGE_WEIGHT_TYPE : EXPLICIT
EDGE_WEIGHT_FORMAT : LOWER_ROW
CAPACITY : 10
EDGE_WEIGHT_SECTION
4
7 3
2 6 5
9 8 4 6
DEMAND_SECTION
1 4
2 5
3 0
4 6
5 3
DEPOT_SECTION
3
-1
EOF
"""


def test_acvrp__a_cvrplib_explicit_file_loads_depot_first_and_costs_in_its_units(tmp_path):
    pytest.importorskip("vrplib")
    from routing_gym import tsplib

    full = np.zeros((5, 5))  # the LOWER_ROW triangle, file ids 1..5
    for i, row in enumerate([[4], [7, 3], [2, 6, 5], [9, 8, 4, 6]], start=1):
        full[i, :i] = full[:i, i] = row
    demand = {1: 4, 2: 5, 4: 6, 5: 3}

    def file_cost(routes):  # routes of file ids, from and back to the depot (file id 3)
        return sum(full[a - 1, b - 1] for r in routes for a, b in zip([3, *r], [*r, 3]))

    feasible = [rs for k in range(1, 5) for perm in itertools.permutations((1, 2, 4, 5))
                for cuts in itertools.combinations(range(1, 4), k - 1)
                for rs in [[list(perm[a:b]) for a, b in zip((0, *cuts), (*cuts, 4))]]
                if all(sum(demand[c] for c in r) <= 10 for r in rs)]
    optimum = min(file_cost(rs) for rs in feasible)
    path = tmp_path / "tiny-n5-k2.vrp"
    path.write_text(EXPLICIT.format(opt=optimum))
    real = tsplib.load(path)
    assert real.problem == "acvrp" and real.node_ids.tolist() == [3, 1, 2, 4, 5]  # the depot first
    assert real.reference == optimum and real.scale == 9
    assert real.instance.demand[0].tolist() == pytest.approx([0, 0.4, 0.5, 0.6, 0.3])
    torch.testing.assert_close(real.instance.cost_matrix[0].double(),
                               torch.as_tensor(full[np.ix_([2, 0, 1, 3, 4], [2, 0, 1, 3, 4])]) / 9,
                               atol=1e-7, rtol=0)
    index = {3: 0, 1: 1, 2: 2, 4: 3, 5: 4}
    for routes in feasible[:20]:
        actions = [index[c] for r in routes for c in [*r, 3]]
        assert tsplib.cost(real, actions) == file_cost(routes)
    assert tsplib.gap(real, optimum) == 0


def test_acvrp__pyvrp_tours_cost_by_our_tour_cost_what_pyvrp_says():
    pytest.importorskip("pyvrp")
    from agents.references.solvers import SCALE, pyvrp_routes, solve, solver_distances

    inst = ACVRP.generate(3, 8, generator=torch.Generator().manual_seed(2))
    for b in range(3):
        data = {k: v[b].numpy() for k, v in inst._asdict().items()}
        demand = np.rint(data["demand"].astype(np.float64) * SCALE).astype(np.int64)
        routes, feasible, distance = pyvrp_routes(data, solver_distances(data), demand=demand, vehicles=8,
                                                  time_limit=0.3, seed=0)
        tour = [node for route in routes for node in route + [0]]
        one = ACVRP.Instance(*(f[b:b + 1] for f in inst))
        assert feasible and float(tour_cost(ACVRP, one, torch.tensor([tour]))[0]) == pytest.approx(
            distance / SCALE, abs=1e-5 * len(tour))
    solved = solve(ACVRP, inst, "pyvrp", time_limit=0.3, progress=False)  # the dispatch entry
    torch.testing.assert_close(tour_cost(ACVRP, inst, solved.tours), solved.cost)
