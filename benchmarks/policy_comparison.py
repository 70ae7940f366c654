"""The policies of routing-gym on TSP-20 at an equal training budget (the same number of training instances):
the Attention Model, the distance-biased Attention Model and the Pointer Network trained by REINFORCE
(greedy-rollout baseline, :class:`agents.training.reinforce.Trainer`), the Attention Model with the critic
and POMO baselines (POMO at the same number of *rollouts*: n times fewer instances, each from its n start
nodes), and the Pointer Network trained by supervised learning on labelled tours
(:mod:`agents.training.supervised`: farthest insertion + 2-opt labels on TSP-20, and/or exact Held-Karp
labels on smaller instances, ``--label-nodes``). Every policy is decoded greedily on the
same seeded validation set (the trainer's, ``val_seed`` 1234)::

    python benchmarks/policy_comparison.py                      # a few minutes per policy on 2 CPU cores
    python benchmarks/policy_comparison.py --instances 1280000 --epochs 10 --batch-size 512 --device cuda

Prints a markdown table and writes it with the settings to ``benchmarks/results/policy_comparison.{md,json}``.
Every trained policy is saved to ``--save-dir`` (``benchmarks/results/policies/{slug}.pt``, a policy file with
its row label), so that ``benchmarks/quality.py --policy benchmarks/results/policies/*.pt`` decodes them
with every strategy beside the heuristics and solvers.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import shutil
import time
from pathlib import Path

import torch

from agents.inference.rollout import evaluate
from agents.policies.pointer_network import PointerNetwork, PointerNetworkConfig
from agents.policies.pretrained import save_policy
from agents.references.exact import MAX_NODES, label_tsp
from agents.references.heuristics import heuristic_tours
from agents.training.config import TrainConfig
from agents.training.reinforce import Trainer
from agents.training.supervised import SupervisedConfig, train_supervised
from routing_gym.problems import TSP, tour_cost

ROOT = Path(__file__).resolve().parents[1]
RL_POLICIES = {  # row label: (TrainConfig.policy, model overrides, baseline, file name)
    "Attention Model (RL)": ("attention", {}, "rollout", "am-rl"),
    "Attention Model + distance bias (RL)": ("attention", {"distance_bias": True}, "rollout", "am-distance-bias-rl"),
    "Pointer Network (RL)": ("pointer", {}, "rollout", "ptrnet-rl"),
    "Attention Model (RL, POMO baseline)": ("attention", {}, "pomo", "am-pomo"),
    "Attention Model (RL, critic baseline)": ("attention", {}, "critic", "am-critic"),
    }


def train_rl(args, policy: str, model: dict, baseline: str, out_dir: str, label: str, save: Path
             ) -> tuple[float, float, int]:
    """(greedy validation cost, training seconds, parameters) of one REINFORCE run; the policy is saved
    to ``save``."""
    # POMO rolls every instance out from each of its n start nodes: it gets n times fewer instances (and
    # batches of n times fewer instances), so that every row decodes the same number of rollouts
    share = args.num_nodes if baseline == "pomo" else 1
    config = TrainConfig(problem="tsp", num_nodes=args.num_nodes, epochs=args.epochs,
                         epoch_size=args.instances // args.epochs // share, batch_size=max(1, args.batch_size // share),
                         lr=args.lr,
                         eval_size=args.eval_size, val_size=args.val_size, seed=args.seed, device=args.device,
                         out_dir=out_dir, policy=policy, model=model, baseline=baseline)
    shutil.rmtree(out_dir, ignore_errors=True)  # a fresh run: metrics.csv is appended to
    trainer = Trainer(config)
    start = time.perf_counter()
    rows = trainer.fit(progress=False, log=False)
    seconds = time.perf_counter() - start
    save_policy(save, trainer.policy, {"label": label, "problem": "tsp", "num_nodes": args.num_nodes,
                                       "instances_seen": trainer.instances_seen, "val_cost": rows[-1]["val_cost"],
                                       "trainer": {k: v for k, v in dataclasses.asdict(config).items()
                                                   if k != "out_dir"}})
    return rows[-1]["val_cost"], seconds, sum(p.numel() for p in trainer.policy.parameters())


def train_sl(args, labels: str, num_nodes: int, val_set, label: str, save: Path) -> tuple[float, float, int, float]:
    """(greedy validation cost, training seconds including labelling, parameters, mean label cost) of the
    Pointer Network trained on ``args.instances`` labelled instances of ``num_nodes`` nodes; saved to ``save``."""
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else
                          "cpu" if args.device == "auto" else args.device)
    generator = torch.Generator(device=device).manual_seed(args.seed)
    instances = TSP.generate(args.instances, num_nodes, generator=generator)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(args.seed)
        policy = PointerNetwork(PointerNetworkConfig(problem="tsp")).to(device)
    start = time.perf_counter()
    tours = label_tsp(instances.locs) if labels == "exact" else heuristic_tours(TSP, instances, "2opt")
    label_cost = float(tour_cost(TSP, instances, tours).mean())
    train_supervised(policy, "tsp", instances, tours,
                     SupervisedConfig(epochs=1, batch_size=args.batch_size, lr=args.sl_lr, seed=args.seed))
    seconds = time.perf_counter() - start
    cost = float(evaluate(policy, "tsp", val_set, device=device).mean())
    save_policy(save, policy, {"label": label, "problem": "tsp", "num_nodes": num_nodes, "instances_seen": args.instances,
                               "val_cost": cost, "trainer": {"policy": "pointer", "supervised": labels,
                                                             "label_cost": label_cost, "lr": args.sl_lr,
                                                             "batch_size": args.batch_size, "seed": args.seed}})
    return cost, seconds, sum(p.numel() for p in policy.parameters()), label_cost


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-nodes", type=int, default=20)
    parser.add_argument("--instances", type=int, default=12_800, help="training instances per policy")
    parser.add_argument("--epochs", type=int, default=2, help="REINFORCE epochs the instances are split into")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=1e-4, help="Adam learning rate of the REINFORCE rows (Kool et al.)")
    parser.add_argument("--sl-lr", type=float, default=1e-3, help="Adam learning rate of the supervised rows")
    parser.add_argument("--eval-size", type=int, default=500, help="rollout baseline's evaluation set")
    parser.add_argument("--val-size", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch CPU threads (1 is fastest on a shared, oversubscribed CPU)")
    parser.add_argument("--supervised", nargs="*", default=["2opt", "exact"], choices=["2opt", "exact"],
                        help="supervised rows: 2-opt labels at --num-nodes, exact labels at --label-nodes")
    parser.add_argument("--label-nodes", type=int, default=10, help="instance size of the exact labels (<= 12 fast)")
    parser.add_argument("--only", nargs="*", help="run only the rows whose label contains one of these words")
    parser.add_argument("--save-dir", type=Path, default=ROOT / "benchmarks" / "results" / "policies",
                        help="where each trained policy is saved (for quality.py --policy)")
    args = parser.parse_args()
    if args.label_nodes > MAX_NODES:
        parser.error(f"--label-nodes must be <= {MAX_NODES}")

    torch.set_num_threads(args.threads)
    val_set = TSP.generate(args.val_size, args.num_nodes, generator=torch.Generator().manual_seed(1234))
    rows = []
    reference = float(tour_cost(TSP, val_set, heuristic_tours(TSP, val_set, "2opt")).mean())
    rows.append({"policy": "farthest insertion + 2-opt (reference, no training)", "training": "-",
                 "val_cost": reference, "train_s": 0.0, "params": 0})

    def wanted(name: str) -> bool:
        return not args.only or any(w.lower() in name.lower() for w in args.only)

    args.save_dir.mkdir(parents=True, exist_ok=True)
    for name, (policy, model, baseline, slug) in RL_POLICIES.items():
        if wanted(name):  # the run (metrics.csv, last.pt) stays in SAVE_DIR/runs/SLUG for training_curves.py
            cost, seconds, params = train_rl(args, policy, model, baseline, str(args.save_dir / "runs" / slug), name,
                                             args.save_dir / f"{slug}.pt")
            detail = (f", {args.instances // args.num_nodes:,} instances x {args.num_nodes} starts"
                      if baseline == "pomo" else "")
            rows.append({"policy": name, "training": f"REINFORCE, {baseline} baseline, {args.epochs} epochs{detail}",
                         "val_cost": cost, "train_s": seconds, "params": params})
            print(rows[-1], flush=True)
    for labels in args.supervised:
        n = args.num_nodes if labels == "2opt" else args.label_nodes
        name = f"Pointer Network (supervised, {'2-opt' if labels == '2opt' else 'Held-Karp'} labels, TSP-{n})"
        if wanted(name):
            slug = f"ptrnet-sl-{labels}{n}"
            cost, seconds, params, label_cost = train_sl(args, labels, n, val_set, name, args.save_dir / f"{slug}.pt")
            rows.append({"policy": name, "training": f"teacher forcing, 1 epoch, label cost {label_cost:.3f}",
                         "val_cost": cost, "train_s": seconds, "params": params})
            print(rows[-1], flush=True)

    lines = [f"TSP-{args.num_nodes}, {args.instances} training instances per policy, batch {args.batch_size}, "
             f"Adam lr {args.lr} (REINFORCE) / {args.sl_lr} (supervised); greedy mean cost on {args.val_size} seeded validation instances "
             f"({platform.processor() or platform.machine()}, torch {torch.__version__}, "
             f"{torch.get_num_threads()} threads)", "",
             "| policy | training | params | train time (s) | greedy val cost |", "|---|---|---:|---:|---:|"]
    lines += [f"| {r['policy']} | {r['training']} | {r['params']:,} | {r['train_s']:.0f} | {r['val_cost']:.3f} |"
              for r in rows]
    table = "\n".join(lines)
    print(table)
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "policy_comparison.md").write_text(table + "\n")
    (out / "policy_comparison.json").write_text(json.dumps({"settings": vars(args), "rows": rows}, indent=2, default=str))


if __name__ == "__main__":
    main()
