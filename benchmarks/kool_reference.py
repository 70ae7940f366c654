"""Kool et al.'s published weights run by our code: greedy mean cost vs the paper's Table 1, and time.

Loads each reference model (not part of this repository: a copy of the ``pretrained/`` folder of
wouterkool/attention-learn-to-route, in the folder ``REFERENCE`` below names) with
:func:`agents.policies.kool_weights.load_kool_weights`, decodes a seeded generated test set greedily on
the vector env (:func:`agents.inference.rollout.evaluate`) and prints one markdown row per problem and
size::

    python benchmarks/kool_reference.py                      # n = 20 and 50, 10,000 instances
    python benchmarks/kool_reference.py --num-instances 2000 --sizes 20 50 100 --threads 2

The paper's numbers come from its own 10,000 test instances, so a few tenths of a percent either way
is sampling noise; the time is wall-clock for the whole set (encoder, decoder and env steps).
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from agents.inference.rollout import evaluate
from agents.policies.kool_weights import load_kool_weights
from paper import kool_weights_dir, paper_value
from routing_gym.problems import get_problem

REFERENCE = kool_weights_dir()
# (problem, n) -> (folder, env variant); the published greedy mean costs are in paper.TABLE1
FOLDERS = {
    ("tsp", 20): ("tsp_20", {}), ("tsp", 50): ("tsp_50", {}), ("tsp", 100): ("tsp_100", {}),
    ("cvrp", 20): ("cvrp_20", {}), ("cvrp", 50): ("cvrp_50", {}), ("cvrp", 100): ("cvrp_100", {}),
    ("op", 20): ("op_dist_20", {"prize_type": "dist"}), ("op", 50): ("op_dist_50", {"prize_type": "dist"}),
    ("pctsp", 20): ("pctsp_det_20", {}), ("pctsp", 50): ("pctsp_det_50", {}),
}


def run(problem: str, n: int, num_instances: int, batch_size: int, seed: int, device: str) -> dict:
    """One row: our greedy mean cost with the reference weights on a seeded set, and the time."""
    folder, variant = FOLDERS[(problem, n)]
    published = paper_value(problem, n, "am_greedy")
    model = load_kool_weights(REFERENCE / folder, device=device)
    instances = get_problem(problem).generate(num_instances, n, generator=torch.Generator().manual_seed(seed),
                                              **variant)
    start = time.perf_counter()
    with torch.inference_mode():
        cost = evaluate(model, problem, instances, batch_size=batch_size, device=device, **variant)
    seconds = time.perf_counter() - start
    return {"problem": problem, "n": n, "ours": cost.mean().item(), "paper": published,
            "gap_percent": 100 * (cost.mean().item() - published) / abs(published), "seconds": seconds,
            "seconds_per_1000": 1000 * seconds / num_instances}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-instances", type=int, default=10_000, help="test instances per problem and size")
    parser.add_argument("--sizes", type=int, nargs="+", default=[20, 50], help="problem sizes n")
    parser.add_argument("--problems", nargs="+", default=["tsp", "cvrp", "op", "pctsp"])
    parser.add_argument("--batch-size", type=int, default=1000, help="instances decoded together")
    parser.add_argument("--seed", type=int, default=1234, help="seed of the generated test sets")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows to this JSON file")
    args = parser.parse_args()
    if not REFERENCE.is_dir():
        raise SystemExit(f"reference weights not found at {REFERENCE}")
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    print(f"{args.num_instances} instances per row, greedy, device {args.device}, {torch.get_num_threads()} threads\n")
    print("| problem | n | ours | paper | gap | time (s) | s / 1000 inst. |")
    print("|---|---|---|---|---|---|---|")
    rows = []
    for n in args.sizes:
        for problem in args.problems:
            if (problem, n) not in FOLDERS:
                continue
            row = run(problem, n, args.num_instances, args.batch_size, args.seed, args.device)
            rows.append(row)
            print(f"| {problem.upper()} | {n} | {row['ours']:.3f} | {row['paper']:.2f} | {row['gap_percent']:+.2f}% "
                  f"| {row['seconds']:.1f} | {row['seconds_per_1000']:.2f} |", flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps({"num_instances": args.num_instances, "threads": torch.get_num_threads(),
                                         "device": args.device, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
