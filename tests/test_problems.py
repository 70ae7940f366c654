"""The problem core: hand-checkable optima, mask rules, generator statistics, costs and bad input."""
import importlib
import math

import numpy as np
import pytest
import torch

from routing_gym.problems import CVRP, OP, PCTSP, PROBLEMS, TSP, step, tour_cost
from routing_gym.problems.base import interpolate_table, replay
from routing_gym.problems.cvrp import capacity
from routing_gym.problems.op import max_length


def one(problem, **fields):
    return problem.instance_from(fields)


def run(problem, instance, actions):
    """Step a batch-1 instance through ``actions``; returns (state, rewards)."""
    state = problem.reset(instance)
    rewards = []
    for a in actions:
        state, r, invalid = step(problem, state, torch.tensor([a]))
        assert not invalid.item()
        rewards.append(float(r[0]))
    return state, rewards


def feasible_episodes(problem, instance, limit=100000):
    """Every complete action sequence the masks allow (depth-first), with its summed reward."""
    out = []

    def dfs(state, actions, ret):
        if state.done.item():
            out.append((actions, ret))
            return
        for a in state.mask[0].nonzero().flatten().tolist():
            nxt, r, _ = step(problem, state, torch.tensor([a]))
            dfs(nxt, actions + [a], ret + float(r[0]))
        assert len(out) < limit

    dfs(problem.reset(instance), [], 0.0)
    return out


# ---------------------------------------------------------------------------------------- optima
def test_tsp__unit_square_optimum_is_its_perimeter():
    inst = one(TSP, locs=[[0, 0], [1, 0], [1, 1], [0, 1]])
    episodes = feasible_episodes(TSP, inst)
    assert len(episodes) == math.factorial(4)
    assert max(ret for _, ret in episodes) == pytest.approx(-4.0, abs=1e-6)
    _, rewards = run(TSP, inst, [2, 3, 0, 1])
    assert sum(rewards) == pytest.approx(-4.0, abs=1e-6)


def test_cvrp__two_customers_that_do_not_fit_together_need_two_routes():
    inst = one(CVRP, locs=[[0, 0], [1, 0], [0, 1]], demand=[0, 0.6, 0.6])
    best = max(ret for _, ret in feasible_episodes(CVRP, inst))
    assert best == pytest.approx(-4.0, abs=1e-6)  # 0 -> 1 -> 0 -> 2 -> 0
    inst = one(CVRP, locs=[[0, 0], [1, 0], [0, 1]], demand=[0, 0.5, 0.5])
    best = max(ret for _, ret in feasible_episodes(CVRP, inst))
    assert best == pytest.approx(-(2 + math.sqrt(2)), abs=1e-6)  # one route 0 -> 1 -> 2 -> 0


def test_op__best_prize_within_the_length_budget():
    inst = one(OP, locs=[[0, 0], [0.5, 0], [0, 0.5], [1, 1]], prize=[0, 0.3, 0.5, 1.0], max_length=1.2)
    episodes = feasible_episodes(OP, inst)
    best_actions, best = max(episodes, key=lambda e: e[1])
    assert best == pytest.approx(0.5, abs=1e-6)  # reward = prize; (1, 1) is out of reach, 1 + 2 too long
    assert best_actions == [2, 0]


def test_pctsp__collects_the_threshold_at_least_cost():
    inst = one(PCTSP, locs=[[0, 0], [0.5, 0], [0, 0.5], [1, 1]], prize=[0, 0.6, 0.6, 0.1],
               penalty=[0, 0.1, 0.1, 0.05])
    best = max(ret for _, ret in feasible_episodes(PCTSP, inst))
    assert best == pytest.approx(-(0.5 + math.sqrt(0.5) + 0.5 + 0.05), abs=1e-6)


# ---------------------------------------------------------------------- returns vs own cost formula
def own_cost(name, locs, feats, tour):
    """Cost recomputed from scratch in float64 (not with the core); a problem whose cost is not one of these
    formulas has its judge in its own test file (``own_cost(locs, feats, tour)`` in ``tests/test_<name>.py``)."""
    try:
        judge = vars(importlib.import_module(f"test_{name}")).get("own_cost")
    except ModuleNotFoundError as e:
        if e.name != f"test_{name}":
            raise
        judge = None
    if judge is not None:
        return judge(locs, feats, tour)
    locs = np.asarray(locs, np.float64)
    d = lambda a, b: float(np.hypot(*(locs[a] - locs[b])))  # noqa: E731
    if name == "tsp":
        return sum(d(tour[i], tour[(i + 1) % len(tour)]) for i in range(len(tour)))
    if name == "op":
        return -float(np.asarray(feats["prize"], np.float64)[tour].sum())
    path = [0] + list(tour) + ([0] if tour[-1] != 0 else [])
    length = sum(d(a, b) for a, b in zip(path, path[1:]))
    if name in ("pctsp", "spctsp"):  # penalties of the nodes left out (real prizes decide only the mask)
        unvisited = sorted(set(range(1, len(locs))) - set(tour))
        length += float(np.asarray(feats["penalty"], np.float64)[unvisited].sum())
    return length


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_rollout__return_is_minus_independent_cost(name):
    problem = PROBLEMS[name]
    rng = np.random.default_rng(0)
    g = torch.Generator().manual_seed(1)
    for _ in range(10):
        inst = problem.generate(1, 10, generator=g)
        state = problem.reset(inst)
        tour, ret = [], 0.0
        while not state.done.item():
            a = int(rng.choice(state.mask[0].nonzero().flatten().numpy()))
            state, r, _ = step(problem, state, torch.tensor([a]))
            tour.append(a)
            ret += float(r[0])
        feats = {k: v[0].numpy() for k, v in inst._asdict().items() if k != "locs"}
        ref = own_cost(name, inst.locs[0].numpy() if "locs" in inst._fields else None, feats, tour)  # None: no coordinates
        assert ret == pytest.approx(-ref, abs=1e-5)
        assert float(tour_cost(problem, inst, torch.tensor([tour]))[0]) == pytest.approx(ref, abs=1e-5)


# ----------------------------------------------------------------------------------------- masks
def test_tsp_mask__visited_nodes_are_masked_and_first_action_is_free():
    state = TSP.reset(TSP.generate(1, 5, generator=torch.Generator().manual_seed(0)))
    assert state.mask.all()
    state, _, _ = step(TSP, state, torch.tensor([3]))
    assert state.mask[0].tolist() == [True, True, True, False, True]


def test_cvrp_mask__capacity_and_depot_rules():
    inst = one(CVRP, locs=[[0, 0], [0.1, 0], [0.2, 0], [0.3, 0]], demand=[0, 0.5, 0.4, 0.7])
    state = CVRP.reset(inst)
    assert state.mask[0].tolist() == [False, True, True, True]  # no depot as the first action
    state, _, _ = step(CVRP, state, torch.tensor([1]))  # load 0.5: node 3 (0.7) no longer fits
    assert state.mask[0].tolist() == [True, False, True, False]
    state, _, _ = step(CVRP, state, torch.tensor([2]))  # load 0.9: nothing fits, depot only
    assert state.mask[0].tolist() == [True, False, False, False]
    state, _, _ = step(CVRP, state, torch.tensor([0]))  # refilled; depot not twice in a row
    assert state.mask[0].tolist() == [False, False, False, True]
    state, r, _ = step(CVRP, state, torch.tensor([3]))  # last customer: return added, episode over
    assert state.done.item() and float(r[0]) == pytest.approx(-0.6, abs=1e-6)


def test_cvrp_mask__exact_fit_is_allowed():
    inst = one(CVRP, locs=[[0, 0], [0.1, 0], [0.2, 0], [0.3, 0], [0.4, 0]],
               demand=[0, 1 / 3, 1 / 3, 1 / 3, 0.1])
    state, _ = run(CVRP, inst, [1, 2])
    assert state.mask[0, 3].item()  # 1/3 + 1/3 + 1/3 fills the vehicle exactly


def test_op_mask__unreachable_nodes_are_masked_and_depot_always_allowed():
    inst = one(OP, locs=[[0, 0], [0.4, 0], [0.8, 0], [0, 0.9]], prize=[0, 0.1, 0.2, 0.3], max_length=1.7)
    state = OP.reset(inst)
    assert state.mask[0].tolist() == [True, True, True, False]  # 0.9 * 2 > 1.7
    state, r, _ = step(OP, state, torch.tensor([2]))
    assert float(r[0]) == pytest.approx(0.2)
    assert state.mask[0].tolist() == [True, True, False, False]  # 0.8 + 0.4 + 0.4 = 1.6 <= 1.7
    state, _, _ = step(OP, state, torch.tensor([1]))
    assert state.mask[0].tolist() == [True, False, False, False]  # node 3: 1.2 + 0.98 + 0.9 > 1.7
    state, r, _ = step(OP, state, torch.tensor([0]))
    assert state.done.item() and float(r[0]) == 0.0 and float(state.length[0]) == pytest.approx(1.6)


def test_pctsp_mask__depot_only_after_the_prize_threshold_or_all_visited():
    inst = one(PCTSP, locs=[[0, 0], [0.1, 0], [0.2, 0], [0.3, 0]], prize=[0, 0.7, 0.4, 0.1], penalty=[0, 0.1, 0.1, 0.1])
    state = PCTSP.reset(inst)
    assert state.mask[0].tolist() == [False, True, True, True]
    state, _, _ = step(PCTSP, state, torch.tensor([1]))
    assert state.mask[0].tolist() == [False, False, True, True]  # 0.7 < 1
    state, _, _ = step(PCTSP, state, torch.tensor([2]))
    assert state.mask[0].tolist() == [True, False, False, True]  # 1.1 >= 1
    inst = one(PCTSP, locs=[[0, 0], [0.1, 0], [0.2, 0]], prize=[0, 0.2, 0.2], penalty=[0, 0.1, 0.1])
    state, _ = run(PCTSP, inst, [1, 2])
    assert state.mask[0].tolist() == [True, False, False]  # all visited with 0.4 < 1: depot allowed


def test_step__masked_action_terminates_with_penalty_and_noop_mask():
    state = CVRP.reset(one(CVRP, locs=[[0, 0], [0.1, 0], [0.2, 0]], demand=[0, 0.5, 0.5]))
    state, r, invalid = step(CVRP, state, torch.tensor([0]))  # depot first is masked
    assert invalid.item() and state.done.item()
    assert float(r[0]) == pytest.approx(-3.0 * 4)  # 3 per step left: 2 customers, at most 4 steps
    assert state.mask[0].tolist() == [True, False, False]
    state2, r2, invalid2 = step(CVRP, state, torch.tensor([0]))  # finished: no-op, nothing added
    assert float(r2[0]) == 0.0 and not invalid2.item() and torch.equal(state2.mask, state.mask)


def test_tour_cost__rejects_infeasible_and_unfinished_tours():
    inst = TSP.instance_from({"locs": [[0, 0], [1, 0], [1, 1]]})
    with pytest.raises(ValueError, match="masked action 0 at step 2"):
        tour_cost(TSP, inst, torch.tensor([[0, 1, 0]]))
    with pytest.raises(ValueError, match="does not finish"):
        tour_cost(TSP, inst, torch.tensor([[0, 1]]))
    cvrp = one(CVRP, locs=[[0, 0], [1, 0], [0, 1]], demand=[0, 0.6, 0.6])
    with pytest.raises(ValueError, match="masked action 2"):
        tour_cost(CVRP, cvrp, torch.tensor([[1, 2, 0]]))  # over capacity
    assert float(tour_cost(CVRP, cvrp, torch.tensor([[1, 0, 2, 0, 0]]))[0]) == pytest.approx(4.0, abs=1e-6)


# ------------------------------------------------------------------------------------- generators
def test_generators__kool_distributions():
    g = torch.Generator().manual_seed(0)
    for n, cap in [(10, 20), (20, 30), (50, 40), (100, 50)]:
        inst = CVRP.generate(200, n, generator=g)
        assert inst.locs.shape == (200, n + 1, 2) and 0 <= inst.locs.min() and inst.locs.max() <= 1
        units = inst.demand[:, 1:] * cap
        assert torch.allclose(units, units.round(), atol=1e-4)
        assert units.round().min() == 1 and units.round().max() == 9
        assert (inst.demand[:, 0] == 0).all()
    for n, length in [(20, 2.0), (50, 3.0), (100, 4.0)]:
        op = OP.generate(200, n, generator=g)
        assert torch.allclose(op.max_length, torch.tensor(length))
        pen = PCTSP.generate(200, n, generator=g)
        assert pen.penalty.max() <= 3 * length / n and pen.penalty.min() >= 0
        assert pen.prize.max() <= 4 / n and pen.prize.min() >= 0
        assert (pen.prize[:, 0] == 0).all() and (pen.penalty[:, 0] == 0).all()
    tsp = TSP.generate(500, 20, generator=g)
    assert 0 <= tsp.locs.min() and tsp.locs.max() <= 1 and abs(tsp.locs.mean().item() - 0.5) < 0.01


def test_generators__op_prize_types():
    g = torch.Generator().manual_seed(0)
    const = OP.generate(50, 20, generator=g, prize_type="const").prize[:, 1:]
    assert (const == 1).all()
    unif = OP.generate(500, 20, generator=g, prize_type="unif").prize[:, 1:] * 100
    assert torch.allclose(unif, unif.round(), atol=1e-4) and unif.min() >= 1 and unif.max() <= 100
    inst = OP.generate(50, 20, generator=g, prize_type="dist")
    p = inst.prize[:, 1:]
    d = torch.linalg.vector_norm(inst.locs[:, 1:] - inst.locs[:, :1], dim=-1)
    assert torch.allclose(p.max(dim=1).values, torch.tensor(1.0))  # the farthest node is worth 1
    assert torch.equal(p.argmax(dim=1), d.argmax(dim=1))
    assert p.min() >= 0.01
    with pytest.raises(ValueError, match="prize_type"):
        OP.generate(1, 20, prize_type="gauss")


def test_tables__interpolate_between_and_hold_beyond_the_paper_sizes():
    assert capacity(20) == 30 and capacity(30) == pytest.approx(30 + 10 / 3) and capacity(200) == 50
    assert capacity(5) == 20
    assert max_length(35) == pytest.approx(2.5) and max_length(10) == 2.0
    assert interpolate_table({10: 1.0, 20: 3.0}, 15) == 2.0


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_generators__same_seed_same_instances(name):
    problem = PROBLEMS[name]
    a = problem.generate(4, 12, generator=torch.Generator().manual_seed(5))
    b = problem.generate(4, 12, generator=torch.Generator().manual_seed(5))
    c = problem.generate(4, 12, generator=torch.Generator().manual_seed(6))
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not torch.equal(a[0], c[0])


# ------------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("problem,fields,match", [
    (TSP, {"locs": [[0, 0], [1, 0], [0.5]]}, "locs"),
    (TSP, {"locs": [[0, 0], [1, np.nan], [0.5, 0.5]]}, "'locs' contains NaN"),
    (TSP, {"locs": [[0, 0], [1, 2.0], [0.5, 0.5]]}, "'locs' must lie in"),
    (TSP, {"locs": [[0, 0], [1, 1]], "demand": [0, 1]}, "unknown field"),
    (CVRP, {"locs": [[0, 0], [1, 1]]}, "lacks field"),
    (CVRP, {"locs": [[0, 0], [1, 1]], "demand": [0, 1.5]}, "exceeds the capacity"),
    (CVRP, {"locs": [[0, 0], [1, 1]], "demand": [0.1, 0.5]}, "0 at the depot"),
    (CVRP, {"locs": [[0, 0], [1, 1]], "demand": [0, 0.5, 0.2]}, "'demand' must have shape"),
    (CVRP, {"locs": [[0, 0], [1, 1]], "demand": [0, np.inf]}, "'demand' contains NaN or inf"),
    (OP, {"locs": [[0, 0], [1, 1]], "prize": [0, 0.5], "max_length": -1.0}, "max_length"),
    (OP, {"locs": [[0, 0], [1, 1]], "prize": [0, 1.5], "max_length": 2.0}, "'prize' must lie in"),
    (PCTSP, {"locs": [[0, 0], [1, 1]], "prize": [0, 0.5], "penalty": [0, -0.5]}, "'penalty' must lie in"),
])
def test_instance_from__bad_input_names_the_field(problem, fields, match):
    with pytest.raises(ValueError, match=match):
        problem.instance_from(fields)


def test_step_core__runs_batched_with_no_python_loop_over_b():
    problem = CVRP
    inst = problem.generate(257, 20, generator=torch.Generator().manual_seed(0))
    state = problem.reset(inst)
    steps = 0
    while not state.done.all():
        a = state.mask.float().multinomial(1, generator=torch.Generator().manual_seed(steps)).squeeze(1)
        state, r, invalid = step(problem, state, a)
        assert not invalid.any() and torch.isfinite(r).all()
        steps += 1
    assert torch.isfinite(state.length).all() and steps <= 2 * 20
    assert state.visited[:, 1:].all()


# ------------------------------------------------------------------- actions and tours the core refuses
def test_step_core__refuses_non_int64_actions_and_masks_indices_outside_the_nodes():
    inst = TSP.instance_from({"locs": [[0, 0], [1, 0], [1, 1]]})
    state = TSP.reset(inst.__class__(*(f.expand(3, -1, -1) for f in inst)))
    for bad in (torch.tensor([1.9, 2.7, 0.0]), torch.tensor([1, 2, 0], dtype=torch.int32),
                torch.tensor([True, False, True]), torch.tensor([[1, 2, 0]])):
        with pytest.raises(ValueError, match="int64 tensor of node indices"):
            step(TSP, state, bad)
    state, r, invalid = step(TSP, state, torch.tensor([1, 3, -1]))  # no raw indexing error: masked actions
    assert invalid.tolist() == [False, True, True] and state.done.tolist() == [False, True, True]
    assert r[1:].tolist() == pytest.approx([-3.0 * 3] * 2)  # 3 per step left: 3 nodes
    assert state.mask[1:].sum(dim=1).tolist() == [1, 1]  # done: the no-op only


def test_tour_cost__refuses_float_tours_and_names_a_node_outside_the_nodes():
    inst = TSP.instance_from({"locs": [[0, 0], [1, 0], [1, 1]]})
    for tours in (torch.tensor([[0.0, 1.7, 2.0]]), torch.tensor([[0.0, 1.0, 2.0]]), np.array([[0.0, 1.0, 2.0]]),
                  [[0, 1.5, 2]], torch.tensor([[True, False, True]])):
        with pytest.raises(ValueError, match="tours must hold integer node indices"):
            tour_cost(TSP, inst, tours)
    with pytest.raises(ValueError, match=r"instance 0 has node 3 at step 2, outside the nodes 0\.\.2"):
        tour_cost(TSP, inst, torch.tensor([[0, 1, 3]]))
    with pytest.raises(ValueError, match="has node -1 at step 0"):
        tour_cost(TSP, inst, [[-1, 1, 2]])
    assert float(tour_cost(TSP, inst, np.array([[0, 1, 2]], np.int32))[0]) == pytest.approx(2 + math.sqrt(2))
    cost, feasible, first_masked = replay(TSP, inst, torch.tensor([[0, 7, 2]]))  # replay does not raise
    assert not feasible[0] and first_masked[0] == 1


def observed_fields(problem, n_total):
    """(field, high) for each instance field the observation shows under its own name (float Boxes)."""
    bounds = problem.bounds(n_total)
    return [(f, bounds[f][2]) for f in problem.Instance._fields if f in bounds]


@pytest.mark.parametrize("name,n", sorted({(name, PROBLEMS[name].valid_num_nodes(n)) for name in PROBLEMS
                                           for n in (1, 2, 3, 10)}))
def test_instance_from__accepts_up_to_the_observation_bound_and_refuses_beyond(name, n):
    """The validation and the observation space agree for every field: a value at a field's bound is
    accepted and observed inside the space; the next float32 above it is refused (no slack)."""
    problem = PROBLEMS[name]
    n_total = problem.num_nodes_total(n)
    base = {k: v[0].numpy().copy() for k, v in problem.generate(1, n, generator=torch.Generator().manual_seed(0))
            ._asdict().items()}
    bounds = problem.bounds(n_total)
    for field, high in observed_fields(problem, n_total):
        for value, ok in ((np.float32(high), True), (np.nextafter(np.float32(high), np.float32(np.inf)), False)):
            data = problem.field_at_bound(base, field, n_total - 1, value)  # the last node (a customer)
            if data is None:  # no valid instance holds that value there (a joint constraint)
                continue
            if not ok:
                with pytest.raises(ValueError, match=f"'{field}'"):
                    problem.instance_from(data)
                continue
            obs = problem.observe(problem.reset(problem.instance_from(data)))
            for key, (_, low, hi) in bounds.items():
                arr = obs[key].numpy().astype(np.float32)
                assert (arr >= np.float32(low)).all() and (arr <= np.float32(hi)).all(), (field, key)
