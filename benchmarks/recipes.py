"""Training recipes at equal wall-clock budgets: greedy gap on a held-out set against minutes of training.

Each recipe is a set of ``routing-gym train`` options. One command runs one row (a recipe on a problem,
for a budget), writing ``runs/recipes/{problem}{n}-{recipe}/``; ``--report`` prints the table of every
finished row and draws the curves (gap against wall-clock minutes, one line per recipe)::

    routing-gym solve --problem tsp --num-nodes 20 --method lkh --num-instances 1000 --seed 5678 \\
        --time-limit 0.1 --save runs/heldout/tsp20_s5678.npz          # the held-out set, once
    python benchmarks/recipes.py --problem tsp --recipe paper --minutes 20
    python benchmarks/recipes.py --problem tsp --recipe pomo --minutes 20
    python benchmarks/recipes.py --report --out docs/images/recipes.png
    python benchmarks/recipes.py --moonshot                          # the 180-minute comparison below

The held-out set (seed 5678) is kept apart from the training stream (seed 0), the trainer's validation
seed (1234), the baseline's evaluation sets and the test sets of ``docs/quality.md`` (seed 4321). Its
references come from the solver adapters. The run validates on it after every epoch (``--val-dataset``),
so ``metrics.csv`` has ``val_gap`` and ``elapsed_s`` (wall clock, validation included) per epoch.
Runs use one torch thread (``--threads``); compare rows measured on the same machine under the same load.

``--moonshot`` asks whether a recipe reaches within its budget (60 minutes at most) the gap that the
paper's recipe reaches in 180 minutes on this machine. The paper's row gives its throughput here (instances per second of wall
clock, validation included); 180 minutes at that rate is an instance count, and the paper-recipe
training history (``training/{problem}{n}-rollout/metrics.csv``: the same recipe from scratch, validated
on the trainer's own set, seed 1234, its first 2,000 instances) gives the validation cost at that count.
Each recipe's model at the end of its run (``last.pt``) is evaluated greedily on that same set, whose LKH
references come from ``routing-gym solve ... --num-instances 10000 --seed 1234 --save
runs/heldout/{problem}{n}_val1234.npz`` (a set drawn from one seed starts with the smaller sets drawn from it).
Gaps here are ratios of mean costs (the history holds mean costs only).

A recipe in ``LABELS`` first solves its labelled instances, drawn from the seed it gives there (LKH-3 for TSP and
SHPP; for a recipe in ``SELF_LABELS``, the shipped model's own search, ``routing-gym eval --save``) into the row's folder
(``labels.npz``, and ``labels.json`` with the seconds it took), then trains with ``--imitate``; the labelling
counts in the row's budget, and its curve starts at the labelling's end.

``--projection`` fits that paper-recipe history (gap against instances seen, a power law over the
second half of the run: the straight part of the log-log curve) and prints how many more instances,
and hours at the run's own throughput, the gap targets would take. The reference mean is the
validation set's (``runs/heldout/{problem}{n}_val1234.npz``) where it exists, else the test set's
(``runs/test/{problem}{n}.npz``, another sample of the same distribution; an estimate). ``--run FOLDER``
projects another run instead (a recipe row, whose ``val_gap`` needs no reference set)::

    python benchmarks/recipes.py --problem tsp --projection 2 1 --run runs/recipes/tsp20-small-b128
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path


def from_weights(weights: str, lr: str) -> list[str]:
    """Training that starts from ``weights`` (a checkpoint or policy file; ``{problem}`` and ``{n}`` filled in):
    the rollout baseline is that model from the first batch (no exponential warm-up), batches of 128, and Adam's
    rate warmed up over 5 % of the budget (a fresh Adam's first steps are full-sized) to ``lr``, then a cosine
    decay to 0."""
    return ["--init-from", weights, "--warmup-epochs", "0", "--baseline", "rollout", "--batch-size", "128", "--lr", lr,
            "--lr-schedule", "cosine", "--lr-warmup", "0.05"]


RECIPES = {
    # the paper's recipe (Kool et al. 2019): greedy-rollout baseline, batch 512, Adam 1e-4
    "paper": ["--baseline", "rollout", "--batch-size", "512", "--lr", "1e-4"],
    # the same with four times as many, four times smaller steps
    "rollout-b128": ["--baseline", "rollout", "--batch-size", "128", "--lr", "1e-4"],
    # batches of 128 with a smaller network (embeddings 64 instead of 128, 2 encoder layers instead of 3,
    # feed-forward 256 instead of 512): several times fewer operations per instance
    "small-b128": ["--baseline", "rollout", "--batch-size", "128", "--lr", "1e-4", "--embed-dim", "64",
                   "--n-layers", "2", "--ff-hidden", "256"],
    # small-b128 with a budgeted schedule (Li et al., "Budgeted training", ICLR 2020): three times the peak rate,
    # reached after a linear warm-up over 2 % of the budget, then a half cosine down to 0 at the budget's end
    "small-b128-cos3e-4": ["--baseline", "rollout", "--batch-size", "128", "--lr", "3e-4", "--lr-schedule", "cosine",
                           "--lr-warmup", "0.02", "--embed-dim", "64", "--n-layers", "2", "--ff-hidden", "256"],
    # a supervised warm start (Vinyals et al. 2015's teacher forcing) on LKH-3 tours of LABELS[recipe] seeded
    # instances, 16 epochs (each label used 4 times), then REINFORCE as small-b128-cos3e-4, one schedule over both
    "sl-small-b128-cos3e-4": ["--imitation-epochs", "16", "--baseline", "rollout", "--batch-size", "128", "--lr", "3e-4",
                              "--lr-schedule", "cosine", "--lr-warmup", "0.02", "--embed-dim", "64", "--n-layers", "2",
                              "--ff-hidden", "256"],
    # fine-tuning the committed paper-recipe run (training/{problem}{n}-rollout, its last epoch), peak rate 1e-4
    "finetune-b128-cos": from_weights("training/{problem}{n}-rollout/last.pt", "1e-4"),
    # the same with a peak rate of 3e-5: finetune-b128-cos improved the model while its rate was below about 4e-5
    # (its warm-up) and made it worse at 1e-4
    "finetune-b128-cos3e-5": from_weights("training/{problem}{n}-rollout/last.pt", "3e-5"),
    # another cosine from 3e-5 over the shipped model (agents/weights/{problem}{n}.pt): what a further budget of
    # finetune-b128-cos3e-5 buys a model that has had one
    "continue-b128-cos3e-5": from_weights("agents/weights/{problem}{n}.pt", "3e-5"),
    # the same from 1e-5: continue-b128-cos3e-5 improved the shipped CVRP-20 model in its warm-up (rate up to
    # 1.1e-5) and made it worse at 3e-5
    "continue-b128-cos1e-5": from_weights("agents/weights/{problem}{n}.pt", "1e-5"),
    # another cosine over the shipped model from 1e-4: a longer second anneal, from a rate at which a model that
    # ended its first one near 0 can move again (for TSP-20's small network, whose first cosine peaked at 3e-4)
    "continue-b128-cos1e-4": from_weights("agents/weights/{problem}{n}.pt", "1e-4"),
    # the same in bf16 autocast (1.4x the instances per second of OP-20's batches of 128 on a CPU with bf16 matrix
    # units, docs/recipes.md's twenty-fourth comparison) from training stream seed 6, not the seed 0 of the anneals
    # before it
    "continue-bf16-b128-cos1e-4": [*from_weights("agents/weights/{problem}{n}.pt", "1e-4"), "--bf16", "--seed", "6"],
    # a short anneal of a model that has just had one: the same from 2e-5, training stream seed 7
    "continue-bf16-b128-cos2e-5": [*from_weights("agents/weights/{problem}{n}.pt", "2e-5"), "--bf16", "--seed", "7"],
    # and from 1e-5, training stream seed 8
    "continue-bf16-b128-cos1e-5": [*from_weights("agents/weights/{problem}{n}.pt", "1e-5"), "--bf16", "--seed", "8"],
    # the shipped model continued with POMO's shared baseline (64 instances x n starts a step), a cosine from 2e-5:
    # training every start is training the multi-start decoding
    "continue-pomo-cos2e-5": ["--init-from", "agents/weights/{problem}{n}.pt", "--baseline", "pomo", "--batch-size",
                              "64", "--lr", "2e-5", "--lr-schedule", "cosine", "--lr-warmup", "0.05"],
    # a larger size by transfer: the shipped n = 20 model (agents/weights/{problem}20.pt, its network's settings)
    # trained on n-node instances with batches of 128 and a cosine from 1e-4 (the attention model is size-agnostic)
    "transfer20-b128-cos1e-4": from_weights("agents/weights/{problem}20.pt", "1e-4"),
    # the same on mixed sizes: each batch has 20, 50 or 100 nodes (drawn uniformly), validated at --num-nodes
    "transfer20-mixed-b128-cos1e-4": from_weights("agents/weights/{problem}20.pt", "1e-4")
    + ["--mixed-sizes", "20", "50", "100"],
    # POMO (Kwon et al. 2020): every start node sampled, their mean the shared baseline; 64 instances
    # x n starts per step, Adam 1e-4 as in the POMO paper
    "pomo": ["--baseline", "pomo", "--batch-size", "64", "--lr", "1e-4"],
    # POMO with a higher learning rate
    "pomo-lr3e-4": ["--baseline", "pomo", "--batch-size", "64", "--lr", "3e-4"],
    # pomo-lr3e-4 with every instance also rolled out on its 8 symmetric copies, one shared baseline over all
    # 8 x n rollouts (POMO's augmentation in training; Sym-NCO's problem symmetricity, Kim et al. 2022); 8
    # instances a step, so that a step samples as many tours as pomo-lr3e-4's 64
    "pomo-aug8-lr3e-4": ["--baseline", "pomo", "--augment", "8", "--batch-size", "8", "--lr", "3e-4"],
    # self-labelling (Corsini et al. 2024, "Self-labeling the job shop scheduling problem"; Pirnay & Grimm 2024,
    # "Self-improvement for neural combinatorial optimization"): the shipped model's own multi-start x 2 tours of
    # LABELS[recipe] seeded instances (SELF_LABELS) imitated by that model, 10 epochs, then REINFORCE; one cosine
    # from 1e-4 over both. Greedy decoding learns what the model's search finds
    "selflabel-aug2-cos1e-4": [*from_weights("agents/weights/{problem}{n}.pt", "1e-4"), "--imitation-epochs", "10"],
    # the same with the shipped model's greedy tours on the 8 symmetric copies of each instance, the best kept
    # (greedy x 8), as labels: tours the greedy policy itself takes on a copy, with no forced first node (the
    # multi-start labels' first step is a start the greedy policy has no reason to prefer); 16 imitation epochs
    "selflabel-greedy8-cos1e-4": [*from_weights("agents/weights/{problem}{n}.pt", "1e-4"), "--imitation-epochs", "16"],
    # selflabel-greedy8-cos1e-4 in bf16 autocast (1.6x the instances per second in imitation, 1.4x in REINFORCE, on
    # OP-20), with fresh streams: twice the labels from another seed (LABELS) and training stream seed 5, so a
    # further round does not revisit the instances of the rounds before it
    "selflabel-greedy8-bf16-cos1e-4": [*from_weights("agents/weights/{problem}{n}.pt", "1e-4"), "--imitation-epochs",
                                       "16", "--bf16", "--seed", "5"],
}
# recipes that imitate labels first: how many labelled instances they draw and from which seed (apart from every
# other stream), and which solver labels each problem; the labelling's wall clock counts in the row's minutes
LABELS = {"sl-small-b128-cos3e-4": (128_000, 11), "selflabel-aug2-cos1e-4": (32_000, 11),
          "selflabel-greedy8-cos1e-4": (64_000, 11), "selflabel-greedy8-bf16-cos1e-4": (128_000, 12)}
LABEL_SOLVER = {problem: ["--method", "lkh", "--time-limit", "0.1"] for problem in ("tsp", "shpp")}
# recipes labelled by a policy's search instead (routing-gym eval --save), for any problem
GREEDY8 = ["--policy", "agents/weights/{problem}{n}.pt", "--decode", "greedy", "--augment", "8"]
SELF_LABELS = {"selflabel-aug2-cos1e-4": ["--policy", "agents/weights/{problem}{n}.pt", "--decode", "multistart",
                                          "--augment", "2"],
               "selflabel-greedy8-cos1e-4": GREEDY8, "selflabel-greedy8-bf16-cos1e-4": GREEDY8}
HELD_OUT = "runs/heldout/{problem}{n}_s5678.npz"
ROOT = Path("runs/recipes")


def run(problem: str, n: int, recipe: str, minutes: float, threads: int, epoch_size: int, tag: str | None = None,
        seed: int | None = None, label_seed: int | None = None) -> int:
    """Train one row; ``seed`` and ``label_seed`` replace the recipe's training-stream and label seeds (a
    further round of a recipe on instances no earlier round saw)."""
    held_out = HELD_OUT.format(problem=problem, n=n)
    if not Path(held_out).is_file():
        raise SystemExit(f"{held_out} is missing: make it with routing-gym solve (see this script's docstring)")
    out = ROOT / f"{problem}{n}-{recipe}{f'-{tag}' if tag else ''}"
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    resume = out / "last.pt"
    if resume.is_file():  # a killed row continues; a finished one says its budget is spent
        cmd = ["--resume", str(resume)]
    else:
        cmd = ["--problem", problem, "--num-nodes", str(n), "--epoch-size", str(epoch_size), "--epochs", "100000",
               "--val-dataset", held_out, "--out-dir", str(out),
               *(arg.format(problem=problem, n=n) for arg in RECIPES[recipe])]
        if seed is not None:  # after the recipe's own --seed, so it wins
            cmd += ["--seed", str(seed)]
        if recipe in LABELS:
            cmd += ["--imitate", str(make_labels(out, problem, n, recipe, env, label_seed))]
        elif label_seed is not None:
            raise SystemExit(f"{recipe} imitates no labels: --label-seed does not apply")
    minutes -= labelling_seconds(out) / 60  # the labels were made within the row's budget
    return subprocess.call([sys.executable, "-m", "agents.apps.cli", "train", *cmd, "--max-minutes", str(minutes),
                            "--no-progress"], env=env)


def make_labels(out: Path, problem: str, n: int, recipe: str, env: dict, seed: int | None = None) -> Path:
    """The row's labelled instances (``out/labels.npz``), solved now (by the solver of ``LABEL_SOLVER``, or
    the policy search of ``SELF_LABELS``) unless a killed row left them; the seconds it took go to
    ``out/labels.json``."""
    path = out / "labels.npz"
    if path.is_file() and (out / "labels.json").is_file():
        return path
    count, recipe_seed = LABELS[recipe]
    seed = recipe_seed if seed is None else seed
    if recipe in SELF_LABELS:
        labeller = ["eval", *(arg.format(problem=problem, n=n) for arg in SELF_LABELS[recipe])]
    elif problem in LABEL_SOLVER:
        labeller = ["solve", *LABEL_SOLVER[problem]]
    else:
        raise SystemExit(f"no fast solver labels {problem} here (labels for: {', '.join(LABEL_SOLVER)})")
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    code = subprocess.call([sys.executable, "-m", "agents.apps.cli", labeller[0], "--problem", problem, "--num-nodes",
                            str(n), *labeller[1:], "--num-instances", str(count), "--seed", str(seed),
                            "--save", str(path), "--no-progress"], env=env)
    if code:
        raise SystemExit(f"labelling failed (exit {code})")
    (out / "labels.json").write_text(json.dumps({"instances": count, "seed": seed,
                                                 "seconds": time.perf_counter() - start}))
    return path


def labelling_seconds(folder: Path) -> float:
    """The wall clock spent on a row's labels (0 for a row without them)."""
    record = folder / "labels.json"
    return json.loads(record.read_text())["seconds"] if record.is_file() else 0.0


def rows(select: tuple[str, ...] = ("*-*",)) -> list[dict]:
    """The rows under ``ROOT`` whose folder names match one of the globs ``select``."""
    table = []
    for folder in sorted({folder for pattern in select for folder in ROOT.glob(pattern)}):
        metrics = folder / "metrics.csv"
        if not metrics.is_file():
            continue
        with metrics.open() as f:
            epochs = [r for r in csv.DictReader(f) if r.get("val_gap")]
        if not epochs:
            continue
        name, recipe = folder.name.split("-", 1)
        offset = labelling_seconds(folder)
        curve = [((offset + float(r["elapsed_s"])) / 60, 100 * float(r["val_gap"]), int(r["instances_seen"]))
                 for r in epochs]
        table.append({"run": name, "recipe": recipe, "curve": curve})
    return table


def gap_at(curve, minutes: float) -> float | None:
    """The last validated gap at or before ``minutes`` (None before the first validation, or past the end
    of the run); a run's last validation, which ends a few seconds past its budget, counts at the budget."""
    if curve[-1][0] < minutes * 0.97:  # the run stopped before this mark
        return None
    seen = [gap for t, gap, _ in curve if t <= minutes * 1.03]
    return seen[-1] if seen else None


def report(out: str | None, marks: list[float], select: tuple[str, ...] = ("*-*",)) -> None:
    table = rows(select)
    if not table:
        raise SystemExit(f"no finished runs under {ROOT} match {' '.join(select)}")
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
        fig, axes = plt.subplots(2, len(runs), figsize=(5.5 * len(runs), 8), squeeze=False)
        for column, name in enumerate(runs):
            for row, (x, label) in enumerate(((0, "wall-clock minutes (1 torch thread)"),
                                              (2, "training instances (labelled ones included)"))):
                ax = axes[row][column]
                for r in (r for r in table if r["run"] == name):
                    ax.plot([p[x] for p in r["curve"]], [p[1] for p in r["curve"]], marker=".", label=r["recipe"])
                ax.set(title=f"{name.upper()}: greedy gap on 1,000 held-out instances", xlabel=label,
                       ylabel="gap to the solver reference (%)", yscale="log", xscale="linear" if x == 0 else "log")
                ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
                ax.yaxis.set_minor_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
                ax.grid(alpha=0.3, which="both")
                ax.legend()
        fig.tight_layout()
        fig.savefig(out, dpi=110)
        print(f"saved {out}")


def history_val_size(problem: str, n: int) -> int:
    """How many instances of the seed-1234 validation set the paper-recipe run validated on (its first
    ones: a smaller set is a prefix of a larger one drawn from the same seed)."""
    import torch

    ckpt = torch.load(f"training/{problem}{n}-rollout/last.pt", map_location="cpu", weights_only=True)
    if ckpt["config"]["val_seed"] != 1234 or ckpt["config"].get("val_dataset"):
        raise SystemExit(f"training/{problem}{n}-rollout validated on another set than seed 1234's")
    return int(ckpt["config"]["val_size"])


def paper_history(problem: str, n: int, ref: float):
    """The paper-recipe run's history (``training/{problem}{n}-rollout``) against the reference mean ``ref``:
    :func:`run_history`."""
    return run_history(Path(f"training/{problem}{n}-rollout"), ref)


def run_history(folder: Path, ref: float | None = None):
    """A run's validated epochs (``folder/metrics.csv``), their instances seen and gaps (its ``val_gap``
    where it validated on a labelled set, else its mean cost against the reference mean ``ref``), and the
    power-law fit ``log gap = intercept + slope log instances`` over the second half (the straight part of
    the log-log curve): ``(rows, seen, gaps, slope, intercept)``."""
    import numpy as np

    with (folder / "metrics.csv").open() as f:
        rows = [r for r in csv.DictReader(f) if r.get("val_cost")]
    seen = np.array([int(r["instances_seen"]) for r in rows], float)
    if all(r.get("val_gap") for r in rows):
        gaps = np.array([float(r["val_gap"]) for r in rows])
    elif ref is None:
        raise SystemExit(f"{folder} has no val_gap column: give a reference set (see the docstring)")
    else:
        gaps = np.array([(float(r["val_cost"]) - ref) / abs(ref) for r in rows])
    half = len(rows) // 2
    slope, intercept = np.polyfit(np.log(seen[half:]), np.log(gaps[half:]), 1)
    return rows, seen, gaps, slope, intercept


def moonshot(problem: str, n: int, paper_minutes: float = 180.0) -> None:
    import numpy as np
    import torch

    from agents.apps.cli import load_policy
    from agents.inference.rollout import evaluate
    from routing_gym.data import load_dataset

    val_path = Path(f"runs/heldout/{problem}{n}_val1234.npz")
    if not val_path.is_file():
        raise SystemExit(f"{val_path} is missing: make it with routing-gym solve (see this script's docstring)")
    size = history_val_size(problem, n)
    instances, refs = load_dataset(val_path, problem)
    if len(refs["ref_cost"]) < size:
        raise SystemExit(f"{val_path} holds {len(refs['ref_cost'])} instances; the history validated on {size}")
    instances = type(instances)(*(f[:size] for f in instances))
    ref = float(np.mean(refs["ref_cost"][:size]))
    with (ROOT / f"{problem}{n}-paper" / "metrics.csv").open() as f:
        last = list(csv.DictReader(f))[-1]
    rate = int(last["instances_seen"]) / float(last["elapsed_s"])
    target = rate * paper_minutes * 60
    history, seen, gaps, slope, intercept = paper_history(problem, n, ref)
    reached = [r for r in history if int(r["instances_seen"]) >= target]
    print(f"{problem.upper()}-{n}, the paper-recipe run's validation set ({size:,} instances, seed 1234; LKH mean {ref:.4f})")
    print(f"paper recipe here: {rate:.0f} instances/s over its {float(last['elapsed_s']) / 60:.0f}-minute row, "
          f"so {paper_minutes:g} minutes = {target:,.0f} instances")
    if reached:
        r = reached[0]
        print(f"  paper-recipe history (training/{problem}{n}-rollout, from scratch) at {int(r['instances_seen']):,} instances: "
              f"cost {float(r['val_cost']):.4f}, gap {100 * (float(r['val_cost']) / ref - 1):.2f} %")
    else:
        last_seen, last_cost = int(history[-1]["instances_seen"]), float(history[-1]["val_cost"])
        print(f"  paper-recipe history (training/{problem}{n}-rollout, from scratch) stops at {last_seen:,} instances: cost "
              f"{last_cost:.4f}, gap {100 * (last_cost / ref - 1):.2f} %; its power-law fit (second half) at "
              f"{target:,.0f}: gap {100 * np.exp(intercept + slope * np.log(target)):.2f} %")
    for folder in sorted(ROOT.glob(f"{problem}{n}-*")):
        with (folder / "metrics.csv").open() as f:
            end = list(csv.DictReader(f))[-1]
        policy = load_policy(str(folder / "last.pt"), problem, n)
        with torch.no_grad():
            cost = float(evaluate(policy, problem, instances, batch_size=1000).mean())
        print(f"  {folder.name.split('-', 1)[1]}: {float(end['elapsed_s']) / 60:.0f} minutes, "
              f"{int(end['instances_seen']):,} instances: cost {cost:.4f}, gap {100 * (cost / ref - 1):.2f} %")


def projection(problem: str, n: int, targets: list[float], run: str | None = None) -> None:
    import numpy as np

    from routing_gym.data import load_dataset

    folder = Path(run or f"training/{problem}{n}-rollout")
    ref, source = None, "its own val_gap"
    if run is None:  # the paper-recipe history validated on generated instances: a reference mean from a solver
        for path in (Path(f"runs/heldout/{problem}{n}_val1234.npz"), Path(f"runs/test/{problem}{n}.npz")):
            if path.is_file():
                break
        else:
            raise SystemExit(f"no reference set for {problem}{n}: make one with routing-gym solve (see the docstring)")
        refs = load_dataset(path, problem)[1]["ref_cost"]
        ref = float(np.mean(refs[:history_val_size(problem, n)] if "val1234" in path.name else refs))
        source = f"reference mean {ref:.4f} from {path}"
    history, seen, gap, slope, intercept = run_history(folder, ref)
    last = history[-1]
    if history[0].get("elapsed_s"):  # wall clock, validation included, recorded from the start
        seconds, clock = float(last["elapsed_s"]), "wall clock"
    else:  # older runs recorded the training time of each epoch only
        seconds, clock = sum(float(r["train_time_s"]) for r in history), "training time"
    rate = seen[-1] / seconds
    half = len(history) // 2
    print(f"{folder}: {len(history)} epochs, {seen[-1]:,.0f} instances, gap now {100 * gap[-1]:.2f} % ({source}); "
          f"fit over the last {len(history) - half} epochs: gap ~ instances^{slope:.3f}")
    for target in targets:
        need = float(np.exp((np.log(target / 100) - intercept) / slope)) if slope < 0 else float("inf")
        more = max(need - seen[-1], 0.0)
        print(f"  {target:g} %: {need:,.0f} instances in all, {more:,.0f} more, about {more / rate / 3600:,.1f} hours "
              f"of one thread at its {rate:.0f} instances/s of {clock}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problem", default="tsp")
    parser.add_argument("--num-nodes", type=int, default=20)
    parser.add_argument("--recipe", choices=tuple(RECIPES))
    parser.add_argument("--minutes", type=float, default=20.0, help="wall-clock budget of the run")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--tag", help="a second row of the same recipe (another budget): runs/recipes/PROBLEMN-RECIPE-TAG")
    parser.add_argument("--epoch-size", type=int, default=32_000, help="instances between validations")
    parser.add_argument("--seed", type=int, help="the training stream's seed in place of the recipe's")
    parser.add_argument("--label-seed", type=int, help="the labelled instances' seed in place of the recipe's (LABELS)")
    parser.add_argument("--report", action="store_true", help="print the table of the finished runs")
    parser.add_argument("--marks", type=float, nargs="+", default=[5, 10, 20], help="table columns (minutes)")
    parser.add_argument("--out", help="with --report: save the curves as this PNG")
    parser.add_argument("--select", nargs="+", default=["*-*"], metavar="GLOB",
                        help="with --report: only the rows whose folder names match one of these globs")
    parser.add_argument("--projection", type=float, nargs="*", metavar="GAP",
                        help="project the paper-recipe run's history to these gaps in %% (see the docstring)")
    parser.add_argument("--run", help="with --projection: the run folder to project (a recipe row, or a training/ "
                        "run; default: the paper-recipe run training/PROBLEMN-rollout)")
    parser.add_argument("--moonshot", action="store_true", help="the paper recipe's 180-minute gap against each "
                        "recipe's model (see the docstring)")
    args = parser.parse_args()
    if args.projection is not None:
        projection(args.problem, args.num_nodes, args.projection or [1.0], args.run)
    elif args.moonshot:
        moonshot(args.problem, args.num_nodes)
    elif args.report:
        report(args.out, args.marks, args.select)
    elif args.recipe is None:
        parser.error("give --recipe (or --report)")
    else:
        sys.exit(run(args.problem, args.num_nodes, args.recipe, args.minutes, args.threads, args.epoch_size, args.tag,
                     args.seed, args.label_seed))


if __name__ == "__main__":
    main()
