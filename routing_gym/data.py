"""Datasets on disk: ``.npz`` files whose arrays carry the observation key names with a leading batch
axis (``locs`` (B, N, 2) with the depot first, ``demand``/``prize``/``penalty`` (B, N), OP's
``max_length`` (B,)), and optionally reference solutions (what ``routing-gym solve --save`` writes):
``ref_cost`` (B,) and ``ref_tours`` (B, S) node indices, returned apart.

Datasets are read strictly. Only those arrays are read (an ``.npz`` decompresses an array only when it
is read, so nothing else costs memory); any other array is left unread and named in a warning (a
misspelt ``ref_cost`` would otherwise vanish without a word). Pickled objects are never loaded. Every
error is a :class:`ValueError` (:class:`FileNotFoundError` for a missing file) naming the file and the
field: an array that is not real numbers (complex, text, objects), of the wrong shape or non-finite, an
instance field out of its range, a dataset without instances.
"""
from __future__ import annotations

import os
import warnings
import zipfile
from pathlib import Path

import numpy as np

from .problems import get_problem

REFERENCES = ("ref_cost", "ref_tours")


def instance_keys(problem) -> tuple[str, ...]:
    return problem.Instance._fields


def save_dataset(path: str | os.PathLike, instances, **references: np.ndarray) -> None:
    """Save a batch of instances (the problem's ``Instance`` of tensors) and reference arrays
    (``ref_cost`` (B,), ``ref_tours`` (B, S)) as ``path``, the name as given (no suffix added), replaced
    atomically; ``ValueError`` for other names or malformed arrays."""
    unknown = sorted(set(references) - set(REFERENCES))
    if unknown:
        raise ValueError(f"unknown reference array(s) {unknown}; a dataset holds {list(REFERENCES)}")
    arrays = {k: v.detach().cpu().numpy() for k, v in instances._asdict().items()}
    b, n = next(iter(arrays.values())).shape[:2]  # the first field, (B, N, ...): ``locs``, or a coordinate-free unit's matrix
    if b == 0:
        raise ValueError("a dataset must hold at least one instance")
    refs = {k: reference_array(k, v, b, n) for k, v in references.items()}
    path = Path(path)  # written under exactly this name (numpy would add .npz to x.NPZ), through a temporary file
    tmp = path.with_name(path.name + ".tmp")
    try:
        with tmp.open("wb") as f:
            np.savez_compressed(f, **arrays, **refs)
        os.replace(tmp, path)
    except BaseException:  # a failed or interrupted write leaves the previous file and no temporary one
        tmp.unlink(missing_ok=True)
        raise


def load_dataset(path: str | os.PathLike, problem: str, device=None):
    """Read and validate a dataset: returns ``(instances, references)``, the latter a dict holding
    ``ref_cost`` (B,) float64 and ``ref_tours`` (B, S) int64 where the file has them.

    Raises:
        FileNotFoundError / ValueError naming the file and the missing or malformed field.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"dataset {path} does not exist")
    core = get_problem(problem)
    fields = instance_keys(core)
    if not zipfile.is_zipfile(path):
        raise ValueError(f"dataset {path} is not an .npz file (a zip archive of named arrays)")
    try:
        data = np.load(path, allow_pickle=False)
    except Exception as e:  # noqa: BLE001 - numpy and zipfile raise many types for a damaged archive
        raise ValueError(f"dataset {path} is not a readable .npz file: {e}") from None
    with data:
        unknown = sorted(set(data.files) - set(fields) - set(REFERENCES))
        if unknown:
            warnings.warn(f"dataset {path}: array(s) {unknown} not read; a {core.label} dataset holds "
                          f"{list(fields)} and optionally {list(REFERENCES)}", stacklevel=2)
        arrays = {k: read_array(path, data, k) for k in fields + REFERENCES if k in data.files}
    references = {k: arrays.pop(k) for k in REFERENCES if k in arrays}
    try:
        instances = core.instance_from(arrays, batched=True, device=device)
    except ValueError as e:
        raise ValueError(f"dataset {path}: {e}") from None
    b, n = instances[0].shape[0], core.n_total_of(instances)
    if b == 0:
        raise ValueError(f"dataset {path} holds no instances")
    try:
        return instances, {k: reference_array(k, v, b, n) for k, v in references.items()}
    except ValueError as e:
        raise ValueError(f"dataset {path}: {e}") from None


def read_array(path: Path, data, key: str) -> np.ndarray:
    """One array of an open ``.npz``, refused unless it holds real numbers."""
    try:
        arr = data[key]
    except Exception as e:  # noqa: BLE001 - zip, zlib and format errors of a damaged member, pickled objects
        raise ValueError(f"dataset {path}: array '{key}' cannot be read: {e}") from None
    if arr.dtype.kind not in "iuf":
        raise ValueError(f"dataset {path}: array '{key}' holds {arr.dtype} values, not real numbers")
    return arr


def reference_array(key: str, value, b: int, n: int) -> np.ndarray:
    """``ref_cost`` as (B,) finite float64, or ``ref_tours`` as (B, S) int64 node indices in 0..N-1, for B
    instances of N nodes; ``ValueError`` naming the field."""
    arr = np.asarray(value)
    if key == "ref_cost":
        if arr.dtype.kind not in "iuf" or arr.shape != (b,):
            raise ValueError(f"'ref_cost' must hold one real number per instance, shape ({b},), got {arr.dtype} "
                             f"of shape {arr.shape}")
        if not np.isfinite(arr).all():
            raise ValueError("'ref_cost' holds NaN or infinite values")
        return arr.astype(np.float64)
    if arr.dtype.kind not in "iu" or arr.ndim != 2 or len(arr) != b or arr.shape[1] == 0:
        raise ValueError(f"'ref_tours' must hold one tour of node indices per instance, shape ({b}, S), got "
                         f"{arr.dtype} of shape {arr.shape}")
    if arr.min() < 0 or arr.max() >= n:
        raise ValueError(f"'ref_tours' holds node {arr.min() if arr.min() < 0 else arr.max()}; the instances "
                         f"have nodes 0..{n - 1}")
    return arr.astype(np.int64)
