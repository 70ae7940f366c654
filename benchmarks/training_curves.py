"""Training curves: greedy validation cost against training instances seen, one panel per problem and size.

Reads the ``metrics.csv`` that ``routing-gym train`` writes after every epoch, and the run's settings from
its ``last.pt`` (problem, size, baseline, policy; or ``run.json``, the checkpoint's ``config`` and ``prior``,
beside a finished run committed without its checkpoint; a run that started from other weights is drawn
from their instances and time on), and draws every run given on the panel of its problem, each recipe in
one colour on every panel (one legend below the panels), with the paper's final greedy cost (Kool et al.
2019, Table 1, after 100 epochs of 1.28 M instances) as a dashed line::

    python benchmarks/training_curves.py runs/tsp20-rollout runs/cvrp20-rollout --out docs/images/training_curves.png
    python benchmarks/training_curves.py training/*/ --out curves.png     # the committed runs

Prints one line per run (instances seen, first and last validation cost) and saves the PNG.
"""
from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from agents.policies.checkpoint import load_checkpoint  # noqa: E402
from paper import paper_value  # noqa: E402


def read_run(folder: Path) -> dict:
    """One run: its settings and its per-epoch rows (instances seen, validation cost)."""
    metrics = folder / "metrics.csv"
    if not metrics.is_file():
        raise SystemExit(f"{folder}: no metrics.csv (not a training run's folder)")
    with metrics.open() as f:
        table = list(csv.DictReader(f))
    if (folder / "last.pt").is_file():
        ckpt = load_checkpoint(folder / "last.pt", kind="trainer")
    elif (folder / "run.json").is_file():  # a finished run committed without its resume checkpoint
        ckpt = json.loads((folder / "run.json").read_text())
    else:
        ckpt = {}
    config, prior = ckpt.get("config", {}), ckpt.get("prior", {})
    start = int(prior.get("instances_seen", 0))  # a run that continued other weights: their training first
    rows = [(start + int(r["instances_seen"]), float(r["val_cost"])) for r in table]
    seconds, elapsed = float(prior.get("elapsed_s", 0.0)) if start else 0.0, []
    for r in table:  # training time only (validation and baseline tests excluded)
        seconds += float(r["train_time_s"])
        elapsed.append(seconds)
    problem, n = config.get("problem"), config.get("num_nodes")
    if problem is None:  # fall back on the folder's name, e.g. cvrp20-rollout
        name = folder.name.split("-")[0]
        problem, n = name.rstrip("0123456789"), int(name[len(name.rstrip("0123456789")):] or 0)
    label = f"{config.get('policy', 'attention')}, {config.get('baseline', '?')} baseline"
    model = config.get("model", {})
    if model.get("distance_bias"):
        label += ", distance bias"
    if {"embed_dim", "n_layers", "ff_hidden"} & set(model):
        label += f", {model.get('embed_dim', 128)}/{model.get('n_layers', 3)}/{model.get('ff_hidden', 512)} network"
    label += ", batch " + _batch_history(table, config.get("batch_size"))
    if config.get("imitate"):
        label += f", {config.get('imitation_epochs')} epochs imitating solver tours first"
    if config.get("lr_schedule", "constant") != "constant":
        label += f", {config['lr_schedule']} from {config.get('lr', '?'):g}"
    recipe = label + (", continuing trained weights" if start else "")  # one colour in every panel
    if start:
        source = Path(config.get("init_from") or "")  # a trainer checkpoint names its run, a policy file itself
        label += f", from {(source.parent.name if source.stem in ('last', 'best') else source.stem) or 'other weights'}"
    return {"folder": folder, "problem": problem, "n": n, "label": label, "recipe": recipe, "rows": rows,
            "seconds": elapsed}


def _batch_history(table: list[dict], final: int | None) -> str:
    """The batch sizes of a run: ``512``, or ``512 -> 128 at 0.42 M`` where a resume changed it. A file
    without the column has the checkpoint's size throughout; rows written before the column existed show
    ``?``."""
    if not table or "batch_size" not in table[0]:
        return str(final or "?")
    text = previous = table[0]["batch_size"] or "?"
    for before, row in zip(table, table[1:]):
        size = row["batch_size"] or "?"
        if size != previous:
            text += f" -> {size} at {int(before['instances_seen']) / 1e6:.2f} M"
            previous = size
    return text


LEGEND_PT = 11  # the legend's text, in points (the axes' labels are 10)
PAPER_LABEL = "the paper's greedy cost after 128 M instances (its value on the line)"


def recipe_colours(runs: list[dict]) -> dict[str, tuple]:
    """One colour per recipe (a run's settings, without the weights it continued), the same in every panel,
    in the order the recipes first appear."""
    recipes = list(dict.fromkeys(r["recipe"] for r in runs))
    palette = plt.get_cmap("tab10" if len(recipes) <= 10 else "tab20").colors
    return {recipe: palette[i % len(palette)] for i, recipe in enumerate(recipes)}


def figure(runs: list[dict], x: str = "instances"):
    """The panels (one per problem and size) over one legend of the recipes: each recipe one colour across
    panels; runs of one recipe in one panel told apart by their line style; the paper's value a dashed line."""
    panels = list(dict.fromkeys((r["problem"], r["n"]) for r in runs))
    colours = recipe_colours(runs)
    cols = min(len(panels), 2)
    rows = -(-len(panels) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6.4 * cols, 3.6 * rows + 0.3 * (len(colours) + 1)), squeeze=False,
                             layout="constrained")
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    handles, paper_line = {}, None
    for ax, (problem, n) in zip(axes.flat, panels):
        same = {}
        for run in (r for r in runs if (r["problem"], r["n"]) == (problem, n)):
            seen, cost = zip(*run["rows"])
            xs = [s / 1e6 for s in seen] if x == "instances" else [s / 60 for s in run["seconds"]]
            k = same[run["recipe"]] = same.get(run["recipe"], -1) + 1
            line, = ax.plot(xs, cost, marker=".", markersize=4, color=colours[run["recipe"]],
                            linestyle=("-", "--", ":", "-.")[k % 4], label=run["label"])
            handles.setdefault(run["recipe"], line)
        paper = paper_value(problem, n, "am_greedy")
        if paper is not None:
            paper_line = ax.axhline(paper, color="grey", linestyle="--")
            ax.annotate(f"paper {paper:.2f}", (0, paper), xycoords=("axes fraction", "data"), xytext=(4, 2),
                        textcoords="offset points", ha="left", va="bottom", color="dimgrey", fontsize=9)
        ax.set_title(f"{problem.upper()}-{n}" + (" (minus prize)" if problem == "op" else ""))
        ax.set_xlabel("training instances seen (millions)" if x == "instances" else "training time (minutes)")
        ax.set_ylabel("greedy validation cost")
        ax.grid(alpha=0.3)
    if paper_line is not None:
        handles[PAPER_LABEL] = paper_line
    fig.legend(list(handles.values()), list(handles), loc="outside lower center", fontsize=LEGEND_PT, frameon=False)
    return fig


def plot(runs: list[dict], out: Path, x: str = "instances") -> None:
    fig = figure(runs, x)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="training output folders (with metrics.csv)")
    parser.add_argument("--out", type=Path, default=Path("training_curves.png"))
    parser.add_argument("--x", choices=("instances", "time"), default="instances",
                        help="horizontal axis: training instances seen, or training time (equal compute)")
    args = parser.parse_args()
    runs = [read_run(folder) for folder in args.runs]
    for run in runs:
        seen, cost = zip(*run["rows"])
        print(f"{run['folder']}: {run['problem']}-{run['n']}, {run['label']}: {len(seen)} epochs, "
              f"{seen[-1]:,} instances, validation cost {cost[0]:.4f} -> {cost[-1]:.4f}")
    plot(runs, args.out, args.x)
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
