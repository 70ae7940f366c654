"""``routing-gym eval --decode best`` measured: the pipeline (agents/references/pipeline.py) and its pieces on
real instances and on generated n = 100 test sets, at one time limit per instance on one CPU thread.

Sets: the TSPLIB and CVRPLIB files of ``tests/data`` and ``benchmarks/instances`` (21 TSPLIB files of 70-318
nodes, CVRPLIB A, B, E, P of 50-101 and X of 101-200; their sources in its README.md), and of ``../shared/data``
where that folder exists (files of a name already read are skipped), each gap against its published optimum
(``benchmarks/instances/references.json`` for files that state none), costed in the file's units; and
``--count`` generated TSP-100 / CVRP-100 instances (seed 4321), whose references are LKH-3
(``--reference-seconds`` per instance) and PyVRP (twice that) through the solver adapters, as
``routing-gym solve --method lkh / pyvrp`` computes them. Per set it prints the mean gap of:

- ``NN + 2-opt``: nearest neighbour (the nearest feasible customer for CVRP) then 2-opt (within routes);
- ``savings`` (CVRP): the best of the savings routes of six route shapes (the pipeline's other start);
- ``construction``: the shipped model of the nearest size, greedy on the instance, then on as many of its
  7 other symmetric copies as fit in 30 % of the budget, then multi-start on those while it lasts (the
  pipeline's first step, run alone);
- ``pipeline``: ``best`` (construction, local search from those of it, NN + 2-opt and the savings within 5 % of
  the cheapest, then iterated local search) with ``--time-limit`` seconds per instance, and its mean seconds
  per instance::

    python benchmarks/real_instances.py                       # --time-limit 2, 20 generated instances per set
    python benchmarks/real_instances.py --time-limit 0.5 --count 10

Real instances run one at a time; a generated set runs as one batch sharing count x time limit.
"""
from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import torch

from agents.apps.commands.decoding import count_routes
from agents.apps.commands.eval_files import fleet_of
from agents.references.pipeline import (best, capacity_routes, construction, heuristic_start, savings_start,
                                        shipped_reviser)
from agents.policies.pretrained import load_pretrained, nearest_pretrained_size
from agents.references.solvers import solve
from routing_gym import tsplib
from routing_gym.problems import get_problem, tour_cost

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = (ROOT / "tests" / "data", ROOT / "benchmarks" / "instances", ROOT.parent / "shared" / "data")
REFERENCES = ROOT / "benchmarks" / "instances" / "references.json"  # optima of the files that state none
REFERENCE = {"tsp": ("lkh", 1.0), "cvrp": ("pyvrp", 2.0)}  # solver, seconds per instance (times --reference-seconds)
SHARE = 0.3  # the pipeline's construction_share
NAN = float("nan")  # the gap of a piece that does not apply
GENERATED = {"tsp": "TSP", "cvrp": "CVRP"}  # the generated sets, by problem
SETS = ("TSPLIB", "CVRPLIB A/B/E/P", "CVRPLIB X", *GENERATED.values())


def pieces(problem, instances, time_limit: float, fleet=None, revision: bool = False):
    """(NN + 2-opt tours, savings tours (None where they do not apply), construction tours, pipeline tours,
    pipeline seconds per instance) of a batch; the pipeline keeps to ``fleet`` (B,) routes where given, as
    ``routing-gym eval --decode best`` runs a CVRPLIB file with its k; ``revision``: with the shipped SHPP model
    as its reviser (``--revise`` there)."""
    policy = load_pretrained(problem.name, nearest_pretrained_size(problem.name, problem.size_of(instances)))
    b = instances[0].shape[0]
    start = heuristic_start(problem, instances)
    saved = savings_start(problem, instances)[1] if capacity_routes(problem, instances) else None
    built = construction(policy, problem, instances, time.monotonic() + SHARE * time_limit * b)[1]
    began = time.perf_counter()
    found = best(policy, problem, instances, time_limit, fleet=fleet,
                 reviser=shipped_reviser() if revision else None)
    return start, saved, built, found.tours, (time.perf_counter() - began) / b


def percent(gap: float) -> str:
    return "-" if math.isnan(gap) else f"{gap:.2f}%"


def set_of(name: str, problem: str) -> str:
    """The row's set: TSPLIB, CVRPLIB X (Uchoa et al.) or the classic CVRPLIB sets A, B, E, P."""
    return "TSPLIB" if problem == "tsp" else "CVRPLIB X" if name.startswith("X-") else "CVRPLIB A/B/E/P"


def real_files():
    """``(path, real)`` of each TSPLIB / CVRPLIB file of :data:`FOLDERS` with a reference (a name once: the first
    folder's copy), loaded by :func:`routing_gym.tsplib.load`."""
    seen = set()
    for folder in FOLDERS:
        for path in sorted(folder.glob("*.tsp")) + sorted(folder.glob("*.vrp")):
            if path.name in seen:
                continue
            seen.add(path.name)
            real = tsplib.load(path, table=REFERENCES)
            if real.reference is not None:
                yield path, real


def real_rows(time_limit: float, sets: list[str], revision: bool = False) -> list[tuple]:
    """(set, name, gaps of NN + 2-opt / construction / pipeline, seconds) per real instance file of ``sets``."""
    rows = []
    for path, real in real_files():
        name = set_of(real.name, real.problem)
        if name not in sets:
            continue
        fleet = fleet_of(real)  # k where the file's reference is for k vehicles (A/B/E/P), as routing-gym eval
        out = pieces(get_problem(real.problem), real.instance, time_limit, fleet and fleet.num_vehicles.long(),
                     revision)
        gaps = [NAN if tours is None else tsplib.gap(real, tsplib.cost(real, tours)) for tours in out[:4]]
        named = tsplib.FLEET_IN_NAME.search(real.name)  # X's k: the least number of routes, not a fleet
        routes = f"{count_routes(out[3])} ({named.group(1) if named else '-'})" if real.problem == "cvrp" else "-"
        rows.append((name, real.name, *gaps, out[4], routes))
    return rows


def generated_rows(name: str, n: int, count: int, time_limit: float, reference_seconds: float,
                   revision: bool = False) -> list[tuple]:
    problem = get_problem(name)
    instances = problem.generate(count, n, generator=torch.Generator().manual_seed(4321))
    method, seconds = REFERENCE[name]
    ref = solve(problem, instances, method, seconds * reference_seconds, progress=False, seed=4321).cost.double()
    out = pieces(problem, instances, time_limit, revision=revision)
    gaps = [torch.full_like(ref, NAN) if tours is None else 100 * (tour_cost(problem, instances, tours) - ref) / ref
            for tours in out[:4]]
    return [(f"{GENERATED[name]}-{n} (seed 4321)", str(i), *(float(g[i]) for g in gaps), out[4]) for i in range(count)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--time-limit", type=float, default=2.0, help="seconds per instance")
    ap.add_argument("--count", type=int, default=20, help="generated instances per set")
    ap.add_argument("--num-nodes", type=int, default=100, help="nodes of the generated sets")
    ap.add_argument("--reference-seconds", type=float, default=1.0, help="scales the solvers' seconds")
    ap.add_argument("--sets", nargs="+", choices=SETS, default=list(SETS), help="the sets to measure (default all)")
    ap.add_argument("--revision", action="store_true",
                    help="the pipeline with its revision by the shipped SHPP model (routing-gym eval --revise)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    rows = real_rows(args.time_limit, args.sets, args.revision)
    for name in ("tsp", "cvrp"):
        if GENERATED[name] in args.sets:
            rows += generated_rows(name, args.num_nodes, args.count, args.time_limit, args.reference_seconds,
                                   args.revision)
    print("| instance | NN + 2-opt | savings | construction | pipeline | s / instance | routes (k in the name) |\n"
          "|---|---|---|---|---|---|---|")
    for r in rows:
        if not r[0].endswith("(seed 4321)"):
            print(f"| {r[1]} | {' | '.join(percent(g) for g in r[2:6])} | {r[6]:.2f} | {r[7]} |")
    print(f"\nmean gap per set, --time-limit {args.time_limit:g}, one thread:\n")
    print("| set | instances | NN + 2-opt | savings | construction | pipeline | s / instance |\n"
          "|---|---|---|---|---|---|---|")
    for group in dict.fromkeys(r[0] for r in rows):
        sel = [r for r in rows if r[0] == group]
        mean = [sum(r[k] for r in sel) / len(sel) for k in (2, 3, 4, 5, 6)]
        print(f"| {group} | {len(sel)} | {' | '.join(percent(m) for m in mean[:4])} | {mean[4]:.2f} |")


if __name__ == "__main__":
    main()
