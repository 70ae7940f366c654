"""TSP and CVRP policies against the instance size: models trained at one size, or on mixed sizes, decoded at others.

A model trained on uniform instances of n nodes in the unit square sees, at another size, another density
(n per unit area) and another episode length. For each policy given, this prints the mean greedy gap (and
greedy x 8, the best of the unit square's 8 symmetric copies) on seeded uniform sets of the problem of each
``--sizes`` (seed 4321, references by the solver adapters, as ``routing-gym solve`` computes them: LKH-3 for
TSP, PyVRP for CVRP), and on the TSPLIB or CVRPLIB files of ``tests/data`` and ``benchmarks/instances`` (gaps to
their published optima in the files' units)::

    python benchmarks/sizes.py --policy agents/weights/tsp20.pt agents/weights/tsp50.pt runs/mixed.pt
    python benchmarks/sizes.py --problem cvrp --policy agents/weights/cvrp20.pt runs/cvrp-mixed.pt --sizes 20 50 100

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

from real_instances import REFERENCE, real_files


def generated_gaps(policies: dict, name: str, n: int, count: int, seconds: float) -> dict[str, tuple[float, float]]:
    problem = get_problem(name)
    instances = problem.generate(count, n, generator=torch.Generator().manual_seed(4321))
    ref = solve(problem, instances, REFERENCE[name][0], seconds, progress=False, seed=4321).cost.double()
    out = {}
    for key, policy in policies.items():
        gaps = []
        for augment in (1, 8):
            tours = greedy(policy, problem, instances, augment=augment, batch_size=250).tours
            gaps.append(100 * float(((tour_cost(problem, instances, tours) - ref) / ref).mean()))
        out[key] = tuple(gaps)
    return out


def real_gaps(policies: dict, name: str) -> tuple[dict[str, tuple[float, float]], int, str]:
    """Mean gaps (greedy, greedy x 8) per policy on the problem's real files, their count and size range."""
    problem = get_problem(name)
    reals = [real for _, real in real_files() if real.problem == name]
    out = {}
    for key, policy in policies.items():
        gaps = [[tsplib.gap(real, tsplib.cost(real, greedy(policy, problem, real.instance, augment=a).tours))
                 for real in reals] for a in (1, 8)]
        out[key] = tuple(sum(g) / len(g) for g in gaps)
    sizes = [problem.size_of(real.instance) for real in reals]
    return out, len(reals), f"{min(sizes)}-{max(sizes)} {'customers' if problem.has_depot else 'nodes'}"


def trained_sizes(policy_file: str) -> str:
    from agents.policies.checkpoint import load_checkpoint

    ckpt = load_checkpoint(policy_file)
    meta = ckpt.get("meta") or {}
    config = meta.get("trainer") or ckpt.get("config") or {}
    mixed = config.get("mixed_sizes")
    return " / ".join(map(str, mixed)) if mixed else str(meta.get("num_nodes", config.get("num_nodes", "?")))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problem", default="tsp", choices=sorted(REFERENCE))
    ap.add_argument("--policy", nargs="+", required=True, help="policy or checkpoint files of the problem")
    ap.add_argument("--sizes", type=int, nargs="+", default=[20, 50, 100, 200])
    ap.add_argument("--count", type=int, default=1000, help="instances per generated set")
    ap.add_argument("--ref-seconds", type=float, default=0.1, help="the reference solver's seconds per instance")
    args = ap.parse_args()
    torch.set_num_threads(1)
    policies = {path: load_policy_file(path).eval() for path in args.policy}
    began = time.perf_counter()
    label = args.problem.upper()
    columns = {f"{label}-{n} ({args.count}, seed 4321)": generated_gaps(policies, args.problem, n, args.count,
                                                                          args.ref_seconds)
               for n in args.sizes}
    real, files, span = real_gaps(policies, args.problem)
    columns[f"{'TSPLIB' if args.problem == 'tsp' else 'CVRPLIB'} ({files} files, {span})"] = real
    print(f"Mean gap, greedy / greedy x 8, one thread ({time.perf_counter() - began:.0f} s)\n")
    print(f"| policy | trained on n = | {' | '.join(columns)} |\n|---|---|{'---|' * len(columns)}")
    for name in policies:
        cells = [f"{col[name][0]:.2f}% / {col[name][1]:.2f}%" for col in columns.values()]
        print(f"| {name} | {trained_sizes(name)} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
