"""One model for the multi-attribute VRP family: per variant, its greedy and multi-start gaps against PyVRP and
against nearest neighbour.

For each of RouteFinder's 48 variants (or ``--variants``), on ``--instances`` seeded instances of that
variant (seed 4321): the model's greedy decoding and multi-start x8, the ``nearest`` heuristic, and PyVRP
(``--time-limit`` seconds each, on the first ``--reference`` instances) where PyVRP expresses the variant (it
cannot order linehauls before backhauls, B). Gaps are paired over the reference instances; "vs nearest" is
the model's greedy cost against nearest neighbour's on all instances.

    python benchmarks/mtvrp_table.py --policy runs/first/mtvrp20-mixed/best.pt
    python benchmarks/mtvrp_table.py --policy ... --variants CVRP VRPTW --instances 1000
"""
from __future__ import annotations

import argparse
from pathlib import Path

import torch

from agents.inference.search import decode
from agents.policies.pretrained import load_policy_file
from agents.references import heuristics, solvers
from routing_gym.problems import get_problem, tour_cost
from routing_gym.problems.mtvrp import VARIANTS


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--policy", required=True, help="a trained MTVRP checkpoint or policy file")
    p.add_argument("--variants", nargs="+", default=list(VARIANTS))
    p.add_argument("--num-nodes", type=int, default=20)
    p.add_argument("--instances", type=int, default=200)
    p.add_argument("--reference", type=int, default=20)
    p.add_argument("--time-limit", type=float, default=0.2)
    p.add_argument("--out", type=Path, default=None, help="also write the table to this markdown file")
    return p.parse_args(argv)


def mean_gap(a: torch.Tensor, ref: torch.Tensor) -> str:
    d = (a[:len(ref)] - ref) / ref
    return f"{100 * float(d.mean()):.2f} %"


def row(policy, variant: str, args) -> str:
    problem = get_problem("mtvrp")
    test = problem.generate(args.instances, args.num_nodes, generator=torch.Generator().manual_seed(4321),
                            variant=variant)
    greedy = decode(policy, problem, test, "greedy").cost.double()
    multi = decode(policy, problem, test, "multistart", augment=8).cost.double()
    nearest = tour_cost(problem, test, heuristics.heuristic_tours(problem, test, "nearest")).double()
    vs_nearest = f"{100 * float(((greedy - nearest) / nearest).mean()):+.2f} %"
    head = type(test)(*(f[:args.reference] for f in test))
    try:
        ref = solvers.solve(problem, head, "pyvrp", args.time_limit, progress=False).cost.double()
        cells = [mean_gap(greedy, ref), mean_gap(multi, ref), mean_gap(nearest, ref)]
    except ValueError:  # PyVRP cannot express the variant
        cells = ["no solver"] * 3
    return (f"| {variant} | {float(greedy.mean()):.4f} | {float(multi.mean()):.4f} | {float(nearest.mean()):.4f} | "
            + " | ".join(cells) + f" | {vs_nearest} |")


def main(argv=None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(1)
    policy = load_policy_file(args.policy)
    lines = [f"MTVRP-{args.num_nodes}, {args.instances} instances per variant (seed 4321); PyVRP {args.time_limit} s "
             f"on the first {args.reference}\n",
             "| variant | greedy | multi-start x8 | nearest | greedy gap | x8 gap | nearest gap | greedy vs nearest |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    print("\n".join(lines), flush=True)
    for variant in args.variants:
        lines.append(row(policy, variant, args))
        print(lines[-1], flush=True)
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
