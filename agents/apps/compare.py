"""The shipped models against the classic heuristics: one table and one picture (``routing-gym compare``).

For each problem with a shipped model at the chosen size (:func:`agents.policies.pretrained.available_pretrained`),
a seeded test set is decoded by the heuristics of :mod:`agents.references.heuristics` and by the shipped attention
model (greedy, and greedy over the 8 symmetries of the unit square). The table gives per method the mean
cost, the mean gap to the best method *of the table* on each instance, and the wall-clock time. The
picture shows, per problem, the shipped model's solution and the nearest-neighbour one on the same
instance, side by side, rendered by the env's own pygame renderer.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch

from routing_gym.problems import get_problem, tour_cost

from ..inference.search import greedy
from ..policies.pretrained import available_pretrained, load_pretrained
from ..references.heuristics import heuristic_tours

HEURISTICS = {"tsp": ["nearest", "farthest_insertion", "2opt"], "cvrp": ["nearest", "2opt"],
              "op": ["nearest", "greedy", "2opt"], "pctsp": ["nearest", "greedy", "2opt"]}
LABELS = {"nearest": "nearest neighbour", "farthest_insertion": "farthest insertion",
          "greedy": "greedy (problem-aware)", "2opt": "heuristic + 2-opt / local search"}
VARIANTS = {"op": {"prize_type": "dist"}}  # the shipped OP models use Kool et al.'s 'dist' prizes


def shipped_problems(num_nodes: int) -> list[str]:
    """Problems with a shipped model of ``num_nodes`` customers, in the table's order."""
    have = set(available_pretrained())
    return [p for p in HEURISTICS if f"{p}{num_nodes}" in have]


def compare_problem(problem_name: str, num_nodes: int, num_instances: int, seed: int) -> list[dict]:
    """Rows (method, mean cost, gap to the best row per instance in %, seconds) for one problem."""
    problem = get_problem(problem_name)
    instances = problem.generate(num_instances, num_nodes, generator=torch.Generator().manual_seed(seed),
                                 **VARIANTS.get(problem_name, {}))
    policy = load_pretrained(problem_name, num_nodes)
    methods = [(LABELS[h], lambda h=h: heuristic_tours(problem, instances, h)) for h in HEURISTICS[problem_name]]
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
    best = torch.stack(costs).min(dim=0).values
    for row, cost in zip(rows, costs):
        row["gap"] = float(((cost - best) / best.abs().clamp_min(1e-9)).mean() * 100)
    return rows


def table(rows: list[dict], num_nodes: int, num_instances: int, seed: int) -> str:
    lines = [f"{num_instances} seeded test instances per problem (n = {num_nodes}, seed {seed}); gap: mean over "
             "instances to the best method of this table; OP costs are minus the prize", "",
             "| problem | method | mean cost | gap | time (s) |", "|---|---|---:|---:|---:|"]
    lines += [f"| {r['problem'].upper()}-{num_nodes} | {r['method']} | {r['cost']:.4f} | {r['gap']:.2f}% | "
              f"{r['seconds']:.2f} |" for r in rows]
    return "\n".join(lines)


def picture(problems: list[str], num_nodes: int, seed: int, out: str | Path, size: int = 360) -> None:
    """One row per problem: the shipped model's and nearest neighbour's solution of the instance of
    ``seed``, with their costs; saved as a PNG (Pillow)."""
    from PIL import Image

    from routing_gym.render import side_by_side

    from ..inference.rollout import env_policy
    from .visual import builtin_policy, run_episode

    strips = []
    for name in problems:
        frames, captions = [], []
        policies = {"shipped model": env_policy(load_pretrained(name, num_nodes), "pretrained"),
                    "nearest neighbour": builtin_policy("nearest")}
        for label, policy in policies.items():
            episode = run_episode(policy, name, num_nodes, seed, (size, size), frames="last",
                                  **VARIANTS.get(name, {}))
            frames.append(episode.frames[-1])
            captions.append(f"{name.upper()}-{num_nodes} {label}: {episode.costs[-1]:.3f}")
        strips.append(side_by_side(frames, captions))
    Image.fromarray(np.concatenate(strips, axis=0)).save(out)
