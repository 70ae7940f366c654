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
    assert "CUDA graphs" not in out or torch.cuda.is_available()
    assert "| TSP-10 | fp32 | 128 |" in out and "| TSP-10 | bf16 | 128 |" in out
    assert "| TSP-20 | 64 | 64 |" in out
