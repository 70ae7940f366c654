"""Real benchmark instances: TSPLIB ``.tsp`` and ``.atsp`` and VRPLIB ``.vrp`` files, read through the
``vrplib`` package (``pip install 'routing-gym[data]'``).

:func:`load` returns a :class:`RealInstance`: the file's data in its own units, and the same instance
scaled into the unit square (one uniform scale for x and y, so shapes and tours are unchanged) as the
problem's ``Instance`` (batch 1) that the envs and policies take. CVRP demands are divided by the
capacity; the depot becomes node 0. An ATSP file (``TYPE: ATSP``, ``EDGE_WEIGHT_TYPE: EXPLICIT``, any
``EDGE_WEIGHT_FORMAT`` vrplib reads, e.g. ``FULL_MATRIX``) has no coordinates: its matrix (diagonal taken
as 0, TSPLIB files often hold a large number there) is divided by its largest entry into the ATSP unit's
``cost_matrix`` in [0, 1] (a file whose few huge entries forbid edges squeezes the others towards 0).

Costs are reported in the instance's own units with its own distance convention (TSPLIB 95, section
2.2): ``EUC_2D`` rounds each edge to the nearest integer (``nint(x) = int(x + 0.5)``), ``CEIL_2D``
rounds up, ``ATT`` is the pseudo-Euclidean distance, ``EXACT_2D`` (or no type) keeps floats.
:func:`cost` first replays the tour through the env's dynamics on the scaled instance (so an
infeasible tour raises, exactly as :func:`routing_gym.problems.tour_cost`), then sums the file's
distances along it.

Reference values (:func:`find_reference`), first found wins: a user table (``{name: value}``, or a
JSON / CSV / whitespace ``name value`` file), a VRPLIB ``NAME.sol`` next to the instance (its ``Cost``
line, else its routes costed; the routes are checked either way), a TSPLIB ``NAME.opt.tour`` next to it
(costed), an ``Optimal value: X`` (``Best value``, ``Best known solution``) in the file's ``COMMENT``,
or, for a classic TSPLIB instance by its NAME, the optimum TSPLIB publishes (:data:`TSPLIB_OPTIMA`).

A policy sees only the scaled coordinates, so it optimises unrounded distances; a tour that is optimal
for those can cost a unit more under ``nint`` (eil51: 427 instead of 426). A solver can work in the
file's convention instead: ``agents.references.solvers.solve(real.problem, real.instance, "lkh",
distances=distance_matrix(real)[None])`` finds 426.

A CVRP file with ``EDGE_WEIGHT_TYPE: EXPLICIT`` (CVRPLIB's matrix instances, any ``EDGE_WEIGHT_FORMAT``
vrplib reads, e.g. ``LOWER_ROW``) becomes an ACVRP instance (CVRP on a cost matrix): its matrix, depot first,
divided by its largest entry, and its demands divided by the capacity.

Instances that cannot be represented are rejected with a :class:`ValueError` that says why: an explicit
matrix in a TSP file (write it as an ATSP), ``GEO`` (and other non-planar) distances, constraints beyond
capacity (:data:`CONSTRAINTS`: ``DISTANCE``, ``SERVICE_TIME``, time windows, ...), several depots.

Files are read strictly: every error is a :class:`ValueError` (:class:`FileNotFoundError` for a missing
file, :class:`IsADirectoryError` for a folder; a FIFO or device is named and never opened) that names the
file and what is wrong. Only an ``EOF`` line ends a file ("EOF" inside ``NAME : GEOFF8`` does not). An
instance needs a ``DIMENSION``, and its ``NODE_COORD_SECTION`` (CVRP: ``DEMAND_SECTION`` too) one row per
node, with the node ids 1..DIMENSION in order and finite numbers within +-1e100 (:data:`COORD_LIMIT`)
that are not all within 1e-100 of each other; a CVRP needs a ``CAPACITY`` > 0 and at least each
demand, whole demands and a ``DEPOT_SECTION`` (if any) naming one existing node. A tour is costed edge by
edge (memory bounded for any N); :func:`distance_matrix` is refused above :data:`MATRIX_NODES` nodes. A
reference value, wherever it comes from, must be a finite number > 0; a ``.sol`` or ``.opt.tour`` beside
the instance must be a feasible solution of it (a ``.sol``'s ``Cost`` line no lower than its routes'
cost), else loading fails naming that file (a bad reference is never mistaken for the policy's failure).
Tours given to :func:`cost` must hold whole node indices of the instance, and only the no-op after their
episode ends.

Example::

    from routing_gym import tsplib
    from routing_gym.problems import TSP

    real = tsplib.load("eil51.tsp")          # reads eil51.opt.tour beside it, if there
    tour = ...                               # (1, 51) actions on real.instance, e.g. from a policy
    print(tsplib.cost(real, tour), tsplib.gap(real, tsplib.cost(real, tour)))
"""
from __future__ import annotations

import csv
import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
import torch

from .problems import get_problem, tour_cost

PROBLEM_TYPES = {"TSP": "tsp", "CVRP": "cvrp", "ATSP": "atsp"}  # an EXPLICIT CVRP file loads as "acvrp"
# VRPLIB's constraints beyond capacity (specifications or sections): a file with one is refused, not
# solved as if it were absent
CONSTRAINTS = ("distance", "service_time", "time_window", "pickup", "delivery", "backhaul", "release_time",
               "vehicles_max_distance", "vehicles_max_duration", "vehicles_allowed_clients", "vehicles_depot")
COORD_LIMIT = 1e100  # coordinates beyond +-1e100, or closer together than 1e-100, are refused
COST_CHUNK = 1 << 16  # edges costed at a time: memory stays bounded for any N (no (N, N) array)
EOF_MASK = "E\u2060OF"  # "EOF" inside a NAME or COMMENT line, hidden from vrplib (which stops at any "EOF")
ROUNDING = ("EUC_2D", "CEIL_2D", "ATT", "EXACT_2D", "FLOOR_2D")
# "Optimal value: 375", "Best known solution = 1234.5": the number is read whole ("1e999" is not 1, "1,234" not 1)
COMMENT_OPTIMUM = re.compile(r"\b(?:optimal|best(?:\s+known)?)\s+(?:value|solution|cost)\s*[:=]?\s*"
                             r"([-+]?(?:\d|\.\d|inf|nan)[^\s;)]*)", re.I)


@dataclass(frozen=True)
class RealInstance:
    """A TSPLIB / VRPLIB instance, in its own units and scaled for the policy."""

    name: str
    problem: str  # "tsp", "cvrp", "atsp" or "acvrp"
    path: Path
    coords: np.ndarray | None  # (N, 2) float64 in the file's units, our node order (depot first for CVRP); None for ATSP
    node_ids: np.ndarray  # (N,) int64 the file's 1-based node ids in our order
    edge_weight_type: str  # one of ROUNDING, or "EXPLICIT" (ATSP)
    demand: np.ndarray | None  # (N,) int64 in the file's units, depot 0 (CVRP)
    capacity: float | None  # vehicle capacity (CVRP)
    offset: np.ndarray  # (2,) subtracted from coords before scaling (zeros for ATSP)
    scale: float  # unit-square coordinates = (coords - offset) / scale; ATSP: cost_matrix = matrix / scale
    instance: Any  # the problem's Instance, batch 1, coordinates in [0, 1]^2 (ATSP: its cost_matrix in [0, 1])
    reference: float | None  # optimal / best-known cost in the file's units
    reference_source: str | None  # where it came from: "table", ".sol", ".opt.tour", "comment"
    matrix: np.ndarray | None = None  # (N, N) float64 the file's explicit costs, diagonal 0 (ATSP)


def load(path: str | os.PathLike, table: Mapping[str, float] | str | os.PathLike | None = None,
         device: Any = None) -> RealInstance:
    """Read a ``.tsp`` / ``.vrp`` file (see the module docstring).

    Args:
        path: the instance file.
        table: reference values by instance name (a mapping, or a JSON / CSV / ``name value`` file).
        device: torch device of ``instance``.

    Raises:
        FileNotFoundError: no such file. ValueError: the file is malformed, or the instance cannot be
            represented, or its reference is bad (the message names the file and says why).
    """
    from vrplib.parse import parse_vrplib

    path = Path(path)
    text = read_text(path)
    try:
        raw = unmask_eof(parse_vrplib(mask_eof(text), compute_edge_weights=False))
    except Exception as e:  # noqa: BLE001 - vrplib raises several types for a malformed file
        raise ValueError(f"{path}: not a readable TSPLIB / VRPLIB file: {e}") from None
    name = str(raw.get("name", path.stem))
    kind = str(raw.get("type", "")).split()[0].upper() if raw.get("type") else ("CVRP" if "capacity" in raw else "TSP")
    if kind not in PROBLEM_TYPES:
        raise ValueError(f"{path}: TYPE {kind} cannot be represented; routing-gym reads {sorted(PROBLEM_TYPES)}")
    problem = PROBLEM_TYPES[kind]
    weight_type = str(raw.get("edge_weight_type", "EXACT_2D")).upper()
    for key in CONSTRAINTS:
        if key in raw:
            raise ValueError(f"{path}: {key.upper()} (a constraint beyond capacity) cannot be represented: "
                             "plain CVRP only, so the instance would be solved without it")
    if problem == "atsp" or (problem == "cvrp" and weight_type == "EXPLICIT"):
        return load_matrix(path, raw, text, name, problem, weight_type, table, device)
    if weight_type == "EXPLICIT":
        raise ValueError(f"{path}: EDGE_WEIGHT_TYPE EXPLICIT (a distance matrix) cannot be represented for a TSP: "
                         "write it as TYPE ATSP (the ATSP unit takes a matrix)")
    if weight_type not in ROUNDING:
        raise ValueError(f"{path}: EDGE_WEIGHT_TYPE {weight_type} cannot be represented (GEO and other "
                         f"non-planar distances are not Euclidean in any coordinates); supported: {ROUNDING}")
    if "dimension" not in raw:
        raise ValueError(f"{path}: no DIMENSION")
    n = raw["dimension"]
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"{path}: DIMENSION must be a whole number > 0, got {n!r}")
    coords = section(path, raw, text, "node_coord", n, columns=2)
    order = np.arange(n)
    demand = capacity = None
    if problem == "cvrp":
        order, capacity, demand = read_demand(path, raw, text, n)
    coords = coords[order]
    offset = coords.min(axis=0)
    extent = float((coords.max(axis=0) - offset).max())
    if np.abs(coords).max() > COORD_LIMIT or 0 < extent < 1 / COORD_LIMIT:
        raise ValueError(f"{path}: NODE_COORD_SECTION must hold coordinates within +-{COORD_LIMIT:g} that "
                         f"differ by more than {1 / COORD_LIMIT:g} (got magnitudes up to "
                         f"{np.abs(coords).max():g}, an extent of {extent:g}): tour lengths would overflow or "
                         "vanish in float64")
    scale = extent or 1.0
    unit = np.clip((coords - offset) / scale, 0.0, 1.0)
    fields = {"locs": unit} if problem == "tsp" else {"locs": unit, "demand": demand / capacity}
    try:
        instance = get_problem(problem).instance_from(fields, device=device)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None
    real = RealInstance(name=name, problem=problem, path=path, coords=coords, node_ids=order + 1,
                        edge_weight_type=weight_type, demand=demand, capacity=capacity, offset=offset, scale=scale,
                        instance=instance, reference=None, reference_source=None)
    value, source = find_reference(real, raw.get("comment"), table)
    return RealInstance(**{**real.__dict__, "reference": value, "reference_source": source})


def read_demand(path: Path, raw: dict, text: str, n: int) -> tuple[np.ndarray, float, np.ndarray]:
    """A CVRP file's (node order with the depot first, capacity, (N,) int64 demands in that order), checked:
    one depot, a CAPACITY > 0, whole demands >= 0, none above the capacity."""
    depots = np.atleast_1d(np.asarray(raw.get("depot", [0])))  # 0-based: vrplib subtracts 1
    if len(depots) != 1:
        raise ValueError(f"{path}: {len(depots)} depots cannot be represented (one depot, node 0)")
    if depots.dtype.kind not in "iu" or not 0 <= depots[0] < n:
        raise ValueError(f"{path}: DEPOT_SECTION names node {depots[0] + 1}, not a node id in 1..{n}")
    order = np.concatenate([depots, np.delete(np.arange(n), depots)])
    if "capacity" not in raw:
        raise ValueError(f"{path}: a CVRP needs a CAPACITY")
    capacity = positive(raw["capacity"], f"{path}: CAPACITY")
    demand = section(path, raw, text, "demand", n, columns=1)[order]
    if (demand < 0).any() or (demand != np.round(demand)).any():
        raise ValueError(f"{path}: DEMAND_SECTION must hold whole numbers >= 0")
    if demand.max() > capacity:
        node = int(order[np.argmax(demand)]) + 1
        raise ValueError(f"{path}: node {node}'s demand {demand.max():g} exceeds the capacity (CAPACITY "
                         f"{raw['capacity']}): no vehicle can serve it")
    return order, capacity, demand.astype(np.int64)


def load_matrix(path: Path, raw: dict, text: str, name: str, problem: str, weight_type: str, table,
                device: Any) -> RealInstance:
    """An ATSP file, or a CVRP file with ``EDGE_WEIGHT_TYPE EXPLICIT`` (into the ACVRP unit, its depot first):
    its explicit (N, N) matrix, checked (square, finite, >= 0 off the diagonal), the diagonal taken as 0,
    divided by its largest entry into the unit's ``cost_matrix``."""
    kind = problem.upper()  # the file's TYPE: ATSP, or CVRP (read into the ACVRP unit)
    if weight_type != "EXPLICIT" or "edge_weight" not in raw:
        raise ValueError(f"{path}: TYPE {kind} needs EDGE_WEIGHT_TYPE EXPLICIT and an EDGE_WEIGHT_SECTION (its "
                         f"matrix), got EDGE_WEIGHT_TYPE {weight_type}")
    n = raw.get("dimension")
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise ValueError(f"{path}: an {kind} needs a DIMENSION >= 2, got {n!r}")
    try:
        matrix = np.array(raw["edge_weight"], dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{path}: EDGE_WEIGHT_SECTION holds values that are not numbers") from None
    if matrix.shape != (n, n):
        raise ValueError(f"{path}: DIMENSION is {n} but EDGE_WEIGHT_SECTION gives a matrix of shape {matrix.shape}")
    np.fill_diagonal(matrix, 0.0)
    if not np.isfinite(matrix).all() or (matrix < 0).any():
        raise ValueError(f"{path}: EDGE_WEIGHT_SECTION must hold finite numbers >= 0 off the diagonal")
    order, demand, capacity = np.arange(n), None, None
    if problem == "cvrp":
        order, capacity, demand = read_demand(path, raw, text, n)
        matrix, problem = matrix[np.ix_(order, order)], "acvrp"
    scale = float(matrix.max()) or 1.0
    fields = {"cost_matrix": np.clip(matrix / scale, 0.0, 1.0)}
    if demand is not None:
        fields["demand"] = demand / capacity
    try:
        instance = get_problem(problem).instance_from(fields, device=device)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None
    real = RealInstance(name=name, problem=problem, path=path, coords=None, node_ids=order + 1,
                        edge_weight_type=weight_type, demand=demand, capacity=capacity, offset=np.zeros(2),
                        scale=scale, instance=instance, reference=None, reference_source=None, matrix=matrix)
    value, source = find_reference(real, raw.get("comment"), table)
    return RealInstance(**{**real.__dict__, "reference": value, "reference_source": source})


# -- strict reading -------------------------------------------------------------------------------
def read_text(path: Path) -> str:
    """The text of a file; ``FileNotFoundError`` / ``ValueError`` naming it when there is none (a folder,
    a FIFO or a device is named as what it is, and never read)."""
    check_file(path)
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not a text file ({e})") from None


def check_file(path: Path) -> None:
    """``FileNotFoundError`` unless ``path`` exists; ``IsADirectoryError`` for a folder; ``ValueError`` for
    anything else that is not a regular file (a FIFO would block the reader; a device never ends)."""
    if path.is_file():
        return
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a folder, not a file")
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    kind = "a FIFO (named pipe)" if path.is_fifo() else "a socket" if path.is_socket() else "a device" \
        if path.is_block_device() or path.is_char_device() else "not a regular file"
    raise ValueError(f"{path}: {kind}, not a regular file")


def mask_eof(text: str) -> str:
    """The file up to its ``EOF`` line, with any other "EOF" (``NAME : GEOFF8``) masked from vrplib."""
    lines = text.splitlines()
    end = next((k for k, line in enumerate(lines) if line.strip().upper() == "EOF"), len(lines))
    return "\n".join(lines[:end]).replace("EOF", EOF_MASK)


def unmask_eof(raw: dict) -> dict:
    return {k: v.replace(EOF_MASK, "EOF") if isinstance(v, str) else v for k, v in raw.items()}


def section(path: Path, raw: dict, text: str, key: str, n: int, columns: int) -> np.ndarray:
    """A data section's values as float64, (N,) for one column or (N, columns), checked: one row per
    node, the node ids 1..N in order, finite numbers."""
    title = f"{key.upper()}_SECTION"
    if key not in raw:
        raise ValueError(f"{path}: no {title}")
    try:
        values = np.asarray(raw[key], dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{path}: {title} holds values that are not numbers, or rows of different lengths") \
            from None
    rows = len(values) if values.ndim else 0
    if rows != n:
        raise ValueError(f"{path}: DIMENSION is {n} but {title} has {rows} rows")
    if values.shape[1:] != (() if columns == 1 else (columns,)):
        raise ValueError(f"{path}: each row of {title} must hold a node id and {columns} value(s)")
    if not np.isfinite(values).all():
        raise ValueError(f"{path}: {title} holds NaN or infinite values")
    for row, token in enumerate(section_ids(text, title), 1):
        if token != str(row):
            raise ValueError(f"{path}: {title} must list the node ids 1..{n} in order, one per row; "
                             f"row {row} has id {token}")
    return values


def section_ids(text: str, title: str) -> list[str]:
    """The first column (the node ids, which vrplib drops) of the rows of a data section, read as vrplib
    reads it: from its title line to the next ``_SECTION`` or ``EOF`` line, blank and ``#`` lines skipped,
    the last such section if there are several."""
    ids, inside = [], False
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.upper() == "EOF":
            break
        if "_SECTION" in line:
            inside = line.strip(" :").upper() == title
            ids = [] if inside else ids
        elif inside:
            ids.append(line.split()[0])
    return ids


def positive(value: Any, what: str) -> float:
    """``value`` as a float, or ``ValueError`` (beginning with ``what``) unless it is a finite number > 0."""
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number) or number <= 0:
        raise ValueError(f"{what} must be a finite number > 0, got {value!r}")
    return number


# -- distances and costs --------------------------------------------------------------------------
def distance_matrix(real: RealInstance) -> np.ndarray:
    """(N, N) float64 distances by the file's convention (integers for the rounding types; an ATSP's
    explicit matrix as read, diagonal 0), built row by row (its own N * N * 8 bytes, no more). Refused
    (``ValueError`` stating the limit) above :data:`MATRIX_NODES` nodes: :func:`cost` needs no matrix."""
    if real.matrix is not None:
        return real.matrix
    n = len(real.coords)
    if n > MATRIX_NODES:
        raise ValueError(f"{real.path}: a distance matrix of {n} nodes would take {n * n * 8 / 2**30:.1f} GiB; "
                         f"distance_matrix builds one for up to {MATRIX_NODES} nodes (tsplib.cost needs none)")
    rows = np.arange(n)
    return np.stack([edge_lengths(real, np.full(n, i), rows) for i in range(n)])


MATRIX_NODES = 20_000  # distance_matrix's limit: 3 GiB of float64


def edge_lengths(real: RealInstance, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(E,) float64 lengths of the edges a[k] -> b[k] by the file's convention. ``hypot`` neither
    overflows nor underflows where squaring would."""
    if real.matrix is not None:
        return real.matrix[a, b]
    diff = real.coords[a] - real.coords[b]
    d = np.hypot(diff[:, 0], diff[:, 1])
    kind = real.edge_weight_type
    if kind == "EUC_2D":
        return np.floor(d + 0.5)
    if kind == "CEIL_2D":
        return np.ceil(d)
    if kind == "FLOOR_2D":
        return np.floor(d)
    if kind == "ATT":
        r = d / math.sqrt(10.0)
        t = np.floor(r + 0.5)
        return np.where(t < r, t + 1, t)
    return d


def cost(real: RealInstance, tours) -> float:
    """Cost of a tour in the instance's units. ``tours``: (S,) or (1, S) actions on ``real.instance``
    (env format: TSP a node order; CVRP routes separated by depot visits, padded with 0).

    Raises:
        ValueError: the tour holds something other than whole node indices of the instance, is infeasible
            (by the env's own dynamics), or goes on past the end of its episode.
    """
    seq = tour_nodes(real, tours)
    tour_cost(get_problem(real.problem), real.instance, torch.tensor([seq], device=real.instance[0].device))
    seq = episode(real, seq)
    legs = np.array([0] + seq + [0] if get_problem(real.problem).has_depot else seq + seq[:1])  # closed tour
    start, end = legs[:-1], legs[1:]
    total = math.fsum(edge_lengths(real, start[k:k + COST_CHUNK], end[k:k + COST_CHUNK]).sum()
                      for k in range(0, len(start), COST_CHUNK))
    if not math.isfinite(total):
        raise ValueError(f"{real.path}: the tour's length overflows float64")
    return total


def tour_nodes(real: RealInstance, tours) -> list[int]:
    """One tour as a list of node indices, refusing fractional, non-finite and out-of-range ones by step."""
    arr = np.asarray(tours.detach().cpu() if isinstance(tours, torch.Tensor) else tours)
    if arr.dtype.kind not in "iuf" or arr.ndim not in (1, 2) or (arr.ndim == 2 and len(arr) != 1):
        raise ValueError(f"a tour must be an (S,) or (1, S) array of node indices, got {arr.dtype} of shape "
                         f"{arr.shape}")
    arr, n = arr.reshape(-1), len(real.node_ids)
    whole = np.isfinite(arr) & (arr == np.round(arr))
    if not whole.all():
        step = int(np.argmin(whole))
        raise ValueError(f"the tour's step {step} is {arr[step]}, not a whole node index")
    outside = (arr < 0) | (arr >= n)
    if outside.any():
        step = int(np.argmax(outside))
        raise ValueError(f"the tour's step {step} is node {arr[step]:g}, which does not exist (nodes 0..{n - 1})")
    return arr.astype(np.int64).tolist()


def episode(real: RealInstance, seq: list[int]) -> list[int]:
    """A feasible tour up to the step that ends its episode (the one visiting the last node to visit).
    The env ignores later steps, which must be the no-op (TSP: its last node; CVRP: the depot) so that the
    file's distances are summed along the same tour."""
    depot = get_problem(real.problem).has_depot
    todo = set(range(int(depot), len(real.node_ids)))
    end = 0
    while todo:
        todo.discard(seq[end])
        end += 1
    noop = 0 if depot else seq[end - 1]
    extra = [node for node in seq[end:] if node != noop]
    if extra:
        raise ValueError(f"the tour goes on after its episode ends at step {end}: later steps must be the "
                         f"no-op {noop}, got node {extra[0]}")
    return seq[:end]


def gap(real: RealInstance, value: float) -> float | None:
    """Percentage above the reference value, or None without one."""
    if real.reference is None:
        return None
    return 100.0 * (value - real.reference) / abs(real.reference)


# -- reference values -----------------------------------------------------------------------------
def read_table(source: Mapping[str, float] | str | os.PathLike) -> dict[str, float]:
    """Reference values by name from a mapping or a JSON (an object), CSV (``name,value``) or ``name
    value`` file; a CSV or text file may begin with a header line, and ``#`` lines are skipped.

    Raises:
        FileNotFoundError: no such file. ValueError (naming the file and the line or name): a value that
            is not a finite number > 0, a name given twice, a line that is not a name and a value.
    """
    if isinstance(source, Mapping):
        return {str(k): positive(v, f"reference table: the value of {k!r}") for k, v in source.items()}
    path = Path(source)
    text = read_text(path)
    if path.suffix == ".json":
        try:
            values = json.loads(text)
        except ValueError as e:
            raise ValueError(f"{path}: not a readable JSON file: {e}") from None
        except RecursionError:  # Python's parser recurses once per level
            raise ValueError(f"{path}: JSON nested too deeply to read (a reference table is one object of "
                             "name: value)") from None
        if not isinstance(values, dict):
            raise ValueError(f"{path}: a reference table must be a JSON object of name: value")
        return {str(k): positive(v, f"{path}: the value of {k!r}") for k, v in values.items()}
    lines = text.splitlines()
    rows = csv.reader(lines) if path.suffix == ".csv" else (line.split() for line in lines)
    table: dict[str, float] = {}
    first = True
    for number, row in enumerate(rows, 1):
        row = [c.strip() for c in row if c.strip()]
        if not row or row[0].startswith("#"):
            continue
        if len(row) < 2:
            raise ValueError(f"{path} line {number}: expected a name and a value, got {lines[number - 1]!r}")
        name, value = row[0], row[1].rstrip(",")
        header, first = first and not is_number(value), False
        if header:
            continue
        if name in table:
            raise ValueError(f"{path} line {number}: {name!r} is given twice")
        table[name] = positive(value, f"{path} line {number}: the value of {name!r}")
    return table


def is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_tour(path: str | os.PathLike, real: RealInstance) -> list[int]:
    """A TSPLIB ``TOUR_SECTION`` file as actions on ``real.instance``. For CVRP, LKH-3's convention is
    read: ids above the dimension are copies of the depot (so the tour is routes joined at the depot).

    Raises:
        FileNotFoundError: no such file. ValueError (naming the file): no ``TOUR_SECTION``, no nodes in
            it, a token that is not a whole number, a node id that does not exist.
    """
    path = Path(path)
    lines = read_text(path).splitlines()
    start = next((k for k, line in enumerate(lines) if line.strip().upper().startswith("TOUR_SECTION")), None)
    if start is None:
        raise ValueError(f"{path}: no TOUR_SECTION")
    ids = []
    for token in " ".join(lines[start + 1:]).split():
        if token == "-1" or token.upper() == "EOF":
            break
        try:
            ids.append(int(token))
        except ValueError:
            raise ValueError(f"{path}: TOUR_SECTION holds {token!r}, not a node id") from None
    n = len(real.node_ids)
    routes = get_problem(real.problem).has_depot  # LKH-3 numbers copies of the depot above N
    unknown = [i for i in ids if i < 1 or (i > n and not routes)]
    if unknown:
        copies = "; LKH-3 numbers copies of the depot above them" if routes else ""
        raise ValueError(f"{path}: node id {unknown[0]} does not exist (the instance's ids are 1..{n}{copies})")
    if not ids:
        raise ValueError(f"{path}: TOUR_SECTION lists no nodes")
    index = {int(node): i for i, node in enumerate(real.node_ids)}
    nodes = [index.get(i, 0) for i in ids]  # depot copies (ids > N) become node 0
    if not get_problem(real.problem).has_depot:
        return nodes
    start = nodes.index(0) if 0 in nodes else 0
    nodes = nodes[start:] + nodes[:start]  # rotate to start at the depot
    actions = [v for k, v in enumerate(nodes[1:], 1) if not (v == 0 and nodes[k - 1] == 0)]
    return actions + [0]


def read_sol(path: str | os.PathLike, real: RealInstance) -> tuple[list[int], Any]:
    """A VRPLIB ``.sol`` file: its routes as actions on ``real.instance`` (customers are numbered from 1,
    the depot omitted) and its ``Cost`` line as written (None without one).

    Raises:
        FileNotFoundError: no such file. ValueError (naming the file): unreadable, no routes, a customer
            that does not exist.
    """
    from vrplib.parse import parse_solution

    path = Path(path)
    text = read_text(path)
    try:
        sol = parse_solution(text)
    except Exception as e:  # noqa: BLE001 - vrplib raises several types for a malformed file
        raise ValueError(f"{path}: not a readable VRPLIB solution file: {e}") from None
    if not sol["routes"]:
        raise ValueError(f"{path}: no routes")
    index = {int(node): i for i, node in enumerate(real.node_ids)}
    actions = []
    for number, route in enumerate(sol["routes"], 1):
        for customer in route:
            if index.get(customer + 1, 0) == 0:
                raise ValueError(f"{path}: route {number} names customer {customer}, which does not exist "
                                 f"(customers are 1..{len(real.node_ids) - 1})")
            actions.append(index[customer + 1])
        actions.append(0)
    return actions, sol.get("cost")


def find_reference(real: RealInstance, comment: Any, table) -> tuple[float | None, str | None]:
    """The first reference value found (see the module docstring) and its source. A bad source is a
    ``ValueError`` naming it, never skipped and never taken for a policy's infeasible tour."""
    if table is not None:
        values = read_table(table)
        for key in (real.name, real.path.stem, real.path.name):
            if key in values:
                return values[key], "table"
    sol, tour = real.path.with_suffix(".sol"), real.path.with_suffix(".opt.tour")
    if sol.is_file():
        actions, stated = read_sol(sol, real)
        value = reference_cost(sol, real, actions)  # the routes are checked even where a Cost line is given
        if stated is None:
            return value, ".sol"
        stated = positive(stated, f"{sol}: the Cost line")
        if stated < value * (1 - SOL_TOLERANCE):  # a Cost line may round; it may not undercut its routes
            raise ValueError(f"{sol}: bad reference file: its Cost line {stated:g} is below the cost of its own "
                             f"routes, {value:g} (in {real.path.name}'s units)")
        return stated, ".sol"
    if tour.is_file():
        return reference_cost(tour, real, read_tour(tour, real)), ".opt.tour"
    match = COMMENT_OPTIMUM.search(str(comment or ""))
    if match:
        return positive(match.group(1).rstrip(".,"), f"{real.path}: the COMMENT's reference value"), "comment"
    if real.problem == "tsp" and real.name in TSPLIB_OPTIMA:
        return TSPLIB_OPTIMA[real.name], "TSPLIB"
    return None, None


SOL_TOLERANCE = 1e-4  # a .sol's Cost line may be this fraction below its routes' cost (rounded decimals)


# the optimal tour lengths TSPLIB publishes (its files' own distances), for the gaps of the classic
# instances whose files state none: every planar one (EUC_2D, CEIL_2D, ATT) of 48 to 1,002 nodes
TSPLIB_OPTIMA = {
    "att48": 10628.0, "eil51": 426.0, "berlin52": 7542.0, "st70": 675.0, "eil76": 538.0, "pr76": 108159.0,
    "rat99": 1211.0, "rd100": 7910.0, "kroA100": 21282.0, "kroB100": 22141.0, "kroC100": 20749.0,
    "kroD100": 21294.0, "kroE100": 22068.0, "eil101": 629.0, "lin105": 14379.0, "pr107": 44303.0,
    "pr124": 59030.0, "bier127": 118282.0, "ch130": 6110.0, "pr136": 96772.0, "pr144": 58537.0, "ch150": 6528.0,
    "kroA150": 26524.0, "kroB150": 26130.0, "pr152": 73682.0, "u159": 42080.0, "rat195": 2323.0, "d198": 15780.0,
    "kroA200": 29368.0, "kroB200": 29437.0, "ts225": 126643.0, "tsp225": 3916.0, "pr226": 80369.0,
    "gil262": 2378.0, "pr264": 49135.0, "a280": 2579.0, "pr299": 48191.0, "lin318": 42029.0,
    "linhp318": 41345.0, "rd400": 15281.0, "fl417": 11861.0, "pr439": 107217.0, "pcb442": 50778.0,
    "d493": 35002.0, "att532": 27686.0, "u574": 36905.0, "rat575": 6773.0, "p654": 34643.0, "d657": 48912.0,
    "u724": 41910.0, "rat783": 8806.0, "pr1002": 259045.0,
}


# -- fixed fleets ---------------------------------------------------------------------------------
FLEET_IN_NAME = re.compile(r"-k(\d+)$")  # CVRPLIB's A/B/E/P/X names: "E-n51-k5"
FLEET_IN_COMMENT = re.compile(r"\bno\.?\s+of\s+(?:trucks|vehicles)\s*[:=]?\s*(\d+)", re.I)  # "Min no of trucks: 5"
UNLIMITED_FLEET = re.compile(r"^X-n\d+-k\d+$")  # Uchoa et al. (2017)'s X set: k is the least number of routes


def fleet_size(path: str | os.PathLike, comment: str | None = None) -> int | None:
    """The fleet k of a CVRPLIB instance, whose reference is for exactly k vehicles: from its name (``E-n51-k5``
    -> 5), else from ``comment`` (``No of trucks: 5``, ``Min no of trucks: 10``), else from the file's own
    ``COMMENT`` line where ``path`` is a file (``comment`` not given); None where none says it, and for the X
    instances (``X-n101-k25``): Uchoa et al. (2017) "follow the convention of not fixing the number of routes",
    the k of their names being the least number the demand needs (X-n101-k25's optimum uses 26 routes)."""
    path = Path(path)
    name = path.name[:-len(path.suffix)] if path.suffix == ".vrp" else path.name
    if UNLIMITED_FLEET.match(name):
        return None
    match = FLEET_IN_NAME.search(name)
    if match is None and comment is None and path.is_file():
        comment = next((line for line in read_text(path).splitlines() if line.upper().startswith("COMMENT")), "")
    match = match or FLEET_IN_COMMENT.search(comment or "")
    return int(match.group(1)) if match else None


def fleet_instance(real: RealInstance):
    """``real`` (a CVRP) as the fixed-fleet CVRP's instance (batch 1) with its :func:`fleet_size`, or None
    where the file states no fleet; ``ValueError`` (naming ``num_vehicles``) where k cannot carry the demand."""
    k = fleet_size(real.path) if real.problem == "cvrp" else None
    if k is None:
        return None
    inst = real.instance
    return get_problem("cvrpmvc").instance_from({"locs": inst.locs, "demand": inst.demand,
                                                 "num_vehicles": torch.tensor([float(k)])}, batched=True)


def reference_cost(path: Path, real: RealInstance, actions: list[int]) -> float:
    """The cost of a reference file's solution, or ``ValueError`` naming the file when it is not one."""
    try:
        return cost(real, actions)
    except ValueError as e:
        raise ValueError(f"{path}: bad reference file, not a feasible solution of {real.path.name}: {e}") from None


# -- evaluation -----------------------------------------------------------------------------------
def evaluate(paths, tours_fn: Callable[[str, Any], Any], table=None) -> list[dict]:
    """One row per instance file: ``tours_fn(problem_name, instance) -> (1, S) actions`` is run on the
    scaled instance and costed in the file's units.

    Returns:
        dicts with ``name``, ``problem``, ``n`` (nodes besides the depot), ``cost``, ``reference``,
        ``source`` and ``gap`` (percent, or None).
    """
    rows = []
    for p in paths:
        real = load(p, table=table)
        tours = tours_fn(real.problem, real.instance)
        try:
            value = cost(real, tours)
        except ValueError as e:
            raise ValueError(f"{real.path}: the policy's tour is refused: {e}") from None
        rows.append({"name": real.name, "problem": real.problem,
                     "n": get_problem(real.problem).size_of(real.instance), "cost": value,
                     "reference": real.reference, "source": real.reference_source, "gap": gap(real, value)})
    return rows


def format_rows(rows: list[dict]) -> str:
    """A markdown table of :func:`evaluate`'s rows, with the mean gap where every row has one."""
    lines = ["| instance | problem | n | cost | reference | gap |", "|---|---|---|---|---|---|"]
    for r in rows:
        ref = "-" if r["reference"] is None else f"{r['reference']:g} ({r['source']})"
        g = "-" if r["gap"] is None else f"{r['gap']:.2f}%"
        lines.append(f"| {r['name']} | {r['problem']} | {r['n']} | {r['cost']:g} | {ref} | {g} |")
    gaps = [r["gap"] for r in rows if r["gap"] is not None]
    if gaps and len(gaps) == len(rows):
        lines.append(f"| mean | | | | | {sum(gaps) / len(gaps):.2f}% |")
    return "\n".join(lines)


__all__ = ["RealInstance", "cost", "distance_matrix", "evaluate", "format_rows", "gap", "load", "read_table",
           "read_tour"]
