"""Real benchmark instances: TSPLIB ``.tsp`` and VRPLIB ``.vrp`` files, read through the ``vrplib``
package (``pip install 'routing-gym[data]'``).

:func:`load` returns a :class:`RealInstance`: the file's data in its own units, and the same instance
scaled into the unit square (one uniform scale for x and y, so shapes and tours are unchanged) as the
problem's ``Instance`` (batch 1) that the envs and policies take. CVRP demands are divided by the
capacity; the depot becomes node 0.

Costs are reported in the instance's own units with its own distance convention (TSPLIB 95, section
2.2): ``EUC_2D`` rounds each edge to the nearest integer (``nint(x) = int(x + 0.5)``), ``CEIL_2D``
rounds up, ``ATT`` is the pseudo-Euclidean distance, ``EXACT_2D`` (or no type) keeps floats.
:func:`cost` first replays the tour through the env's dynamics on the scaled instance (so an
infeasible tour raises, exactly as :func:`routing_gym.problems.tour_cost`), then sums the file's
distances along it.

Reference values (:func:`reference`), first found wins: a user table (``{name: value}``, or a JSON /
CSV / whitespace ``name value`` file), a VRPLIB ``NAME.sol`` next to the instance (its ``Cost`` line,
else its routes costed), a TSPLIB ``NAME.opt.tour`` next to it (costed), or an
``Optimal value: X`` in the file's ``COMMENT``.

A policy sees only the scaled coordinates, so it optimises unrounded distances; a tour that is optimal
for those can cost a unit more under ``nint`` (eil51: 427 instead of 426). A solver can work in the
file's convention instead: ``agents.references.solvers.solve(real.problem, real.instance, "lkh",
distances=distance_matrix(real)[None])`` finds 426.

Instances that cannot be represented are rejected with a :class:`ValueError` that says why: explicit
distance matrices without coordinates that define them, ``GEO`` (and other non-planar) distances,
asymmetric or time-window problems, several depots.

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
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
import torch

from .problems import get_problem, tour_cost

PROBLEM_TYPES = {"TSP": "tsp", "CVRP": "cvrp"}
ROUNDING = ("EUC_2D", "CEIL_2D", "ATT", "EXACT_2D", "FLOOR_2D")
COMMENT_OPTIMUM = re.compile(r"(?:optimal|best known)\s*(?:value|solution)?\s*[:=]?\s*([0-9]+(?:\.[0-9]+)?)", re.I)


@dataclass(frozen=True)
class RealInstance:
    """A TSPLIB / VRPLIB instance, in its own units and scaled for the policy."""

    name: str
    problem: str  # "tsp" or "cvrp"
    path: Path
    coords: np.ndarray  # (N, 2) float64 in the file's units, our node order (depot first for CVRP)
    node_ids: np.ndarray  # (N,) int64 the file's 1-based node ids in our order
    edge_weight_type: str  # one of ROUNDING
    demand: np.ndarray | None  # (N,) int64 in the file's units, depot 0 (CVRP)
    capacity: float | None  # vehicle capacity (CVRP)
    offset: np.ndarray  # (2,) subtracted from coords before scaling
    scale: float  # unit-square coordinates = (coords - offset) / scale
    instance: Any  # the problem's Instance, batch 1, coordinates in [0, 1]^2
    reference: float | None  # optimal / best-known cost in the file's units
    reference_source: str | None  # where it came from: "table", ".sol", ".opt.tour", "comment"


def load(path: str | os.PathLike, table: Mapping[str, float] | str | os.PathLike | None = None,
         device: Any = None) -> RealInstance:
    """Read a ``.tsp`` / ``.vrp`` file (see the module docstring).

    Args:
        path: the instance file.
        table: reference values by instance name (a mapping, or a JSON / CSV / ``name value`` file).
        device: torch device of ``instance``.

    Raises:
        FileNotFoundError: no such file. ValueError: the instance cannot be represented (says why).
    """
    import vrplib

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"instance file {path} does not exist")
    raw = vrplib.read_instance(path, compute_edge_weights=False)
    name = str(raw.get("name", path.stem))
    kind = str(raw.get("type", "")).split()[0].upper() if raw.get("type") else ("CVRP" if "capacity" in raw else "TSP")
    if kind not in PROBLEM_TYPES:
        raise ValueError(f"{path.name}: TYPE {kind} cannot be represented; routing-gym reads {sorted(PROBLEM_TYPES)}")
    problem = PROBLEM_TYPES[kind]
    weight_type = str(raw.get("edge_weight_type", "EXACT_2D")).upper()
    if weight_type == "EXPLICIT":
        raise ValueError(f"{path.name}: EDGE_WEIGHT_TYPE EXPLICIT (a distance matrix) cannot be represented: the "
                         "envs compute Euclidean distances from coordinates")
    if weight_type not in ROUNDING:
        raise ValueError(f"{path.name}: EDGE_WEIGHT_TYPE {weight_type} cannot be represented (GEO and other "
                         f"non-planar distances are not Euclidean in any coordinates); supported: {ROUNDING}")
    if "node_coord" not in raw:
        raise ValueError(f"{path.name}: no NODE_COORD_SECTION; routing-gym needs planar coordinates")
    coords = np.asarray(raw["node_coord"], dtype=np.float64)
    if coords.ndim != 2 or coords.shape[1] != 2:
        raise ValueError(f"{path.name}: coordinates must be 2-D, got shape {coords.shape}")
    for key in ("time_window", "service_time", "pickup", "backhaul"):
        if key in raw:
            raise ValueError(f"{path.name}: section {key.upper()} cannot be represented (plain CVRP only)")
    order = np.arange(len(coords))
    demand = capacity = None
    if problem == "cvrp":
        depots = np.atleast_1d(np.asarray(raw.get("depot", [0]), dtype=np.int64))
        if len(depots) != 1:
            raise ValueError(f"{path.name}: {len(depots)} depots cannot be represented (one depot, node 0)")
        order = np.concatenate([depots, np.delete(order, depots)])
        demand = np.asarray(raw["demand"], dtype=np.int64)[order]
        capacity = float(raw["capacity"])
    coords = coords[order]
    offset = coords.min(axis=0)
    scale = float((coords.max(axis=0) - offset).max()) or 1.0
    unit = np.clip((coords - offset) / scale, 0.0, 1.0)
    if problem == "tsp":
        instance = get_problem("tsp").instance_from({"locs": unit}, device=device)
    else:
        try:
            instance = get_problem("cvrp").instance_from({"locs": unit, "demand": demand / capacity}, device=device)
        except ValueError as e:
            raise ValueError(f"{path.name}: {e}") from None
    real = RealInstance(name=name, problem=problem, path=path, coords=coords, node_ids=order + 1,
                        edge_weight_type=weight_type, demand=demand, capacity=capacity, offset=offset, scale=scale,
                        instance=instance, reference=None, reference_source=None)
    value, source = find_reference(real, raw.get("comment"), table)
    return RealInstance(**{**real.__dict__, "reference": value, "reference_source": source})


# -- distances and costs --------------------------------------------------------------------------
def distance_matrix(real: RealInstance) -> np.ndarray:
    """(N, N) float64 distances by the file's convention (integers for the rounding types)."""
    diff = real.coords[:, None, :] - real.coords[None, :, :]
    d = np.sqrt((diff ** 2).sum(-1))
    kind = real.edge_weight_type
    if kind == "EUC_2D":
        return np.floor(d + 0.5)
    if kind == "CEIL_2D":
        return np.ceil(d)
    if kind == "FLOOR_2D":
        return np.floor(d)
    if kind == "ATT":
        r = np.sqrt((diff ** 2).sum(-1) / 10.0)
        t = np.floor(r + 0.5)
        return np.where(t < r, t + 1, t)
    return d


def cost(real: RealInstance, tours) -> float:
    """Cost of a tour in the instance's units. ``tours``: (S,) or (1, S) actions on ``real.instance``
    (env format: TSP a node order; CVRP routes separated by depot visits, padded with 0).

    Raises:
        ValueError: the tour is infeasible (by the env's own dynamics).
    """
    tours = torch.as_tensor(np.asarray(tours) if not isinstance(tours, torch.Tensor) else tours).long()
    tours = tours.reshape(1, -1).to(real.instance.locs.device)
    tour_cost(get_problem(real.problem), real.instance, tours)  # validates
    seq = tours[0].tolist()
    if real.problem == "tsp":
        seq = seq + seq[:1]
    else:
        seq = [0] + seq + [0]
    d = distance_matrix(real)
    return float(sum(d[a, b] for a, b in zip(seq[:-1], seq[1:])))


def gap(real: RealInstance, value: float) -> float | None:
    """Percentage above the reference value, or None without one."""
    if real.reference is None:
        return None
    return 100.0 * (value - real.reference) / abs(real.reference)


# -- reference values -----------------------------------------------------------------------------
def read_table(source: Mapping[str, float] | str | os.PathLike) -> dict[str, float]:
    """Reference values by name from a mapping or a JSON, CSV (``name,value``) or ``name value`` file."""
    if isinstance(source, Mapping):
        return {str(k): float(v) for k, v in source.items()}
    path = Path(source)
    text = path.read_text()
    if path.suffix == ".json":
        return {str(k): float(v) for k, v in json.loads(text).items()}
    rows = csv.reader(text.splitlines()) if path.suffix == ".csv" else (line.split() for line in text.splitlines())
    table = {}
    for row in rows:
        row = [c.strip() for c in row if c.strip()]
        if len(row) >= 2:
            try:
                table[row[0]] = float(row[1].rstrip(","))
            except ValueError:
                continue  # a header line
    return table


def read_tour(path: str | os.PathLike, real: RealInstance) -> list[int]:
    """A TSPLIB ``TOUR_SECTION`` file as actions on ``real.instance``. For CVRP, LKH-3's convention is
    read: ids above the dimension are copies of the depot (so the tour is routes joined at the depot)."""
    ids, inside = [], False
    for line in Path(path).read_text().splitlines():
        token = line.strip()
        if token.upper().startswith("TOUR_SECTION"):
            inside = True
            continue
        if not inside or not token:
            continue
        if token == "-1" or token.upper() == "EOF":
            break
        ids += [int(v) for v in token.split()]
    index = {int(node): i for i, node in enumerate(real.node_ids)}
    nodes = [index.get(i, 0) for i in ids]  # depot copies (ids > N) become node 0
    if real.problem == "tsp":
        return nodes
    start = nodes.index(0) if 0 in nodes else 0
    nodes = nodes[start:] + nodes[:start]  # rotate to start at the depot
    actions = [v for k, v in enumerate(nodes[1:], 1) if not (v == 0 and nodes[k - 1] == 0)]
    return actions + [0]


def read_sol_routes(path: str | os.PathLike, real: RealInstance) -> list[int]:
    """A VRPLIB ``.sol`` file's routes as actions (its customers are numbered from 1, the depot omitted)."""
    import vrplib

    sol = vrplib.read_solution(path)
    index = {int(node): i for i, node in enumerate(real.node_ids)}
    actions = []
    for route in sol["routes"]:
        actions += [index[int(c) + 1] for c in route] + [0]
    return actions


def find_reference(real: RealInstance, comment: Any, table) -> tuple[float | None, str | None]:
    if table is not None:
        values = read_table(table)
        for key in (real.name, real.path.stem, real.path.name):
            if key in values:
                return values[key], "table"
    sol = real.path.with_suffix(".sol")
    if sol.is_file():
        import vrplib

        value = vrplib.read_solution(sol).get("cost")
        return (float(value) if value is not None else cost(real, read_sol_routes(sol, real))), ".sol"
    tour = real.path.with_suffix(".opt.tour")
    if tour.is_file():
        return cost(real, read_tour(tour, real)), ".opt.tour"
    match = COMMENT_OPTIMUM.search(str(comment or ""))
    if match:
        return float(match.group(1)), "comment"
    return None, None


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
        value = cost(real, tours_fn(real.problem, real.instance))
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
