"""A first Attention Model per problem on a CPU budget, against nearest neighbour and a solver reference.

Each row trains ``routing-gym train`` at n = 20 for ``--minutes`` of wall clock on one torch thread with the
small recipe that learns fastest here (``small-b128-cos3e-4`` of ``benchmarks/recipes.py``: embeddings 64,
2 encoder layers, batches of 128, a cosine from 3e-4 over the budget), into ``runs/first/{problem}20/``
(``--resume`` when that folder holds a run). Then it evaluates, on ``--instances`` seeded test instances (seed
4321): the model's greedy decoding and multi-start x8 (where the problem has start nodes), the ``nearest``
heuristic, and the solver reference where one handles the problem (``routing_gym``'s adapters, ``--time-limit``
seconds each, on the first ``--reference`` instances); gaps are paired over those instances.

    python benchmarks/first_models.py --problems atsp cvrptw pdp mtsp cvrpmvc --minutes 12
    python benchmarks/first_models.py --report --problems atsp cvrptw pdp mtsp cvrpmvc   # evaluate only
    python benchmarks/first_models.py --problems mtvrp --variant mixed --minutes 20          # one model, 48 variants
    python benchmarks/first_models.py --problems mtvrp --variant mixed --minutes 20 --reward-norm variant
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import torch

RECIPE = ["--baseline", "rollout", "--batch-size", "128", "--lr", "3e-4", "--lr-schedule", "cosine",
          "--lr-warmup", "0.02", "--embed-dim", "64", "--n-layers", "2", "--ff-hidden", "256"]


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--problems", nargs="+", required=True)
    p.add_argument("--num-nodes", type=int, default=20)
    p.add_argument("--minutes", type=float, default=12.0, help="training budget per problem (wall clock)")
    p.add_argument("--epochs", type=int, default=None,
                   help="train this many epochs of 12,800 instances instead of --minutes (a budget that a loaded "
                   "machine does not shrink)")
    p.add_argument("--variant", default=None, help="MTVRP's --variant for training (e.g. mixed)")
    p.add_argument("--reward-norm", default="none", choices=("none", "variant"),
                   help="train's --reward-norm (per-variant normalisation; its runs go to a folder ending -norm)")
    p.add_argument("--report", action="store_true", help="evaluate the finished runs only (no training)")
    p.add_argument("--instances", type=int, default=1000)
    p.add_argument("--reference", type=int, default=100, help="instances the solver reference solves")
    p.add_argument("--time-limit", type=float, default=0.5)
    p.add_argument("--out", default=None, help="also write the table to this markdown file")
    p.add_argument("--root", type=Path, default=Path("runs/first"), help="where the runs are")
    return p.parse_args(argv)


def folder(problem: str, args) -> Path:
    norm = "-norm" if args.reward_norm != "none" else ""
    return args.root / f"{problem}{args.num_nodes}{'-' + args.variant if args.variant else ''}{norm}"


def train(problem: str, args) -> None:
    out = folder(problem, args)
    cmd = [sys.executable, "-m", "agents.apps.cli", "train", "--problem", problem, "--num-nodes", str(args.num_nodes),
           *(["--epochs", str(args.epochs)] if args.epochs else ["--max-minutes", str(args.minutes), "--epochs", "1000"]),
           "--epoch-size", "12800", "--val-size", "1000",
           "--eval-size", "1000", "--no-progress", *RECIPE]
    if args.variant:
        cmd += ["--variant", args.variant]
    if args.reward_norm != "none":
        cmd += ["--reward-norm", args.reward_norm]
    cmd += ["--resume", str(out / "last.pt"), "--out-dir", str(out)] if (out / "last.pt").exists() \
        else ["--out-dir", str(out)]
    print(" ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, env={**os.environ, "OMP_NUM_THREADS": "1"})


def evaluate(problem_name: str, args) -> dict:
    from agents.inference.search import decode
    from agents.policies.pretrained import load_policy_file
    from agents.references import heuristics, solvers
    from routing_gym.problems import get_problem, tour_cost

    torch.set_num_threads(1)
    problem = get_problem(problem_name)
    test = problem.generate(args.instances, args.num_nodes, generator=torch.Generator().manual_seed(4321),
                            **({"variant": "mixed"} if args.variant else {}))
    run = folder(problem_name, args)
    policy = load_policy_file(run / "best.pt" if (run / "best.pt").exists() else run / "last.pt")
    row = {"problem": problem.label + (f" ({args.variant})" if args.variant else ""), "n": args.num_nodes}
    start = time.perf_counter()
    row["greedy"] = decode(policy, problem, test, "greedy").cost.double()
    row["greedy s"] = time.perf_counter() - start
    try:
        row["multistart x8"] = decode(policy, problem, test, "multistart", augment=8).cost.double()
    except ValueError as e:  # no start nodes or no coordinates to augment
        print(f"{problem.label}: multi-start x8 skipped ({e})", flush=True)
    row["nearest"] = tour_cost(problem, test, heuristics.heuristic_tours(problem, test, "nearest")).double()
    method = next((m for m in ("pyvrp", "lkh") if problem.name in solvers.SUPPORTED.get(m, ()) and solvers.available(m)),
                  None)
    if method:
        k = min(args.reference, args.instances)
        head = type(test)(*(f[:k] for f in test))
        row["reference"] = solvers.solve(problem, head, method, args.time_limit, progress=False).cost.double()
        row["method"] = method
    return row


def gap(a: torch.Tensor, ref: torch.Tensor) -> str:
    k = len(ref)
    d = (a[:k] - ref) / ref.abs()
    return f"{100 * float(d.mean()):.2f} ± {100 * float(d.std() / k ** 0.5):.2f} %"


def table(rows: list[dict]) -> str:
    lines = ["| problem | n | greedy | multi-start x8 | nearest | reference | greedy gap | x8 gap | nearest gap | "
             "greedy vs nearest |", "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|"]
    for r in rows:
        ref = r.get("reference")
        ms = r.get("multistart x8")
        cells = [r["problem"], str(r["n"]), f"{float(r['greedy'].mean()):.4f}",
                 f"{float(ms.mean()):.4f}" if ms is not None else "-", f"{float(r['nearest'].mean()):.4f}",
                 f"{float(ref.mean()):.4f} ({r['method']}, first {len(ref)})" if ref is not None else "no solver",
                 gap(r["greedy"], ref) if ref is not None else "-",
                 gap(ms, ref) if ref is not None and ms is not None else "-",
                 gap(r["nearest"], ref) if ref is not None else "-",
                 f"{100 * float(((r['greedy'] - r['nearest']) / r['nearest'].abs()).mean()):+.2f} %"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> None:
    args = parse_args(argv)
    if not args.report:
        for problem in args.problems:
            train(problem, args)
    rows = [evaluate(p, args) for p in args.problems]
    text = table(rows)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
