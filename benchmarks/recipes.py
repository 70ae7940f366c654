"""Training recipes at equal wall-clock budgets: greedy gap on a held-out set against minutes of training.

Each recipe is a set of ``routing-gym train`` options. One command runs one row (a recipe on a problem,
for a budget), writing ``runs/recipes/{problem}{n}-{recipe}/``; ``--report`` prints the table of every
finished row and draws the curves (gap against wall-clock minutes, one line per recipe)::

    routing-gym solve --problem tsp --num-nodes 20 --method lkh --num-instances 1000 --seed 5678 \\
        --time-limit 0.1 --save runs/heldout/tsp20_s5678.npz          # the held-out set, once
    python benchmarks/recipes.py --problem tsp --recipe paper --minutes 20
    python benchmarks/recipes.py --problem tsp --recipe pomo --minutes 20
    python benchmarks/recipes.py --report --out docs/images/recipes.png

The held-out set (seed 5678) is kept apart from the training stream (seed 0), the trainer's validation
seed (1234), the baseline's evaluation sets and the test sets of ``docs/quality.md`` (seed 4321). Its
references come from the solver adapters. The run validates on it after every epoch (``--val-dataset``),
so ``metrics.csv`` has ``val_gap`` and ``elapsed_s`` (wall clock, validation included) per epoch.
Runs use one torch thread (``--threads``); compare rows measured on the same machine under the same load.
"""
from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
from pathlib import Path

RECIPES = {
    # the paper's recipe (Kool et al. 2019): greedy-rollout baseline, batch 512, Adam 1e-4
    "paper": ["--baseline", "rollout", "--batch-size", "512", "--lr", "1e-4"],
    # the same with four times as many, four times smaller steps
    "rollout-b128": ["--baseline", "rollout", "--batch-size", "128", "--lr", "1e-4"],
    # POMO (Kwon et al. 2020): every start node sampled, their mean the shared baseline; 64 instances
    # x n starts per step, Adam 1e-4 as in the POMO paper
    "pomo": ["--baseline", "pomo", "--batch-size", "64", "--lr", "1e-4"],
    # POMO with a higher learning rate
    "pomo-lr3e-4": ["--baseline", "pomo", "--batch-size", "64", "--lr", "3e-4"],
}
HELD_OUT = "runs/heldout/{problem}{n}_s5678.npz"
ROOT = Path("runs/recipes")


def run(problem: str, n: int, recipe: str, minutes: float, threads: int, epoch_size: int) -> int:
    held_out = HELD_OUT.format(problem=problem, n=n)
    if not Path(held_out).is_file():
        raise SystemExit(f"{held_out} is missing: make it with routing-gym solve (see this script's docstring)")
    out = ROOT / f"{problem}{n}-{recipe}"
    resume = out / "last.pt"
    if resume.is_file():  # a killed row continues; a finished one says its budget is spent
        cmd = ["--resume", str(resume)]
    else:
        cmd = ["--problem", problem, "--num-nodes", str(n), "--epoch-size", str(epoch_size), "--epochs", "100000",
               "--val-dataset", held_out, "--out-dir", str(out), *RECIPES[recipe]]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    return subprocess.call([sys.executable, "-m", "agents.apps.cli", "train", *cmd, "--max-minutes", str(minutes),
                            "--no-progress"], env=env)


def rows() -> list[dict]:
    table = []
    for folder in sorted(ROOT.glob("*-*")):
        metrics = folder / "metrics.csv"
        if not metrics.is_file():
            continue
        with metrics.open() as f:
            epochs = [r for r in csv.DictReader(f) if r.get("val_gap")]
        if not epochs:
            continue
        name, recipe = folder.name.split("-", 1)
        curve = [(float(r["elapsed_s"]) / 60, 100 * float(r["val_gap"]), int(r["instances_seen"])) for r in epochs]
        table.append({"run": name, "recipe": recipe, "curve": curve})
    return table


def gap_at(curve, minutes: float) -> float | None:
    """The last validated gap at or before ``minutes`` (None before the first validation); a run's last
    validation, which ends a few seconds past its budget, counts at the budget."""
    seen = [gap for t, gap, _ in curve if t <= minutes * 1.03]
    return seen[-1] if seen else None


def report(out: str | None, marks: list[float]) -> None:
    table = rows()
    if not table:
        raise SystemExit(f"no finished runs under {ROOT}")
    head = "| problem | recipe | " + " | ".join(f"gap at {m:g} min" for m in marks) + " | minutes run | instances |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for r in table:
        gaps = [gap_at(r["curve"], m) for m in marks]
        last = r["curve"][-1]
        print(f"| {r['run']} | {r['recipe']} | " + " | ".join("-" if g is None else f"{g:.2f} %" for g in gaps)
              + f" | {last[0]:.1f} | {last[2]:,} |")
    if out:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker

        runs = sorted({r["run"] for r in table})
        fig, axes = plt.subplots(1, len(runs), figsize=(5.5 * len(runs), 4), squeeze=False)
        for ax, name in zip(axes[0], runs):
            for r in (r for r in table if r["run"] == name):
                ax.plot([t for t, _, _ in r["curve"]], [g for _, g, _ in r["curve"]], marker=".", label=r["recipe"])
            ax.set(title=f"{name.upper()}: greedy gap on 1,000 held-out instances", xlabel="wall-clock minutes "
                   "(1 torch thread)", ylabel="gap to the solver reference (%)", yscale="log")
            ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
            ax.yaxis.set_minor_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
            ax.grid(alpha=0.3, which="both")
            ax.legend()
        fig.tight_layout()
        fig.savefig(out, dpi=110)
        print(f"saved {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problem", default="tsp")
    parser.add_argument("--num-nodes", type=int, default=20)
    parser.add_argument("--recipe", choices=tuple(RECIPES))
    parser.add_argument("--minutes", type=float, default=20.0, help="wall-clock budget of the run")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--epoch-size", type=int, default=32_000, help="instances between validations")
    parser.add_argument("--report", action="store_true", help="print the table of the finished runs")
    parser.add_argument("--marks", type=float, nargs="+", default=[5, 10, 20], help="table columns (minutes)")
    parser.add_argument("--out", help="with --report: save the curves as this PNG")
    args = parser.parse_args()
    if args.report:
        report(args.out, args.marks)
    elif args.recipe is None:
        parser.error("give --recipe (or --report)")
    else:
        sys.exit(run(args.problem, args.num_nodes, args.recipe, args.minutes, args.threads, args.epoch_size))


if __name__ == "__main__":
    main()
