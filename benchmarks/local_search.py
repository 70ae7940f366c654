"""Local search after construction (``agents.inference.local_search.improve``): what it buys over its start.

On the TSPLIB files of ``tests/data`` (eil51, berlin52; optima 426 and 7542, costed in the file's units)
and on seeded generated TSP / CVRP instances, it prints per set: the start's mean cost (TSP: nearest
neighbour from node 0; CVRP: greedy, the nearest feasible customer), the start + 2-opt alone (TSP: 2-opt
on the closed tour; CVRP: 2-opt within routes, the ``2opt`` heuristic), the start + ``improve`` (TSP:
2-opt and or-opt; CVRP: relocate, swap, 2-opt and 2-opt* between routes), the gap to the optimum where
known, and the seconds per instance of each search (a batch's time divided by its instances; one torch
thread)::

    python benchmarks/local_search.py                     # 1,000 TSP-50 and CVRP-50 instances (minutes)
    python benchmarks/local_search.py --instances 100 --sizes 20 50 100 --reference 100

``--reference K`` adds the gap to LKH-3 (TSP, 0.5 s) and PyVRP (CVRP, 1 s) on the first K generated
instances of each set (the solver adapters, ``agents.references.solvers``), where installed.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from agents.inference.local_search import improve, two_opt
from agents.references.heuristics import construct, improve_routes, nearest_neighbour_tsp
from agents.references.solvers import available, solve
from routing_gym import tsplib
from routing_gym.problems import CVRP, TSP, tour_cost

DATA = Path(__file__).resolve().parents[1] / "tests" / "data"
TSPLIB = {"eil51": 426, "berlin52": 7542}  # TSPLIB's published optima
REFERENCE = {"tsp": ("lkh", 0.5), "cvrp": ("pyvrp", 1.0)}  # solver, seconds per instance


def timed(fn, *args):
    start = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - start


def searches(problem, instance):
    """(start tours, start + 2-opt tours, start + improve tours, seconds of 2-opt, seconds of improve)."""
    if problem is TSP:
        start = nearest_neighbour_tsp(instance.locs)
        closed, t2 = timed(two_opt, instance.locs, torch.cat([start, start[:, :1]], dim=1))
        plain = closed[:, :-1]
    else:
        start = construct(problem, instance)
        plain, t2 = timed(improve_routes, problem, instance, start)
    (best, _), t3 = timed(improve, problem, instance, start)
    return start, plain, best, t2, t3


def real_rows() -> list[list]:
    rows = []
    for name, optimum in TSPLIB.items():
        real = tsplib.load(DATA / f"{name}.tsp", table=TSPLIB)
        start, plain, best, t2, t3 = searches(TSP, real.instance)
        costs = [tsplib.cost(real, t) for t in (start, plain, best)]
        rows.append([name, len(real.coords), 1, *costs, [100 * (c / optimum - 1) for c in costs], t2, t3])
    return rows


def generated_row(problem, n: int, count: int, batch: int, seed: int, reference: int) -> list:
    gen = torch.Generator().manual_seed(seed)
    instances = problem.generate(count, n, generator=gen)
    totals, seconds = torch.zeros(3, dtype=torch.float64), [0.0, 0.0]
    kept = []
    for lo in range(0, count, batch):
        chunk = problem.Instance(*(f[lo:lo + batch] for f in instances))
        *tours, t2, t3 = searches(problem, chunk)
        costs = [tour_cost(problem, chunk, t) for t in tours]
        totals += torch.stack([c.sum() for c in costs])
        seconds[0] += t2
        seconds[1] += t3
        kept.append(torch.stack(costs))
    costs = torch.cat(kept, dim=1)  # (3, count)
    gaps = ["", "", ""]
    method, limit = REFERENCE[problem.name]
    if reference and available(method):
        k = min(reference, count)
        ref = solve(problem, problem.Instance(*(f[:k] for f in instances)), method, time_limit=limit,
                    progress=False).cost.double()
        gaps = [100 * float((c[:k] / ref - 1).mean()) for c in costs]
    return [f"{problem.label}-{n} (seed {seed})", n, count, *(totals / count).tolist(), gaps,
            seconds[0] / count, seconds[1] / count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=1000, help="generated instances per set")
    parser.add_argument("--sizes", type=int, nargs="+", default=[50])
    parser.add_argument("--batch", type=int, default=250, help="instances searched at once")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--reference", type=int, default=0, metavar="K",
                        help="gap to LKH-3 / PyVRP on the first K generated instances of each set")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rows = real_rows()
    rows += [generated_row(p, n, args.instances, args.batch, args.seed, args.reference)
             for p in (TSP, CVRP) for n in args.sizes]
    print(f"torch {torch.__version__}, {args.threads} thread(s); TSP start: nearest neighbour, 2-opt on the tour, "
          f"improve = 2-opt + or-opt; CVRP start: greedy, 2-opt within routes, improve = relocate, swap, "
          f"2-opt, 2-opt*; gap in % to the optimum (TSPLIB) or the reference solver\n")
    print("| set | n | instances | start | + 2-opt | + improve | gap start / 2-opt / improve | s/inst 2-opt | s/inst improve |")
    print("|---|---:|---:|---:|---:|---:|---|---:|---:|")
    for name, n, count, c1, c2, c3, gaps, t2, t3 in rows:
        gap = " / ".join(f"{g:.2f} %" for g in gaps) if gaps[0] != "" else "-"
        print(f"| {name} | {n} | {count} | {c1:.4g} | {c2:.4g} | {c3:.4g} | {gap} | {t2:.4f} | {t3:.4f} |")


if __name__ == "__main__":
    main()
