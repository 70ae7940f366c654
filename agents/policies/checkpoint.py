"""Checkpoint files: one format for training state and for shipped policies.

A checkpoint is a dict ``{"format": "routing-gym", "version": 1, "kind": KIND, ...payload}`` saved with
``torch.save`` and read back with ``torch.load(..., weights_only=True)``: tensors, numbers, strings,
lists and dicts only. Writes go to a temporary file that is renamed into place, so a run killed while
saving never leaves a half-written checkpoint.

Reading checks what torch does not: every member's CRC (a bit flipped on disk is refused, not resumed),
and the type of every entry the code reads (:data:`FIELDS`: a config that is a list, a history that is a
string, an epoch of -5 are refused naming the file and the entry).
"""
from __future__ import annotations

import errno
import math
import os
import zipfile
from pathlib import Path
from typing import Any

import torch

FORMAT = "routing-gym"
VERSION = 1
# the entries a checkpoint may hold and what each must be: a mapping, a list, a count >= its minimum, or a
# number (seconds >= 0; a validation cost, inf before the first)
FIELDS = {"config": dict, "model_config": dict, "model": dict, "meta": dict, "optimizer": dict, "baseline": dict,
          "prior": dict, "generators": list, "history": list, "world_size": 1, "epoch": 0, "instances_seen": 0,
          "elapsed_s": "seconds", "best_val": "cost"}


class NotACheckpoint(ValueError):
    """A torch file that is not a routing-gym checkpoint (other code's weights, e.g. Kool et al.'s)."""


def save_checkpoint(path: str | os.PathLike, *, kind: str, payload: dict[str, Any]) -> None:
    """Write a checkpoint atomically (see the module docstring); its folder is created if missing.

    Raises:
        OSError: ``path`` is a folder, or it cannot be written (a full disk, a read-only folder: naming
            ``path``, not the temporary file); no temporary file is left, and an earlier ``path`` is intact.
    """
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a folder; give a file name for the checkpoint", str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with tmp.open("wb") as f:  # through Python's file: a failed write (a full disk) is an OSError saying so
            torch.save({"format": FORMAT, "version": VERSION, "kind": kind, **payload}, f)
        os.replace(tmp, path)
    except BaseException as e:  # a failed or interrupted write leaves no temporary file behind
        tmp.unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise renamed(e, path) from None
        raise


def renamed(e: OSError, path: Path) -> OSError:
    """``e`` (raised writing a temporary file) as the same error about ``path``, the file the user named."""
    return type(e)(e.errno, e.strerror or str(e), str(path)) if e.errno is not None else e


def read_torch_file(path: str | os.PathLike, map_location: Any = "cpu") -> Any:
    """What ``torch.load(path, weights_only=True)`` reads (tensors, numbers, strings and containers only);
    ``ValueError`` names the file when it is damaged, not a torch file, or holds other objects."""
    path = Path(path)
    check_archive(path)
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except Exception as e:  # noqa: BLE001 - torch raises many types for a bad file
        raise ValueError(f"checkpoint {path} is corrupt or not a torch file ({type(e).__name__}: {load_error(e)}); "
                         "checkpoints are read with torch.load(weights_only=True), which holds tensors, numbers, "
                         "strings and containers only") from None


def load_error(e: Exception) -> str:
    """The part of a ``torch.load`` error that says what is wrong with the file: for a weights-only
    unpickling error, the unpickler's own words, without torch's advice to load with ``weights_only=False``
    or to allowlist the file's globals (either would run code the file names)."""
    text = str(e)
    marker = "WeightsUnpickler error:"
    if marker in text:
        text = text[text.index(marker) + len(marker):]
        for advice in (" Please use", " Check the documentation"):  # allowlisting the file's globals, or reading docs
            text = text.split(advice)[0]
    return text.strip().split("\n")[0]


def load_checkpoint(path: str | os.PathLike, *, kind: str | None = None, map_location: Any = "cpu") -> dict:
    """Load and check a routing-gym checkpoint; ``ValueError`` names the file and what is wrong."""
    return checked(read_torch_file(path, map_location), Path(path), kind)


def checked(ckpt: Any, path: Path, kind: str | None = None) -> dict:
    """``ckpt``, read from ``path``, if it is a routing-gym checkpoint (of ``kind``, if given) in this code's
    format; ``ValueError`` names the file and what is wrong."""
    if not isinstance(ckpt, dict) or ckpt.get("format") != FORMAT:
        raise NotACheckpoint(f"checkpoint {path} is not a routing-gym checkpoint (no 'format': '{FORMAT}' entry)")
    if ckpt.get("version") != VERSION:
        raise ValueError(f"checkpoint {path} has format version {ckpt.get('version')}, this code reads {VERSION}")
    if kind is not None and ckpt.get("kind") != kind:
        raise ValueError(f"checkpoint {path} holds a {ckpt.get('kind')!r}, expected a {kind!r}")
    for key, value in ckpt.items():
        problem = field_problem(key, value)
        if problem:
            raise ValueError(f"checkpoint {path}: its '{key}' {problem} (the file is damaged or was not written by "
                             "routing-gym)")
    return ckpt


def check_archive(path: Path) -> None:
    """``FileNotFoundError`` / ``IsADirectoryError`` unless ``path`` is a file; ``ValueError`` when a member
    of its zip archive (torch's format) fails its CRC check (torch's reader does not check). A file that
    is not a zip archive (torch's legacy format) is left to ``torch.load``."""
    if path.is_dir():
        raise IsADirectoryError(f"checkpoint {path} is a folder, not a file")
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint {path} does not exist" if not path.exists()
                                else f"checkpoint {path} is not a regular file (a FIFO or device)")
    if not zipfile.is_zipfile(path):
        return
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except Exception as e:  # noqa: BLE001 - zipfile and zlib raise many types for a damaged archive
        raise ValueError(f"checkpoint {path} is corrupt: {type(e).__name__}: {e}") from None
    if bad is not None:
        raise ValueError(f"checkpoint {path} is corrupt: its member {bad} fails its CRC check (the file changed "
                         "after it was written)")


def is_metrics_row(row: Any) -> bool:
    """Whether ``row`` is a trainer's metrics row: a dict with a whole ``epoch`` and a numeric ``val_cost``."""
    def number(v):
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    return isinstance(row, dict) and number(row.get("epoch")) and row["epoch"] == int(row["epoch"]) \
        and number(row.get("val_cost"))


def field_problem(key: str, value: Any) -> str | None:
    """What is wrong with a checkpoint entry (see :data:`FIELDS`), or None."""
    want = FIELDS.get(key)
    if want is None:
        return None
    got = type(value).__name__
    if want in (dict, list):
        if not isinstance(value, want):
            return f"must be a {want.__name__}, got a {got}"
        if key == "model" and not all(isinstance(v, torch.Tensor) for v in value.values()):
            return "must map parameter names to tensors"
        if key == "history" and not all(is_metrics_row(row) for row in value):
            return "must be a list of metrics rows (dicts with a whole 'epoch' and a numeric 'val_cost')"
        return None
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(want, int):
        if not number or value != int(value) or value < want:
            return f"must be a whole number >= {want}, got {value!r}"
        return None
    if not number or math.isnan(value) or (want == "seconds" and not 0 <= value < math.inf):
        return f"must be {'a finite number of seconds >= 0' if want == 'seconds' else 'a number'}, got {value!r}"
    return None
