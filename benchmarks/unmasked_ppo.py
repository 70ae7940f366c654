"""Unmasked PPO under the old and the new masked-action penalty: does the learner finish its episodes?

An agent that ignores ``action_mask`` learns from the penalty alone. The old penalty was a constant,
``2 sqrt(2) N``: a policy that expects to fail later gains by failing at once, and PPO on TSP-10 converged
to ending every episode at its second step. The new one (:func:`routing_gym.problems.base.invalid_penalty`)
grows with what is left undone, so that every valid step pays.

What runs, for each env: Stable-Baselines3's ``PPO("MultiInputPolicy", env, gamma=1.0)`` (every other
setting SB3's default) on the single env ``gym.make(env_id)``, seeded, without masks, for ``--steps``
environment steps, once with each penalty; for reference, sb3-contrib's ``MaskablePPO`` with the same
settings and budget, and a uniform choice among the allowed actions. Each then plays ``--eval-episodes``
fresh instances (seeds 10^6 + i; the PPO policies deterministically). The table gives the share of those
episodes completed (ended by the rules, not by a masked action), their mean length in steps, and the mean
cost of the completed ones.

The old penalty is not a product option: this script alone brings it back, by replacing the core's
``invalid_penalty`` for the duration of a run (:func:`old_penalty`).

Usage::

    python benchmarks/unmasked_ppo.py                    # TSP-10 and CVRP-10, 80k steps per run, ~14 min on one core
    python benchmarks/unmasked_ppo.py --steps 4096 --eval-episodes 20   # a smoke run
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import time
from collections.abc import Callable

import gymnasium as gym
import numpy as np
import torch
from sb3_contrib import MaskablePPO
from stable_baselines3 import PPO

import routing_gym  # noqa: F401  (registers the routing/ ids)
from routing_gym.problems import base

AGENTS = (("PPO, unmasked", "old"), ("PPO, unmasked", "new"), ("MaskablePPO", "new"),
          ("uniform among allowed actions", "new"))


@contextlib.contextmanager
def old_penalty():
    """The penalty before the redesign, ``2 sqrt(2) N`` whatever the state, in place of the core's."""
    new = base.invalid_penalty
    base.invalid_penalty = lambda problem, state: torch.full(state.done.shape, 2 * math.sqrt(2) * state.mask.shape[-1],
                                                            device=state.done.device)
    try:
        yield
    finally:
        base.invalid_penalty = new


def evaluate(act: Callable, env_id: str, episodes: int) -> dict:
    """Share of episodes completed, their mean length and the mean cost of the completed ones, with
    ``act(obs, env) -> action``."""
    env = gym.make(env_id)
    costs, lengths = [], []
    for i in range(episodes):
        obs, _ = env.reset(seed=10**6 + i)
        done, steps = False, 0
        while not done:
            obs, _, terminated, truncated, info = env.step(int(act(obs, env)))
            done, steps = terminated or truncated, steps + 1
        lengths.append(steps)
        if not info["invalid_action"]:
            costs.append(info["cost"])
    return {"completed": len(costs) / episodes, "mean_length": float(np.mean(lengths)),
            "mean_cost": float(np.mean(costs)) if costs else float("nan")}


def run(env_id: str, agent: str, penalty: str, steps: int, episodes: int, seed: int) -> dict:
    start = time.perf_counter()
    with old_penalty() if penalty == "old" else contextlib.nullcontext():
        if agent.startswith("uniform"):
            rng = np.random.default_rng(seed)
            result = evaluate(lambda obs, env: rng.choice(np.flatnonzero(obs["action_mask"])), env_id, episodes)
        else:
            masked = agent == "MaskablePPO"
            env = gym.make(env_id)
            env.reset(seed=seed)
            model = (MaskablePPO if masked else PPO)("MultiInputPolicy", env, gamma=1.0, seed=seed, device="cpu")
            model.learn(steps)
            if masked:
                act = lambda obs, env: model.predict(obs, action_masks=env.unwrapped.action_masks(),  # noqa: E731
                                                     deterministic=True)[0]
            else:
                act = lambda obs, env: model.predict(obs, deterministic=True)[0]  # noqa: E731
            result = evaluate(act, env_id, episodes)
    return {"env": env_id, "agent": agent, "penalty": penalty, "steps": 0 if agent.startswith("uniform") else steps,
            **result, "seconds": time.perf_counter() - start}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--envs", nargs="+", default=["routing/TSP-10", "routing/CVRP-10"])
    p.add_argument("--steps", type=int, default=80_000, help="environment steps per training run")
    p.add_argument("--eval-episodes", type=int, default=500)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    return p.parse_args(argv)


def main(argv=None) -> list[dict]:
    args = parse_args(argv)
    torch.set_num_threads(1)
    rows = [run(env_id, agent, penalty, args.steps, args.eval_episodes, args.seed)
            for env_id in args.envs for agent, penalty in AGENTS]
    print(f"SB3 defaults with gamma=1, {args.steps:,} training steps; {args.eval_episodes} evaluation episodes\n")
    print("| env | agent | masked-action penalty | episodes completed | mean length | mean cost (completed) "
          "| run time |")
    print("|---|---|---|---|---:|---:|---:|")
    for r in rows:
        penalty = {"old": "old: 2 sqrt(2) N", "new": "new: grows with what is left"}[r["penalty"]] \
            if r["agent"] == "PPO, unmasked" else "never taken"
        print(f"| {r['env']} | {r['agent']} | {penalty} | {r['completed']:.1%} | {r['mean_length']:.1f} | "
              f"{r['mean_cost']:.3f} | {r['seconds']:.0f} s |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    return rows


if __name__ == "__main__":
    main()
