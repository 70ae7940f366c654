"""Training and inference throughput of the attention model with our trainer (and RL4CO's when installed).

Timed per training batch: instance generation, the sampling rollout with gradients, the baseline
(greedy rollout of the frozen baseline model, or POMO's shared multi-start rollouts), backward,
gradient clipping and the Adam step: exactly ``agents.training.reinforce.train_step``. Also reported: the time of one
paper-sized epoch (1,280,000 instances) extrapolated from the measured rate, the model FLOPs of one
training instance (counted by ``torch.utils.flop_counter``) and the utilisation of the device's
measured matmul rate, and greedy inference time of 1,000 instances (``--greedy-instances``, decoded in batches of
1,000). When ``rl4co`` is installed (the
``bench`` extra) its Attention Model policy and environment are measured side by side, interleaved with
ours, doing the same REINFORCE step with a greedy-rollout baseline.

    python benchmarks/train_throughput.py                       # TSP-20 and TSP-50, batch 512, CPU
    python benchmarks/train_throughput.py --problems tsp cvrp --sizes 50 --device cuda --bf16
    python benchmarks/train_throughput.py --sizes 50 --bf16 --greedy-instances 10000 --repeats 1
"""
from __future__ import annotations

import argparse
import copy
import statistics
import time

from importlib.metadata import version

import torch
from torch.utils.flop_counter import FlopCounterMode

from agents.inference.rollout import evaluate
from agents.training.config import TrainConfig
from agents.training.reinforce import Trainer, train_step
from report import threads_kept
from routing_gym.problems import get_problem

EPOCH = 1_280_000
GREEDY_BATCH = 1000  # instances decoded at once in the greedy timing, by every contender


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def matmul_rate(device: torch.device, dtype: torch.dtype) -> float:
    """Measured dense matmul FLOP/s on ``device`` (the utilisation's denominator)."""
    n = 4096 if device.type == "cuda" else 1024
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    for _ in range(3):
        a @ b
    sync(device)
    reps = 50 if device.type == "cuda" else 5
    start = time.perf_counter()
    for _ in range(reps):
        a @ b
    sync(device)
    return 2 * n**3 * reps / (time.perf_counter() - start)


def ours(problem: str, n: int, args, bf16: bool = False):
    """``(train_step, greedy, count_flops)`` of our trainer: each call does one training batch
    (``agents.training.reinforce.train_step``), a greedy evaluation of ``--greedy-instances``, or counts a batch's FLOPs."""
    cfg = TrainConfig(problem=problem, num_nodes=n, batch_size=args.batch_size, epoch_size=args.batch_size,
                      eval_size=args.batch_size, val_size=args.batch_size, device=args.device, bf16=bf16,
                      baseline=args.baseline, warmup_epochs=0, out_dir="/tmp/routing-gym-bench")
    trainer = Trainer(cfg)
    instances = get_problem(problem).generate(args.greedy_instances, n, generator=torch.Generator().manual_seed(0))

    def greedy():
        with torch.no_grad(), trainer.autocast():
            evaluate(trainer.policy, problem, instances, batch_size=GREEDY_BATCH, device=trainer.device)

    def flops():
        with FlopCounterMode(display=False) as counter:
            train_step(trainer)
        return counter.get_total_flops() / args.batch_size

    return lambda: train_step(trainer), greedy, flops


def rl4co(problem: str, n: int, args, bf16: bool = False):
    """The same three for RL4CO's Attention Model policy and environment (its REINFORCE step with a greedy
    rollout baseline written out, as ``rl4co.models.REINFORCE`` does it, without Lightning's loop), its
    forward passes under the same bf16 autocast as ours with ``bf16``, or None when rl4co is not installed."""
    try:
        with threads_kept():
            from rl4co import envs
            from rl4co.models.zoo.am import AttentionModelPolicy
    except ImportError:
        return None
    device = torch.device(args.device)
    env = getattr(envs, f"{problem.upper()}Env")(generator_params={"num_loc": n})
    policy = AttentionModelPolicy(env_name=env.name).to(device)
    baseline = copy.deepcopy(policy).eval()
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-4)
    autocast = lambda: torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16)  # noqa: E731

    def train_step():
        td = env.reset(batch_size=[args.batch_size]).to(device)
        with autocast():
            out = policy(td.clone(), env, phase="train", decode_type="sampling")
        with torch.no_grad(), autocast():
            bl = baseline(td.clone(), env, phase="train", decode_type="greedy")["reward"]
        loss = -((out["reward"] - bl) * out["log_likelihood"]).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
        optimizer.step()

    test = env.reset(batch_size=[args.greedy_instances]).to(device)

    def greedy():
        policy.eval()
        with torch.no_grad(), autocast():
            for i in range(0, args.greedy_instances, GREEDY_BATCH):
                policy(test[i:i + GREEDY_BATCH].clone(), env, phase="test", decode_type="greedy")
        policy.train()

    def flops():  # FlopCounterMode's module hooks fail inside RL4CO's decoder: not counted
        return None

    return train_step, greedy, flops


def timed(fn, device: torch.device) -> float:
    sync(device)
    start = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - start


def measure(problem: str, n: int, args) -> list[dict]:
    """One row per contender; their training batches and greedy evaluations are interleaved, so that a
    slow spell of a shared machine hits all of them alike."""
    device = torch.device(args.device)
    contenders = {"ours": ours(problem, n, args)}
    if args.bf16:
        contenders["ours (bf16)"] = ours(problem, n, args, bf16=True)
    if args.rl4co and args.baseline == "rollout":
        for bf16 in (False, True) if args.bf16 else (False,):
            peer = rl4co(problem, n, args, bf16)
            if peer is not None:
                contenders[f"RL4CO {version('rl4co')}" + (" (bf16)" if bf16 else "")] = peer
    for train_step, greedy, _ in contenders.values():  # warm-up
        train_step()
        greedy()
    times = {name: {"train": [], "greedy": []} for name in contenders}
    for _ in range(args.repeats):
        for name, (train_step, greedy, _) in contenders.items():
            times[name]["train"].append(timed(train_step, device))
            times[name]["greedy"].append(timed(greedy, device))
    rows = []
    for name, (_, _, flops) in contenders.items():
        rate = args.batch_size / statistics.median(times[name]["train"])
        per_instance = flops()
        rows.append({"problem": f"{problem}-{n}", "contender": name, "bf16": "bf16" in name,
                     "inst_s": rate, "epoch_s": EPOCH / rate,
                     "gflop_per_inst": per_instance and per_instance / 1e9,
                     "achieved_tflops": per_instance and per_instance * rate / 1e12,
                     "greedy_s": statistics.median(times[name]["greedy"])})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", nargs="+", default=["tsp"])
    ap.add_argument("--sizes", nargs="+", type=int, default=[20, 50])
    ap.add_argument("--batch-size", type=int, default=512)
    ap.add_argument("--baseline", default="rollout", choices=("rollout", "exponential", "pomo"))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--bf16", action="store_true", help="also each contender with bf16 autocast (rows beside fp32)")
    ap.add_argument("--threads", type=int, default=None, help="torch threads on the CPU (default: torch's)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--greedy-instances", type=int, default=1000,
                    help="instances of the greedy timing (default 1,000), decoded in batches of 1,000")
    ap.add_argument("--no-rl4co", dest="rl4co", action="store_false",
                    help="skip RL4CO's rows (measured with the rollout baseline in fp32 when rl4co is installed)")
    args = ap.parse_args()
    if args.greedy_instances < 1:
        ap.error(f"--greedy-instances must be at least 1, got {args.greedy_instances}")
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu, {torch.get_num_threads()} threads"
    peaks = {False: matmul_rate(device, torch.float32)}
    rates = f"measured matmul fp32 {peaks[False] / 1e12:.2f} TFLOP/s"
    if args.bf16:
        peaks[True] = matmul_rate(device, torch.bfloat16)
        rates += f", bf16 {peaks[True] / 1e12:.2f} (each row's MFU against its own)"
    print(f"device: {name}; batch {args.batch_size}; baseline {args.baseline}; {rates}")
    print("| problem | contender | train inst/s | vs ours | epoch of 1.28M (s) | GFLOP / inst | achieved TFLOP/s | MFU "
          f"| greedy s / {args.greedy_instances:,} |")
    print("|---|---|---|---|---|---|---|---|---|")
    for problem in args.problems:
        for n in args.sizes:
            rows = measure(problem, n, args)
            for r in rows:
                counted = r["gflop_per_inst"] is not None
                flops = (f"{r['gflop_per_inst']:.3f} | {r['achieved_tflops']:.3f} | "
                         f"{100 * r['achieved_tflops'] * 1e12 / peaks[r['bf16']]:.1f}%") if counted else "- | - | -"
                print(f"| {r['problem']} | {r['contender']} | {r['inst_s']:.0f} | "
                      f"{r['inst_s'] / rows[0]['inst_s']:.2f}x | {r['epoch_s']:.0f} | {flops} | "
                      f"{r['greedy_s']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
