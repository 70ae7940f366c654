"""TSP policies against the instance size: models trained at one size, or on mixed sizes, decoded at others.

A model trained on uniform instances of n nodes in the unit square sees, at another size, another density
(n per unit area) and another episode length. For each policy given, this prints the mean greedy gap (and
greedy x 8, the best of the unit square's 8 symmetric copies) on seeded uniform TSP sets of each
``--sizes`` (seed 4321, references by LKH-3 through the solver adapters, as ``routing-gym solve --method lkh``
computes them), and on the TSPLIB files of ``tests/data`` and ``benchmarks/instances`` (51-318 nodes, gaps to
their published optima in the files' units)::

    python benchmarks/sizes.py --policy agents/weights/tsp20.pt agents/weights/tsp50.pt runs/mixed.pt

Policies are checkpoint or policy files (their ``meta`` names the size or sizes they were trained on).
"""
from __future__ import annotations

import argparse
import time

import torch

from agents.inference.search import greedy
from agents.policies.pretrained import load_policy_file
from agents.references.solvers import solve
from routing_gym import tsplib
from routing_gym.problems import get_problem, tour_cost

from real_instances import FOLDERS, REFERENCES


def generated_gaps(policies: dict, n: int, count: int, seconds: float) -> dict[str, tuple[float, float]]:
    problem = get_problem("tsp")
    instances = problem.generate(count, n, generator=torch.Generator().manual_seed(4321))
    ref = solve(problem, instances, "lkh", seconds, progress=False, seed=4321).cost.double()
    out = {}
    for name, policy in policies.items():
        gaps = []
        for augment in (1, 8):
            tours = greedy(policy, problem, instances, augment=augment, batch_size=250).tours
            gaps.append(100 * float(((tour_cost(problem, instances, tours) - ref) / ref).mean()))
        out[name] = tuple(gaps)
    return out


def tsplib_gaps(policies: dict) -> dict[str, tuple[float, float]]:
    problem = get_problem("tsp")
    reals, seen = [], set()
    for folder in FOLDERS:
        for path in sorted(folder.glob("*.tsp")):
            if path.name not in seen:
                seen.add(path.name)
                real = tsplib.load(path, table=REFERENCES)
                if real.reference is not None:
                    reals.append(real)
    out = {}
    for name, policy in policies.items():
        gaps = [[tsplib.gap(real, tsplib.cost(real, greedy(policy, problem, real.instance, augment=a).tours))
                 for real in reals] for a in (1, 8)]
        out[name] = tuple(sum(g) / len(g) for g in gaps)
    return out, len(reals)


def trained_sizes(policy_file: str) -> str:
    from agents.policies.checkpoint import load_checkpoint

    ckpt = load_checkpoint(policy_file)
    meta = ckpt.get("meta") or {}
    config = meta.get("trainer") or ckpt.get("config") or {}
    mixed = config.get("mixed_sizes")
    return " / ".join(map(str, mixed)) if mixed else str(meta.get("num_nodes", config.get("num_nodes", "?")))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--policy", nargs="+", required=True, help="TSP policy or checkpoint files")
    ap.add_argument("--sizes", type=int, nargs="+", default=[20, 50, 100, 200])
    ap.add_argument("--count", type=int, default=1000, help="instances per generated set")
    ap.add_argument("--lkh-seconds", type=float, default=0.1, help="LKH-3's seconds per instance")
    args = ap.parse_args()
    torch.set_num_threads(1)
    policies = {path: load_policy_file(path).eval() for path in args.policy}
    began = time.perf_counter()
    columns = {f"TSP-{n} ({args.count}, seed 4321)": generated_gaps(policies, n, args.count, args.lkh_seconds)
               for n in args.sizes}
    real, files = tsplib_gaps(policies)
    columns[f"TSPLIB ({files} files, 51-318 nodes)"] = real
    print(f"Mean gap, greedy / greedy x 8, one thread ({time.perf_counter() - began:.0f} s)\n")
    print(f"| policy | trained on n = | {' | '.join(columns)} |\n|---|---|{'---|' * len(columns)}")
    for name in policies:
        cells = [f"{col[name][0]:.2f}% / {col[name][1]:.2f}%" for col in columns.values()]
        print(f"| {name} | {trained_sizes(name)} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
