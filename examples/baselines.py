"""What the examples compare against, on the same seeded instances: a random masked policy, the
nearest-neighbour heuristic and the shipped attention model (a helper of the scripts in this folder)."""
from __future__ import annotations

import numpy as np
import torch

from agents.inference.rollout import evaluate
from agents.policies.pretrained import load_pretrained
from agents.references.heuristics import NearestNeighbour
from routing_gym.problems import TSP, tour_cost


def test_instances(num_nodes: int, count: int, seed: int):
    """``count`` TSP instances from a seeded generator: the examples' evaluation set."""
    return TSP.generate(count, num_nodes, generator=torch.Generator().manual_seed(seed))


def reference_costs(instances, seed: int = 0) -> dict[str, float | None]:
    """Mean costs of uniformly random tours, nearest neighbour and the shipped attention model
    (greedy; None when no model ships for this size)."""
    count, num_nodes = instances.locs.shape[:2]
    random_tours = torch.as_tensor(np.argsort(np.random.default_rng(seed).random((count, num_nodes)), axis=1))
    costs: dict[str, float | None] = {
        "random masked policy": float(tour_cost(TSP, instances, random_tours).mean()),
        "nearest neighbour": float(evaluate(NearestNeighbour(TSP), "tsp", instances).mean()),
    }
    try:
        model = load_pretrained("tsp", num_nodes)
    except ValueError as e:
        print(f"No shipped attention model is available to compare with ({e}).")
        costs["attention model (shipped, greedy)"] = None
    else:
        costs["attention model (shipped, greedy)"] = float(evaluate(model, "tsp", instances).mean())
    return costs


def print_comparison(title: str, results: dict[str, float | None], instances) -> None:
    """Mean costs (lower is better) with the gap to nearest neighbour."""
    count, num_nodes = instances.locs.shape[:2]
    print(f"\n{title}: mean tour length on {count} seeded TSP-{num_nodes} instances (lower is better)")
    reference = results.get("nearest neighbour")
    width = max(len(name) for name in results)
    for name, cost in results.items():
        if cost is None:
            print(f"  {name:<{width}}  not available")
            continue
        gap = ""
        if reference and name != "nearest neighbour":
            gap = f"  ({100 * (cost / reference - 1):+.1f}% vs nearest neighbour)"
        print(f"  {name:<{width}}  {cost:.3f}{gap}")
