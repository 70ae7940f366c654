"""``routing-gym solve``: reference solutions (Held-Karp, LKH, OR-Tools, PyVRP) of seeded instances or a
dataset; ``--save`` writes them with the instances as a labelled dataset (what ``train --imitate`` reads)."""
from __future__ import annotations

import torch

from routing_gym.data import check_fits
from routing_gym.problems import get_problem

from .common import (PROBLEM_CHOICES, add_command, add_variant_args, input_file, make_parent, npz_output,
                     positive_float, positive_int, seed_int, variant_of)

WRITES_AND_READS = ("save", ("dataset",))  # never --save over the dataset read


def add_parser(sub) -> None:
    """The ``solve`` subcommand: the problem and method, the instances, the solver's budget, the output."""
    v = add_command(sub, "solve", "reference solutions (Held-Karp, LKH, OR-Tools, PyVRP)",
                    "Reference solutions of seeded instances or a dataset (Held-Karp, LKH, OR-Tools, PyVRP); --save "
                    "writes them with the instances as a labelled dataset.")
    v.add_argument("--problem", choices=PROBLEM_CHOICES, required=True)
    v.add_argument("--method", choices=("exact", "lkh", "ortools", "pyvrp"), required=True,
                   help="exact = Held-Karp (TSP up to n = 20); the others need pip install -e '.[solvers]'")
    v.add_argument("--num-nodes", type=int, help="customers (TSP: nodes) per generated instance")
    add_variant_args(v)
    v.add_argument("--dataset", type=input_file, help=".npz dataset to solve; else --num-instances seeded instances")
    v.add_argument("--num-instances", type=positive_int, default=1000, help="seeded instances generated")
    v.add_argument("--seed", type=seed_int, default=4321, help="seed of the generated instances (and the solvers)")
    v.add_argument("--time-limit", type=positive_float, default=1.0, help="seconds per instance (exact ignores it)")
    v.add_argument("--workers", type=positive_int, default=1, help="solver processes")
    v.add_argument("--save", type=npz_output, help="write the instances with ref_cost and ref_tours to this .npz")
    v.add_argument("--no-progress", action="store_true", help="no progress bar")
    v.set_defaults(func=run)


def run(args) -> int:
    """Solve the instances (generated, or a dataset's), print the mean cost; ``--save`` labels them."""
    from routing_gym.data import load_dataset, save_dataset

    from ...references.solvers import solve

    problem = get_problem(args.problem)
    variant = variant_of(args, problem)
    if args.dataset:
        instances, _ = load_dataset(args.dataset, args.problem)
    else:
        if args.num_nodes is None:
            raise ValueError("solve needs --num-nodes (or --dataset)")
        check_fits(args.problem, args.num_instances, args.num_nodes, "--num-instances", **variant)
        instances = problem.generate(args.num_instances, args.num_nodes,
                                     generator=torch.Generator().manual_seed(args.seed), **variant)
    num_nodes = problem.size_of(instances)
    if args.save:
        make_parent(args.save)
    out = solve(problem, instances, args.method, args.time_limit, progress=not args.no_progress, seed=args.seed,
                workers=args.workers)
    repaired = f", {out.repaired} tour(s) repaired" if out.repaired else ""
    print(f"{args.problem}-{num_nodes} {args.method}: mean cost {out.cost.mean():.4f} on {len(out.cost)} instances "
          f"in {out.seconds:.1f} s{repaired}")
    if args.save:
        save_dataset(args.save, instances, ref_cost=out.cost.numpy(), ref_tours=out.tours.numpy())
        print(f"saved {args.save} (instances, ref_cost, ref_tours)")
    return 0
