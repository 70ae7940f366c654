"""Input normalisation for instances unlike the training distribution: elongated TSPs.

Real instances are mapped into the unit square before a policy sees them. ``routing_gym.tsplib`` keeps
their shape (one scale for x and y), so a 3:1 instance fills a [0, 1] x [0, 1/3] strip and the policy,
trained on the uniform square, sees three times its training density. The alternative is to stretch each
axis to [0, 1] (distances distorted, density as in training); the tour is costed on the true shape
either way. This script measures both on seeded uniform instances in a strip of aspect ratio r (so the
references are exact enough: LKH-3 through the solver adapters), for each policy given::

    python benchmarks/normalisation.py --policy pretrained ../reference-weights/tsp_50 --num-nodes 50

and prints the greedy gap (mean of (cost - LKH) / LKH) per policy, aspect ratio and normalisation.
"""
from __future__ import annotations

import argparse

import torch

from agents.apps.cli import load_policy
from agents.inference.search import decode
from agents.references.solvers import solve
from routing_gym.problems import TSP, tour_cost


def strip_instances(count: int, n: int, aspect: float, seed: int):
    """``count`` TSPs of ``n`` nodes uniform in [0, 1] x [0, 1 / aspect] (the shape-keeping scaling)."""
    locs = torch.rand(count, n, 2, generator=torch.Generator().manual_seed(seed))
    locs[..., 1] /= aspect
    return TSP.Instance(locs=locs)


def stretched(instances, aspect: float):
    locs = instances.locs.clone()
    locs[..., 1] *= aspect
    return TSP.Instance(locs=locs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", nargs="+", default=["pretrained"], help="policy specs as routing-gym eval takes")
    parser.add_argument("--num-nodes", type=int, default=50)
    parser.add_argument("--num-instances", type=int, default=200)
    parser.add_argument("--aspects", type=float, nargs="+", default=[1, 2, 3, 5])
    parser.add_argument("--decode", default="greedy", choices=("greedy", "multistart"))
    parser.add_argument("--seed", type=int, default=2024)
    args = parser.parse_args()
    torch.set_num_threads(1)
    policies = {spec: load_policy(spec, "tsp", 20) for spec in args.policy}  # shipped: n = 20; any n decodes
    print(f"TSP-{args.num_nodes}, {args.num_instances} instances per aspect ratio (seed {args.seed}), {args.decode} "
          f"decoding; gap to LKH-3 on the true shape\n")
    print("| policy | aspect r | shape kept ([0,1] x [0,1/r]) | stretched to [0,1]^2 |")
    print("|---|---:|---:|---:|")
    for aspect in args.aspects:
        kept = strip_instances(args.num_instances, args.num_nodes, aspect, args.seed)
        ref = solve("tsp", kept, "lkh", time_limit=0.1, progress=False).cost.double()
        for spec, policy in policies.items():
            gaps = []
            for view in (kept, stretched(kept, aspect)):
                tours = decode(policy, "tsp", view, args.decode, augment=8 if args.decode == "multistart" else 1).tours
                cost = tour_cost(TSP, kept, tours)  # the true shape's length
                gaps.append(100 * float(((cost - ref) / ref).mean()))
            print(f"| {spec} | {aspect:g} | {gaps[0]:.2f} % | {gaps[1]:.2f} % |")


if __name__ == "__main__":
    main()
