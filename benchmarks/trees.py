"""Two checkouts side by side in one run: env-step and training throughput of this tree against another.

For a refactoring that must not slow anything down: each measurement runs in a fresh subprocess with the
chosen tree first on ``PYTHONPATH`` (one torch thread), and the trees alternate round by round, so a
slow spell of the machine hits both alike. Printed: the median over rounds per tree and the ratio.

    git worktree add /tmp/before <commit>          # the tree to compare against
    python benchmarks/trees.py --other /tmp/before --rounds 5

Measured (public APIs only, so any version of the project runs them):

- ``vector``: steps per second of ``gym.make_vec("routing/{P}-50", 1024, array_type="torch",
  autoreset_mode=DISABLED)`` with uniformly drawn allowed actions (drawing included), episodes reset
  when all are done;
- ``single``: steps per second of ``gym.make("routing/{P}-50")`` with the first allowed action;
- ``train``: training instances per second of the REINFORCE trainer (TSP-20, batch 256, rollout baseline),
  over a few batches after one warm-up batch.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]

SNIPPET = r'''
import json, sys, time, numpy as np, torch, gymnasium as gym
torch.set_num_threads(1)
import routing_gym
kind, problem = sys.argv[1], sys.argv[2]
if kind == "vector":
    env = gym.make_vec(f"routing/{problem}-50", num_envs=1024, vectorization_mode="vector_entry_point",
                       array_type="torch", autoreset_mode="Disabled")
    obs, _ = env.reset(seed=0)
    g = torch.Generator().manual_seed(0)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < 1.0:
        a = torch.multinomial(obs["action_mask"].float(), 1, generator=g).squeeze(1)
        obs, r, term, trunc, info = env.step(a)
        steps += 1
        if bool(term.all()):
            obs, _ = env.reset()
    print(json.dumps(steps * 1024 / (time.perf_counter() - start)))
elif kind == "single":
    env = gym.make(f"routing/{problem}-50")
    obs, _ = env.reset(seed=0)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < 1.0:
        obs, r, term, trunc, info = env.step(int(np.flatnonzero(obs["action_mask"])[0]))
        steps += 1
        if term:
            obs, _ = env.reset()
    print(json.dumps(steps / (time.perf_counter() - start)))
else:
    try:
        from agents.training import reinforce
        from agents.training.config import TrainConfig
        from agents.training.reinforce import Trainer
    except ImportError:  # an older tree
        from agents import reinforce
        from agents.reinforce import TrainConfig, Trainer
    train_step = getattr(reinforce, "train_step", None) or Trainer.train_batch  # older trees: the method
    import tempfile
    cfg = TrainConfig(problem="tsp", num_nodes=20, batch_size=256, epoch_size=256 * 6, eval_size=256, val_size=256,
                      device="cpu", out_dir=tempfile.mkdtemp())
    trainer = Trainer(cfg)
    train_step(trainer)
    start = time.perf_counter()
    for _ in range(4):
        train_step(trainer)
    print(json.dumps(4 * 256 / (time.perf_counter() - start)))
'''


def measure(tree: Path, kind: str, problem: str) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", SNIPPET, kind, problem], env=env, cwd=tree, capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--other", type=Path, required=True, help="the other checkout (e.g. a git worktree)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--problems", nargs="+", default=["TSP", "CVRP", "OP", "PCTSP"])
    ap.add_argument("--no-train", action="store_true")
    args = ap.parse_args()
    trees = {"this": HERE, "other": args.other.resolve()}
    cases = [(k, p) for k in ("vector", "single") for p in args.problems] + ([] if args.no_train else [("train", "TSP")])
    results = {(name, k, p): [] for name in trees for k, p in cases}
    for r in range(args.rounds):
        for k, p in cases:
            for name, tree in (trees.items() if r % 2 == 0 else reversed(trees.items())):
                results[(name, k, p)].append(measure(tree, k, p))
    print(f"| measurement | this tree | other ({args.other}) | this / other |")
    print("|---|---|---|---|")
    for k, p in cases:
        a, b = (statistics.median(results[(n, k, p)]) for n in trees)
        unit = "instances/s" if k == "train" else "steps/s"
        print(f"| {k} {p}{'-20' if k == 'train' else '-50'} ({unit}) | {a:,.0f} | {b:,.0f} | {a / b:.2f} |")


if __name__ == "__main__":
    main()
