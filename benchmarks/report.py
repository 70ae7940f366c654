"""What the benchmark scripts print besides their numbers: the machine they ran on and markdown tables."""
from __future__ import annotations

import contextlib
import os
import platform
from typing import Iterator

import gymnasium as gym
import torch


def machine_line(threads: int, *notes: str) -> str:
    """torch, threads, cores, Python, CPU architecture and gymnasium versions, then ``notes``, ``;``-separated."""
    return "; ".join([f"torch {torch.__version__}, {threads} torch thread(s), {os.cpu_count()} CPU core(s), "
                      f"Python {platform.python_version()}, {platform.machine()}, gymnasium {gym.__version__}",
                      *notes])


@contextlib.contextmanager
def threads_kept() -> Iterator[None]:
    """Within: whatever changes torch's number of threads (importing ``rl4co.envs`` sets it to the machine's cores,
    through numba's OpenMP start-up) is undone on leaving, so that a run said to use one thread uses one: with two,
    an eager op over (1024, 50) splits across both cores, and a thread-CPU clock counts only the calling one's."""
    threads = torch.get_num_threads()
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def markdown_table(headers: list[str], rows: list[list], left: int = 1) -> str:
    """A GitHub markdown table, the first ``left`` columns left-aligned, the others right-aligned."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]

    def line(values):
        return "| " + " | ".join(v.ljust(w) if i < left else v.rjust(w)
                                 for i, (v, w) in enumerate(zip(values, widths))) + " |"
    rule = "|" + "|".join("-" * (w + 2) if i < left else "-" * (w + 1) + ":" for i, w in enumerate(widths)) + "|"
    return "\n".join([line(headers), rule] + [line(r) for r in cells])
