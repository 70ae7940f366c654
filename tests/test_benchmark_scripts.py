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


def test_threads_kept__undoes_a_change_of_torchs_thread_count(monkeypatch):
    """Importing rl4co.envs sets torch's thread count to the machine's cores; the benchmarks import it within
    ``threads_kept`` so that a run said to use one thread keeps one."""
    import torch

    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from report import threads_kept

    before = torch.get_num_threads()
    try:
        with threads_kept():
            torch.set_num_threads(before + 1)
            assert torch.get_num_threads() == before + 1
        assert torch.get_num_threads() == before
    finally:
        torch.set_num_threads(before)
