"""Datasets on disk: ``.npz`` files whose arrays carry the observation key names with a leading batch
axis (``locs`` (B, N, 2) with the depot first, ``demand``/``prize``/``penalty`` (B, N), OP's
``max_length`` (B,)), and optionally reference solutions (what ``routing-gym solve --save`` writes):
``ref_cost`` (B,) and ``ref_tours`` (B, S) node indices, returned apart.

Datasets are read strictly. Only those arrays are read (an ``.npz`` decompresses an array only when it
is read, so nothing else costs memory), and with ``limit`` only their first rows (the rest is never
decompressed); any other array is left unread and named in a warning (a misspelt ``ref_cost`` would
otherwise vanish without a word). What is read is bounded: more than :data:`MAX_READ_BYTES` of array data
is refused, saying the limit (``limit`` reads less). Pickled objects are never loaded. Every error is a
:class:`ValueError` (:class:`FileNotFoundError` for a missing file, :class:`IsADirectoryError` for a
folder) naming the file and the field: a member that is not a ``.npy`` array, an array that is not real
numbers (complex, text, objects), of the wrong shape or non-finite, an instance field out of its range,
a dataset without instances.
"""
from __future__ import annotations

import math
import os
import warnings
import zipfile
from pathlib import Path

import numpy as np

from .problems import get_problem

REFERENCES = ("ref_cost", "ref_tours")
MAX_READ_BYTES = 2**31  # array data read from one dataset, at most (2 GiB)
MAX_GENERATED_BYTES = 2**32  # instances generated at once, at most (4 GiB)


def instance_bytes(problem: str, num_nodes: int, **variant) -> int:
    """Bytes one generated instance of ``num_nodes`` takes, measured on three small ones (every field
    grows at most as N^2, an ATSP's matrix) without generating one of ``num_nodes``."""
    core = get_problem(problem)
    import torch

    sizes = [core.valid_num_nodes(n) for n in (8, 16, 24)]  # sizes every variant takes (several depots, pairs)
    measured = [sum(t.element_size() * t.numel() for t in core.generate(
        1, n, generator=torch.Generator().manual_seed(0), **variant)) for n in sizes]
    coefficients = np.polyfit(sizes, measured, 2)
    return max(int(round(float(np.polyval(coefficients, num_nodes)))), 1)


def check_fits(problem: str, count: int, num_nodes: int, what: str, **variant) -> None:
    """``ValueError`` (naming ``what``, the memory it would take and :data:`MAX_GENERATED_BYTES`) when
    ``count`` generated instances of ``num_nodes`` would take more than the limit."""
    per = instance_bytes(problem, num_nodes, **variant)
    if count * per > MAX_GENERATED_BYTES:
        raise ValueError(f"{what} {count}: {get_problem(problem).label}-{num_nodes} instances would take "
                         f"{count * per / 2**30:.1f} GiB; instances generated at once are limited to "
                         f"{MAX_GENERATED_BYTES / 2**30:g} GiB: at most {MAX_GENERATED_BYTES // per:,} of this size")


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
    except BaseException as e:  # a failed or interrupted write leaves the previous file and no temporary one
        tmp.unlink(missing_ok=True)
        if isinstance(e, OSError) and e.errno is not None:  # named as the file asked for, not the temporary one
            raise type(e)(e.errno, e.strerror or str(e), str(path)) from None
        raise


def load_dataset(path: str | os.PathLike, problem: str, device=None, limit: int | None = None):
    """Read and validate a dataset: returns ``(instances, references)``, the latter a dict holding
    ``ref_cost`` (B,) float64 and ``ref_tours`` (B, S) int64 where the file has them. ``limit``: only the
    first ``limit`` instances (and their references) are read.

    Raises:
        FileNotFoundError / IsADirectoryError / ValueError naming the file and the missing or malformed
        field, or the limit on what is read (:data:`MAX_READ_BYTES`).
    """
    from .tsplib import check_file

    path = Path(path)
    try:
        check_file(path)
    except (FileNotFoundError, IsADirectoryError, ValueError) as e:
        raise type(e)(f"dataset {e}") from None
    core = get_problem(problem)
    fields = instance_keys(core)
    if not zipfile.is_zipfile(path):
        raise ValueError(f"dataset {path} is not an .npz file (a zip archive of named arrays)")
    try:
        archive = zipfile.ZipFile(path)
    except Exception as e:  # noqa: BLE001 - zipfile raises many types for a damaged archive
        raise ValueError(f"dataset {path} is not a readable .npz file: {e}") from None
    with archive:
        members = {name[:-4] if name.endswith(".npy") else name: name for name in archive.namelist()}
        unknown = sorted(set(members) - set(fields) - set(REFERENCES))
        if unknown:
            warnings.warn(f"dataset {path}: array(s) {unknown} not read; a {core.label} dataset holds "
                          f"{list(fields)} and optionally {list(REFERENCES)}", stacklevel=2)
        budget = [MAX_READ_BYTES]
        arrays = {k: read_array(path, archive, members[k], k, limit, budget)
                  for k in fields + REFERENCES if k in members}
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


def read_array(path: Path, archive: zipfile.ZipFile, member: str, key: str, limit: int | None,
               budget: list[int]) -> np.ndarray:
    """One ``.npy`` member of an open ``.npz`` (its first ``limit`` rows where given, the rest never
    decompressed), refused unless it is an array of real numbers that fits in ``budget[0]`` bytes (which
    it then uses up)."""
    what = f"dataset {path}: array '{key}'"
    try:
        with archive.open(member) as f:
            try:
                version = np.lib.format.read_magic(f)
            except ValueError:
                raise ValueError(f"{what} is not a .npy array (the member {member} holds something else)") from None
            read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) \
                else np.lib.format.read_array_header_2_0
            try:
                shape, fortran, dtype = read_header(f)
            except ValueError as e:
                raise ValueError(f"{what} cannot be read: a damaged .npy header ({e})") from None
            if dtype.hasobject:
                raise ValueError(f"{what} cannot be read: Object arrays (pickled Python objects) are never loaded")
            if dtype.kind not in "iuf":
                raise ValueError(f"{what} holds {dtype} values, not real numbers")
            rows = shape[0] if shape and (limit is None or fortran) else min(limit, shape[0]) if shape else 1
            size = rows * math.prod(shape[1:]) if shape else 1
            if size * dtype.itemsize > budget[0]:
                raise ValueError(f"{what} would take {size * dtype.itemsize / 2**30:.1f} GiB: a dataset read is "
                                 f"limited to {MAX_READ_BYTES / 2**30:g} GiB of arrays (read fewer instances "
                                 "with --limit, or split the file)")
            budget[0] -= size * dtype.itemsize
            buffer = bytearray(size * dtype.itemsize)
            if f.readinto(buffer) != len(buffer):
                raise ValueError(f"{what} is truncated: its header says shape {shape}")
    except ValueError:
        raise
    except Exception as e:  # noqa: BLE001 - zip, zlib and format errors of a damaged member
        raise ValueError(f"{what} cannot be read: {e}") from None
    arr = np.frombuffer(buffer, dtype=dtype)
    if fortran:
        return arr.reshape(shape, order="F")[:limit]
    return arr.reshape((rows, *shape[1:]) if shape else ())


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
