"""The environment benchmark scripts stay runnable: each prints its machine line and its table at a tiny setting
(the numbers themselves are not judged here: benchmarks/README.md holds them, measured on a quiet machine)."""
import runpy
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.mark.parametrize("script, argv, row", [
    ("env_step.py", ["--problems", "TSP", "--sizes", "10", "--steps", "20", "--rounds", "1", "--warmup", "2"],
     "| TSP     | 10 |"),
    ("env_throughput.py", ["--problems", "TSP", "--num-nodes", "10", "--big-batch", "8", "--small-batch", "4",
                           "--rounds", "1", "--window", "0.02", "--no-rl4co", "--only", "numpy"],
     "| TSP     | ours numpy B=4 (NEXT_STEP) |"),
    ("sb3_adapter.py", ["--batch-sizes", "4", "--steps", "10", "--rounds", "1", "--warmup", "2"], "| 4 |"),
])
def test_benchmark_script__tiny_run_prints_machine_and_table(script, argv, row, capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # as `python benchmarks/SCRIPT` has it: their shared report.py
    monkeypatch.setattr(sys, "argv", [script, *argv])
    runpy.run_path(str(BENCHMARKS / script), run_name="__main__")
    out = capsys.readouterr().out
    assert "torch thread(s)" in out and "gymnasium" in out
    assert row in out, out
