"""The trainer's record of a run: ``metrics.csv`` (written whole and atomically from the metrics history),
TensorBoard events under ``tb/``, one printed line per epoch, and progress bars (rank 0 only)."""
from __future__ import annotations

import csv
import os
from pathlib import Path

import torch


def record(out: Path, history: list[dict], writer, log: bool) -> None:
    """After a checkpoint: ``out/metrics.csv`` rewritten from ``history``, its last row sent to the
    TensorBoard ``writer`` (None: none) and printed when ``log``."""
    write_csv(out / "metrics.csv", history)
    row = history[-1]
    if writer is not None:
        for key, value in row.items():
            if key != "epoch":
                writer.add_scalar(key, value, row["epoch"])
        writer.flush()
    if log:
        print(" ".join(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()))


def tensorboard(out: Path, purge_step: int):
    """A TensorBoard writer under ``out/tb`` that drops events from ``purge_step`` on (left by a run
    killed after its last checkpoint, they are written again); None without tensorboard."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:  # tensorboard is optional
        return None
    return SummaryWriter(str(out / "tb"), purge_step=purge_step)


def progress_bar(total: int, desc: str, enabled: bool):
    """A tqdm bar of ``total`` batches, or None when not ``enabled``."""
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="batch", leave=False)


def describe(device: torch.device) -> str:
    """The device as the run's first line names it."""
    if device.type == "cuda":
        return f"{device} ({torch.cuda.get_device_name(device)})"
    return f"cpu ({torch.get_num_threads()} threads)"


def write_csv(path: Path, rows: list[dict]) -> None:
    """Write ``rows`` as the whole CSV file, through a temporary file renamed into place (a kill leaves
    the previous file). Columns in order of first appearance; a row without one leaves it empty."""
    header = list(dict.fromkeys(key for row in rows for key in row)) or ["epoch"]
    tmp = path.with_name(path.name + ".tmp")
    try:
        with tmp.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=header, restval="")
            w.writeheader()
            w.writerows(rows)
        os.replace(tmp, path)
    except BaseException as e:  # a failed write (a full disk) leaves the previous file, no temporary one
        tmp.unlink(missing_ok=True)
        if isinstance(e, OSError) and e.errno is not None:
            raise type(e)(e.errno, e.strerror or str(e), str(path)) from None
        raise


def read_history(path: Path, epochs: int) -> list[dict]:
    """The metrics rows of epochs ``0 .. epochs - 1`` from an older run's CSV (whose checkpoints did not
    hold them): rows a killed run wrote past its checkpoint are dropped, numbers parsed."""
    if not path.is_file():
        return []
    with path.open(newline="") as f:
        rows = [{k: _number(v) for k, v in row.items() if v != ""} for row in csv.DictReader(f)]
    last = {row["epoch"]: row for row in rows if isinstance(row.get("epoch"), int) and row["epoch"] < epochs}
    return [last[epoch] for epoch in sorted(last)]  # an epoch written twice (a rerun) counts once, as last written


def _number(text: str) -> int | float | str:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text
