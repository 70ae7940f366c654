"""Why the compiled step uses inductor's scalar C++ loops on the CPU: one table, eager against
``torch.compile`` with inductor's vectorised loops (its default) and with scalar loops
(``cpp.simdlen=1``, what ``compile=True`` uses), for single operations on (B, N) tensors and for each
problem's core ``step``.

Each cell is the best of 3 windows of ``--reps`` calls, in microseconds per call, timed with the thread's
CPU time (one torch thread); the compiled cells include the call overhead of a compiled function
(guards and wrappers, about 20-30 µs here).

Usage::

    python benchmarks/compile_probe.py                   # B = 1024, N = 50
    python benchmarks/compile_probe.py --batch 4096 --problems TSP CVRP
"""
from __future__ import annotations

import argparse
import time

import torch
import torch._dynamo

from routing_gym.problems import get_problem, step


def per_call(fn, args, reps: int) -> float:
    for _ in range(3):
        fn(*args)
    best = float("inf")
    for _ in range(3):
        start = time.thread_time()
        for _ in range(reps):
            fn(*args)
        best = min(best, (time.thread_time() - start) / reps)
    return best * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--num-nodes", type=int, default=50)
    parser.add_argument("--problems", nargs="+", default=["TSP", "CVRP", "OP", "PCTSP"])
    parser.add_argument("--reps", type=int, default=200)
    args = parser.parse_args()
    torch.set_num_threads(1)
    b, n = args.batch, args.num_nodes
    g = torch.Generator().manual_seed(0)
    masks = [torch.rand(b, n, generator=g) > 0.5 for _ in range(2)]
    cases = {
        "bool (B, N): a & ~b": (lambda x, y: x & ~y, masks),
        "uint8 (B, N): a & (1 - b)": (lambda x, y: x & (1 - y), [m.to(torch.uint8) for m in masks]),
        "float32 (B, N): a * (1 - b)": (lambda x, y: x * (1 - y), [m.float() for m in masks]),
        "bool (B, N) scatter of one node per row": (
            lambda v, i: v.scatter(1, i[:, None], True), [masks[0], torch.randint(0, n, (b,), generator=g)]),
    }
    for name in args.problems:
        problem = get_problem(name)
        state = problem.reset(problem.generate(b, n, generator=g))
        action = torch.multinomial(state.mask.float(), 1, generator=g).squeeze(1)
        stepped = step(problem, state, action)[0]  # a stepped state (a fresh one aliases some tensors)
        action = torch.multinomial(stepped.mask.float(), 1, generator=g).squeeze(1)
        cases[f"{problem.label} core step"] = ((lambda p: lambda s, a: step(p, s, a))(problem), [stepped, action])

    print(f"µs per call, B = {b}, N = {n}, 1 torch thread, torch {torch.__version__}\n")
    print("| operation | eager | compiled, vectorised loops | compiled, scalar loops (`cpp.simdlen=1`) |")
    print("|---|---:|---:|---:|")
    for label, (fn, inputs) in cases.items():
        cells = [per_call(fn, inputs, args.reps)]
        for options in (None, {"cpp.simdlen": 1}):
            torch._dynamo.reset()
            cells.append(per_call(torch.compile(fn, dynamic=False, options=options), inputs, args.reps))
        print(f"| {label} | " + " | ".join(f"{c:,.1f}" for c in cells) + " |", flush=True)


if __name__ == "__main__":
    main()
