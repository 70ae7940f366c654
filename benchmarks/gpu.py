"""One script for a GPU: env steps per second over batch sizes, a TSP-50 training epoch and greedy decoding.

Prints three tables (markdown), each section bounded in time (about 7 minutes on one H200 with the defaults,
torch 2.11; ``--sections`` picks them):

1. Core step throughput of each problem at n = 50 for B = 2^10 .. 2^17: the problem's batched ``step``
   eager, compiled (the single env's fixed-layout step, :func:`fixed_layout_step`, once per batch size) and
   the compiled step captured in a CUDA graph that steps fixed state buffers in place (:class:`InPlaceStep`;
   CUDA only). Random masked actions drawn outside the timing, a fresh batch whenever every episode has
   ended. The paper's four problems first, then the others while ``--step-budget`` lasts.
2. A TSP-50 training epoch of ``--epoch-size`` instances (the paper's 1,280,000) with the bundled trainer
   (``agents.training.reinforce.train_step``: generation, sampling rollout, greedy-rollout baseline, backward, Adam), in
   fp32 and in bf16 autocast; where ``--epoch-budget`` seconds run out first, the epoch time is
   extrapolated from the batches done (said in the table).
3. Greedy decoding of ``--decode-instances`` TSP-100 instances (10,000) with an untrained model of the
   paper's size (decoding time does not depend on the weights).

On the CPU (no GPU) it runs at tiny sizes with ``--tiny``, which the test suite does, so the script stays
runnable where no GPU is lent.

    python benchmarks/gpu.py                 # on a CUDA machine
    python benchmarks/gpu.py --tiny          # CPU smoke run (seconds)
"""
from __future__ import annotations

import argparse
import time
import traceback

import torch

from agents.inference.rollout import evaluate
from agents.training.config import TrainConfig
from agents.training.reinforce import Trainer, train_step
from routing_gym.problems import PROBLEMS, get_problem, step
from routing_gym.problems.base import fixed_layout_step, rebuild, row_major_state, tensors_of


FIRST = ["tsp", "cvrp", "op", "pctsp"]


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--problems", nargs="+", default=FIRST + sorted(set(PROBLEMS) - set(FIRST)),
                   help="problems of the step table, in order (the paper's four first)")
    p.add_argument("--num-nodes", type=int, default=50)
    p.add_argument("--min-exp", type=int, default=10, help="smallest batch 2^min-exp")
    p.add_argument("--max-exp", type=int, default=17, help="largest batch 2^max-exp")
    p.add_argument("--step-seconds", type=float, default=0.3, help="timed seconds per step-table cell")
    p.add_argument("--step-budget", type=float, default=240.0,
                   help="seconds for the step table: rows not begun when it runs out are left out (and named)")
    p.add_argument("--epoch-size", type=int, default=1_280_000)
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--epoch-budget", type=float, default=60.0, help="seconds per training-epoch row")
    p.add_argument("--decode-instances", type=int, default=10_000)
    p.add_argument("--decode-nodes", type=int, default=100)
    p.add_argument("--sections", nargs="+", choices=["steps", "train", "decode"], default=["steps", "train", "decode"],
                   help="the tables printed")
    p.add_argument("--tiny", action="store_true", help="CPU smoke sizes: B up to 2^6, 1,024-instance epoch, "
                                                       "64 decoded instances")
    args = p.parse_args(argv)
    if args.tiny:
        args.min_exp, args.max_exp, args.step_seconds, args.step_budget = 4, 6, 0.05, 60.0
        args.epoch_size, args.batch_size, args.epoch_budget = 1024, 128, 5.0
        args.decode_instances, args.decode_nodes, args.num_nodes = 64, 20, 10
    return args


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def step_rate(problem, batch: int, n: int, device: torch.device, make, seconds: float) -> float:
    """Steps per second (batch x calls / timed seconds) of ``fn = make(problem, state, action)`` called as
    ``fn(problem, state, action)``; ``make`` sees the first state and action (a CUDA graph is captured on them),
    and ``fn`` is checked against the eager step before it is timed."""
    g = torch.Generator(device=device).manual_seed(0)
    # a reset's state made row-major: the layout of every later state, for which the step is compiled once
    fresh = lambda: row_major_state(problem.reset(problem.generate(batch, n, generator=g, device=device)))  # noqa: E731
    draw = lambda s: torch.multinomial(s.mask.float(), 1, generator=g).squeeze(1)  # noqa: E731
    state = fresh()
    fn = make(problem, state, draw(state))
    check_against_eager(problem, fn, fresh(), draw)
    for _ in range(3):  # warm-up (compiles)
        state = fn(problem, state, draw(state))[0]
    timed, calls = 0.0, 0
    while timed < seconds:
        if bool(state.done.all()):
            state = fresh()
        action = draw(state)
        sync(device)
        start = time.perf_counter()
        state = fn(problem, state, action)[0]
        sync(device)
        timed += time.perf_counter() - start
        calls += 1
    return batch * calls / timed


def check_against_eager(problem, fn, state, draw) -> None:
    """A few steps of ``fn`` from ``state`` must give the eager step's states: a rate of a step that does
    not step is no result."""
    ref = cur = state
    for _ in range(3):
        action = draw(ref)
        ref, cur = step(problem, ref, action)[0], fn(problem, cur, action)[0]
        for name, a, b in zip(type(ref)._fields, ref, cur):
            for x, y in zip(tensors_of([a]), tensors_of([b])):
                if x.shape != y.shape or not torch.allclose(x.double(), y.double(), atol=1e-5):
                    raise AssertionError(f"{problem.label}: the measured step's {name} differs from the eager step's")


class InPlaceStep:
    """``fn`` stepping a fixed set of state and action buffers in place (the new state copied into the
    buffers), on CUDA captured once in a CUDA graph so that a step is one replay: how a rollout on a GPU
    runs a compiled step without launching its kernels one by one. The buffers are copies of the first
    state (a reset's state can hold one tensor in two fields, which an in-place copy would then write
    twice); a state given that is not the buffers (a fresh batch) is copied in first."""

    def __init__(self, problem, fn, state, action, graph: bool):
        self.problem, self.fn = problem, fn
        self.state = rebuild(state, [t.clone() for t in tensors_of(state)])
        self.action = action.clone()
        self.graph = None
        if graph:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # compile outside the capture, without stepping the buffers
                for _ in range(2):
                    fn(problem, self.state, self.action)
            torch.cuda.current_stream().wait_stream(side)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.advance()

    def advance(self) -> None:
        new = self.fn(self.problem, self.state, self.action)[0]
        for dst, src in zip(tensors_of(self.state), tensors_of(new)):
            if src.data_ptr() != dst.data_ptr():
                dst.copy_(src)

    def __call__(self, problem, state, action):
        if state is not self.state:
            for dst, src in zip(tensors_of(self.state), tensors_of(state)):
                dst.copy_(src)
        self.action.copy_(action)
        if self.graph is None:
            self.advance()
        else:
            self.graph.replay()
        return (self.state,)


def step_modes(device: torch.device) -> dict:
    """Each mode of the step table: ``mode -> make(problem, state, action) -> fn``. The compiled modes run
    :func:`fixed_layout_step` (traced by ``make_fx`` and compiled by inductor for the state's layout, called
    without dynamo: what the single env's ``compile=True`` runs), once per batch size: torch 2.11's dynamo
    could not compile the step that the vector env's ``compile=True`` compiles (an ``AssertionError`` in its
    side-effect codegen on the state's NamedTuples, or a wrong result), measured on an H200."""
    def layout_step(problem, state, action):
        return fixed_layout_step(problem, state)[1]

    modes = {"eager": lambda problem, state, action: step, "compiled": layout_step}
    if device.type == "cuda":
        modes["compiled + CUDA graph"] = lambda problem, state, action: InPlaceStep(
            problem, layout_step(problem, state, action), state, action, graph=True)
    return modes


def step_table(args, device: torch.device) -> str:
    """The step table, row by row while ``--step-budget`` seconds last (the rows left out are named)."""
    batches = [2**e for e in range(args.min_exp, args.max_exp + 1)]
    rows = ["| problem | mode | " + " | ".join(f"B=2^{b.bit_length() - 1}" for b in batches) + " |",
            "|---|---|" + "---:|" * len(batches)]
    start, skipped = time.perf_counter(), []
    for name in args.problems:
        problem = get_problem(name)
        for mode, make in step_modes(device).items():
            if time.perf_counter() - start > args.step_budget:
                skipped.append(f"{problem.label} {mode}")
                continue
            cells = []
            for b in batches:
                try:
                    cells.append(f"{step_rate(problem, b, args.num_nodes, device, make, args.step_seconds) / 1e6:.2f}")
                except torch.OutOfMemoryError:
                    cells.append("OOM")
                except Exception as e:  # noqa: BLE001 - one failed cell must not lose the rest of a GPU lease
                    traceback.print_exc()
                    cells.append(f"failed ({type(e).__name__})")
            rows.append(f"| {problem.label} | {mode} | " + " | ".join(cells) + " |")
            print(rows[-1], flush=True)
    note = f"\n\nLeft out when the {args.step_budget:.0f} s budget ran out: {', '.join(skipped)}." if skipped else ""
    return "Core step throughput, million steps/s, n = {}\n\n".format(args.num_nodes) + "\n".join(rows) + note


def epoch_row(args, device: torch.device, bf16: bool) -> str:
    cfg = TrainConfig(problem="tsp", num_nodes=50 if not args.tiny else args.num_nodes, batch_size=args.batch_size,
                      epoch_size=args.batch_size, eval_size=args.batch_size, val_size=args.batch_size,
                      device=str(device), bf16=bf16, warmup_epochs=0, out_dir="/tmp/routing-gym-gpu-bench")
    trainer = Trainer(cfg)
    train_step(trainer)  # warm-up
    sync(device)
    batches = -(-args.epoch_size // args.batch_size)
    start, done = time.perf_counter(), 0
    while done < batches and time.perf_counter() - start < args.epoch_budget:
        train_step(trainer)
        done += 1
    sync(device)
    seconds = time.perf_counter() - start
    epoch = seconds * batches / done
    how = "measured" if done == batches else f"extrapolated from {done} of {batches} batches"
    return (f"| TSP-{cfg.num_nodes} | {'bf16' if bf16 else 'fp32'} | {args.batch_size} | {epoch:,.1f} s ({how}) | "
            f"{done * args.batch_size / seconds:,.0f} |")


def decode_row(args, device: torch.device) -> str:
    from agents.policies.attention_model import AttentionModel, AttentionModelConfig

    policy = AttentionModel(AttentionModelConfig(problem="tsp")).to(device)
    instances = get_problem("tsp").generate(args.decode_instances, args.decode_nodes,
                                            generator=torch.Generator().manual_seed(0))
    chunk = min(args.decode_instances, 10_000 if device.type == "cuda" else 1000)
    evaluate(policy, "tsp", type(instances)(*(f[:chunk] for f in instances)), batch_size=chunk, device=device)
    sync(device)
    start = time.perf_counter()
    with torch.no_grad():
        cost = evaluate(policy, "tsp", instances, batch_size=chunk, device=device)
    sync(device)
    seconds = time.perf_counter() - start
    return (f"| TSP-{args.decode_nodes} | {args.decode_instances:,} | {chunk:,} | {seconds:.2f} s | "
            f"{float(cost.mean()):.3f} (untrained) |")


def main(argv=None) -> None:
    args = parse_args(argv)
    device = torch.device(args.device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"torch {torch.__version__}, device {device} ({name})\n", flush=True)
    if "steps" in args.sections:
        print(step_table(args, device), "\n", flush=True)
    if "train" in args.sections:
        print("Training epoch (reinforce.train_step, greedy-rollout baseline)\n")
        print("| problem | precision | batch | epoch time | instances/s |\n|---|---|---:|---:|---:|")
        for bf16 in (False, True):
            if bf16 and device.type == "cuda" and not torch.cuda.is_bf16_supported():
                continue
            print(row_or_failure(epoch_row, args, device, bf16), flush=True)
    if "decode" in args.sections:
        print("\nGreedy decoding\n")
        print("| problem | instances | chunk | time | mean cost |\n|---|---:|---:|---:|---:|")
        print(row_or_failure(decode_row, args, device), flush=True)


def row_or_failure(row, *args) -> str:
    """``row(*args)``, or a row that names its failure (the traceback on stderr): one failed row must not
    lose the rest of a GPU lease."""
    try:
        return row(*args)
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        return f"| {row.__name__} failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''} |"

if __name__ == "__main__":
    main()
