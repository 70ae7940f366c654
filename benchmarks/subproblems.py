"""The shipped CVRP-20 model on larger instances: decoded whole, or as sub-problems of about its own size.

A model trained at n = 20 sees a 100-customer instance at five times its training density and with five
times as many routes to plan. :func:`agents.inference.subproblems.sector_decode` cuts the customers into
sectors around the depot of at most ``--sizes`` customers, moves each sector (with the depot) into the unit
square and decodes all of them in one batch. This script prints, per set, the mean gap of

- ``whole``: greedy decoding of the whole instance on its 8 symmetric copies (the pipeline's first decoding);
- ``sectors of S``: sector decoding with sectors of at most S customers (greedy x 8 per sector, 4 rotations of
  the cut);
- ``sectors of 20 / 30 / 50``: the cheapest cut of all the sizes (``sector_decode``'s default, one call);
- ``savings``: Clarke & Wright's savings, the best of six route shapes (the pipeline's other start);

on the CVRPLIB files of ``tests/data`` and ``benchmarks/instances`` (gaps to their optima, in the files'
units) and on generated CVRP-50 / CVRP-100 sets (seed 4321, PyVRP references with ``--reference-seconds``),
with the mean seconds per instance of each decoding (one thread)::

    python benchmarks/subproblems.py                          # 5 minutes with the references
    python benchmarks/subproblems.py --sizes 20 30 --count 20
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from agents.inference.search import greedy
from agents.inference.subproblems import sector_decode
from agents.policies.pretrained import load_pretrained
from agents.references.pipeline import savings_start
from agents.references.solvers import solve
from routing_gym import tsplib
from routing_gym.problems import get_problem, tour_cost

from real_instances import real_files, set_of


def decodings(policy, problem, instances, sizes: list[int]) -> list[tuple[torch.Tensor, float]]:
    """``(tours, seconds per instance)`` of each column, in the table's order."""
    b = instances[0].shape[0]
    runs = [lambda: greedy(policy, problem, instances, augment=8).tours]
    runs += [lambda s=s: sector_decode(policy, problem, instances, [s]).tours for s in sizes]
    runs += [lambda: sector_decode(policy, problem, instances, sizes).tours]
    runs += [lambda: savings_start(problem, instances)[1]]
    out = []
    for run in runs:
        began = time.perf_counter()
        tours = run()
        out.append((tours, (time.perf_counter() - began) / b))
    return out


def real_rows(policy, problem, sizes: list[int]) -> list[tuple[str, str, list[float], list[float]]]:
    rows = []
    for _, real in real_files():
        if real.problem != "cvrp":
            continue
        out = decodings(policy, problem, real.instance, sizes)
        gaps = [tsplib.gap(real, tsplib.cost(real, tours)) for tours, _ in out]
        rows.append((set_of(real.name, real.problem), real.name, gaps, [s for _, s in out]))
    return rows


def generated_rows(policy, problem, n: int, count: int, sizes: list[int], reference_seconds: float):
    instances = problem.generate(count, n, generator=torch.Generator().manual_seed(4321))
    ref = solve(problem, instances, "pyvrp", reference_seconds, progress=False, seed=4321).cost.double()
    out = decodings(policy, problem, instances, sizes)
    gaps = [(100 * (tour_cost(problem, instances, tours) - ref) / ref).tolist() for tours, _ in out]
    return [(f"CVRP-{n} (seed 4321)", str(i), [g[i] for g in gaps], [s for _, s in out]) for i in range(count)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[20, 30, 50], help="sector sizes (customers)")
    ap.add_argument("--count", type=int, default=50, help="generated instances per set")
    ap.add_argument("--num-nodes", type=int, nargs="*", default=[50, 100], help="sizes of the generated sets")
    ap.add_argument("--reference-seconds", type=float, default=1.0, help="PyVRP's seconds per generated instance")
    args = ap.parse_args()
    torch.set_num_threads(1)
    problem = get_problem("cvrp")
    policy = load_pretrained("cvrp", 20)
    rows = real_rows(policy, problem, args.sizes)
    for n in args.num_nodes:
        rows += generated_rows(policy, problem, n, args.count, args.sizes, args.reference_seconds)
    names = ["whole", *(f"sectors of {s}" for s in args.sizes), f"sectors of {' / '.join(map(str, args.sizes))}",
             "savings"]
    print("The shipped CVRP-20 model, greedy x 8: mean gap per set (seconds per instance), one thread\n")
    print(f"| set | instances | {' | '.join(names)} |\n|---|---|{'---|' * len(names)}")
    for name in dict.fromkeys(r[0] for r in rows):
        mine = [r for r in rows if r[0] == name]
        gaps = np.array([r[2] for r in mine])
        seconds = np.array([r[3] for r in mine]).mean(axis=0)
        cells = [f"{g:.2f}% ({s:.2f} s)" for g, s in zip(gaps.mean(axis=0), seconds)]
        print(f"| {name} | {len(mine)} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
