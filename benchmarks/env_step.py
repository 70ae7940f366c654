"""Single-env step time: median and p90 microseconds per ``env.step`` for every problem and size.

What is timed: one call of ``env.step(action)`` on ``gym.make(f"routing/{P}-{n}")`` (the env as a user
gets it, with Gymnasium's default wrappers), measured per call with ``time.perf_counter_ns``. Not
timed: ``reset`` (called when an episode ends) and choosing the action, which is drawn uniformly from
the allowed nodes of the observation's ``action_mask`` with a seeded numpy generator. ``--clock cpu``
times with the thread's CPU time (``time.thread_time_ns``) instead of the wall clock, which ignores time
the process spends descheduled on a busy machine.

Noise control: the configurations are measured in interleaved rounds (every configuration once per
round), so a slow spell of the machine affects all of them alike; the samples of all rounds are pooled
before taking the median and the 90th percentile.

Usage::

    python benchmarks/env_step.py                      # TSP/CVRP/OP/PCTSP at n = 20/50/100, 1 thread
    python benchmarks/env_step.py --threads 2 --problems TSP CVRP --sizes 50
    python benchmarks/env_step.py --json step_times.json
"""
from __future__ import annotations

import argparse
import gc
import json
import time

import gymnasium as gym
import numpy as np
import torch

import routing_gym  # noqa: F401  (registers the routing/ ids)
from report import machine_line, markdown_table

PROBLEMS = ("TSP", "CVRP", "OP", "PCTSP")
CLOCKS = {"wall": time.perf_counter_ns, "cpu": time.thread_time_ns}
SIZES = (20, 50, 100)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    p.add_argument("--problems", nargs="+", default=list(PROBLEMS), choices=PROBLEMS)
    p.add_argument("--sizes", nargs="+", type=int, default=list(SIZES))
    p.add_argument("--steps", type=int, default=3000, help="timed steps per configuration, over all rounds")
    p.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds")
    p.add_argument("--warmup", type=int, default=200, help="untimed steps per configuration before timing")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                   help="wall (time.perf_counter_ns, default) or cpu (time.thread_time_ns: this thread's CPU time, "
                        "robust on a shared machine)")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    return p.parse_args(argv)


class Runner:
    """One env, its current observation and the action generator; ``run(k)`` times k steps."""

    def __init__(self, env_id: str, seed: int, clock):
        self.env = gym.make(env_id)
        self.clock = clock
        self.rng = np.random.default_rng(seed)
        self.obs, _ = self.env.reset(seed=seed)

    def run(self, steps: int) -> np.ndarray:
        """Per-step times in nanoseconds for ``steps`` calls of ``env.step``."""
        env, rng, obs = self.env, self.rng, self.obs
        times = np.empty(steps, dtype=np.int64)
        clock = self.clock
        for i in range(steps):
            action = int(rng.choice(np.flatnonzero(obs["action_mask"])))  # uniform over allowed nodes
            t0 = clock()
            obs, _, terminated, truncated, _ = env.step(action)
            times[i] = clock() - t0
            if terminated or truncated:
                obs, _ = env.reset()  # not timed
        self.obs = obs
        return times


def main(argv=None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    configs = [(p, n) for p in args.problems for n in args.sizes]
    runners = {c: Runner(f"routing/{c[0]}-{c[1]}", args.seed, CLOCKS[args.clock]) for c in configs}
    for r in runners.values():
        r.run(args.warmup)
    per_round = max(1, args.steps // args.rounds)
    samples: dict = {c: [] for c in configs}
    for _ in range(args.rounds):
        for c in configs:
            gc.collect()
            samples[c].append(runners[c].run(per_round))

    machine = machine_line(args.threads, f"{args.clock} clock")
    print(f"Single-env step time (env.step only; random masked actions; reset not timed)\n{machine}\n")
    rows = []
    for p, n in configs:
        t = np.concatenate(samples[(p, n)]) / 1e3
        rows.append({"problem": p, "n": n, "median_us": float(np.median(t)), "p90_us": float(np.percentile(t, 90)),
                     "steps": int(t.size)})
    print(markdown_table(["problem", "n", "median µs/step", "p90 µs/step", "steps"],
                         [[r["problem"], r["n"], f"{r['median_us']:.1f}", f"{r['p90_us']:.1f}", r["steps"]]
                          for r in rows]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine, "threads": args.threads, "results": rows}, f, indent=2)


if __name__ == "__main__":
    main()
