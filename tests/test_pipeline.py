"""The best-in-a-time-limit pipeline (agents.references.pipeline) and ``routing-gym eval --decode best --csv``:
never worse than its construction nor than nearest neighbour + 2-opt (each re-costed by tour_cost), within
its time, and CSV rows whose tours re-cost to the cost printed beside them."""
import csv
import time
from pathlib import Path

import pytest
import torch

from agents.inference.local_search import improve, two_opt
from agents.references import pipeline
from agents.references.pipeline import (START_SLACK, best, construction, double_bridge, eliminate_routes,
                                       final_check, pool_search, route_counts, route_lists, savings_start,
                                       search_starts, within_fleet)
from agents.inference.search import decode, pad_tours
from agents.policies.protocol import select_rows
from agents.policies.pretrained import load_pretrained
from agents.references.heuristics import construct, improve_routes, nearest_neighbour_tsp
from routing_gym.problems import get_problem, tour_cost
from tours import instances

DATA = Path(__file__).resolve().parent / "data"


def nearest_neighbour_2opt(problem, inst):
    """Nearest neighbour from node 0 then 2-opt (TSP); the nearest feasible customer then 2-opt within routes."""
    if problem.has_depot:
        return improve_routes(problem, inst, construct(problem, inst))
    tour = nearest_neighbour_tsp(inst.locs)
    return two_opt(inst.locs, torch.cat([tour, tour[:, :1]], dim=1))[:, :-1]


@pytest.mark.parametrize("name, n", [("tsp", 20), ("tsp", 30), ("cvrp", 20), ("op", 20), ("pctsp", 20)])
def test_pipeline__never_worse_than_its_construction_nor_nearest_neighbour_2opt(name, n):
    problem = get_problem(name)
    policy = load_pretrained(name, 20)
    inst = instances(problem, 6, n, seed=3)
    found = best(policy, problem, inst, time_limit=0.05)
    cost = tour_cost(problem, inst, found.tours)  # validates every tour
    assert torch.allclose(cost, found.cost)
    greedy = decode(policy, problem, inst, "greedy").cost  # decoded whenever the heuristic start leaves time
    baseline = tour_cost(problem, inst, nearest_neighbour_2opt(problem, inst))
    assert (cost <= greedy + 1e-9).all() and (cost <= found.construction + 1e-9).all()
    assert (cost <= baseline + 1e-9).all() and torch.allclose(found.baseline, baseline)
    assert (found.cost <= found.searched + 1e-12).all()


@pytest.mark.parametrize("name", ["tsp", "cvrp"])
def test_construction__decodes_the_symmetric_copies_that_fit_in_its_time(name):
    problem = get_problem(name)
    policy = load_pretrained(name, 20)
    inst = instances(problem, 4, 20, seed=5)
    greedy8 = decode(policy, problem, inst, "greedy", augment=8).cost
    ample = construction(policy, problem, inst, time.monotonic() + 60)[0]  # every copy, then multi-start
    assert (ample <= greedy8 + 1e-9).all()
    began = time.monotonic()
    none_left = construction(policy, problem, inst, began)[0]  # the instances as they are, nothing more
    torch.testing.assert_close(none_left, decode(policy, problem, inst, "greedy").cost)


def test_construction__multi_start_only_where_the_search_would_start_from_it(monkeypatch):
    """Given the heuristic starts' costs (``bar``), the multi-start decodes only the instances whose
    construction is within START_SLACK of them; the others keep their greedy x 8 tours."""
    problem = get_problem("cvrp")
    policy = load_pretrained("cvrp", 20)
    inst = instances(problem, 4, 20, seed=5)
    greedy8 = decode(policy, problem, inst, "greedy", augment=8).cost.double()
    decoded = []
    real = pipeline.best_of_copies
    monkeypatch.setattr(pipeline, "best_of_copies",
                        lambda pol, prob, some, copies, **kw: decoded.append((some[0].shape[0], len(copies.transform)))
                        or real(pol, prob, some, copies, **kw))
    bar = torch.tensor([0.5, 1.0, 0.5, 1.0]).double() * greedy8  # rows 1 and 3 within the slack, 0 and 2 far off
    cost = construction(policy, problem, inst, time.monotonic() + 60, bar=bar)[0]
    multi = [rows for rows, copies in decoded[2:]]
    assert decoded[:2] == [(4, 1), (4, 7)] and multi and set(multi) == {2}  # greedy, the transforms, then 2 rows
    torch.testing.assert_close(cost[[0, 2]], greedy8[[0, 2]])
    assert (cost[[1, 3]] <= greedy8[[1, 3]] + 1e-9).all()


def test_pipeline__without_a_policy_searches_from_the_heuristic_start():
    problem = get_problem("tsp")
    inst = instances(problem, 3, 40)
    found = best(None, problem, inst, time_limit=0.1)
    assert torch.isinf(found.construction).all()
    assert (tour_cost(problem, inst, found.tours) <= found.baseline + 1e-9).all()


def test_pipeline__searches_from_every_start_near_the_cheapest():
    """Each start within START_SLACK of its instance's cheapest is searched, the others are not: the result is
    the cheaper of the near starts' local optima (TSP's search is per row, so it matches one search per start)."""
    problem = get_problem("tsp")
    inst = instances(problem, 8, 30, seed=5)
    first = nearest_neighbour_2opt(problem, inst)
    second = torch.stack([torch.randperm(30, generator=torch.Generator().manual_seed(s)) for s in range(8)])
    c1, c2 = tour_cost(problem, inst, first), tour_cost(problem, inst, second)
    c2 = torch.where(torch.arange(8) % 2 == 0, c1 * (1 + START_SLACK / 2), c2)  # near on even rows (cost only)
    cost, tours = search_starts(problem, inst, [(c1, first), (c2, second)], time.monotonic() + 60)
    alone1, alone2 = improve(problem, inst, first)[1], improve(problem, inst, second)[1]
    even = torch.arange(8) % 2 == 0
    assert torch.allclose(cost[even], torch.minimum(alone1, alone2)[even])
    assert torch.allclose(cost[~even], alone1[~even]) and (c2[~even] > c1[~even] * (1 + START_SLACK)).all()
    assert torch.allclose(tour_cost(problem, inst, tours), cost)


def test_pipeline__double_bridge_keeps_every_node():
    tours = torch.stack([torch.randperm(30, generator=torch.Generator().manual_seed(s)) for s in range(50)])
    kicked = double_bridge(tours, torch.Generator().manual_seed(0))
    assert (kicked.sort(dim=1).values == torch.arange(30)).all()
    assert (kicked[:, 0] == tours[:, 0]).all() and not torch.equal(kicked, tours)


def test_pipeline__pool_search_keeps_every_customer_within_the_capacity_and_shortens():
    """The iterated search on routes (ruin, recreate through the ejection pool) returns, per instance, a tour
    that serves every customer within the capacity (the unit's replay), costs what it says and is never longer
    than its input; in a second per instance of 40 customers it shortens the savings routes somewhere."""
    problem = get_problem("cvrp")
    inst = instances(problem, 4, 40, seed=4)
    tours = savings_start(problem, inst)[1]
    cost = tour_cost(problem, inst, tours)
    found_cost, found = pool_search(problem, inst, cost, tours, time.monotonic() + 4 * 1.0,
                                    torch.Generator().manual_seed(0))
    check_routes(problem, inst, found, torch.full((4,), 40))
    torch.testing.assert_close(tour_cost(problem, inst, found), found_cost)
    assert (found_cost <= cost).all() and (found_cost < cost - 1e-6).any()


def test_pipeline__routes_start_from_the_savings_where_a_capacity_alone_binds():
    problem = get_problem("cvrp")
    inst = instances(problem, 4, 50, seed=6)
    found = best(load_pretrained("cvrp", 20), problem, inst, time_limit=0.3)
    assert (found.cost <= savings_start(problem, inst)[0] + 1e-9).all()
    assert torch.allclose(tour_cost(problem, inst, found.tours), found.cost)


@pytest.mark.parametrize("name", ["tsp", "cvrp"])
def test_pipeline__a_budget_the_heuristic_starts_spend_runs_no_construction(name):
    """At a time limit the heuristic starts alone overrun (1 µs an instance), the policy is never called: the
    result is the cheapest heuristic start (NN + 2-opt; CVRP's savings too), valid."""
    problem = get_problem(name)
    inst = instances(problem, 4, 60)

    class Untouchable:
        def precompute(self, obs):
            raise AssertionError("the construction started after the deadline")

        def log_probs(self, cache, obs):
            raise AssertionError("the construction started after the deadline")

    found = best(Untouchable(), problem, inst, time_limit=1e-6)
    assert torch.allclose(tour_cost(problem, inst, found.tours), found.cost)
    assert torch.isinf(found.construction).all() and (found.cost <= found.baseline + 1e-9).all()


@pytest.mark.parametrize("name", ["tsp", "cvrp"])
def test_final_check__replays_only_the_tours_no_start_holds(name, monkeypatch):
    """The pipeline's last replay: rows whose tour is a start keep the start's replayed cost (nothing
    replayed); the others are replayed, and an infeasible one is an error."""
    problem = get_problem(name)
    inst = instances(problem, 4, 12)
    start = nearest_neighbour_2opt(problem, inst)
    start_cost = tour_cost(problem, inst, start)
    replayed = []
    real = pipeline.replay
    monkeypatch.setattr(pipeline, "replay", lambda p, i, t: replayed.append(t.shape[0]) or real(p, i, t))
    assert torch.equal(final_check(problem, inst, start, [(start_cost, start)]), start_cost.double())
    assert replayed == []
    # other valid tours: TSP's reversed, CVRP's nearest feasible customer before 2-opt
    other = torch.flip(start, dims=(1,)) if name == "tsp" else construct(problem, inst)
    width = max(other.shape[1], start.shape[1])
    differs = int((pad_tours(other, width) != pad_tours(start, width)).any(dim=1).sum()) if name == "cvrp" else 4
    assert differs > 0
    cost = final_check(problem, inst, other, [(start_cost, start)])
    assert replayed == [differs] and torch.allclose(cost, tour_cost(problem, inst, other).double())
    broken = start.clone()
    broken[0, 1] = broken[0, 0]  # the first customer twice: the unit refuses it
    with pytest.raises(RuntimeError, match="infeasible tour"):
        final_check(problem, inst, broken, [(start_cost, start)])


def test_pipeline__respects_its_time_limit_roughly():
    problem = get_problem("tsp")
    policy = load_pretrained("tsp", 50)
    inst = instances(problem, 2, 100)
    start = time.perf_counter()
    best(policy, problem, inst, time_limit=0.5)
    elapsed = time.perf_counter() - start
    assert 0.5 <= elapsed < 2 * 0.5 + 1.5  # the budget is spent on search, overrun by at most one step


# -- routing-gym eval --decode best --csv ------------------------------------------------------------
def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_eval__best_csv_rows_of_real_instances_recost_to_the_printed_cost(tmp_path, capsys):
    pytest.importorskip("vrplib")
    from agents.apps.cli import main
    from routing_gym import tsplib

    files = [DATA / "eil51.tsp", DATA / "E-n22-k4.vrp"]
    out = tmp_path / "rows.csv"
    assert main(["eval", "--instances", *map(str, files), "--policy", "pretrained", "--decode", "best",
                 "--time-limit", "0.2", "--csv", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    rows = read_csv(out)
    assert [r["name"] for r in rows] == ["eil51", "E-n22-k4"]
    for path, row in zip(files, rows):
        real = tsplib.load(path)
        index = {int(node_id): i for i, node_id in enumerate(real.node_ids)}
        tour = [index[int(t)] for t in row["tour"].split()]
        if real.problem == "cvrp":
            tour += [0]  # the depot's id between routes; the last route returns to it
            assert int(row["routes"]) == tour.count(0)
        else:
            assert sorted(tour) == list(range(len(real.node_ids)))
        assert tsplib.cost(real, tour) == float(row["cost"])
        assert f"| {row['name']} | {real.problem} | {row['n']} | {float(row['cost']):g} |" in printed
        assert float(row["gap"]) == pytest.approx(tsplib.gap(real, float(row["cost"])), abs=1e-4)
        assert 0 < float(row["seconds"]) < 0.2 + 2.0


def test_eval__best_keeps_to_the_fleet_in_one_run_within_its_time_limit(monkeypatch, capsys):
    """Other decodings of a CVRPLIB file with more routes than its k are decoded again under the fixed fleet;
    --decode best runs once, given k (that would take its time limit twice), sectors once without it (plain
    CVRP sub-problems)."""
    pytest.importorskip("vrplib")
    from agents.apps.cli import main
    from agents.apps.commands import eval_files

    decoded = []
    real_decode = eval_files.decode_with

    def decode_with(args, policy, problem, instances, options, fleet=None):
        decoded.append((problem.name, None if fleet is None else fleet.tolist()))
        return real_decode(args, policy, problem, instances, options, fleet)

    monkeypatch.setattr(eval_files, "decode_with", decode_with)
    monkeypatch.setattr(eval_files, "count_routes", lambda tours: 99)  # more than any k
    expected = {"greedy": [("cvrp", None), ("cvrpmvc", None)], "best": [("cvrp", [4])], "sectors": [("cvrp", None)]}
    for decode, calls in expected.items():
        decoded.clear()
        assert main(["eval", "--instances", str(DATA / "E-n22-k4.vrp"), "--policy", "pretrained", "--decode", decode,
                     "--time-limit", "0.05", "--no-progress"]) == 0
        assert decoded == calls
    assert "or --decode sectors was given" in capsys.readouterr().out


def fleet_case(seed=5, n=40, batch=6):
    """CVRP instances and their savings routes, with a fleet of one route fewer than the savings use, or the
    fewest the total demand allows (here 3 of the 6 have a route to eliminate, and all can)."""
    problem = get_problem("cvrp")
    inst = instances(problem, batch, n, seed=seed)
    tours = savings_start(problem, inst)[1]
    least = inst.demand.double().sum(dim=1).ceil().long()
    return problem, inst, tours, torch.maximum(route_counts(tours) - 1, least)


def check_routes(problem, inst, tours, fleet):
    """Every customer once, every load within the capacity (the unit's replay), at most ``fleet`` routes."""
    n = inst.locs.shape[1]
    served = tours.sort(dim=1).values
    assert (served[:, -(n - 1):] == torch.arange(1, n)).all() and (served[:, :-(n - 1)] == 0).all()
    assert torch.isfinite(tour_cost(problem, inst, tours)).all()
    assert (route_counts(tours) <= fleet).all()


def test_pipeline__route_elimination_puts_the_routes_on_the_fleet_or_says_it_could_not():
    import random

    from agents.inference.local_search import distances

    problem, inst, tours, fleet = fleet_case()
    assert (route_counts(tours) > fleet).any()  # the case has routes to eliminate
    found = []
    for row in range(len(fleet)):
        routes = eliminate_routes(route_lists(tours[row].tolist()), inst.demand[row].double().tolist(),
                                  distances(inst.locs[row:row + 1])[0].tolist(), int(fleet[row]), random.Random(0),
                                  10_000)
        assert routes is not None and len(routes) <= int(fleet[row])
        found.append([v for r in routes for v in (*r, 0)])
    width = max(map(len, found))
    check_routes(problem, inst, torch.tensor([t + [0] * (width - len(t)) for t in found]), fleet)
    # fewer routes than the demand needs: no way there, None (not a tour over capacity)
    least = int(inst.demand[0].double().sum().ceil())
    assert eliminate_routes(route_lists(tours[0].tolist()), inst.demand[0].double().tolist(),
                            distances(inst.locs[:1])[0].tolist(), least - 1, random.Random(0), 10_000) is None


def test_within_fleet__draws_its_randomness_from_the_generator(monkeypatch):
    """The route elimination is seeded from the pipeline's generator: the same seed gives the same routes,
    another seed another random stream (``best(generator=...)`` varies every random choice)."""
    problem, inst, tours, fleet = fleet_case()
    cost = tour_cost(problem, inst, tours)
    runs = [within_fleet(problem, inst, cost, tours, fleet, float("inf"), torch.Generator().manual_seed(0))
            for _ in range(2)]
    assert torch.equal(runs[0][1], runs[1][1])
    first_draws = []
    real = pipeline.eliminate_routes
    monkeypatch.setattr(pipeline, "eliminate_routes",
                        lambda routes, demand, dist, k, rng, *a: first_draws.append(rng.getstate()) or
                        real(routes, demand, dist, k, rng, *a))
    states = {}
    for seed in (0, 1, 0):
        first_draws.clear()
        within_fleet(problem, inst, cost, tours, fleet, float("inf"), torch.Generator().manual_seed(seed))
        assert states.setdefault(seed, first_draws[0]) == first_draws[0]  # seed 0 twice: the same stream
    assert states[0] != states[1]


def test_pipeline__pool_search_within_a_fleet_opens_no_route_beyond_it():
    problem, inst, tours, fleet = fleet_case()
    cost, tours = within_fleet(problem, inst, tour_cost(problem, inst, tours), tours, fleet, float("inf"),
                               torch.Generator().manual_seed(0))
    check_routes(problem, inst, tours, fleet)
    found_cost, found = pool_search(problem, inst, cost, tours, time.monotonic() + 6 * 0.3,
                                    torch.Generator().manual_seed(1), fleet)
    check_routes(problem, inst, found, fleet)
    torch.testing.assert_close(tour_cost(problem, inst, found), found_cost)
    assert (found_cost <= cost).all() and (found_cost < cost - 1e-6).any()


def test_pipeline__keeps_to_a_fleet_it_is_given(monkeypatch):
    """Given a fleet, the pipeline's tours keep to it: those of its first search (here the savings routes, so
    that the routes to eliminate do not hang on the machine's speed) are put on the fleet, and the iterated
    search from there opens no route beyond it."""
    from agents.references import pipeline

    problem, inst, tours, fleet = fleet_case()
    monkeypatch.setattr(pipeline, "search_starts",
                        lambda problem, inst, starts, deadline: (tour_cost(problem, inst, tours), tours))
    found = best(None, problem, inst, 0.3, fleet=fleet)
    check_routes(problem, inst, found.tours, fleet)
    torch.testing.assert_close(found.cost, tour_cost(problem, inst, found.tours))
    assert (found.cost < found.searched).any()  # the iterated search ran


def test_pipeline__the_tsp_start_is_the_units_nearest_neighbour_tour():
    """The heuristic start of a closed tour is nearest neighbour on the distances: the tour the unit's greedy
    construction makes, stepped through its dynamics."""
    problem = get_problem("tsp")
    inst = instances(problem, 8, 60, seed=3)
    assert torch.equal(nearest_neighbour_tsp(inst.locs), construct(problem, inst))


def test_pipeline__a_bad_fleet_is_refused_by_name():
    problem, inst, _, fleet = fleet_case(batch=2)
    for bad in (fleet[:1], fleet.float(), fleet * 0):
        with pytest.raises(ValueError, match="fleet must hold one whole number"):
            best(None, problem, inst, 0.01, fleet=bad)
    tsp = get_problem("tsp")
    with pytest.raises(ValueError, match="fleet: tsp has no routes"):
        best(None, tsp, instances(tsp, 2, 10), 0.01, fleet=fleet)


def test_pipeline__no_pool_search_where_the_unit_refuses_capacity_only_routes(monkeypatch):
    """CVRPTW loads a demand too, but its time windows refuse the savings routes, and with them what the pool
    search builds from loads and lengths alone: it gets no share of the budget there; CVRP does."""
    from agents.references import pipeline

    calls = []
    monkeypatch.setattr(pipeline, "pool_search", lambda *a, **k: calls.append(a[0].name) or (a[2], a[3]))
    for name in ("cvrptw", "cvrp"):
        problem = get_problem(name)
        found = best(None, problem, instances(problem, 2, 15), 0.05)
        assert torch.isfinite(found.cost).all()
    assert calls == ["cvrp"]


@pytest.mark.parametrize("name, n", [("tsp", 60), ("cvrp", 50)])
def test_pipeline__revision_by_the_shipped_shpp_model_keeps_every_node_and_is_never_worse(name, n, monkeypatch):
    problem = get_problem(name)
    inst = instances(problem, 3, n, seed=5)
    reviser = pipeline.shipped_reviser()
    assert reviser is not None  # agents/weights/shpp20.pt is shipped
    calls = []
    real_revise = pipeline.revise

    def counted(*args, **kwargs):
        tours, cost = real_revise(*args, **kwargs)
        calls.append(cost)
        return tours, cost

    monkeypatch.setattr(pipeline, "revise", counted)
    found = best(None, problem, inst, time_limit=0.3, perturbations=0, reviser=reviser)
    assert len(calls) == 1  # the searched tours were revised
    cost = tour_cost(problem, inst, found.tours)  # validates every tour: every node (customer) kept, loads held
    assert torch.allclose(cost, found.cost) and (found.cost <= found.searched + 1e-9).all()
    assert (found.cost <= calls[0] + 1e-9).all()  # the search after the revision never lengthens it


def test_eval__revise_is_a_piece_of_best_only(capsys):
    from agents.apps.cli import main

    assert main(["eval", "--problem", "tsp", "--num-nodes", "20", "--policy", "pretrained", "--revise",
                 "--num-instances", "2", "--no-progress"]) != 0
    assert "--revise is a piece of --decode best, not of --decode greedy" in capsys.readouterr().err
    assert main(["eval", "--problem", "tsp", "--num-nodes", "50", "--policy", "pretrained", "--decode", "best",
                 "--revise", "--time-limit", "0.1", "--num-instances", "2", "--no-progress"]) == 0
    assert "best in 0.1 s per instance, revised: mean cost" in capsys.readouterr().out


@pytest.mark.parametrize("name, n", [("tsp", 100), ("cvrp", 50)])
def test_eval__best_on_generated_instances_of_a_size_not_shipped_uses_the_nearest_model(name, n, tmp_path, capsys):
    """Issue #31, item 4: `--decode best --csv` on generated instances of any size, as on files."""
    from agents.apps.cli import main

    out = tmp_path / "rows.csv"
    assert main(["eval", "--problem", name, "--num-nodes", str(n), "--policy", "pretrained", "--decode", "best",
                 "--time-limit", "0.1", "--num-instances", "2", "--seed", "3", "--csv", str(out),
                 "--no-progress"]) == 0
    size = 50 if name == "tsp" else 20
    assert f"no shipped {name} model for n = {n}; using the {name}-{size} model" in capsys.readouterr().err
    problem = get_problem(name)
    inst = instances(problem, 2, n, seed=3)
    rows = read_csv(out)
    assert [int(r["n"]) for r in rows] == [n, n]
    for i, row in enumerate(rows):
        tour = [int(t) for t in row["tour"].split()] + ([0] if problem.has_depot else [])
        assert sorted(set(tour)) == list(range(n + problem.has_depot))  # every node visited
        cost = tour_cost(problem, select_rows(inst, torch.tensor([i])), torch.tensor([tour]))  # the same instance
        assert float(cost) == pytest.approx(float(row["cost"]), rel=1e-6)


def test_pipeline__long_tours_search_each_kick_within_a_window(monkeypatch):
    """TSP tours longer than REPAIR_WINDOW + 20: each double bridge is searched only around itself; the result
    is a tour of every node, its cost the length the unit replays, never longer, and shorter after 1 s."""
    problem = get_problem("tsp")
    n = pipeline.REPAIR_WINDOW + 60
    inst = instances(problem, 2, n, seed=4)
    start = nearest_neighbour_2opt(problem, inst)
    cost = tour_cost(problem, inst, start)
    calls = []
    monkeypatch.setattr(pipeline, "improve", lambda *a, **k: calls.append("improve"))  # not the whole search
    real_window = pipeline.repaired_in_window
    monkeypatch.setattr(pipeline, "repaired_in_window", lambda *a: calls.append("window") or real_window(*a))
    found_cost, found = pipeline.perturbation_search(problem, inst, cost, start, time.monotonic() + 1.0, 4,
                                                     torch.Generator().manual_seed(0))
    assert calls and set(calls) == {"window"}
    assert (found.sort(dim=1).values == torch.arange(n)).all()
    assert torch.allclose(tour_cost(problem, inst, found), found_cost)
    assert (found_cost <= cost + 1e-9).all() and (found_cost < cost - 1e-6).all()
