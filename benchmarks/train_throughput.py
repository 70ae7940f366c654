"""Training and inference throughput of the attention model with our trainer (and RL4CO's when installed).

Timed per training batch: instance generation, the sampling rollout with gradients, the baseline
(greedy rollout of the frozen baseline model, or POMO's shared multi-start rollouts), backward,
gradient clipping and the Adam step: exactly ``Trainer.train_batch``. Also reported: the time of one
paper-sized epoch (1,280,000 instances) extrapolated from the measured rate, the model FLOPs of one
training instance (counted by ``torch.utils.flop_counter``) and the utilisation of the device's
measured matmul rate, and greedy inference time per 1,000 instances.

    python benchmarks/train_throughput.py                       # TSP-20 and TSP-50, batch 512, CPU
    python benchmarks/train_throughput.py --problems tsp cvrp --sizes 50 --device cuda --bf16
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch.utils.flop_counter import FlopCounterMode

from agents.decoding import evaluate
from agents.reinforce import TrainConfig, Trainer
from routing_gym.problems import get_problem

EPOCH = 1_280_000


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


def measure(problem: str, n: int, args) -> dict:
    cfg = TrainConfig(problem=problem, num_nodes=n, batch_size=args.batch_size, epoch_size=args.batch_size,
                      eval_size=args.batch_size, val_size=args.batch_size, device=args.device, bf16=args.bf16,
                      baseline=args.baseline, warmup_epochs=0, out_dir="/tmp/routing-gym-bench")
    trainer = Trainer(cfg)
    trainer.train_batch()  # warm-up
    sync(trainer.device)
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        trainer.train_batch()
        sync(trainer.device)
        times.append(time.perf_counter() - start)
    with FlopCounterMode(display=False) as counter:
        trainer.train_batch()
    flops_per_instance = counter.get_total_flops() / args.batch_size
    rate = args.batch_size / statistics.median(times)
    instances = get_problem(problem).generate(1000, n, generator=torch.Generator().manual_seed(0))
    trainer.policy.eval()
    evaluate(trainer.policy, problem, instances, batch_size=1000, device=trainer.device)  # warm-up
    sync(trainer.device)
    start = time.perf_counter()
    with torch.no_grad():
        evaluate(trainer.policy, problem, instances, batch_size=1000, device=trainer.device)
    sync(trainer.device)
    return {"problem": f"{problem}-{n}", "inst_s": rate, "epoch_s": EPOCH / rate,
            "gflop_per_inst": flops_per_instance / 1e9, "achieved_tflops": flops_per_instance * rate / 1e12,
            "greedy_1000_s": time.perf_counter() - start}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", nargs="+", default=["tsp"])
    ap.add_argument("--sizes", nargs="+", type=int, default=[20, 50])
    ap.add_argument("--batch-size", type=int, default=512)
    ap.add_argument("--baseline", default="rollout", choices=("rollout", "exponential", "pomo"))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--threads", type=int, default=None, help="torch threads on the CPU (default: torch's)")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu, {torch.get_num_threads()} threads"
    peak = matmul_rate(device, torch.bfloat16 if args.bf16 else torch.float32)
    print(f"device: {name}; batch {args.batch_size}; baseline {args.baseline}; "
          f"{'bf16' if args.bf16 else 'fp32'}; measured matmul {peak / 1e12:.2f} TFLOP/s")
    print("| problem | train inst/s | epoch of 1.28M (s) | GFLOP / inst | achieved TFLOP/s | MFU | greedy s / 1000 |")
    print("|---|---|---|---|---|---|---|")
    for problem in args.problems:
        for n in args.sizes:
            r = measure(problem, n, args)
            print(f"| {r['problem']} | {r['inst_s']:.0f} | {r['epoch_s']:.0f} | {r['gflop_per_inst']:.3f} | "
                  f"{r['achieved_tflops']:.3f} | {100 * r['achieved_tflops'] * 1e12 / peak:.1f}% | "
                  f"{r['greedy_1000_s']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
