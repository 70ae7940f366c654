"""What revision by a small SHPP model buys (issue 31 item 2): on seeded TSP-100 and TSP-200 sets, the
TSPLIB files of tests/data and a seeded CVRP-100 set, the tours of nearest neighbour, of nearest neighbour +
local search (``agents.inference.local_search.improve``), and of each followed by
``agents.inference.revision.revise`` with an SHPP-20 policy (and revise, then local search); mean gap to a
reference and seconds per instance (each set decoded as one batch, one torch thread).

The reference is LKH-3 for TSP and PyVRP for CVRP (``--reference-seconds`` per instance, twice that for
PyVRP, through the solver adapters) where installed, else the best tour found here; a TSPLIB file's
published optimum, in its units.

    python benchmarks/revision.py                                  # runs/first/shpp20/best.pt
    python benchmarks/revision.py --policy agents/weights/shpp20.pt --augment 8 --count 50
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from agents.inference.local_search import improve
from agents.inference.revision import revise
from agents.policies.pretrained import load_policy_file
from agents.references.heuristics import heuristic_tours
from agents.references.solvers import available, solve
from routing_gym import tsplib
from routing_gym.problems import TSP, get_problem, tour_cost

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = {"tsp": ("lkh", 1.0), "cvrp": ("pyvrp", 2.0)}  # solver, seconds per instance (times --reference-seconds)


def timed(fn, *args, **kwargs):
    began = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - began


def pieces(policy, problem, instances, args) -> dict[str, tuple[torch.Tensor, float]]:
    """Tours (B, N) and seconds (for the batch, the earlier pieces' included) of each combination."""
    kw = {"window": args.window, "augment": args.augment, "samples": args.samples, "rounds": args.rounds,
          "generator": torch.Generator().manual_seed(0)}
    nn, t_nn = timed(heuristic_tours, problem, instances, "nearest")
    (nn_rev, _), t_rev = timed(revise, policy, problem, instances, nn, **kw)
    (nn_ls, _), t_ls = timed(improve, problem, instances, nn)
    (nn_ls_rev, _), t_ls_rev = timed(revise, policy, problem, instances, nn_ls, **kw)
    (nn_rev_ls, _), t_rev_ls = timed(improve, problem, instances, nn_rev)
    return {"NN": (nn, t_nn), "NN + revise": (nn_rev, t_nn + t_rev), "NN + LS": (nn_ls, t_nn + t_ls),
            "NN + LS + revise": (nn_ls_rev, t_nn + t_ls + t_ls_rev),
            "NN + revise + LS": (nn_rev_ls, t_nn + t_rev + t_rev_ls)}


def generated(policy, name: str, n: int, args) -> tuple[str, dict[str, tuple[float, float]]]:
    problem = get_problem(name)
    instances = problem.generate(args.count, n, generator=torch.Generator().manual_seed(args.seed))
    out = pieces(policy, problem, instances, args)
    costs = {k: tour_cost(problem, instances, tours) for k, (tours, _) in out.items()}
    method, seconds = REFERENCE[name]
    if args.reference_seconds > 0 and available(method):
        ref = solve(problem, instances, method, seconds * args.reference_seconds, progress=False,
                    seed=args.seed).cost.double()
        source = method
    else:
        ref, source = torch.stack(list(costs.values())).min(dim=0).values, "best here"
    gaps = {k: float((100 * (c - ref) / ref).mean()) for k, c in costs.items()}
    return (f"{problem.label}-{n} x {args.count} (seed {args.seed}, vs {source})",
            {k: (gaps[k], out[k][1] / args.count) for k in out})


def real(policy, path: Path, args) -> tuple[str, dict[str, tuple[float, float]]]:
    inst = tsplib.load(path)
    out = pieces(policy, TSP, inst.instance, args)
    return f"{inst.name} (n = {inst.coords.shape[0]})", {k: (tsplib.gap(inst, tsplib.cost(inst, t)), s)
                                                        for k, (t, s) in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--policy", type=Path, default=ROOT / "runs/first/shpp20/best.pt", help="SHPP policy file")
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 200], help="TSP sizes")
    ap.add_argument("--cvrp-sizes", type=int, nargs="*", default=[100])
    ap.add_argument("--count", type=int, default=20, help="generated instances per size")
    ap.add_argument("--seed", type=int, default=4321)
    ap.add_argument("--window", type=int, default=20)
    ap.add_argument("--augment", type=int, default=8, help="greedy paths per window (mirror images)")
    ap.add_argument("--samples", type=int, default=0, help="sampled paths per window besides")
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--reference-seconds", type=float, default=1.0, help="LKH seconds per instance (0: none)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    policy = load_policy_file(args.policy)
    rows = [generated(policy, "tsp", n, args) for n in args.sizes]
    rows += [real(policy, path, args) for path in sorted((ROOT / "tests/data").glob("*.tsp"))]
    rows += [generated(policy, "cvrp", n, args) for n in args.cvrp_sizes]
    names = list(rows[0][1])
    print(f"SHPP policy {args.policy}, window {args.window}, augment {args.augment}, samples {args.samples}; "
          "gap % (seconds per instance)\n")
    print("| set | " + " | ".join(names) + " |\n|---|" + "---|" * len(names))
    for label, cells in rows:
        print(f"| {label} | " + " | ".join(f"{cells[k][0]:.2f}% ({cells[k][1]:.2f} s)" for k in names) + " |")


if __name__ == "__main__":
    main()
