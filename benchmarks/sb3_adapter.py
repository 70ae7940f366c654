"""SB3 VecEnv step time: :class:`routing_gym.sb3.SB3VecEnv` over the native vector env against SB3's
``DummyVecEnv`` over B single envs, in microseconds per instance-step.

What is timed, per call, with ``time.perf_counter_ns``:

- ``step``: ``venv.step(actions)`` (SB3's ``step_async`` + ``step_wait``), including the automatic
  resets of finished sub-envs and the building of SB3's per-env ``infos`` (``terminal_observation``).
- ``step + masks``: the same plus ``get_action_masks(venv)`` (sb3-contrib's call, made by
  ``MaskablePPO`` before every step), which ``DummyVecEnv`` answers with one Python call per sub-env.

Not timed: choosing the actions (uniform over the allowed nodes, seeded numpy). Neither VecEnv is
wrapped in ``VecMonitor``. The single envs are ``gym.make(id)`` as a user gets them.

Noise control: both VecEnvs of every B are measured in interleaved rounds and the per-call samples of
all rounds pooled before taking the median; torch uses one thread (``--threads``).

Usage::

    python benchmarks/sb3_adapter.py                       # TSP-20, B = 16, 64, 256
    python benchmarks/sb3_adapter.py --env routing/CVRP-50 --batch-sizes 256 1024 --json sb3.json
"""
from __future__ import annotations

import argparse
import gc
import json
import time

import gymnasium as gym
import numpy as np
import stable_baselines3
import torch
from gymnasium.vector import AutoresetMode
from sb3_contrib.common.maskable.utils import get_action_masks
from stable_baselines3.common.vec_env import DummyVecEnv

import routing_gym  # noqa: F401  (registers the routing/ ids)
from routing_gym.sb3 import SB3VecEnv
from report import machine_line, markdown_table


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env", default="routing/TSP-20", help="a routing/ env id (default routing/TSP-20)")
    p.add_argument("--batch-sizes", nargs="+", type=int, default=[16, 64, 256], help="B values (default 16 64 256)")
    p.add_argument("--steps", type=int, default=150, help="timed calls per VecEnv and B, over all rounds")
    p.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds")
    p.add_argument("--warmup", type=int, default=20, help="untimed calls per VecEnv before timing")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    return p.parse_args(argv)


def make_adapter(env_id: str, b: int):
    return SB3VecEnv(gym.make_vec(env_id, num_envs=b, vectorization_mode="vector_entry_point",
                                  autoreset_mode=AutoresetMode.SAME_STEP, array_type="numpy"))


def make_dummy(env_id: str, b: int):
    return DummyVecEnv([lambda: gym.make(env_id) for _ in range(b)])


class Runner:
    """One VecEnv and its action generator; ``run(k)`` returns k per-call times (ns) of step and of masks."""

    def __init__(self, venv, seed: int):
        self.venv = venv
        self.rng = np.random.default_rng(seed)
        venv.seed(seed)
        venv.reset()

    def run(self, calls: int) -> tuple[np.ndarray, np.ndarray]:
        venv, rng, clock = self.venv, self.rng, time.perf_counter_ns
        step_ns = np.empty(calls, dtype=np.int64)
        mask_ns = np.empty(calls, dtype=np.int64)
        for i in range(calls):
            t0 = clock()
            masks = get_action_masks(venv)
            t1 = clock()
            actions = np.argmax(rng.random(masks.shape) * masks, axis=1)  # uniform over the allowed nodes
            t2 = clock()
            venv.step(actions)
            step_ns[i] = clock() - t2
            mask_ns[i] = t1 - t0
        return step_ns, mask_ns


def main(argv=None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    kinds = {"DummyVecEnv": make_dummy, "SB3VecEnv": make_adapter}
    runners = {(k, b): Runner(make(args.env, b), args.seed) for b in args.batch_sizes for k, make in kinds.items()}
    for r in runners.values():
        r.run(args.warmup)
    per_round = max(1, args.steps // args.rounds)
    samples: dict = {c: ([], []) for c in runners}
    for _ in range(args.rounds):
        for c, r in runners.items():
            gc.collect()
            step_ns, mask_ns = r.run(per_round)
            samples[c][0].append(step_ns)
            samples[c][1].append(mask_ns)

    results = []
    for b in args.batch_sizes:
        row = {"batch_size": b}
        for k in kinds:
            step_ns = np.concatenate(samples[(k, b)][0])
            both_ns = step_ns + np.concatenate(samples[(k, b)][1])
            row[k] = {"step_us_per_instance": float(np.median(step_ns)) / 1e3 / b,
                      "step_masks_us_per_instance": float(np.median(both_ns)) / 1e3 / b, "calls": int(step_ns.size)}
        row["speedup_step"] = row["DummyVecEnv"]["step_us_per_instance"] / row["SB3VecEnv"]["step_us_per_instance"]
        row["speedup_step_masks"] = (row["DummyVecEnv"]["step_masks_us_per_instance"]
                                     / row["SB3VecEnv"]["step_masks_us_per_instance"])
        results.append(row)

    machine = machine_line(args.threads, f"stable-baselines3 {stable_baselines3.__version__}")
    print(f"SB3 VecEnv step on {args.env}: µs per instance-step (median per call / B), random masked actions\n"
          f"{machine}\n")
    rows = []
    for r in results:
        dummy, ours = r["DummyVecEnv"], r["SB3VecEnv"]
        rows.append([r["batch_size"], f"{dummy['step_us_per_instance']:.2f}", f"{ours['step_us_per_instance']:.2f}",
                     f"{r['speedup_step']:.0f}x", f"{dummy['step_masks_us_per_instance']:.2f}",
                     f"{ours['step_masks_us_per_instance']:.2f}", f"{r['speedup_step_masks']:.0f}x"])
    print(markdown_table(["B", "DummyVecEnv step", "SB3VecEnv step", "speedup (step)", "DummyVecEnv step+masks",
                          "SB3VecEnv step+masks", "speedup (step+masks)"], rows, left=0))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"env": args.env, "machine": machine, "threads": args.threads,
                       "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
