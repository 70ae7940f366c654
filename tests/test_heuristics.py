"""Heuristics, the exact Held-Karp DP and the solver adapters: every tour replays through the env's own
dynamics (tour_cost), and the orderings that must hold do."""
import math

import pytest
import torch

from agents.inference.rollout import evaluate, replay
from agents.references.exact import brute_force, held_karp
from agents.references.heuristics import (HEURISTICS, applicable, heuristic_tours, improve_routes, insertion_tsp,
                                          nearest_neighbour_tsp, savings_routes, two_opt)
from agents.references.solvers import METHODS, SUPPORTED, available, repair, solve
from routing_gym.problems import CVRP, OP, PCTSP, PROBLEMS, SDVRP, SPCTSP, TSP, step, tour_cost
from tours import instances, ordered_routes, routes


# ------------------------------------------------------------------------------------------ TSP
def test_two_opt__uncrosses_the_square():
    locs = torch.tensor([[[0.0, 0.0], [1.0, 1.0], [1.0, 0.0], [0.0, 1.0]]])
    seq = two_opt(locs, torch.tensor([[0, 1, 2, 3, 0]]))
    assert tour_cost(TSP, TSP.Instance(locs=locs), seq[:, :-1]).item() == pytest.approx(4.0, abs=1e-6)
    assert seq[0, 0] == 0 and seq[0, -1] == 0


def test_tsp_heuristics__valid_tours_in_kool_order():
    inst = instances(TSP, 128, 20)
    cost = {name: tour_cost(TSP, inst, heuristic_tours(TSP, inst, name)) for name in applicable(TSP)}
    assert torch.equal(nearest_neighbour_tsp(inst.locs), heuristic_tours(TSP, inst, "nearest"))
    # Kool et al. 2019, Table 1 (TSP20): nearest neighbour 4.50 > nearest ins. 4.33 > random ins. 4.00 > farthest 3.93
    mean = {k: v.mean().item() for k, v in cost.items()}
    assert mean["nearest"] > mean["nearest_insertion"] > mean["random_insertion"] > mean["farthest_insertion"]
    assert (cost["2opt"] <= cost["farthest_insertion"] + 1e-6).all()  # 2-opt only improves its start
    assert mean["random"] > 2 * mean["nearest"]


def test_insertion__rejects_unknown_rule_and_depot_problems():
    with pytest.raises(ValueError, match="rule"):
        insertion_tsp(torch.rand(1, 5, 2), "cheapest")
    with pytest.raises(ValueError, match="TSP only"):
        heuristic_tours(CVRP, instances(CVRP, 2, 5), "farthest_insertion")
    with pytest.raises(ValueError, match="unknown heuristic"):
        heuristic_tours(TSP, instances(TSP, 2, 5), "lkh")


# ---------------------------------------------------------------------------------- depot problems
@pytest.mark.parametrize("problem", [CVRP, OP, PCTSP])
def test_depot_heuristics__valid_and_local_search_improves(problem):
    inst = instances(problem, 64, 20)
    greedy = heuristic_tours(problem, inst, "greedy")
    improved = heuristic_tours(problem, inst, "2opt")
    before, after = tour_cost(problem, inst, greedy), tour_cost(problem, inst, improved)
    assert (after <= before + 1e-6).all() and (after < before - 1e-6).any()
    for g, i in zip(greedy[:16], improved[:16]):
        if problem is CVRP:
            assert routes(g) == routes(i)  # intra-route 2-opt: same customers in the same routes
        elif problem is OP:
            assert set().union(*routes(g)) <= set().union(*routes(i))  # OP only inserts
    nearest = tour_cost(problem, inst, heuristic_tours(problem, inst, "nearest"))
    if problem is not CVRP:  # the problem-aware greedy beats plain nearest neighbour on OP and PCTSP
        assert before.mean() < nearest.mean()


def savings_one_by_one(locs, demand, shape):
    """Clarke & Wright's parallel savings over every pair, one instance, in plain Python: the routes as tuples."""
    n = len(locs)
    d = [[math.dist(p, q) for q in locs] for p in locs]
    route = {v: [v] for v in range(1, n)}  # customer -> its route (a shared list)
    pairs = sorted(((d[0][i] + d[0][j] - shape * d[i][j], i, j) for i in range(1, n) for j in range(i + 1, n)),
                   reverse=True)
    for saving, i, j in pairs:
        ri, rj = route[i], route[j]
        if saving <= 0 or ri is rj or i not in (ri[0], ri[-1]) or j not in (rj[0], rj[-1]):
            continue
        if sum(demand[v] for v in ri + rj) > 1 + 1e-6:
            continue
        joined = (ri if ri[-1] == i else ri[::-1]) + (rj if rj[0] == j else rj[::-1])
        for v in joined:
            route[v] = joined
    return {min(tuple(r), tuple(r[::-1])) for r in route.values()}


@pytest.mark.parametrize("shape", [0.6, 1.0, 1.4])
def test_savings__the_routes_of_clarke_and_wright_one_instance_at_a_time(shape):
    """The batched savings (every pair a neighbour at n = 12) joins the routes a plain one-by-one
    implementation does, and its tours replay within the capacity."""
    inst = instances(CVRP, 24, 12, seed=5)
    tours = savings_routes(inst, shape, neighbours=12)
    assert torch.isfinite(tour_cost(CVRP, inst, tours)).all()
    for b in range(24):
        got = {min(tuple(r), tuple(r[::-1])) for r in ordered_routes(tours[b])}
        assert got == savings_one_by_one(inst.locs[b].double().tolist(), inst.demand[b].double().tolist(), shape)


def test_savings__joins_the_near_pairs_and_keeps_a_full_customer_alone():
    locs = torch.tensor([[[0, 0], [1, 0], [1, 0.1], [-1, 0], [-1, 0.1], [0, 5]]])
    demand = torch.tensor([[0, 0.5, 0.5, 0.5, 0.5, 1.0]])
    tours = savings_routes(CVRP.Instance(locs=locs, demand=demand))
    assert routes(tours[0]) == [[1, 2], [3, 4], [5]]
    assert savings_routes(CVRP.Instance(locs=locs[:, :2], demand=demand[:, :2])).tolist() == [[1, 0]]


def test_savings__far_cheaper_than_nearest_neighbour_2opt_on_cvrp_100():
    inst = instances(CVRP, 8, 100, seed=2)
    saved = tour_cost(CVRP, inst, heuristic_tours(CVRP, inst, "savings"))
    assert saved.mean() < 0.9 * tour_cost(CVRP, inst, heuristic_tours(CVRP, inst, "2opt")).mean()


def test_insert_and_remove__pctsp_drops_a_costly_detour_and_op_fills_its_budget():
    pc = PCTSP.instance_from({"locs": [[[0, 0], [0.1, 0], [0.2, 0], [1, 1]]], "prize": [[0, 0.6, 0.6, 0.1]],
                              "penalty": [[0, 1, 1, 0.01]]}, batched=True)
    tours = improve_routes(PCTSP, pc, torch.tensor([[1, 3, 2, 0]]))
    assert sorted(routes(tours[0])[0]) == [1, 2]  # node 3's detour costs more than its penalty
    op = OP.instance_from({"locs": [[[0, 0], [0.1, 0], [0.2, 0], [0.9, 0.9]]], "prize": [[0, 0.1, 0.1, 1.0]],
                           "max_length": [0.5]}, batched=True)
    tours = improve_routes(OP, op, torch.tensor([[1, 0, 0, 0]]))
    assert sorted(routes(tours[0])[0]) == [1, 2]  # node 3 does not fit; node 2 does


@pytest.mark.parametrize("name", sorted(HEURISTICS))
@pytest.mark.parametrize("problem", ["tsp", "cvrp", "op", "pctsp"])
def test_heuristics_table__each_entry_is_a_decoding_policy(problem, name):
    """What `routing-gym eval --policy NAME` runs: the policy on the vector env matches heuristic_tours."""
    core = PROBLEMS[problem]
    inst = instances(core, 16, 10, seed=1)
    if name.endswith("_insertion") and problem != "tsp" or name == "savings" and problem != "cvrp":
        with pytest.raises(ValueError, match="TSP only" if name != "savings" else r"\(CVRP only"):
            evaluate(HEURISTICS[name](core), problem, inst)
        return
    cost = evaluate(HEURISTICS[name](core), problem, inst)
    assert cost.shape == (16,) and torch.isfinite(cost).all()
    if name != "random":
        expected = tour_cost(core, inst, heuristic_tours(core, inst, name))
        assert torch.allclose(cost.double(), expected, atol=1e-4)


@pytest.mark.parametrize("problem", ["sdvrp", "spctsp"])
@pytest.mark.parametrize("name", ["nearest", "greedy"])
def test_heuristics__sdvrp_as_cvrp_and_spctsp_as_pctsp(problem, name):
    """SDVRP runs nearest/greedy as CVRP does (the depot only when no customer is allowed); SPCTSP as PCTSP
    does on the expected prizes (with real prizes equal to them, the very tours of PCTSP)."""
    core = PROBLEMS[problem]
    inst = instances(core, 16, 10, seed=3)
    tours = heuristic_tours(core, inst, name)
    cost = evaluate(HEURISTICS[name](core), problem, inst)
    assert torch.allclose(cost.double(), tour_cost(core, inst, tours), atol=1e-4)
    if problem == "sdvrp":
        state = core.reset(inst)
        for t in range(tours.shape[1]):
            depot = (tours[:, t] == 0) & ~state.done
            assert not (depot & state.mask[:, 1:].any(dim=1)).any()
            state = step(core, state, tours[:, t])[0]
    else:
        known = inst._replace(real_prize=inst.prize)
        pctsp = PCTSP.Instance(locs=inst.locs, prize=inst.prize, penalty=inst.penalty)
        assert torch.equal(heuristic_tours(core, known, name), heuristic_tours(PCTSP, pctsp, name))


def test_applicable__read_from_the_declarations():
    for name, core in PROBLEMS.items():
        names = applicable(core)
        assert names[:2] == ["random", "nearest"]
        assert ("farthest_insertion" in names) == (not core.has_depot and core.policy.coordinates is not None)
        assert ("greedy" in names) == (core.optional_visits is not None)
        assert ("savings" in names) == (name == "cvrp")  # locs and demand alone (SDVRP's mask refuses its routes)
        for h in HEURISTICS:
            if h not in names and h != "greedy":
                with pytest.raises(ValueError, match=core.label):
                    HEURISTICS[h](core)
    assert applicable(SDVRP) == [h for h in applicable(CVRP) if h != "savings"] and "2opt" not in applicable(SPCTSP)
    with pytest.raises(ValueError, match="real prizes"):
        heuristic_tours(SPCTSP, instances(SPCTSP, 2, 5), "2opt")


def test_sdvrp_local_search__valid_and_never_worse():
    inst = instances(SDVRP, 64, 20)
    greedy, improved = (tour_cost(SDVRP, inst, heuristic_tours(SDVRP, inst, h)) for h in ("greedy", "2opt"))
    assert (improved <= greedy + 1e-6).all() and (improved < greedy - 1e-6).any()


@pytest.mark.parametrize("problem", sorted(PROBLEMS))
def test_instance_from_observation__the_instance_behind_the_first_observation(problem):
    core = PROBLEMS[problem]
    inst = instances(core, 3, 6)
    obs = core.observe(core.reset(inst))
    if problem == "spctsp":
        with pytest.raises(ValueError, match="real prizes"):
            core.instance_from_observation(obs)
        return
    back = core.instance_from_observation(obs)
    assert type(back) is type(inst) and all(torch.equal(a, b) for a, b in zip(back, inst))


def test_heuristics__guess_no_problem():
    """The heuristics read the unit's declarations: no problem class is imported, no key looked for."""
    import inspect

    from agents.references import heuristics

    source = inspect.getsource(heuristics)
    assert " in obs" not in source and "instances_from_obs" not in source
    assert not [n for n in ("TSP", "CVRP", "SDVRP", "OP", "PCTSP", "SPCTSP") if hasattr(heuristics, n)]


def test_replay__reports_infeasible_tours_without_raising():
    inst = instances(PCTSP, 2, 5)
    cost, ok = replay(PCTSP, inst, torch.tensor([[1, 2, 3, 4, 5, 0], [0, 0, 0, 0, 0, 0]]))
    assert ok.tolist() == [True, False]


# ------------------------------------------------------------------------------------ Held-Karp
@pytest.mark.parametrize("n", [2, 3, 5, 7])
def test_held_karp__equals_brute_force(n):
    inst = instances(TSP, 32, n, seed=n)
    cost, tours = held_karp(inst.locs)
    assert torch.allclose(cost, brute_force(inst.locs), atol=1e-9)
    assert torch.allclose(tour_cost(TSP, inst, tours), cost, atol=1e-5)
    assert (tours[:, 0] == 0).all()


def test_held_karp__never_worse_than_heuristics_and_chunks_agree():
    inst = instances(TSP, 32, 11)
    cost, tours = held_karp(inst.locs)
    chunked, _ = held_karp(inst.locs, chunk_size=10)
    assert torch.allclose(cost, chunked)
    assert (cost <= tour_cost(TSP, inst, heuristic_tours(TSP, inst, "2opt")) + 1e-6).all()
    with pytest.raises(ValueError, match="N <= 20"):
        held_karp(torch.rand(1, 21, 2))


def test_held_karp__unit_square_perimeter():
    cost, tours = held_karp(torch.tensor([[[0.0, 0.0], [1.0, 1.0], [1.0, 0.0], [0.0, 1.0]]]))
    assert cost.item() == pytest.approx(4.0)


# -------------------------------------------------------------------------------------- solvers
CASES = [(m, p) for m in METHODS for p in SUPPORTED[m]]


@pytest.mark.parametrize("method,problem", CASES, ids=[f"{m}-{p}" for m, p in CASES])
def test_solve__valid_tours_at_least_as_good_as_greedy(method, problem):
    if not available(method):
        pytest.skip(f"{method} is not installed")
    core = PROBLEMS[problem]
    inst = instances(core, 3, 10, seed=2)
    try:
        out = solve(core, inst, method, time_limit=0.1, progress=False)
    except ValueError as e:  # an adapter that refuses some variants of its problem says which (its own tests)
        assert "cannot express" in str(e)
        pytest.skip(str(e))
    assert torch.allclose(out.cost, tour_cost(core, inst, out.tours))
    best = "2opt" if "2opt" in applicable(core) else "nearest"  # the strongest heuristic that applies
    greedy = tour_cost(core, inst, heuristic_tours(core, inst, best))
    assert out.cost.mean() <= greedy.mean() + 1e-6
    if problem == "tsp":  # every method finds the optimum of TSP-10
        assert torch.allclose(out.cost, held_karp(inst.locs)[0], atol=1e-5)


def test_solve__rejects_unknown_and_unsupported():
    inst = instances(CVRP, 1, 5)
    with pytest.raises(ValueError, match="unknown method"):
        solve(CVRP, inst, "gurobi", progress=False)
    with pytest.raises(ValueError, match="does not solve cvrp"):
        solve(CVRP, inst, "lkh", progress=False)
    for core in (SDVRP, SPCTSP):
        with pytest.raises(ValueError, match=f"no solver reference exists for {core.label}"):
            solve(core, instances(core, 1, 5), "ortools", progress=False)


def test_repair__trims_long_op_tours_and_tops_up_pctsp_prize():
    op = OP.instance_from({"locs": [[0, 0], [0.5, 0], [1, 0], [1, 1]], "prize": [0, 1, 1, 1], "max_length": 2.5},
                          batched=False)
    tours, n = repair(OP, op, torch.tensor([[1, 2, 3, 0]]))  # length 1 + 1 + sqrt(2): too long
    assert n == 1 and tours[0].tolist()[:3] == [1, 2, 0]
    pc = PCTSP.instance_from({"locs": [[0, 0], [0.1, 0], [0.2, 0], [0.9, 0.9]], "prize": [0, 0.5, 0.6, 0.2],
                              "penalty": [0, 0.1, 0.1, 0.1]})
    tours, n = repair(PCTSP, pc, torch.tensor([[1, 0, 0]]))
    assert n == 1 and math.isfinite(tour_cost(PCTSP, pc, tours).item())
    assert set(tours[0].tolist()) == {0, 1, 2}


def test_solve__exact_shows_progress_per_chunk(capsys):
    """``solve --method exact`` (Held-Karp) reports its progress as its chunks finish, as the other methods do."""
    done = []
    locs = instances(TSP, 5, 6, seed=1).locs
    cost, _ = held_karp(locs, chunk_size=2, done=done.append)
    assert done == [2, 2, 1] and len(cost) == 5
    solve(TSP, instances(TSP, 5, 6, seed=1), "exact", progress=True)
    assert "exact tsp" in capsys.readouterr().err
