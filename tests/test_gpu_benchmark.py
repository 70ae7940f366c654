"""benchmarks/gpu.py stays runnable where no GPU is lent: its CPU smoke sizes print its three tables."""
import runpy
import sys
from pathlib import Path

import torch

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu.py"


def test_gpu_benchmark__tiny_cpu_run_prints_its_three_tables(capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["gpu.py", "--tiny", "--device", "cpu", "--problems", "tsp",
                                      "--epoch-budget", "1"])
    runpy.run_path(str(SCRIPT), run_name="__main__")
    out = capsys.readouterr().out
    assert "Core step throughput" in out and "| TSP | eager |" in out and "| TSP | compiled |" in out
    assert ("CUDA graph" in out) == torch.cuda.is_available() and "failed" not in out
    assert "| TSP-10 | fp32 | 128 |" in out and "| TSP-10 | bf16 | 128 |" in out
    assert "| TSP-20 | 64 | 64 |" in out


def test_in_place_step__steps_its_buffers_as_the_step_does():
    """The CUDA-graph mode steps copies of the state in place; run without a graph it must give the step's
    states exactly, through fresh batches and TSP's reset, whose state holds one tensor in two fields."""
    gpu = runpy.run_path(str(SCRIPT))
    from routing_gym.problems import get_problem, step
    from routing_gym.problems.base import tensors_of

    for name in ("tsp", "cvrp", "op", "pctsp", "cvrptw", "pdp"):
        problem = get_problem(name)
        g = torch.Generator().manual_seed(1)
        fresh = lambda: problem.reset(problem.generate(8, 12, generator=g))  # noqa: E731
        draw = lambda s: torch.multinomial(s.mask.float(), 1, generator=g).squeeze(1)  # noqa: E731
        ref = fresh()
        fn = gpu["InPlaceStep"](problem, step, ref, draw(ref), graph=False)
        cur = ref
        for i in range(60):
            if i == 30:
                ref = cur = fresh()
            action = draw(ref)
            ref, cur = step(problem, ref, action)[0], fn(problem, cur, action)[0]
            assert all(torch.equal(a, b) for a, b in zip(tensors_of(ref), tensors_of(cur))), (name, i)
        assert bool(ref.done.all())
