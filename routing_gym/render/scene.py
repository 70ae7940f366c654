"""What a frame shows of a state: the numbers read off it and how each node and route is drawn.

:func:`snapshot` reads a batch-1 state (plus the tour and cost the env keeps) as numpy, with what the
problem declares for drawing it (``drawing``, ``layout``, ``gauge``); :func:`look` decides, from that
alone, each node's glyph and colour and the paths to draw (:func:`routes`, :func:`arrow_edges`). Nothing
here re-states a problem's rule: whether an episode ended on a masked action is passed in.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ..problems import get_problem
from .style import ROUTE_COLOURS
from .text import cost_text


def _np(x) -> np.ndarray:
    return x.detach().cpu().numpy() if hasattr(x, "detach") else np.asarray(x)


class Snapshot(NamedTuple):
    """A batch-1 state as numpy, plus the tour and cost the env keeps, and what the problem declares
    for drawing it."""
    problem: Any  # the problem unit
    locs: np.ndarray  # (N, 2) where the nodes are drawn (the problem's ``layout``: its coordinates, where it has them)
    mask: np.ndarray  # (N,) bool, True = allowed
    visited: np.ndarray  # (N,) bool
    current: int
    step: int
    done: bool
    invalid: bool  # the episode ended on a masked action
    tour: list
    cost: float
    fields: dict  # the instance's and state's per-node float fields as numpy (N,) (what ``size_by`` / ``ring_by`` name)
    depots: np.ndarray  # (N,) bool: the depots (the problem's ``depots_by``; node 0 alone where it has one)
    kind: np.ndarray  # (N,) bool: the customers of the ``drawing.kind_by`` kind
    open_routes: bool  # the ``drawing.open_by`` flag: trips are drawn without their return arcs
    windows: np.ndarray | None  # (N, 2) the ``drawing.window_by`` windows as fractions of the horizon, or None
    gauge: tuple  # the problem's ``gauge(state)``: (fill fraction, text, threshold reached)
    header: str  # the problem's extra header text


def snapshot(problem, state, tour, cost: float, invalid: bool = False) -> Snapshot:
    """What a frame shows of the batch-1 ``state`` of ``problem`` (a unit or its name)."""
    problem = get_problem(problem)
    inst = state.instance._asdict()
    n = problem.n_total_of(state.instance)
    per_node = [*inst.items(), *state._asdict().items()]  # a state field shadows an instance field of its name
    fields = {k: _np(v)[0] for k, v in per_node
              if hasattr(v, "dim") and v.dim() == 2 and v.shape[1] == n and v.is_floating_point()}
    drawing = problem.drawing
    depots = np.zeros(n, dtype=bool)
    depots[0] = problem.has_depot
    if problem.depots_by:
        depots = _np(_field(state, problem.depots_by))[0] != 0
    kind = _np(_field(state, drawing.kind_by))[0] > 0 if drawing.kind_by else np.zeros(n, dtype=bool)
    open_routes = bool(_np(_field(state, drawing.open_by))[0].any()) if drawing.open_by else False
    windows = _windows(_np(_field(state, drawing.window_by))[0], depots) if drawing.window_by else None
    return Snapshot(problem=problem, locs=_np(problem.layout(state.instance))[0], mask=_np(state.mask)[0].astype(bool),
                    visited=_np(state.visited)[0].astype(bool), current=int(_np(state.current)[0]),
                    step=int(_np(state.num_steps)[0]), done=bool(_np(state.done)[0]), invalid=bool(invalid),
                    tour=[int(a) for a in tour], cost=float(cost), fields=fields, depots=depots,
                    kind=kind & ~depots, open_routes=open_routes, windows=windows, gauge=problem.gauge(state),
                    header=drawing.header(state) if drawing.header is not None else "")


def _windows(times: np.ndarray, depots: np.ndarray) -> np.ndarray | None:
    """(N, 2) time windows ``times`` as fractions of the horizon, the latest finite close (an open end is
    the horizon); None where no customer's window closes before it (nothing to draw)."""
    close = times[:, 1]
    finite = np.isfinite(close)
    if not finite.any():
        return None
    horizon = float(close[finite].max())
    if horizon <= 0 or not (close[~depots] < horizon).any() and not (times[~depots, 0] > 0).any():
        return None
    return np.clip(np.nan_to_num(times / horizon, posinf=1.0), 0.0, 1.0)


def _field(state, key: str):
    """The state's field ``key``, or else its instance's."""
    return getattr(state, key) if key in state._fields else getattr(state.instance, key)


def routes(snap: Snapshot) -> list[list[int]]:
    """The node sequences to draw, one per colour, as the problem's ``drawing.paths`` says: ``tour`` one
    path (closed when done), ``trips`` one per route (split at depot visits, each from the depot it left
    and back to the depot it returns to, when finished back to the depot it left; no return where
    ``snap.open_routes``; a move from depot to depot is no route), ``from_depot`` one from the depot."""
    finished = snap.done and not snap.invalid
    kind = snap.problem.drawing.paths
    if kind == "tour":
        return [snap.tour + snap.tour[:1]] if finished and snap.tour else [list(snap.tour)]
    if kind == "trips":
        out, cur, home = [], [], int(np.argmax(snap.depots))  # the depot the route left
        back = not snap.open_routes
        for a in snap.tour:
            if snap.depots[a]:
                if cur:
                    out.append([home] + cur + [a] * back)
                cur, home = [], a
            else:
                cur.append(a)
        return out + ([[home] + cur + [home] * (finished and back)] if cur else [])
    if kind == "from_depot":
        return [[0] + snap.tour]
    raise ValueError(f"{snap.problem.name}: unknown drawing.paths {kind!r}")


def arrow_edges(paths: list[list[int]]) -> list[list[bool]]:
    """Per path, per edge, whether it carries an arrowhead: every edge but one whose reverse already
    carries one (a route to a single customer and back: the arrowheads would lie on top of each other,
    pointing both ways) and a step that stays put."""
    seen, out = set(), []
    for path in paths:
        marks = []
        for a, b in zip(path, path[1:]):
            marks.append(a != b and (b, a) not in seen)
            if marks[-1]:
                seen.add((a, b))
        out.append(marks)
    return out


class Look(NamedTuple):
    """How each node of a snapshot is drawn (what the legend reads, and what the frame draws)."""
    paths: list  # routes(snap)
    route_of: np.ndarray  # (N,) int: index into ROUTE_COLOURS of the route that visited the node, -1 none
    hollow: np.ndarray  # (N,) bool: a customer drawn hollow (not allowed now, or not visited once done)
    ringed: np.ndarray  # (N,) bool: a customer ringed by ``ring_by``
    start: int | None  # the node drawn as a diamond (a tour's first)
    current: int | None  # the node drawn as the current one (none before a tour starts, nor once done)
    sized: bool  # node areas differ (``size_by``)
    split: dict  # customer -> the ROUTE_COLOURS indices of the routes that served it, where more than one did


def look(snap: Snapshot) -> Look:
    """How the frame of ``snap`` draws its nodes."""
    paths = routes(snap)
    n = len(snap.locs)
    depot = snap.problem.has_depot
    route_of = np.full(n, -1, dtype=np.int64)
    for k, path in enumerate(paths):
        route_of[path] = k % len(ROUTE_COLOURS)
    customer = ~snap.depots
    coloured = snap.visited & (route_of >= 0)
    hollow = customer & ~coloured & ~(snap.mask & (not snap.done))
    ring_by = snap.problem.drawing.ring_by
    ringed = customer & ~snap.visited if ring_by and ring_by in snap.fields else np.zeros(n, dtype=bool)
    radii = _radii(snap, 1.0)[customer]
    started = depot or snap.step > 0
    serving: dict[int, list[int]] = {}
    for k, path in enumerate(paths):
        for i in dict.fromkeys(path):
            if customer[i]:
                serving.setdefault(i, []).append(k % len(ROUTE_COLOURS))
    return Look(paths=paths, route_of=route_of, hollow=hollow, ringed=ringed,
                start=snap.tour[0] if not depot and snap.tour else None,
                current=snap.current if started and not snap.done else None,
                sized=bool(len(radii) and np.ptp(radii) > 1e-9),
                split={i: ks for i, ks in serving.items() if len(ks) > 1})


def _radii(snap: Snapshot, base: float) -> np.ndarray:
    """Each node's radius for a plain node of ``base``: node area in proportion to the ``size_by`` field."""
    key = snap.problem.drawing.size_by
    size = snap.fields.get(key) if key else None
    if size is None:
        return np.full(len(snap.locs), base)
    if size[1:].max(initial=0.0) <= 0:  # nothing left anywhere (a field used up by the episode): the smallest
        return np.full(len(snap.locs), base * 0.55)
    rel = np.sqrt(np.clip(size / size[1:].max(), 0.0, 1.0))  # area in proportion to the field
    return base * (0.55 + 0.85 * rel)


def header_text(snap: Snapshot) -> str:
    """The header's words after the problem's label: step, cost (:func:`cost_text`) and the problem's own."""
    return f"    step {snap.step}    cost {cost_text(snap.cost, snap.step)}{snap.header}"


def footer_text(snap: Snapshot) -> str:
    """The footer's words: the problem's gauge text, led once done by the number of routes drawn where
    the drawing has ``trips`` (``3 routes    served 20 / 20``)."""
    text = snap.gauge[1]
    if snap.done and snap.problem.drawing.paths == "trips":
        k = sum(1 for p in routes(snap) if len(p) > 1)
        text = f"{k} route{'s' * (k != 1)}    {text}"
    return text
