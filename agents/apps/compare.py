"""The shipped models against the classic heuristics: one table and one picture (``routing-gym compare``).

For each problem with a shipped model at the chosen size (:func:`agents.policies.pretrained.available_pretrained`),
a seeded test set (the problem's default variant) is decoded by the heuristics of
:mod:`agents.references.heuristics` that apply to it (:func:`~agents.references.heuristics.applicable`, those with
a row label here) and by the shipped attention model (greedy, and greedy over the 8 symmetries of the unit square). The table gives per method the mean
cost, the mean gap to the best method *of the table* on each instance, and the wall-clock time. The
picture shows, per problem, the shipped model's solution and the nearest-neighbour one (the same heuristic as the
table's) on the same instance, side by side, rendered by the env's own pygame renderer.
"""
from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import numpy as np
import torch

from routing_gym.data import check_fits
from routing_gym.problems import PROBLEMS, get_problem, tour_cost
from routing_gym.render import format_cost

from ..inference.search import greedy
from ..policies.pretrained import available_pretrained, load_pretrained
from ..references.heuristics import applicable, heuristic_tours

# the heuristics the table shows, where they apply (``applicable``), and their row labels
LABELS = {"nearest": "nearest neighbour", "farthest_insertion": "farthest insertion",
          "greedy": "greedy (problem-aware)", "2opt": "heuristic + 2-opt / local search",
          "savings": "savings (Clarke & Wright)"}


def heuristics_for(problem) -> list[str]:
    """The table's heuristics for ``problem``: those of :data:`LABELS` that apply to it."""
    return [h for h in applicable(problem) if h in LABELS]


def shipped_problems(num_nodes: int) -> list[str]:
    """Problems with a shipped model of ``num_nodes`` customers, in the registry's order."""
    have = set(available_pretrained())
    return [p for p in PROBLEMS if f"{p}{num_nodes}" in have]


def method_count(problem_name: str) -> int:
    """The rows :func:`compare_problem` computes for a problem (its heuristics and the model's two)."""
    return len(heuristics_for(get_problem(problem_name))) + 2


def compare_problem(problem_name: str, num_nodes: int, num_instances: int, seed: int, done=None) -> list[dict]:
    """Rows (method, mean cost, gap to the best row per instance in %, seconds) for one problem;
    ``done(method)`` is called after each method (a progress bar)."""
    if isinstance(num_instances, bool) or not isinstance(num_instances, int) or num_instances < 1:
        raise ValueError(f"num_instances must be a positive integer, got {num_instances!r}")
    problem = get_problem(problem_name)
    check_fits(problem_name, num_instances, num_nodes, "--num-instances")
    instances = problem.generate(num_instances, num_nodes, generator=torch.Generator().manual_seed(seed))
    policy = load_pretrained(problem_name, num_nodes)
    methods = [(LABELS[h], lambda h=h: heuristic_tours(problem, instances, h)) for h in heuristics_for(problem)]
    methods += [("shipped model, greedy", lambda: greedy(policy, problem, instances).tours),
                ("shipped model, greedy x 8 symmetries", lambda: greedy(policy, problem, instances, augment=8).tours)]
    rows, costs = [], []
    for name, run in methods:
        start = time.perf_counter()
        with torch.inference_mode():
            tours = run()
        seconds = time.perf_counter() - start
        cost = tour_cost(problem, instances, tours).double()  # every tour replayed and checked
        costs.append(cost)
        rows.append({"problem": problem_name, "method": name, "cost": float(cost.mean()), "seconds": seconds})
        if done is not None:
            done(name)
    best = torch.stack(costs).min(dim=0).values
    for row, cost in zip(rows, costs):
        row["gap"] = float(((cost - best) / best.abs().clamp_min(1e-9)).mean() * 100)
    return rows


def table(rows: list[dict], num_nodes: int, num_instances: int, seed: int) -> str:
    units = [get_problem(p) for p in dict.fromkeys(r["problem"] for r in rows)]
    prizes = "/".join(u.label for u in units if u.optional_visits == "orienteering")  # the cost is minus the prize
    lines = [f"{num_instances} seeded test instances per problem (n = {num_nodes}, seed {seed}); gap: mean over "
             "instances to the best method of this table" + (f"; {prizes} costs are minus the prize" if prizes else ""),
             "",
             "| problem | method | mean cost | gap | time (s) |", "|---|---|---:|---:|---:|"]
    lines += [f"| {get_problem(r['problem']).label}-{num_nodes} | {r['method']} | {r['cost']:.4f} | {r['gap']:.2f}% | "
              f"{r['seconds']:.2f} |" for r in rows]
    return "\n".join(lines)


def check_picture(out: str | Path) -> None:
    """What :func:`picture` needs to write ``out``, checked before any work: Pillow and pygame installed
    (``ModuleNotFoundError`` with the pip command), an image format Pillow writes (``ValueError``)."""
    for module, package in (("PIL", "pillow"), ("pygame", "pygame")):
        if importlib.util.find_spec(module) is None:
            raise ModuleNotFoundError(f"the picture needs {package}: pip install {package}")
    from PIL import Image

    Image.init()
    suffix = Path(out).suffix.lower()
    if Image.registered_extensions().get(suffix) not in Image.SAVE:
        raise ValueError(f"cannot write a picture to {out}: {'no' if not suffix else 'unknown'} image file "
                         f"extension{f' {suffix!r}' if suffix else ''} (use .png)")


def picture(problems: list[str], num_nodes: int, seed: int, out: str | Path, size: int = 360) -> None:
    """One row per problem: the shipped model's and nearest neighbour's solution of the instance of
    ``seed``, with their costs; saved as a PNG (Pillow)."""
    check_picture(out)
    from PIL import Image

    from routing_gym.render import side_by_side

    from ..inference.rollout import env_policy
    from .visual import builtin_policy, run_episode, written_atomically

    strips = []
    for name in problems:
        frames, captions = [], []
        policies = {"shipped model": env_policy(load_pretrained(name, num_nodes), "pretrained"),
                    "nearest neighbour": builtin_policy("nearest")}
        for label, policy in policies.items():
            episode = run_episode(policy, name, num_nodes, seed, (size, size), frames="last")
            frames.append(episode.frames[-1])
            captions.append(f"{get_problem(name).label}-{num_nodes} {label}: {format_cost(episode.costs[-1])}")
        strips.append(side_by_side(frames, captions))
    written_atomically(str(out), Image.fromarray(np.concatenate(strips, axis=0)).save)
