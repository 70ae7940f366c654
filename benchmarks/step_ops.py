"""Torch operations dispatched per env step: a count that does not depend on how busy the machine is.

A step of a batch of small tensors costs mostly the dispatch of its operations (a few microseconds each on
a CPU), so their number is what a lean step reduces. Counted with a ``TorchDispatchMode`` over one
``step`` call after a few warm-up steps (every aten call: kernels and views alike), for each problem at
n = 50: the native vector env in torch mode (B = 1024, autoreset DISABLED and NEXT_STEP) and the single
env (``gym.make``). The action rule is the same cheap one as ``env_throughput.py`` and is not counted.
Compare two checkouts by running this script in each (``PYTHONPATH=<tree> python benchmarks/step_ops.py``).
"""
from __future__ import annotations

import argparse

import gymnasium as gym
import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import routing_gym  # noqa: F401

PROBLEMS = ("TSP", "CVRP", "OP", "PCTSP")


class Count(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls += 1
        return func(*args, **(kwargs or {}))


def counted(step) -> int:
    with Count() as count:
        step()
    return count.calls


def vector_ops(problem: str, n: int, batch: int, mode: str, warmup: int) -> int:
    env = gym.make_vec(f"routing/{problem}-v0", num_envs=batch, vectorization_mode="vector_entry_point",
                       num_nodes=n, array_type="torch", autoreset_mode=mode)
    obs, _ = env.reset(seed=0)
    weight = torch.full((obs["action_mask"].shape[1],), 2, dtype=torch.int8)
    weight[0] = 1
    for _ in range(warmup):
        obs = env.step((obs["action_mask"] * weight).argmax(1))[0]
    action = (obs["action_mask"] * weight).argmax(1)
    return counted(lambda: env.step(action))


def single_ops(problem: str, n: int, warmup: int) -> int:
    env = gym.make(f"routing/{problem}-{n}")
    obs, _ = env.reset(seed=0)
    for _ in range(warmup):
        obs = env.step(int(np.flatnonzero(obs["action_mask"])[-1]))[0]
    action = int(np.flatnonzero(obs["action_mask"])[-1])
    return counted(lambda: env.step(action))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-nodes", type=int, default=50)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    print(f"torch operations per step (n = {args.num_nodes}; vector env B = {args.batch}, torch mode)\n")
    print("| problem | vector DISABLED | vector NEXT_STEP | single env |")
    print("|---|---:|---:|---:|")
    for p in PROBLEMS:
        row = [vector_ops(p, args.num_nodes, args.batch, mode, args.warmup) for mode in ("Disabled", "NextStep")]
        row.append(single_ops(p, args.num_nodes, args.warmup))
        print(f"| {p} | " + " | ".join(str(v) for v in row) + " |")


if __name__ == "__main__":
    main()
