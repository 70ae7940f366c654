"""Checkpoint files: one format for training state and for shipped policies.

A checkpoint is a dict ``{"format": "routing-gym", "version": 1, "kind": KIND, ...payload}`` saved with
``torch.save`` and read back with ``torch.load(..., weights_only=True)``: tensors, numbers, strings,
lists and dicts only. Writes go to a temporary file that is renamed into place, so a run killed while
saving never leaves a half-written checkpoint.
"""
from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import torch

FORMAT = "routing-gym"
VERSION = 1


def save_checkpoint(path: str | os.PathLike, *, kind: str, payload: dict[str, Any]) -> None:
    """Write a checkpoint atomically (see the module docstring); its folder is created if missing.

    Raises:
        OSError: ``path`` is a folder, or it cannot be written (naming the path); no temporary file is left.
    """
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a folder; give a file name for the checkpoint", str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        torch.save({"format": FORMAT, "version": VERSION, "kind": kind, **payload}, tmp)
        os.replace(tmp, path)
    except BaseException:  # a failed or interrupted write leaves no temporary file behind
        tmp.unlink(missing_ok=True)
        raise


def load_checkpoint(path: str | os.PathLike, *, kind: str | None = None, map_location: Any = "cpu") -> dict:
    """Load and check a routing-gym checkpoint; ``ValueError`` names the file and what is wrong."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint {path} does not exist")
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as e:  # noqa: BLE001 - torch raises many types for a bad file
        raise ValueError(f"checkpoint {path} is corrupt or not a torch file: {type(e).__name__}: {e}") from None
    if not isinstance(ckpt, dict) or ckpt.get("format") != FORMAT:
        raise ValueError(f"checkpoint {path} is not a routing-gym checkpoint (no 'format': '{FORMAT}' entry)")
    if ckpt.get("version") != VERSION:
        raise ValueError(f"checkpoint {path} has format version {ckpt.get('version')}, this code reads {VERSION}")
    if kind is not None and ckpt.get("kind") != kind:
        raise ValueError(f"checkpoint {path} holds a {ckpt.get('kind')!r}, expected a {kind!r}")
    return ckpt
