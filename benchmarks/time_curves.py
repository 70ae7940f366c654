"""Gap against time per instance (issue #31, item 6): ``routing-gym eval --decode best`` (the pipeline of
agents/references/pipeline.py), its pieces one at a time, PyVRP and LKH-3, at the same time limits per
instance on one CPU thread.

Sets (one panel each): the TSPLIB files eil51, berlin52 and pr107 and the CVRPLIB files E-n22-k4 and
E-n51-k5 (found in ``tests/data`` or ``../shared/data``, as benchmarks/real_instances.py reads them), each
costed in the file's units against its published optimum; and ``--count`` generated TSP-100 / CVRP-100
instances (seed 4321) against a long reference: per instance the cheaper of LKH-3 (TSP; one run with a
time limit of ``--reference-seconds``, which ends earlier) and PyVRP (``--reference-seconds``).

Methods, each run at every time limit T (seconds per instance):

- ``NN + 2-opt``: nearest neighbour (CVRP: the nearest feasible customer), then 2-opt (CVRP: within
  routes); it takes no time limit, so its one value is drawn flat;
- ``construction``: the shipped model of the nearest size alone, with the whole budget (the pipeline's
  construction: greedy x 8, then multi-start x 8 a few start nodes at a time until T would pass; it stops
  earlier once every start node is decoded);
- ``savings`` (CVRP): the best of the savings routes of six route shapes (the pipeline's other heuristic start,
  ``savings_start``); it takes no time limit either;
- ``construction + search``: the pipeline without its iterated local search (``best(...,
  perturbations=0)``): the construction, then local search from those of it, NN + 2-opt and (CVRP) the
  savings within 5 % of the cheapest until the search converges or T is spent;
- ``construction + search + revision`` and ``pipeline + revision``: the two above with the shipped SHPP-20 model
  revising the searched tours (``best(..., reviser=shipped_reviser())``, ``routing-gym eval --revise``): what
  revision buys after the search from the starts, and in the whole pipeline at the same time limit;
- ``search, no model``: the pipeline without a policy (``best(None, ...)``): NN + 2-opt (and the savings),
  local search, and iterated local search: what the search alone buys, and so what the model adds;
- ``pipeline``: ``best(policy, ...)``, as ``routing-gym eval --decode best --time-limit T`` runs it;
- ``PyVRP`` (TSP and CVRP) and ``LKH-3`` (TSP: the adapter has no CVRP) through
  ``agents.references.solvers.solve`` with T seconds per instance; on the real files they minimise the
  file's own distances (``tsplib.distance_matrix``). LKH-3 runs once (``RUNS = 1``) and ends when that run
  does, often before T.

A real file runs alone; a generated set runs as one batch sharing count x T (as real_instances.py does),
and the solvers solve its instances one after the other, T each. Every cell is the mean gap and the mean
measured seconds per instance::

    python benchmarks/time_curves.py --plot docs/images/time_curves.png      # about 26 min on one core
    python benchmarks/time_curves.py --limits 0.1 0.3 --count 2 --sets eil51 TSP-100
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Callable, NamedTuple

import torch
from torch import Tensor

from agents.policies.pretrained import load_pretrained, nearest_pretrained_size
from agents.references.pipeline import (best, capacity_routes, closed_tour, construction, heuristic_start,
                                        savings_start, shipped_reviser)
from agents.references.solvers import available, solve
from real_instances import FOLDERS  # benchmarks/, the script's folder, is on sys.path
from routing_gym import tsplib
from routing_gym.problems import get_problem, tour_cost

REAL = {"eil51": "eil51.tsp", "berlin52": "berlin52.tsp", "pr107": "pr107.tsp", "E-n22-k4": "E-n22-k4.vrp",
        "E-n51-k5": "E-n51-k5.vrp"}
GENERATED = {"TSP-100": "tsp", "CVRP-100": "cvrp"}
SETS = (*REAL, *GENERATED)
LIMITS = (0.1, 0.3, 1.0, 3.0, 10.0)
SEED = 4321
SOLVERS = {"PyVRP": "pyvrp", "LKH-3": "lkh"}
ONCE = ("NN + 2-opt", "savings")  # no time limit: run once, drawn flat
METHODS = ("NN + 2-opt", "savings", "construction", "construction + search", "construction + search + revision",
           "search, no model", "pipeline", "pipeline + revision", *SOLVERS)
REVISED = ("construction + search + revision", "pipeline + revision")  # with the shipped SHPP-20 model
STYLE = {"NN + 2-opt": ("tab:gray", "--", "s"), "savings": ("tab:brown", "--", "*"),
         "construction": ("tab:orange", "-", "^"),
         "construction + search": ("tab:purple", "-", "v"),
         "construction + search + revision": ("tab:pink", "-", "<"),
         "pipeline + revision": ("tab:cyan", "-", ">"), "search, no model": ("tab:green", "-", "D"),
         "pipeline": ("tab:blue", "-", "o"), "PyVRP": ("tab:red", ":", "x"), "LKH-3": ("black", ":", "+")}


class Bench(NamedTuple):
    """One set: its instances and how a batch of its tours becomes gaps in percent."""

    name: str
    problem: object  # the problem unit
    instances: object  # its batch of B instances (unit square)
    gaps: Callable[[Tensor], Tensor]  # (B, S) tours -> (B,) float64 gaps in %
    distances: object  # (B, N, N) integer distances for the solvers, or None (their scaled Euclidean ones)
    reference: str  # what the gaps are against


def real_bench(name: str) -> Bench | None:
    """A real file's set, or None where neither folder holds it."""
    path = next((folder / REAL[name] for folder in FOLDERS if (folder / REAL[name]).is_file()), None)
    if path is None:
        return None
    real = tsplib.load(path)
    if real.reference is None:
        raise ValueError(f"{path}: no published optimum known (routing_gym.tsplib.TSPLIB_OPTIMA)")

    def gaps(tours: Tensor) -> Tensor:
        return torch.tensor([tsplib.gap(real, tsplib.cost(real, t[None])) for t in tours], dtype=torch.float64)

    return Bench(name, get_problem(real.problem), real.instance, gaps, tsplib.distance_matrix(real)[None],
                 f"{real.reference:g} ({real.reference_source}, the file's units)")


def generated_bench(name: str, count: int, n: int, reference_seconds: float) -> Bench:
    """``count`` generated instances of ``n`` nodes (seed 4321) against the cheaper of the long solver runs."""
    problem = get_problem(GENERATED[name])
    instances = problem.generate(count, n, generator=torch.Generator().manual_seed(SEED))
    runs = [(label, method) for label, method in SOLVERS.items() if applies(label, problem, instances)]
    if not runs:
        raise RuntimeError(f"{name}: neither PyVRP nor LKH-3 is installed; the generated sets need a reference")
    costs = [solve(problem, instances, method, reference_seconds, progress=False, seed=SEED).cost.double()
             for _, method in runs]
    ref = torch.stack(costs).min(dim=0).values

    def gaps(tours: Tensor) -> Tensor:
        return 100 * (tour_cost(problem, instances, tours).double() - ref) / ref

    solvers = " and ".join(label for label, _ in runs)
    return Bench(f"{GENERATED[name].upper()}-{n}", problem, instances, gaps, None,
                 f"{'the cheaper of ' if len(runs) > 1 else ''}{solvers} with {reference_seconds:g} s per instance")


def applies(method: str, problem, instances) -> bool:
    if method == "savings":
        return capacity_routes(problem, instances)  # where the pipeline starts from the savings
    if method in SOLVERS:
        return available(SOLVERS[method]) and (problem.name == "tsp" or SOLVERS[method] == "pyvrp")
    if method in REVISED:
        return shipped_reviser() is not None and (closed_tour(problem) or capacity_routes(problem, instances))
    return True


def measure(bench: Bench, method: str, limit: float, policy) -> tuple[float, float]:
    """(mean gap %, mean seconds per instance) of ``method`` at ``limit`` seconds per instance."""
    problem, instances = bench.problem, bench.instances
    b = instances[0].shape[0]
    began = time.perf_counter()
    if method == "NN + 2-opt":
        tours = heuristic_start(problem, instances)
    elif method == "savings":
        tours = savings_start(problem, instances)[1]
    elif method == "construction":
        tours = construction(policy, problem, instances, time.monotonic() + limit * b)[1]
    elif method == "construction + search":
        tours = best(policy, problem, instances, limit, perturbations=0).tours
    elif method == "construction + search + revision":
        tours = best(policy, problem, instances, limit, perturbations=0, reviser=shipped_reviser()).tours
    elif method == "search, no model":
        tours = best(None, problem, instances, limit).tours
    elif method == "pipeline":
        tours = best(policy, problem, instances, limit).tours
    elif method == "pipeline + revision":
        tours = best(policy, problem, instances, limit, reviser=shipped_reviser()).tours
    else:
        tours = solve(problem, instances, SOLVERS[method], limit, progress=False, seed=SEED,
                      distances=bench.distances).tours
    seconds = (time.perf_counter() - began) / b
    return float(bench.gaps(tours).mean()), seconds


def run(benches: list[Bench], limits: list[float], methods: list[str]) -> dict:
    """{(set, method): [(gap, seconds) per limit]}; NN + 2-opt and the savings are run once and repeated."""
    results = {}
    for bench in benches:
        size = bench.problem.size_of(bench.instances)
        policy = load_pretrained(bench.problem.name, nearest_pretrained_size(bench.problem.name, size))
        for method in methods:
            if not applies(method, bench.problem, bench.instances):
                continue
            began = time.perf_counter()
            if method in ONCE:
                results[bench.name, method] = [measure(bench, method, 0.0, policy)] * len(limits)
            else:
                results[bench.name, method] = [measure(bench, method, t, policy) for t in limits]
            print(f"  {bench.name}: {method} in {time.perf_counter() - began:.0f} s", file=sys.stderr, flush=True)
    return results


def table(results: dict, limits: list[float]) -> str:
    head = "| set | method | " + " | ".join(f"{t:g} s" for t in limits) + " |"
    lines = [head, "|---|---|" + "---|" * len(limits)]
    for (name, method), cells in results.items():
        lines.append(f"| {name} | {method} | " + " | ".join(f"{g:.2f}% ({s:.2f} s)" for g, s in cells) + " |")
    return "\n".join(lines)


def plot(results: dict, limits: list[float], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, NullFormatter

    names = list(dict.fromkeys(name for name, _ in results))
    cols = min(4, len(names) + 1)
    rows = math.ceil((len(names) + 1) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.6 * rows), squeeze=False)
    axes = axes.ravel()
    handles = {}
    seconds_all = [max(s, 1e-3) for cells in results.values() for _, s in cells]
    for ax, name in zip(axes, names):
        for (set_name, method), cells in results.items():
            if set_name != name:
                continue
            colour, style, marker = STYLE[method]
            gaps, seconds = [g for g, _ in cells], [max(s, 1e-3) for _, s in cells]
            if method in ONCE:  # no time limit: its value, flat, from the time it took
                ax.axhline(gaps[0], color=colour, linestyle=style, linewidth=1)
                line, = ax.plot(seconds[:1], gaps[:1], color=colour, linestyle=style, marker=marker)
            else:
                line, = ax.plot(seconds, gaps, color=colour, linestyle=style, marker=marker, markersize=5)
            handles[method] = line
        ax.set_xscale("log")
        ax.set_xlim(0.5 * min(0.01, *seconds_all), 2 * max(limits))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_yscale("symlog", linthresh=0.1)
        gaps_all = [g for (set_name, _), cells in results.items() if set_name == name for g, _ in cells]
        ax.set_ylim(min(-0.02, 1.5 * min(gaps_all)), 1.5 * max(0.1, *gaps_all))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}%"))
        ax.set_title(name)
        ax.set_xlabel("seconds per instance")
        ax.grid(True, which="major", alpha=0.3)
    for ax in axes[len(names):]:
        ax.axis("off")
    axes[0].set_ylabel("gap (symlog)")
    order = [m for m in METHODS if m in handles]
    axes[len(names)].legend([handles[m] for m in order], order, loc="center", fontsize=11, frameon=False)
    fig.suptitle("gap against measured time per instance (one CPU thread); points at time limits "
                 + ", ".join(f"{t:g}" for t in limits) + " s", fontsize=11)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limits", type=float, nargs="+", default=list(LIMITS), help="seconds per instance")
    ap.add_argument("--count", type=int, default=10, help="instances per generated set")
    ap.add_argument("--num-nodes", type=int, default=100, help="nodes of the generated sets")
    ap.add_argument("--sets", nargs="+", default=list(SETS), choices=SETS, metavar="SET",
                    help=f"sets to run, of {', '.join(SETS)}")
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS, metavar="METHOD",
                    help=f"methods to run, of {', '.join(METHODS)}")
    ap.add_argument("--reference-seconds", type=float, default=20.0,
                    help="seconds per instance of the generated sets' reference runs")
    ap.add_argument("--plot", type=Path, default=None, help="write the curves to this PNG")
    args = ap.parse_args(argv)
    if any(not math.isfinite(t) or t <= 0 for t in args.limits) or args.count < 1:
        ap.error("--limits must be positive seconds and --count at least 1")
    torch.set_num_threads(1)
    began = time.perf_counter()
    benches = []
    for name in args.sets:
        bench = real_bench(name) if name in REAL else generated_bench(name, args.count, args.num_nodes,
                                                                      args.reference_seconds)
        if bench is None:
            print(f"{name}: no file {REAL[name]} in {', '.join(map(str, FOLDERS))}; skipped", file=sys.stderr)
            continue
        benches.append(bench)
    skipped = [m for m in SOLVERS if m in args.methods and not available(SOLVERS[m])]
    results = run(benches, sorted(args.limits), args.methods)
    print("references: " + "; ".join(f"{b.name}: {b.reference}" for b in benches))
    if skipped:
        print(f"not installed, not run: {', '.join(skipped)}")
    print("\nmean gap (mean seconds per instance) at each time limit, one thread:\n")
    print(table(results, sorted(args.limits)))
    print(f"\ntotal {time.perf_counter() - began:.0f} s")
    if args.plot is not None:
        plot(results, sorted(args.limits), args.plot)
        print(f"wrote {args.plot}")
    return results


if __name__ == "__main__":
    main()
