"""Reference solutions from exact and strong solvers: one entry, :func:`solve`.

==========  ==========================  =====================================================================
method      problems                    what runs (package)
==========  ==========================  =====================================================================
``exact``   TSP (N <= 20)               Held-Karp dynamic program, batched (:mod:`agents.references.exact`; no extra)
``lkh``     TSP, ATSP, SHPP             LKH-3 (Helsgaun) through ``elkai``, whose wheel bundles LKH; ATSP as
                                        an explicit full matrix (:func:`lkh_atsp`); SHPP as an ATSP whose only
                                        cheap edge into the start leaves the end (:func:`lkh_shpp`)
``ortools`` TSP, CVRP, OP, PCTSP        OR-Tools routing: guided local search; OP and PCTSP drop nodes via
                                        disjunctions (penalty = prize resp. penalty), OP bounds a distance
                                        dimension, PCTSP puts a minimum on a prize dimension
``pyvrp``   TSP, CVRP, OP, PCTSP,       PyVRP's iterated local search; OP and PCTSP as prize-collecting
            CVRPTW, CVRPMVC, MTVRP,     (optional clients); OP bounds ``max_distance``; PCTSP's prize
            ACVRP                       minimum by Lagrangian relaxation (below); CVRPTW with PyVRP's own
                                        time windows (:func:`pyvrp_time_windows`); CVRPMVC with
                                        ``num_available = num_vehicles`` (:func:`pyvrp_fixed_fleet`);
                                        MTVRP's variants but B (:func:`pyvrp_mtvrp`); ACVRP from its matrix
==========  ==========================  =====================================================================

Integer data. The solvers work in integers: coordinates and distances are scaled by :data:`SCALE`
(10^6, so an edge is rounded by at most 5e-7, negligible next to the 1e-4 resolution of the gaps we
report; the returned cost is always recomputed from the tours in floats by
:func:`routing_gym.problems.tour_cost`). OP distances are rounded *up* and the length budget down by
one unit per node, so a tour feasible for the solver stays feasible in the env's float32 dynamics. OP
prizes become ``round(prize * 10^4)`` times a weight larger than any tour length, so that prize comes
first and length breaks ties. OR-Tools weighs the distances themselves; PyVRP bounds the 10^6-scaled
distances (``max_distance``) but charges none of them (with the 10^6 weight its penalty-based search
returned over-length tours at short time limits): it charges the tour length in units of 10^-2,
given as durations, and weighs the prizes above that. CVRP demands become ``round(demand * 10^6)``
against a capacity of 10^6 (the env's 1e-5 tolerance absorbs the rounding). PCTSP prizes are rounded
down and the prize minimum raised by one unit per node.

PCTSP in PyVRP: PyVRP has no minimum on the prize collected. We solve the Lagrangian problem (each
optional client's PyVRP prize = its penalty + lambda * its prize) for lambda = 0, then for lambda
growing fourfold until the collected prize reaches 1, then bisect; at most 6 solves, each with a sixth
of the time limit, and the cheapest tour that collects 1 is kept.

Every tour is replayed through the env's dynamics; the rare tour that float rounding makes infeasible
is repaired (OP: the customer of least prize per length saved dropped, repeatedly; PCTSP: the nodes
of highest prize inserted at their cheapest position until the minimum is met), and
:attr:`Solved.repaired` counts them.
"""
from __future__ import annotations

import importlib.util
import math
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Callable, NamedTuple

import numpy as np
import torch
from torch import Tensor

from routing_gym.problems import OP, PCTSP, get_problem, tour_cost

from ..inference.rollout import replay
from ..policies.protocol import select_rows

SCALE = 10 ** 6  # unit-square coordinates -> integer distances
PRIZE_RESOLUTION = 10 ** 4  # OP prizes rounded to 1e-4
PACKAGES = {"lkh": "elkai", "ortools": "ortools", "pyvrp": "pyvrp"}  # method -> PyPI package (extra)
SUPPORTED = {"exact": ("tsp",), "lkh": ("tsp", "atsp", "shpp"), "ortools": ("tsp", "cvrp", "op", "pctsp"),
             "pyvrp": ("tsp", "cvrp", "op", "pctsp", "cvrptw", "cvrpmvc", "mtvrp", "acvrp")}
METHODS = tuple(SUPPORTED)


class Solved(NamedTuple):
    cost: Tensor  # (B,) float64 cost of each tour, by tour_cost
    tours: Tensor  # (B, S) int64 actions, padded with the no-op node
    seconds: float  # wall-clock time of the whole batch
    repaired: int  # tours that needed a repair after float rounding (see the module docstring)


def available(method: str) -> bool:
    """Whether ``method`` can run here (its package is installed)."""
    return method == "exact" or (method in PACKAGES and importlib.util.find_spec(PACKAGES[method]) is not None)


def solve(problem, instances, method: str, time_limit: float = 1.0, *, progress: bool = True, seed: int = 0,
          workers: int = 1, distances=None) -> Solved:
    """Solve a batch of instances with ``method`` (see the module table).

    Args:
        problem: a problem class or name.
        instances: the problem's ``Instance`` (B instances, any device; solved on the CPU).
        method: ``"exact"``, ``"lkh"``, ``"ortools"`` or ``"pyvrp"``.
        time_limit: seconds per instance for the search-based solvers (``exact`` ignores it).
        progress: show a tqdm progress bar over the instances.
        seed: the solvers' random seed.
        workers: processes solving instances in parallel (1: in this process).
        distances: optional (B, N, N) integer distances that the solver minimises instead of the scaled
            Euclidean ones (TSP and CVRP; e.g. :func:`routing_gym.tsplib.distance_matrix` of a TSPLIB
            instance, so that the solver works in the file's own rounding convention). The returned
            cost is still the env's (unit-square) cost of the tours.

    Raises:
        ValueError: an unknown method, a problem no solver handles (SDVRP, SPCTSP) or the method does not
            handle, or its package missing (the message names the pip extra); a time limit that is not a
            positive finite number, fewer than one worker, or no instances.
    """
    problem = get_problem(problem)
    if method not in SUPPORTED:
        raise ValueError(f"unknown method {method!r}; choose one of {METHODS}")
    if not any(problem.name in names for names in SUPPORTED.values()):
        raise ValueError(f"no solver reference exists for {problem.label}: the solvers handle "
                         f"{sorted({n for names in SUPPORTED.values() for n in names})}; use a heuristic "
                         f"(agents.references.heuristics) instead")
    if problem.name not in SUPPORTED[method]:
        raise ValueError(f"method {method!r} does not solve {problem.name}; it handles {SUPPORTED[method]}")
    if isinstance(time_limit, bool) or not isinstance(time_limit, (int, float)) or not math.isfinite(time_limit) \
            or time_limit <= 0:
        raise ValueError(f"time_limit must be a positive, finite number of seconds, got {time_limit!r}")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    if len(instances[0]) == 0:
        raise ValueError("no instances to solve (the batch is empty)")
    if not available(method):
        raise ValueError(f"method {method!r} needs the package {PACKAGES[method]!r}: "
                         f"pip install 'routing-gym[solvers]' (or pip install {PACKAGES[method]})")
    if distances is not None and problem.name not in ("tsp", "cvrp", "acvrp"):
        raise ValueError("distances are accepted for TSP, CVRP and ACVRP only")
    start = time.perf_counter()
    if method == "exact":
        from .exact import held_karp

        bar = tqdm_or_none(len(instances.locs), f"exact {problem.name}", progress)
        tours = held_karp(instances.locs.cpu(), done=bar.update if bar is not None else None)[1].to(instances.locs.device)
        if bar is not None:
            bar.close()
        return Solved(tour_cost(problem, instances, tours), tours, time.perf_counter() - start, 0)
    arrays = {k: v.detach().cpu().numpy() for k, v in instances._asdict().items()}
    data = [{k: v[i] for k, v in arrays.items()} for i in range(len(instances[0]))]
    if distances is not None:
        for d, matrix in zip(data, np.asarray(distances)):
            d["distances"] = np.rint(matrix).astype(np.int64)
    jobs = [(problem.name, method, d, time_limit, seed) for d in data]
    bar = tqdm_or_none(len(jobs), f"{method} {problem.name}", progress)
    if workers > 1:
        with ProcessPoolExecutor(workers) as pool:
            results = [r for r in _tick(pool.map(solve_one, jobs, chunksize=4), bar)]
    else:
        results = [r for r in _tick(map(solve_one, jobs), bar)]
    if bar is not None:
        bar.close()
    tours = pad([torch.as_tensor(r, dtype=torch.long) for r in results], problem).to(instances[0].device)
    tours, repaired = repair(problem, instances, tours)
    return Solved(tour_cost(problem, instances, tours), tours, time.perf_counter() - start, repaired)


def tqdm_or_none(total: int, desc: str, enabled: bool):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, leave=False)


def _tick(results, bar):
    for r in results:
        if bar is not None:
            bar.update(1)
        yield r


def pad(tours: list[Tensor], problem) -> Tensor:
    """Tours of different lengths as one (B, S) tensor padded with the depot (depot problems only pad)."""
    length = max(len(t) for t in tours)
    out = torch.zeros(len(tours), length, dtype=torch.long)
    for i, t in enumerate(tours):
        out[i, :len(t)] = t
    return out


def solve_one(job: tuple) -> list[int]:
    """One instance: ``(problem name, method, arrays, time limit, seed) -> actions`` (env format)."""
    name, method, data, time_limit, seed = job
    return SOLVERS[method](name, data, time_limit, seed)


# -- integer data ---------------------------------------------------------------------------------
def solver_distances(data: dict, round_up: bool = False) -> np.ndarray:
    """The integer distances a solver minimises: the user's, the scaled cost matrix (ACVRP), or the scaled
    Euclidean ones."""
    if "distances" in data:
        return data["distances"]
    if "cost_matrix" in data:
        return np.rint(data["cost_matrix"].astype(np.float64) * SCALE).astype(np.int64)
    return int_distances(data["locs"], round_up)


def int_distances(locs: np.ndarray, round_up: bool = False) -> np.ndarray:
    d = np.sqrt(((locs[:, None, :].astype(np.float64) - locs[None, :, :]) ** 2).sum(-1)) * SCALE
    return (np.ceil(d) if round_up else np.rint(d)).astype(np.int64)


def op_budget(data: dict) -> int:
    """OP length bound in solver units: rounded down, minus one unit per node (see the module docstring)."""
    return int(math.floor((float(data["max_length"]) - 1e-6) * SCALE)) - len(data["locs"])


def op_prizes(data: dict) -> np.ndarray:
    """OP prizes as integers weighted above any tour length, so that prize comes first."""
    weight = op_budget(data) + 1
    return np.rint(data["prize"].astype(np.float64) * PRIZE_RESOLUTION).astype(np.int64) * weight


def pctsp_minimum(data: dict) -> tuple[np.ndarray, int]:
    """PCTSP prizes rounded down and the minimum to collect (1 plus one unit per node; everything when
    the prizes add up to less)."""
    prize = np.floor(data["prize"].astype(np.float64) * SCALE).astype(np.int64)
    return prize, int(min(SCALE + len(prize), prize.sum()))


def routes_to_actions(name: str, routes: list[list[int]]) -> list[int]:
    """Solver routes (node lists without the depot) in the env's action format."""
    routes = [r for r in routes if r]
    if name == "tsp":
        return routes[0]
    actions: list[int] = []
    for r in routes:
        actions += r + [0]
    return actions or [0]


# -- LKH (elkai) ----------------------------------------------------------------------------------
def lkh(name: str, data: dict, time_limit: float, seed: int) -> list[int]:
    from elkai import _elkai  # the bundled LKH-3; elkai's public classes take no time limit

    if name == "atsp":
        return lkh_atsp(data, time_limit, seed)
    if name == "shpp":
        return lkh_shpp(data, time_limit, seed)
    if "distances" in data:
        d = data["distances"]
        problem = (f"TYPE : TSP\nDIMENSION : {len(d)}\nEDGE_WEIGHT_TYPE : EXPLICIT\nEDGE_WEIGHT_FORMAT : FULL_MATRIX\n"
                   "EDGE_WEIGHT_SECTION\n" + "".join(" ".join(map(str, row)) + "\n" for row in d.tolist()))
    else:
        xy = np.rint(data["locs"].astype(np.float64) * SCALE).astype(np.int64)
        problem = (f"TYPE : TSP\nDIMENSION : {len(xy)}\nEDGE_WEIGHT_TYPE : EUC_2D\nNODE_COORD_SECTION\n"
                   + "".join(f"{i + 1} {x} {y}\n" for i, (x, y) in enumerate(xy)))
    params = f"RUNS = 1\nPROBLEM_FILE = :stdin:\nTIME_LIMIT = {time_limit}\nSEED = {seed + 1}\n"
    return [v - 1 for v in _elkai.solve_problem(params, problem)]  # what elkai's own classes call


def lkh_atsp(data: dict, time_limit: float, seed: int) -> list[int]:
    """An ATSP tour by LKH-3: the ``cost_matrix`` scaled by :data:`SCALE` and rounded, given as LKH's
    ``TYPE : ATSP`` with an ``EXPLICIT`` ``FULL_MATRIX`` (what ``elkai.DistanceMatrix(m).solve_tsp()``
    writes for an asymmetric ``m``, here with a time limit); LKH returns the tour in the direction it is
    travelled, row node to column node. Two nodes have one tour, returned without a solver (LKH needs 3)."""
    from elkai import _elkai

    d = np.rint(data["cost_matrix"].astype(np.float64) * SCALE).astype(np.int64)
    if len(d) < 3:
        return list(range(len(d)))
    problem = (f"TYPE : ATSP\nDIMENSION : {len(d)}\nEDGE_WEIGHT_TYPE : EXPLICIT\nEDGE_WEIGHT_FORMAT : FULL_MATRIX\n"
               "EDGE_WEIGHT_SECTION\n" + "".join(" ".join(map(str, row)) + "\n" for row in d.tolist()))
    params = f"RUNS = 1\nPROBLEM_FILE = :stdin:\nTIME_LIMIT = {time_limit}\nSEED = {seed + 1}\n"
    return [v - 1 for v in _elkai.solve_problem(params, problem)]


def lkh_shpp(data: dict, time_limit: float, seed: int) -> list[int]:
    """A shortest Hamiltonian path from node 0 to node N - 1 by LKH-3, as an ATSP: the scaled, rounded
    Euclidean distances, except that every edge into the start costs more than a path through all nodes
    (the path 0, 1, ..., N - 1, plus one) but the edge from the end, which costs 0. A tour that enters the
    start from anywhere but the end then costs more than one that closes the path from the end, so the
    optimal tour is the optimal path closed by that free edge. ``PRECISION = 1`` keeps LKH's internal costs
    (the distances times the precision, 100 by default) inside its integers. Returns the actions: the path
    after the start. Fewer than 3 nodes have one path, returned without a solver."""
    from elkai import _elkai

    n = len(data["locs"])
    if n < 3:
        return list(range(1, n))
    d = int_distances(data["locs"])
    d[:, 0] = int(d[np.arange(n - 1), np.arange(1, n)].sum()) + 1
    d[n - 1, 0] = d[0, 0] = 0
    problem = (f"TYPE : ATSP\nDIMENSION : {n}\nEDGE_WEIGHT_TYPE : EXPLICIT\nEDGE_WEIGHT_FORMAT : FULL_MATRIX\n"
               "EDGE_WEIGHT_SECTION\n" + "".join(" ".join(map(str, row)) + "\n" for row in d.tolist()))
    params = f"RUNS = 1\nPROBLEM_FILE = :stdin:\nTIME_LIMIT = {time_limit}\nSEED = {seed + 1}\nPRECISION = 1\n"
    tour = [v - 1 for v in _elkai.solve_problem(params, problem)]
    at = tour.index(0)
    path = tour[at:] + tour[:at]
    if path[-1] != n - 1:
        raise RuntimeError(f"LKH's tour does not close the path from the end: {path}")
    return path[1:]


# -- OR-Tools -------------------------------------------------------------------------------------
def ortools(name: str, data: dict, time_limit: float, seed: int) -> list[int]:
    from ortools.constraint_solver import pywrapcp, routing_enums_pb2

    n = len(data["locs"])
    dist = solver_distances(data, round_up=name == "op")
    vehicles = 1
    if name == "cvrp":
        demand = np.rint(data["demand"].astype(np.float64) * SCALE).astype(np.int64)
        vehicles = min(n - 1, 2 * math.ceil(demand.sum() / SCALE) + 1)
    manager = pywrapcp.RoutingIndexManager(n, vehicles, 0)
    routing = pywrapcp.RoutingModel(manager)
    transit = routing.RegisterTransitMatrix(dist.tolist())
    routing.SetArcCostEvaluatorOfAllVehicles(transit)
    if name == "cvrp":
        load = routing.RegisterUnaryTransitVector(demand.tolist())
        routing.AddDimensionWithVehicleCapacity(load, 0, [SCALE] * vehicles, True, "load")
    elif name == "op":
        routing.AddDimension(transit, 0, op_budget(data), True, "length")
        for i, p in enumerate(op_prizes(data)[1:], start=1):
            routing.AddDisjunction([manager.NodeToIndex(i)], int(p))
    elif name == "pctsp":
        prize, minimum = pctsp_minimum(data)
        gained = routing.RegisterUnaryTransitVector(prize.tolist())
        routing.AddDimension(gained, 0, int(prize.sum()), True, "prize")
        routing.GetDimensionOrDie("prize").CumulVar(routing.End(0)).SetMin(minimum)
        for i, p in enumerate(np.rint(data["penalty"].astype(np.float64) * SCALE).astype(np.int64)[1:], start=1):
            routing.AddDisjunction([manager.NodeToIndex(i)], int(p))
    params = pywrapcp.DefaultRoutingSearchParameters()
    params.first_solution_strategy = routing_enums_pb2.FirstSolutionStrategy.PATH_CHEAPEST_ARC
    params.local_search_metaheuristic = routing_enums_pb2.LocalSearchMetaheuristic.GUIDED_LOCAL_SEARCH
    params.time_limit.FromMilliseconds(max(1, int(time_limit * 1000)))
    solution = routing.SolveWithParameters(params)
    if solution is None:
        return [0] if name in ("op", "pctsp") else list(range(1, n)) if name == "cvrp" else list(range(n))
    routes = []
    for v in range(vehicles):
        route, index = [], solution.Value(routing.NextVar(routing.Start(v)))
        while not routing.IsEnd(index):
            route.append(manager.IndexToNode(index))
            index = solution.Value(routing.NextVar(index))
        routes.append(route)
    if name == "tsp":
        routes = [[0] + routes[0]]
    return routes_to_actions(name, routes)


# -- PyVRP ----------------------------------------------------------------------------------------
def pyvrp_routes(data: dict, dist: np.ndarray, *, demand=None, prize=None, vehicles: int = 1,
                 max_distance: int | None = None, distance_cost: int = 1, duration: np.ndarray | None = None,
                 time_limit: float, seed: int) -> tuple[list[list[int]], bool, int]:
    """Solve one PyVRP model; ``(routes as our node lists, feasible, PyVRP's distance of them)``."""
    import pyvrp
    from pyvrp.stop import MaxRuntime

    model = pyvrp.Model()
    locs = data["locs"].astype(np.float64) * SCALE if "locs" in data else np.zeros((len(dist), 2))  # matrix only
    model.add_depot(model.add_location(x=float(locs[0, 0]), y=float(locs[0, 1])))
    for i in range(1, len(locs)):
        model.add_client(model.add_location(x=float(locs[i, 0]), y=float(locs[i, 1])),
                         delivery=[int(demand[i])] if demand is not None else [],
                         prize=int(prize[i]) if prize is not None else 0, required=prize is None)
    model.add_vehicle_type(num_available=vehicles, capacity=[SCALE] if demand is not None else [],
                           max_distance=max_distance if max_distance is not None else np.iinfo(np.int64).max,
                           unit_distance_cost=distance_cost, unit_duration_cost=int(duration is not None))
    durations = np.zeros_like(dist) if duration is None else duration
    problem = model.data().replace(distance_matrices=[dist], duration_matrices=[durations])
    best = pyvrp.solve(problem, stop=MaxRuntime(time_limit), seed=seed, display=False).best
    return [route_nodes(route) for route in best.routes()], best.is_feasible(), int(best.distance())


def route_nodes(route) -> list[int]:
    """A PyVRP route's clients as our node indices (the depot is location 0, clients 1..n)."""
    if hasattr(route, "visits"):  # PyVRP before 0.14: location indices
        return [int(v) for v in route.visits()]
    return [a.idx + 1 for a in route if a.is_client()]


def pyvrp_solver(name: str, data: dict, time_limit: float, seed: int) -> list[int]:
    if name == "tsp":
        routes, *_ = pyvrp_routes(data, solver_distances(data), time_limit=time_limit, seed=seed)
        return [0] + routes[0] if routes else list(range(len(data["locs"])))
    if name in ("cvrp", "acvrp"):
        demand = np.rint(data["demand"].astype(np.float64) * SCALE).astype(np.int64)
        routes, *_ = pyvrp_routes(data, solver_distances(data), demand=demand, vehicles=len(demand) - 1,
                                 time_limit=time_limit, seed=seed)
        return routes_to_actions(name, routes)
    if name == "op":
        dist = int_distances(data["locs"], round_up=True)
        coarse = np.rint(dist / (SCALE // 100)).astype(np.int64)  # lengths in 1e-2: the tie-break, as durations
        weight = int(coarse.max()) * len(dist) + 1  # above any tour's coarse length: prize first
        prize = np.rint(data["prize"].astype(np.float64) * PRIZE_RESOLUTION).astype(np.int64) * weight
        routes, *_ = pyvrp_routes(data, dist, prize=prize, max_distance=op_budget(data), distance_cost=0,
                                 duration=coarse, time_limit=time_limit, seed=seed)
        return routes_to_actions(name, routes)
    if name == "cvrptw":
        return routes_to_actions(name, pyvrp_time_windows(data, time_limit, seed)[0])
    if name == "cvrpmvc":
        return routes_to_actions(name, pyvrp_fixed_fleet(data, time_limit, seed)[0])
    if name == "mtvrp":
        return mtvrp_actions(pyvrp_mtvrp(data, time_limit, seed)[0])
    return pyvrp_pctsp(data, time_limit, seed)


def pyvrp_time_windows(data: dict, time_limit: float, seed: int) -> tuple[list[list[int]], int]:
    """CVRPTW (``time_windows``, ``service_time``, unit speed) in PyVRP: ``(routes, PyVRP's distance in units
    of 1 / SCALE)``. Distances, the cost, rounded to the nearest unit; travel and service times rounded up,
    openings up and closings down, so that PyVRP's clock never runs behind the env's and a route it finds
    feasible is feasible in the env (the env's 1e-5 slack absorbs its float32 sums)."""
    import pyvrp
    from pyvrp.stop import MaxRuntime

    locs, n = data["locs"].astype(np.float64), len(data["locs"])
    windows, service = data["time_windows"].astype(np.float64) * SCALE, data["service_time"].astype(np.float64) * SCALE
    demand = np.rint(data["demand"].astype(np.float64) * SCALE).astype(np.int64)
    model = pyvrp.Model()
    horizon = int(np.floor(windows[0, 1]))
    depot = model.add_depot(model.add_location(x=float(locs[0, 0]), y=float(locs[0, 1])), tw_late=horizon)
    for i in range(1, n):
        model.add_client(model.add_location(x=float(locs[i, 0]), y=float(locs[i, 1])), delivery=[int(demand[i])],
                         service_duration=int(np.ceil(service[i])), tw_early=int(np.ceil(windows[i, 0])),
                         tw_late=int(np.floor(windows[i, 1])))
    model.add_vehicle_type(num_available=n - 1, capacity=[SCALE], start_depot=depot, end_depot=depot, tw_late=horizon)
    problem = model.data().replace(distance_matrices=[int_distances(locs)],
                                   duration_matrices=[int_distances(locs, round_up=True)])
    best = pyvrp.solve(problem, stop=MaxRuntime(time_limit), seed=seed, display=False).best
    return [route_nodes(route) for route in best.routes()], int(best.distance())


def pyvrp_mtvrp(data: dict, time_limit: float, seed: int) -> tuple[list[tuple[int, list[int]]], int]:
    """The multi-attribute VRP (RouteFinder's variants) in PyVRP: ``([(depot, customers) per route], PyVRP's
    distance in units of 1 / SCALE)``. Demands as pickups and deliveries (PyVRP loads the deliveries at the
    depot and keeps the load within the capacity throughout: MB), time windows and service times (times =
    distance / speed, rounded up; openings up, closings down, as :func:`pyvrp_time_windows`), the duration
    limit as ``max_distance`` (rounded down, less one unit per node), several depots as one vehicle type per
    depot, open routes as zero-cost (and zero-time) arcs back to the depots. PyVRP cannot express B (linehauls
    before backhauls on a route): ``ValueError`` for an instance with backhauls of class 1. On open routes
    with time windows PyVRP still asks the vehicle to reach its depot (in zero time) before the depot closes,
    which the env does not: its tours stay feasible, it may miss a cheaper one."""
    import pyvrp
    from pyvrp.stop import MaxRuntime

    locs, n = data["locs"].astype(np.float64), len(data["locs"])
    m, speed = int(data["num_depots"][0]), float(data["speed"][0])
    if int(data["backhaul_class"][0]) == 1 and (data["demand_backhaul"] > 0).any():
        raise ValueError("PyVRP cannot express backhauls of class 1 (B: linehauls before backhauls on a route); "
                         "it solves the other variants (mixed backhauls MB included)")
    late = lambda t: int(np.floor(t * SCALE)) if np.isfinite(t) else 2 ** 62  # noqa: E731
    windows, service = data["time_windows"].astype(np.float64), data["service_time"].astype(np.float64) * SCALE
    delivery = np.rint(data["demand_linehaul"].astype(np.float64) * SCALE).astype(np.int64)
    pickup = np.rint(data["demand_backhaul"].astype(np.float64) * SCALE).astype(np.int64)
    model = pyvrp.Model()
    depots = [model.add_depot(model.add_location(x=float(locs[k, 0]), y=float(locs[k, 1])),
                              tw_late=late(windows[k, 1])) for k in range(m)]
    for i in range(m, n):
        model.add_client(model.add_location(x=float(locs[i, 0]), y=float(locs[i, 1])), delivery=[int(delivery[i])],
                         pickup=[int(pickup[i])], service_duration=int(np.ceil(service[i])),
                         tw_early=int(np.ceil(windows[i, 0] * SCALE)), tw_late=late(windows[i, 1]))
    limit = float(data["distance_limit"][0])
    for k, depot in enumerate(depots):
        model.add_vehicle_type(num_available=n - m, capacity=[SCALE], start_depot=depot, end_depot=depot,
                               tw_late=late(windows[k, 1]),
                               max_distance=int(np.floor(limit * SCALE)) - n if np.isfinite(limit) else 2 ** 62)
    dist = int_distances(locs)
    duration = np.ceil(np.sqrt(((locs[:, None] - locs[None]) ** 2).sum(-1)) * SCALE / speed).astype(np.int64)
    if bool(data["open_route"][0]):
        dist[m:, :m], duration[m:, :m] = 0, 0
    problem = model.data().replace(distance_matrices=[dist], duration_matrices=[duration])
    best = pyvrp.solve(problem, stop=MaxRuntime(time_limit), seed=seed, display=False).best
    if not best.is_feasible():
        raise ValueError(f"PyVRP found no feasible solution in {time_limit} s")
    clients = lambda route: [int(v) for v in route.visits()] if hasattr(route, "visits") \
        else [m + a.idx for a in route if a.is_client()]  # noqa: E731  (before 0.14: location indices)
    return [(int(route.start_depot()), clients(route)) for route in best.routes()], int(best.distance())


def mtvrp_actions(routes: list[tuple[int, list[int]]]) -> list[int]:
    """Routes ``(depot, customers)`` as MTVRP actions: a move to the route's depot where the vehicle is at
    another, the customers, the return (the last one is the episode's end, padding)."""
    actions, at = [], 0
    for depot, customers in routes:
        actions += ([depot] if depot != at else []) + customers + [depot]
        at = depot
    return actions


def pyvrp_fixed_fleet(data: dict, time_limit: float, seed: int) -> tuple[list[list[int]], int]:
    """Fixed-fleet CVRP (``num_vehicles``) in PyVRP, as CVRP with ``num_available = num_vehicles``: ``(routes,
    PyVRP's distance in units of 1 / SCALE)``; ``ValueError`` where PyVRP finds no solution within the fleet in
    the time limit (a tight fleet is a bin packing). Routes that fit the fleet pass the env's bound (the
    demand left never exceeds the vehicles left when the routes that follow carry it)."""
    import pyvrp
    from pyvrp.stop import MaxRuntime

    locs = data["locs"].astype(np.float64)
    demand = np.rint(data["demand"].astype(np.float64) * SCALE).astype(np.int64)
    model = pyvrp.Model()
    depot = model.add_depot(model.add_location(x=float(locs[0, 0]), y=float(locs[0, 1])))
    for i in range(1, len(locs)):
        model.add_client(model.add_location(x=float(locs[i, 0]), y=float(locs[i, 1])), delivery=[int(demand[i])])
    model.add_vehicle_type(num_available=int(data["num_vehicles"]), capacity=[SCALE], start_depot=depot,
                           end_depot=depot)
    dist = solver_distances(data)
    problem = model.data().replace(distance_matrices=[dist], duration_matrices=[np.zeros_like(dist)])
    best = pyvrp.solve(problem, stop=MaxRuntime(time_limit), seed=seed, display=False).best
    if not best.is_feasible():
        raise ValueError(f"PyVRP found no solution with at most {int(data['num_vehicles'])} vehicles in "
                         f"{time_limit} s")
    return [route_nodes(route) for route in best.routes()], int(best.distance())


def pyvrp_pctsp(data: dict, time_limit: float, seed: int, max_solves: int = 6) -> list[int]:
    """PCTSP by Lagrangian relaxation of the prize minimum (see the module docstring)."""
    dist = int_distances(data["locs"])
    prize, minimum = pctsp_minimum(data)
    penalty = data["penalty"].astype(np.float64) * SCALE
    budget = time_limit / max_solves

    def attempt(lam: float):
        routes, *_ = pyvrp_routes(data, dist, prize=np.rint(penalty + lam * prize).astype(np.int64),
                                 time_limit=budget, seed=seed)
        route = routes[0] if routes else []
        collected = int(prize[route].sum())
        length = int(sum(dist[a, b] for a, b in zip([0] + route, route + [0])))
        return route, collected >= minimum, length + penalty.sum() - penalty[route].sum()

    best, best_cost = None, math.inf
    route, ok, cost = attempt(0.0)
    lo, hi, solves = 0.0, None, 1
    if ok:
        return route + [0]
    lam = float(penalty.max() / max(prize[1:].mean(), 1)) + 1.0
    while solves < max_solves:
        route, ok, cost = attempt(lam)
        solves += 1
        if ok:
            if cost < best_cost:
                best, best_cost = route, cost
            hi = lam
        else:
            lo = lam
        lam = lam * 4 if hi is None else (lo + hi) / 2
    return (best if best is not None else route) + [0]


SOLVERS: dict[str, Callable[[str, dict, float, int], list[int]]] = {"lkh": lkh, "ortools": ortools,
                                                                   "pyvrp": pyvrp_solver}


# -- repair ---------------------------------------------------------------------------------------
def repair(problem, instances, tours: Tensor) -> tuple[Tensor, int]:
    """Make every tour replay feasibly (see the module docstring); ``(tours, number repaired)``."""
    feasible = replay(problem, instances, tours)[1]
    bad = (~feasible).nonzero().flatten().tolist()
    if not bad:
        return tours, 0
    if problem not in (OP, PCTSP):
        raise ValueError(f"solver returned infeasible {problem.name} tours for instances {bad[:5]}")
    fixed = [tours[i] for i in range(len(tours))]
    for i in bad:
        one = select_rows(instances, slice(i, i + 1))
        route = [int(a) for a in tours[i] if a != 0]
        while True:
            candidate = torch.tensor([route + [0]], device=tours.device)
            if bool(replay(problem, one, candidate)[1]):
                break
            route = drop_worst(one, route) if problem is OP else insert_best(one, route)
        fixed[i] = candidate[0].cpu()
    return pad(fixed, problem).to(tours.device), len(bad)


def drop_worst(instance, route: list[int]) -> list[int]:
    """OP: the route without the customer of least prize per unit of length its removal saves."""
    locs = instance.locs[0].double()
    seq = [0] + route + [0]
    saving = [float((locs[a] - locs[c]).norm() + (locs[c] - locs[b]).norm() - (locs[a] - locs[b]).norm())
              for a, c, b in zip(seq[:-2], seq[1:-1], seq[2:])]
    ratio = [float(instance.prize[0, c]) / max(s, 1e-12) for c, s in zip(route, saving)]
    k = int(np.argmin(ratio))
    return route[:k] + route[k + 1:]


def insert_best(instance, route: list[int]) -> list[int]:
    """PCTSP: the route with its unvisited node of highest prize inserted where it adds least length."""
    locs = instance.locs[0].double()
    prize = instance.prize[0].clone()
    prize[[0] + route] = -1
    node = int(prize.argmax())
    seq = [0] + route + [0]
    grow = [float((locs[a] - locs[node]).norm() + (locs[node] - locs[b]).norm() - (locs[a] - locs[b]).norm())
            for a, b in zip(seq[:-1], seq[1:])]
    k = int(np.argmin(grow))
    return route[:k] + [node] + route[k:]
