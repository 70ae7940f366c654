"""Datasets on disk: ``.npz`` files whose arrays carry the observation key names with a leading batch
axis (``locs`` (B, N, 2) with the depot first, ``demand``/``prize``/``penalty`` (B, N), OP's
``max_length`` (B,)). Extra arrays (reference costs ``ref_cost``, tours) are kept apart and returned."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .problems import get_problem


def instance_keys(problem) -> tuple[str, ...]:
    return problem.Instance._fields


def save_dataset(path: str | os.PathLike, instances, **extras: np.ndarray) -> None:
    """Save a batch of instances (the problem's ``Instance`` of tensors) and extra arrays."""
    arrays = {k: v.detach().cpu().numpy() for k, v in instances._asdict().items()}
    clash = sorted(set(arrays) & set(extras))
    if clash:
        raise ValueError(f"extra arrays {clash} would overwrite instance fields")
    np.savez_compressed(path, **arrays, **{k: np.asarray(v) for k, v in extras.items()})


def load_dataset(path: str | os.PathLike, problem: str, device=None):
    """Read and validate a dataset: returns ``(instances, extras)``.

    Raises:
        FileNotFoundError / ValueError naming the file and the missing or malformed field.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"dataset {path} does not exist")
    core = get_problem(problem)
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except Exception as e:  # noqa: BLE001 - numpy raises many types for a bad file
        raise ValueError(f"dataset {path} is not a readable .npz file: {e}") from None
    keys = instance_keys(core)
    fields = {k: arrays.pop(k) for k in keys if k in arrays}
    try:
        instances = core.instance_from(fields, batched=True, device=device)
    except ValueError as e:
        raise ValueError(f"dataset {path}: {e}") from None
    return instances, arrays
