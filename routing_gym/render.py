"""pygame drawing of a routing episode: ``human`` windows, ``rgb_array`` frames and PNG pictures.

Generic over the problem units: what differs between problems is what each declares in its
``drawing`` (:class:`routing_gym.problems.base.Drawing`: legend, how actions become paths, which
instance field sizes nodes and which rings them) and its ``gauge(state)``; the renderer re-states no
rule (whether an episode ended on a masked action is passed in by the env).

A frame has three bands, laid out by :func:`layout` for any size:

- a header: ``LABEL-n  step k  cost c`` (plus the problem's ``drawing.header``; a cost never reads
  ``-0.000``: :func:`format_cost`, and reads ``-`` before the first action: :func:`cost_text`), the
  episode's status on the right (``running``, ``done`` or ``ended: invalid action``), and the legend (:func:`legend_entries`): each entry a glyph drawn as the plot draws
  it and its meaning, only the entries for what the frame shows (no current node on a final frame), in
  one row or, where a problem's longest legend does not fit in one, two (:func:`legend_plan`);
- the framed paper, the largest square that fits: the unit square (y pointing up, as in a plot) inside
  a margin that holds a node on its edge whole; every node position goes through :func:`to_pixel`;
- a footer gauge: the problem's ``gauge(state)`` (TSP nodes visited, CVRP the load of the route in
  progress and, once done, the customers served, led by the number of routes: :func:`footer_text`; OP the
  length left, PCTSP the prize collected against the threshold 1).

What the nodes and edges mean (the colours are the constants below, fixed so tests can read pixels):

- the depot (problems with one) is a ``DEPOT_COLOUR`` square; a tour's start node a diamond;
- a node the mask allows is filled with ``NODE_COLOUR``; an unvisited node the mask forbids (and, once
  the episode is over, every unvisited node) is hollow, a ``UNAVAILABLE_COLOUR`` outline: one grey fill,
  one meaning; a visited node takes the colour of the route that visited it;
- the tour so far is drawn in ``ROUTE_COLOURS[0]``; ``trips`` split it at depot visits and give route k
  the colour ``ROUTE_COLOURS[k % len(ROUTE_COLOURS)]``, the gauge taking the colour of the route in
  progress (``GAUGE_DONE_COLOUR`` once the problem says a threshold is reached); an arrowhead at the
  middle of each edge gives the direction, except on an edge that goes back along one already carrying
  an arrowhead (a route to one customer and back has one arrowhead: :func:`arrow_edges`);
- the current node is filled with ``CURRENT_COLOUR`` inside a ring of that colour (at the depot only
  the ring is drawn, so the depot keeps its colour; a tour has no current node before its first action);
- ``size_by`` draws node area in proportion to that field (OP's and PCTSP's prize); ``ring_by`` rings
  each unvisited node in ``PENALTY_COLOUR``, the ring's width growing with that field (PCTSP's penalty);
- once an episode is done by the rules, a ``tour``'s closing edge and each ``trip``'s return to the depot
  are drawn (``from_depot`` paths end by choosing the depot, so the return is already in the tour).

Text is set in DejaVu Sans (matplotlib's copy where installed, else a system sans with a true bold
face, else pygame's font) and shrinks more slowly than the drawing in small frames (:func:`text_scale`).
Drawing happens at twice the size and is smoothed down (anti-aliasing); the centre pixels of nodes
keep their exact colours. pygame is imported only when something is drawn.
"""
from __future__ import annotations

import functools
import importlib.util
import math
import os
from typing import Any, NamedTuple

import numpy as np
from gymnasium.error import DependencyNotInstalled

from .problems import get_problem
from .problems.base import LEGEND_GLYPHS, LegendEntry  # noqa: F401  (LEGEND_GLYPHS: what a legend may draw)

BACKGROUND = (246, 246, 243)
PAPER_COLOUR = (255, 255, 255)  # the unit square
FRAME_COLOUR = (205, 205, 200)
TEXT_COLOUR = (30, 30, 35)
LEGEND_TEXT_COLOUR = (62, 62, 70)  # the legend and the gauge's text: 9:1 against BACKGROUND
MUTED_TEXT_COLOUR = (98, 98, 106)  # the "running" status: 5.6:1 against BACKGROUND
DEPOT_COLOUR = (35, 35, 45)
CURRENT_COLOUR = (255, 140, 0)
NODE_COLOUR = (82, 86, 96)
UNAVAILABLE_COLOUR = (150, 150, 158)  # the outline of a hollow node: not allowed now, or not visited once done
PENALTY_COLOUR = (200, 30, 30)
GAUGE_BACK_COLOUR = (225, 225, 222)
GAUGE_DONE_COLOUR = (60, 150, 80)  # PCTSP's prize gauge once the threshold is reached
DONE_COLOUR = (60, 150, 80)
INVALID_COLOUR = (200, 30, 30)
NOTE_COLOUR = (200, 30, 30)
ROUTE_COLOURS = (  # route k of CVRP gets ROUTE_COLOURS[k % 10]; the single tour of TSP/OP/PCTSP the first
    (31, 119, 180), (44, 160, 44), (148, 103, 189), (214, 39, 40), (23, 190, 207),
    (140, 86, 75), (227, 119, 194), (188, 189, 34), (57, 59, 121), (0, 128, 128),
)
SUPERSAMPLE = 2
BASE_SIZE = 600  # lengths below are in pixels of a 600-pixel frame and scale with min(W, H)
MIN_SIZE = 64  # the smallest side of a frame the envs and the viewer draw


class PygameNotInstalled(DependencyNotInstalled, ImportError):
    """pygame is missing: caught as Gymnasium's ``DependencyNotInstalled`` or as ``ImportError``."""


def import_pygame():
    """Import pygame on first use, with an install hint when it is missing."""
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    try:
        import pygame
    except ImportError as e:
        raise PygameNotInstalled("pygame is not installed: run `pip install pygame` to render") from e
    return pygame


# -- geometry -------------------------------------------------------------------------------------
def frame_size(size: Any) -> tuple[int, int]:
    """``size`` as ``(W, H)`` ints: the check of the envs' ``render_size`` and the viewer's ``size``
    (``ValueError`` unless it is two integers, each at least :data:`MIN_SIZE` pixels)."""
    pair = tuple(size) if isinstance(size, (tuple, list, np.ndarray)) else ()
    if len(pair) != 2 or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= MIN_SIZE
                                 for v in pair):
        raise ValueError(f"render_size must be (width, height), two integers of at least {MIN_SIZE} pixels, "
                         f"got {size!r}")
    return int(pair[0]), int(pair[1])


def text_scale(scale: float) -> float:
    """The scale of text for a frame whose lengths scale by ``scale`` (``min(W, H) / 600``): the same at 600
    pixels and above, shrinking more slowly below (``scale ** 0.6``) so that small frames stay readable."""
    return scale if scale >= 1 else scale ** 0.6


# how far a node's glyphs reach beyond its centre, at most: NODE_REACH * side + RING_REACH * scale pixels (the
# start diamond of the largest node, 1.45 * 1.4 * 8 / 470 of the side; the current node's ring and PCTSP's
# penalty ring, up to 6.2 pixels of a 600-pixel frame, beyond the node), plus a clear gap of at least
# CLEAR_GAP pixels before the frame line
NODE_REACH = 0.035
RING_REACH = 10.0
CLEAR_GAP = 2.0


class Layout(NamedTuple):
    scale: float  # min(W, H) / 600: lengths of the drawing
    text: float  # the scale of the text (:func:`text_scale`)
    header: int  # header height, pixels
    footer: int  # footer height, pixels
    x0: float  # left edge of the unit square, pixels
    y0: float  # top edge of the unit square, pixels
    side: float  # side of the unit square, pixels
    margin: float  # the framed paper extends this far beyond the unit square on each side, pixels


def layout(size: tuple[int, int], problem=None) -> Layout:
    """Where the bands and the unit square lie in a frame of ``size`` = (W, H) pixels drawing ``problem``
    (a unit or its name; its legend takes one row of the header or, where it does not fit in one, two:
    :func:`legend_plan`; None: one row). The framed paper is the largest square that fits between the
    header and the footer; the unit square lies inside it with a margin that holds the glyphs of a node
    at its edge whole."""
    w, h = int(size[0]), int(size[1])
    s = min(w, h) / BASE_SIZE
    t = text_scale(s)
    rows = legend_plan(get_problem(problem).name, w, h)[0] if problem is not None else 1
    header, footer, pad = round((64 + 19 * (rows - 1)) * t), round(40 * t), round(12 * s)
    plot_h = h - header - footer
    paper = max(1.0, min(w - 2 * pad, plot_h - 2 * pad))
    side = max(1.0, (paper - 2 * (RING_REACH * s + CLEAR_GAP)) / (1 + 2 * NODE_REACH))
    return Layout(scale=s, text=t, header=header, footer=footer, x0=(w - side) / 2,
                  y0=header + (plot_h - side) / 2, side=side, margin=(paper - side) / 2)


def paper_rect(size: tuple[int, int], problem=None) -> tuple[int, int, int, int]:
    """(x, y, width, height) in pixels of the framed paper in a frame of ``size`` drawing ``problem`` (the
    unit square and its margin; the frame line is its outermost pixels)."""
    lay = layout(size, problem)
    x, y = round(lay.x0 - lay.margin), round(lay.y0 - lay.margin)
    side = round(lay.x0 + lay.side + lay.margin) - x
    return x, y, side, side


def to_pixel(locs, size: tuple[int, int], problem=None) -> np.ndarray:
    """Pixel (x, y) of each location (N, 2) in [0, 1]^2 in a frame of ``size`` = (W, H) drawing ``problem``
    (a unit or its name, whose legend sets the header's height: :func:`layout`): (N, 2) int64, x to the
    right, y down (the unit square's y axis points up)."""
    lay = layout(size, problem)
    xy = np.asarray(locs, dtype=np.float64).reshape(-1, 2)
    px = lay.x0 + xy[:, 0] * lay.side
    py = lay.y0 + (1.0 - xy[:, 1]) * lay.side
    return np.rint(np.stack([px, py], axis=1)).astype(np.int64)


def node_radius(num_nodes: int, size: tuple[int, int], problem=None) -> float:
    """Radius in pixels of a plain node: smaller for many nodes, in proportion to the unit square."""
    return layout(size, problem).side / 470 * float(np.clip(45 / math.sqrt(max(num_nodes, 1)), 3.5, 8.0))


def format_cost(cost: float, digits: int = 3) -> str:
    """``cost`` with ``digits`` decimals, never as a negative zero (``-0.000`` reads ``0.000``)."""
    text = f"{float(cost):.{digits}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def cost_text(cost: float, steps: int) -> str:
    """The cost a header or caption shows after ``steps`` actions: ``-`` before the first (nothing has been
    built to cost yet), else :func:`format_cost`."""
    return format_cost(cost) if steps > 0 else "-"


# -- what a state shows ---------------------------------------------------------------------------
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
    return Snapshot(problem=problem, locs=_np(problem.layout(state.instance))[0], mask=_np(state.mask)[0].astype(bool),
                    visited=_np(state.visited)[0].astype(bool), current=int(_np(state.current)[0]),
                    step=int(_np(state.step)[0]), done=bool(_np(state.done)[0]), invalid=bool(invalid),
                    tour=[int(a) for a in tour], cost=float(cost), fields=fields, gauge=problem.gauge(state),
                    header=drawing.header(state) if drawing.header is not None else "")


def routes(snap: Snapshot) -> list[list[int]]:
    """The node sequences to draw, one per colour, as the problem's ``drawing.paths`` says: ``tour`` one
    path (closed when done), ``trips`` one per route (split at depot visits, each from and, when
    finished, back to the depot), ``from_depot`` one from the depot."""
    finished = snap.done and not snap.invalid
    kind = snap.problem.drawing.paths
    if kind == "tour":
        return [snap.tour + snap.tour[:1]] if finished and snap.tour else [list(snap.tour)]
    if kind == "trips":
        out, cur = [], []
        for a in snap.tour:
            if a == 0 and cur:
                out.append([0] + cur + [0])
            cur = [] if a == 0 else cur + [a]
        return out + ([[0] + cur + ([0] if finished else [])] if cur else [])
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
    """How each node of a snapshot is drawn (what the legend reads, and what :func:`render_surface` draws)."""
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
    customer = np.ones(n, dtype=bool)
    customer[0] = not depot
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
    key = snap.problem.drawing.size_by
    size = snap.fields.get(key) if key else None
    if size is None:
        return np.full(len(snap.locs), base)
    if size[1:].max(initial=0.0) <= 0:  # nothing left anywhere (SDVRP's demand, once delivered): the smallest
        return np.full(len(snap.locs), base * 0.55)
    rel = np.sqrt(np.clip(size / size[1:].max(), 0.0, 1.0))  # area in proportion to the field
    return base * (0.55 + 0.85 * rel)


# -- the legend -------------------------------------------------------------------------------------
NOT_VISITED = "not visited"  # what a hollow node means once the episode is over


def legend_entries(problem) -> list[LegendEntry]:
    """Every entry the legend of ``problem`` (a unit or its name) can show, in order: the problem's declared
    ``drawing.legend``, with the renderer's entries for what every problem draws where the problem declares
    none: the current node (after the depot or start) and the nodes the mask forbids."""
    entries = list(get_problem(problem).drawing.legend)
    glyphs = [e.glyph for e in entries]
    if "current" not in glyphs:
        at = max((i + 1 for i, g in enumerate(glyphs) if g in ("depot", "start")), default=0)
        entries.insert(at, LegendEntry("current", "current node"))
    if "unavailable" not in glyphs:
        entries.append(LegendEntry("unavailable", "not allowed now"))
    return entries


LEGEND_PX = 16  # the legend's text, in pixels of a 600-pixel frame (times ``text_scale``)
LEGEND_SHRINK = 0.88  # the legend keeps to one row where that takes shrinking its text to no less than this


def _worst_legend(problem) -> list[LegendEntry]:
    """Every entry of ``problem``'s legend with the longer of its texts: the widest legend a frame shows."""
    return [e._replace(text=NOT_VISITED) if e.glyph == "unavailable" and len(e.text) < len(NOT_VISITED) else e
            for e in legend_entries(problem)]


@functools.lru_cache(maxsize=256)
def legend_plan(problem_name: str, w: int, h: int) -> tuple[int, int]:
    """(rows, font size in supersampled pixels) of the legend of a problem in a frame of (w, h): one row
    where the widest legend the problem can show fits in one at ``LEGEND_PX`` (or at no less than
    ``LEGEND_SHRINK`` of it), else two, at a smaller size only where two rows at ``LEGEND_PX`` do not hold
    it. The same for every frame of a problem and size, so that nothing moves or changes size within a
    GIF."""
    pygame = import_pygame()
    s = min(w, h) / BASE_SIZE
    width = (w - 2 * round(14 * s)) * SUPERSAMPLE
    entries = _worst_legend(problem_name)
    px = LEGEND_PX * text_scale(s) * SUPERSAMPLE
    need = _legend_width(_font(pygame, px), entries)
    if need * LEGEND_SHRINK <= width:
        fitted = px * min(1.0, width / need)
        while _font_px(fitted) > 6 and _legend_width(_font(pygame, fitted), entries) > width:
            fitted *= 0.98
        return 1, _font_px(fitted)
    for _ in range(40):
        font = _font(pygame, px)
        if len(_wrap(font, entries, width)) <= 2 or _font_px(px) <= 6:
            break
        px *= 0.95
    return 2, _font_px(px)


def _wrap(font, entries: list[LegendEntry], width: float) -> list[list[LegendEntry]]:
    """The entries in rows no wider than ``width`` (greedily; an entry wider than a row gets one)."""
    rows: list[list[LegendEntry]] = [[]]
    for entry in entries:
        if rows[-1] and _legend_width(font, rows[-1] + [entry]) > width:
            rows.append([])
        rows[-1].append(entry)
    return rows


def _glyph_width(glyph: str, px: int) -> int:
    return 0 if not glyph else round(px * (1.5 if glyph in ("routes", "size") else 0.8))


def _legend_width(font, entries) -> int:
    px = font.get_height()
    gap, space = round(0.25 * px), round(0.75 * px)
    return sum(_glyph_width(e.glyph, px) + (gap if e.glyph else 0) + font.size(e.text)[0] for e in entries) \
        + space * max(len(entries) - 1, 0)


def _draw_glyph(pygame, surf, glyph: str, x: int, cy: int, px: int, route_colours: list) -> None:
    """The legend's picture of ``glyph``, ``_glyph_width`` wide from ``x``, centred on the line ``cy``."""
    r = px * 0.32
    cx = x + _glyph_width(glyph, px) / 2
    if glyph == "depot":
        half = round(r * 0.95)
        pygame.draw.rect(surf, DEPOT_COLOUR, pygame.Rect(round(cx) - half, cy - half, 2 * half + 1, 2 * half + 1))
    elif glyph == "start":
        d = r * 1.3
        pygame.draw.polygon(surf, route_colours[0], [(cx, cy - d), (cx + d, cy), (cx, cy + d), (cx - d, cy)])
    elif glyph == "current":
        pygame.draw.circle(surf, CURRENT_COLOUR, (round(cx), cy), round(r * 0.62))
        pygame.draw.circle(surf, CURRENT_COLOUR, (round(cx), cy), round(r * 1.2), max(1, round(px / 11)))
    elif glyph == "unavailable":
        pygame.draw.circle(surf, PAPER_COLOUR, (round(cx), cy), round(r))
        pygame.draw.circle(surf, UNAVAILABLE_COLOUR, (round(cx), cy), round(r), max(1, round(px / 9)))
    elif glyph == "size":
        small, big = r * 0.55, r * 1.05
        pygame.draw.circle(surf, NODE_COLOUR, (round(x + small), cy), round(small))
        pygame.draw.circle(surf, NODE_COLOUR, (round(x + _glyph_width(glyph, px) - big), cy), round(big))
    elif glyph == "ring":
        pygame.draw.circle(surf, PENALTY_COLOUR, (round(cx), cy), round(r * 1.25))
        pygame.draw.circle(surf, NODE_COLOUR, (round(cx), cy), round(r * 0.8))
    elif glyph == "split":
        _sectors(pygame, surf, (round(cx), cy), r * 1.25, list(ROUTE_COLOURS[:2]))  # served by routes 1 and 2
        pygame.draw.circle(surf, PAPER_COLOUR, (round(cx), cy), round(r * 0.95))
        pygame.draw.circle(surf, ROUTE_COLOURS[1], (round(cx), cy), round(r * 0.75))
    elif glyph == "routes":
        colours = route_colours[:3]
        step = _glyph_width(glyph, px) / len(colours)
        for k, colour in enumerate(colours):
            pygame.draw.line(surf, colour, (round(x + k * step + px * 0.06), cy),
                             (round(x + (k + 1) * step - px * 0.06), cy), max(2, round(px / 6)))


def _draw_legend(pygame, surf, entries: list[LegendEntry], font, x0: int, y: int, width: int, row_height: int,
                 route_colours: list) -> None:
    px = font.get_height()
    gap, space = round(0.25 * px), round(0.75 * px)
    for row in _wrap(font, entries, width):
        x, cy = x0, y + px // 2
        for entry in row:
            if entry.glyph:
                _draw_glyph(pygame, surf, entry.glyph, x, cy, px, route_colours)
                x += _glyph_width(entry.glyph, px) + gap
            text = font.render(entry.text, True, LEGEND_TEXT_COLOUR)
            surf.blit(text, (x, y))
            x += text.get_width() + space
        y += row_height


# -- drawing ----------------------------------------------------------------------------------------
_FONTS: dict[tuple[int, bool], Any] = {}
_FONT_FILES: dict[bool, str | None] = {}
# a sans-serif with a true bold face, the first found: matplotlib's copy of DejaVu Sans, where matplotlib is
# installed (the same letters on every machine), else one of the system's (fontconfig's names), else pygame's own
SYSTEM_FONTS = "dejavusans,liberationsans,arial,helvetica,freesans"


def _font_file(pygame, bold: bool) -> str | None:
    """The font file of the regular or bold face, or None for pygame's default font (a bold face only)."""
    if bold not in _FONT_FILES:
        path = None
        spec = importlib.util.find_spec("matplotlib")
        for where in (spec.submodule_search_locations or []) if spec else []:
            name = "DejaVuSans-Bold.ttf" if bold else "DejaVuSans.ttf"
            candidate = os.path.join(where, "mpl-data", "fonts", "ttf", name)
            if os.path.isfile(candidate):
                path = candidate
                break
        if path is None:
            try:
                regular = pygame.font.match_font(SYSTEM_FONTS)
                path = pygame.font.match_font(SYSTEM_FONTS, bold=True) if bold else regular
                path = path if path and (not bold or path != regular) else None  # no synthetic bold
            except Exception:  # no font listing on this system
                path = None
        _FONT_FILES[bold] = path
    return _FONT_FILES[bold]


def _font_px(px: float) -> int:
    return max(int(round(px)), 6)


def _font(pygame, px: float, bold: bool = False):
    """A font of ``px`` pixels, regular or bold (a true bold face: pygame's synthetic bold spreads the
    letters apart)."""
    if not pygame.font.get_init():
        pygame.font.init()
        _FONTS.clear()
    key = (_font_px(px), bold)
    if key not in _FONTS:
        _FONTS[key] = pygame.font.Font(_font_file(pygame, bold), key[0])
    return _FONTS[key]


def render_surface(problem, state, tour, cost: float, size: tuple[int, int] = (600, 600),
                   note: str | None = None, invalid: bool = False, legend: list[LegendEntry] | None = None):
    """The frame as an off-screen ``pygame.Surface`` of ``size`` (the work of :class:`Viewer`) for
    ``problem`` (a unit or its name); a ``note`` replaces the legend line, in ``NOTE_COLOUR`` (e.g. why
    a click was refused); ``invalid``: the episode ended on a masked action; ``legend``: the entries to
    show instead of the frame's own (:func:`frame_legend`), e.g. :func:`shared_legend` of panels side by side."""
    pygame = import_pygame()
    snap = snapshot(problem, state, tour, cost, invalid)
    ss = SUPERSAMPLE
    w, h = int(size[0]), int(size[1])
    lay = layout(size, snap.problem)
    surf = pygame.Surface((w * ss, h * ss))
    surf.fill(BACKGROUND)
    u = lay.scale * ss  # one pixel of a 600-pixel frame, in supersampled pixels

    px, py, pw, ph = paper_rect(size, snap.problem)
    paper = pygame.Rect(px * ss, py * ss, pw * ss, ph * ss)
    pygame.draw.rect(surf, PAPER_COLOUR, paper)
    pygame.draw.rect(surf, FRAME_COLOUR, paper, width=ss)

    pix = to_pixel(snap.locs, size, snap.problem) * ss + ss // 2
    pts = [tuple(int(v) for v in p) for p in pix]
    base = node_radius(len(snap.locs), size, snap.problem)
    radii = _radii(snap, base) * ss
    drawn = look(snap)
    paths = drawn.paths
    for k, (path, arrows) in enumerate(zip(paths, arrow_edges(paths))):
        colour = ROUTE_COLOURS[k % len(ROUTE_COLOURS)]
        if len(path) > 1:
            pygame.draw.lines(surf, colour, False, [pts[i] for i in path], max(2, round(2.6 * u)))
            for a, b, arrow in zip(path, path[1:], arrows):
                if arrow:
                    _arrow(pygame, surf, colour, pts[a], pts[b], 5.5 * u)

    depot = snap.problem.has_depot
    ring_by = snap.problem.drawing.ring_by
    ring_field = snap.fields.get(ring_by) if ring_by else None
    outline = max(1, round(1.2 * u))
    for i, (p, r) in enumerate(zip(pts, radii)):
        if depot and i == 0:
            continue
        if drawn.hollow[i]:  # not allowed now, or (once done) not visited
            fill, edge = PAPER_COLOUR, UNAVAILABLE_COLOUR
        elif drawn.route_of[i] >= 0 and snap.visited[i]:
            fill, edge = ROUTE_COLOURS[drawn.route_of[i]], PAPER_COLOUR
        else:
            fill, edge = NODE_COLOUR, PAPER_COLOUR
        if i in drawn.split:  # a rim in the colours of the routes that served it, one sector each
            _sectors(pygame, surf, p, r + outline + max(2, round(2.4 * u)), [ROUTE_COLOURS[k] for k in drawn.split[i]])
        if drawn.ringed[i]:
            rel = ring_field[i] / max(float(ring_field.max()), 1e-9)
            ring = max(1, round((1.0 + 3.0 * rel) * u))
            pygame.draw.circle(surf, PENALTY_COLOUR, p, round(r + ring + outline))
        if i == drawn.start:
            d = round(r * 1.45)
            pygame.draw.polygon(surf, edge, [(p[0], p[1] - d - outline), (p[0] + d + outline, p[1]),
                                             (p[0], p[1] + d + outline), (p[0] - d - outline, p[1])])
            pygame.draw.polygon(surf, fill, [(p[0], p[1] - d), (p[0] + d, p[1]), (p[0], p[1] + d), (p[0] - d, p[1])])
        elif drawn.hollow[i]:
            pygame.draw.circle(surf, PAPER_COLOUR, p, round(r + outline))
            pygame.draw.circle(surf, edge, p, round(r))
            pygame.draw.circle(surf, fill, p, max(1, round(r - max(2, round(1.6 * u)))))
        else:
            pygame.draw.circle(surf, edge, p, round(r + outline))
            pygame.draw.circle(surf, fill, p, round(r))

    if depot:
        half = round(base * ss * 1.35)
        pygame.draw.rect(surf, PAPER_COLOUR, pygame.Rect(pts[0][0] - half - outline, pts[0][1] - half - outline,
                                                         2 * (half + outline) + 1, 2 * (half + outline) + 1))
        square = pygame.Rect(pts[0][0] - half, pts[0][1] - half, 2 * half + 1, 2 * half + 1)
        pygame.draw.rect(surf, DEPOT_COLOUR, square)

    if drawn.current is not None:
        c = drawn.current
        r = half * 1.45 if depot and c == 0 else radii[c]
        pygame.draw.circle(surf, CURRENT_COLOUR, pts[c], round(r + 5 * u), max(2, round(2.4 * u)))
        if not (depot and c == 0):
            pygame.draw.circle(surf, CURRENT_COLOUR, pts[c], round(radii[c]))

    drawn_routes = [ROUTE_COLOURS[k % len(ROUTE_COLOURS)] for k, p in enumerate(paths) if len(p) > 1]
    _draw_header(pygame, surf, snap, lay, ss, note, drawn, drawn_routes or ROUTE_COLOURS[:1], legend)
    _draw_footer(pygame, surf, snap, lay, ss, sum(1 for p in paths if len(p) > 1))
    return pygame.transform.smoothscale(surf, (w, h))


def _sectors(pygame, surf, centre, radius: float, colours: list) -> None:
    """A disc of ``radius`` around ``centre`` cut into equal sectors, one per colour, the first on the left."""
    cx, cy, radius = float(centre[0]), float(centre[1]), float(radius)
    k = len(colours)
    for j, colour in enumerate(colours):
        a0, a1 = math.pi / 2 + 2 * math.pi * j / k, math.pi / 2 + 2 * math.pi * (j + 1) / k
        steps = max(4, round(24 / k))
        arc = [(cx + radius * math.cos(a0 + (a1 - a0) * s / steps), cy + radius * math.sin(a0 + (a1 - a0) * s / steps))
               for s in range(steps + 1)]
        pygame.draw.polygon(surf, colour, [(cx, cy), *arc])


def _arrow(pygame, surf, colour, a, b, size: float) -> None:
    """A small arrowhead at the middle of the edge a -> b (none on edges too short to hold one)."""
    dx, dy = b[0] - a[0], b[1] - a[1]
    length = math.hypot(dx, dy)
    if length < 6 * size:
        return
    ux, uy = dx / length, dy / length
    mx, my = a[0] + dx / 2 + ux * size, a[1] + dy / 2 + uy * size
    back = (mx - 2 * size * ux, my - 2 * size * uy)
    pygame.draw.polygon(surf, colour, [(mx, my), (back[0] - size * uy, back[1] + size * ux),
                                       (back[0] + size * uy, back[1] - size * ux)])


def frame_legend(snap: Snapshot, drawn: Look | None = None) -> list[LegendEntry]:
    """The legend entries of the frame of ``snap`` (drawn as ``drawn``, by default :func:`look`): those of
    :func:`legend_entries` whose glyph the frame shows (text entries always), the hollow node's meaning
    ``not visited`` once the episode is over."""
    drawn = look(snap) if drawn is None else drawn
    shown = {"depot": snap.problem.has_depot, "start": drawn.start is not None, "current": drawn.current is not None,
             "routes": any(len(p) > 1 for p in drawn.paths), "unavailable": bool(drawn.hollow.any()),
             "size": drawn.sized, "ring": bool(drawn.ringed.any()), "split": bool(drawn.split)}
    out = []
    for entry in legend_entries(snap.problem):
        if entry.glyph and not shown.get(entry.glyph, False):
            continue
        out.append(entry._replace(text=NOT_VISITED) if entry.glyph == "unavailable" and snap.done else entry)
    return out


def shared_legend(snaps: list[Snapshot]) -> list[LegendEntry]:
    """One legend for frames of one problem shown side by side (``render --compare``): every glyph that
    any of their :func:`frame_legend` shows, once, in the problem's order; a hollow node's meaning is
    ``not visited`` only where every frame that shows one is over."""
    shown = [frame_legend(s) for s in snaps]
    out = []
    for entry in legend_entries(snaps[0].problem):
        texts = [e.text for entries in shown for e in entries if e.glyph == entry.glyph
                 and (entry.glyph or e.text == entry.text)]
        if texts:
            out.append(entry._replace(text=entry.text if entry.text in texts else texts[0]))
    return out


def _fitted(pygame, parts: list[tuple[str, float, bool]], width: float, colour=TEXT_COLOUR) -> list:
    """``parts`` (text, size, bold) rendered side by side as (font, surface), all smaller where together
    they would be wider than ``width``."""
    fonts = [_font(pygame, px, bold) for _, px, bold in parts]
    need = sum(f.size(text)[0] for f, (text, _, _) in zip(fonts, parts))
    if need > width > 0:
        fonts = [_font(pygame, px * width / need, bold) for _, px, bold in parts]
    return [(f, f.render(text, True, colour)) for f, (text, _, _) in zip(fonts, parts)]


def header_text(snap: Snapshot) -> str:
    """The header's words after the problem's label: step, cost (:func:`cost_text`) and the problem's own."""
    return f"    step {snap.step}    cost {cost_text(snap.cost, snap.step)}{snap.header}"


def _draw_header(pygame, surf, snap: Snapshot, lay: Layout, ss: int, note: str | None, drawn: Look,
                 route_colours: list, legend: list[LegendEntry] | None = None) -> None:
    t = lay.text * ss
    left = round(14 * lay.scale * ss)
    width = surf.get_width() - 2 * left
    problem = snap.problem
    n = problem.num_customers(len(snap.locs))
    if snap.done:
        status, colour = ("ended: invalid action", INVALID_COLOUR) if snap.invalid else ("done", DONE_COLOUR)
    else:
        status, colour = "running", MUTED_TEXT_COLOUR
    badge = _font(pygame, 19 * t, bold=True).render(status, True, colour)
    top = round(9 * t)
    surf.blit(badge, (surf.get_width() - left - badge.get_width(), top + round(2 * t)))
    (bold, name), (regular, rest) = _fitted(pygame, [
        (f"{problem.label}-{n}", 21 * t, True),
        (header_text(snap), 21 * t, False)],
        width - badge.get_width() - round(16 * t))
    surf.blit(name, (left, top))
    surf.blit(rest, (left + name.get_width(), top + bold.get_ascent() - regular.get_ascent()))
    legend_y = round(38 * t)
    if note:
        (_, text), = _fitted(pygame, [(note, LEGEND_PX * t, True)], width, NOTE_COLOUR)
        surf.blit(text, (left, legend_y))
        return
    _, px = legend_plan(problem.name, surf.get_width() // ss, surf.get_height() // ss)
    entries = frame_legend(snap, drawn) if legend is None else legend
    _draw_legend(pygame, surf, entries, _font(pygame, px), left, legend_y, width,
                 round(19 * t), route_colours)


def footer_text(snap: Snapshot) -> str:
    """The footer's words: the problem's gauge text, led once done by the number of routes drawn where
    the drawing has ``trips`` (a finished CVRP: ``3 routes    served 20 / 20``)."""
    text = snap.gauge[1]
    if snap.done and snap.problem.drawing.paths == "trips":
        k = sum(1 for p in routes(snap) if len(p) > 1)
        text = f"{k} route{'s' * (k != 1)}    {text}"
    return text


def _draw_footer(pygame, surf, snap: Snapshot, lay: Layout, ss: int, route_count: int) -> None:
    u = lay.scale * ss
    t = lay.text * ss
    fraction, _, reached = snap.gauge
    text = footer_text(snap)
    # the route in progress's colour (CVRP: route k's), green once a threshold is reached (PCTSP's prize)
    colour = GAUGE_DONE_COLOUR if reached else ROUTE_COLOURS[(max(route_count, 1) - 1) % len(ROUTE_COLOURS)]
    top = surf.get_height() - round(lay.footer * ss)
    bar_h = round(12 * u)
    bar = pygame.Rect(round(14 * u), top + (round(lay.footer * ss) - bar_h) // 2, round(170 * u), bar_h)
    pygame.draw.rect(surf, GAUGE_BACK_COLOUR, bar, border_radius=bar_h // 2)
    filled = round(bar.width * float(np.clip(fraction, 0.0, 1.0)))
    if filled > 0:
        pygame.draw.rect(surf, colour, pygame.Rect(bar.x, bar.y, max(filled, bar_h), bar_h), border_radius=bar_h // 2)
    (_, label), = _fitted(pygame, [(text, 17 * t, False)], surf.get_width() - bar.right - round(26 * u))
    surf.blit(label, (bar.right + round(12 * u), bar.centery - label.get_height() // 2))


def surface_to_array(surf) -> np.ndarray:
    """(H, W, 3) uint8 copy of a pygame surface."""
    pygame = import_pygame()
    return np.ascontiguousarray(pygame.surfarray.array3d(surf).transpose(1, 0, 2), dtype=np.uint8)


def side_by_side(frames: list[np.ndarray], captions: list[str], caption_height: int | None = None) -> np.ndarray:
    """Frames (H, W, 3) placed left to right, each under a caption strip: (H + c, sum W, 3) uint8."""
    pygame = import_pygame()
    h = max(f.shape[0] for f in frames)
    t = text_scale(min(h, frames[0].shape[1]) / BASE_SIZE)
    c = caption_height if caption_height is not None else max(20, round(34 * t))
    out = np.empty((h + c, sum(f.shape[1] for f in frames), 3), dtype=np.uint8)
    out[:] = BACKGROUND
    x = 0
    for frame, caption in zip(frames, captions):
        strip = pygame.Surface((frame.shape[1], c))
        strip.fill(PAPER_COLOUR)
        pygame.draw.line(strip, FRAME_COLOUR, (0, c - 1), (frame.shape[1], c - 1))
        font = _font(pygame, c * 0.55, bold=True)
        text = font.render(caption, True, TEXT_COLOUR)
        if text.get_width() > frame.shape[1] - 8:  # a long caption: smaller, so that it fits
            font = _font(pygame, c * 0.55 * (frame.shape[1] - 8) / text.get_width(), bold=True)
            text = font.render(caption, True, TEXT_COLOUR)
        strip.blit(text, ((frame.shape[1] - text.get_width()) // 2, (c - text.get_height()) // 2))
        out[:c, x:x + frame.shape[1]] = surface_to_array(strip)
        out[c:c + frame.shape[0], x:x + frame.shape[1]] = frame
        if x:
            out[:, x] = FRAME_COLOUR
        x += frame.shape[1]
    return out


# -- public entry points ------------------------------------------------------------------------------
class Viewer:
    """Draws one routing env's frames: to a window (``"human"``) or as arrays (``"rgb_array"``).

    Args:
        problem: the problem unit, or its name (a key of ``routing_gym.problems.PROBLEMS``).
        render_mode: ``"human"`` or ``"rgb_array"``.
        fps: frames per second a human window is held to.
        size: (W, H) of the frame in pixels, each at least 64 (:func:`frame_size`); everything scales with it.

    In ``human`` mode the window opens on the first :meth:`draw`; clicking its close button closes it,
    after which :meth:`draw` does nothing (returns None) until :meth:`close`.
    """

    def __init__(self, problem, render_mode: str, fps: int, size: tuple[int, int] = (600, 600)):
        self.problem = get_problem(problem)
        if render_mode not in ("human", "rgb_array"):
            raise ValueError(f"render_mode must be 'human' or 'rgb_array', got {render_mode!r}")
        self.render_mode = render_mode
        self.fps = int(fps)
        self.size = frame_size(size)
        self._pygame = import_pygame()
        self._window = None
        self._clock = None
        self._closed_by_user = False

    def draw(self, state, tour: list[int], cost: float, invalid: bool = False):
        """Draw the batch-1 ``state`` with the actions ``tour`` taken so far and the ``cost`` so far
        (``invalid``: the episode ended on a masked action).

        Returns the (H, W, 3) uint8 frame for ``rgb_array``; for ``human`` shows it and returns None.
        """
        if self.render_mode == "rgb_array":
            return surface_to_array(render_surface(self.problem, state, tour, cost, self.size, invalid=invalid))
        if self._closed_by_user:
            return None
        pygame = self._pygame
        if self._window is None:
            pygame.display.init()
            self._window = pygame.display.set_mode(self.size)
            pygame.display.set_caption(f"routing-gym: {self.problem.label}")
            self._clock = pygame.time.Clock()
        for event in pygame.event.get():
            if event.type == pygame.QUIT:
                self._closed_by_user = True
                self._shut()
                return None
        self._window.blit(render_surface(self.problem, state, tour, cost, self.size, invalid=invalid), (0, 0))
        pygame.display.flip()
        self._clock.tick(self.fps)
        return None

    def _shut(self) -> None:
        if self._window is not None:
            self._pygame.display.quit()
            self._window = None

    def close(self) -> None:
        """Close the window, if one is open (safe to call more than once)."""
        self._shut()
        self._closed_by_user = False


def save_png(problem, state, tour, cost: float, path: str, size: tuple[int, int] = (600, 600)) -> str:
    """Save a picture of ``state`` (typically a finished solution) to ``path`` as PNG; returns the path.

    ``problem`` is the problem unit (or its name); no window is opened.
    """
    pygame = import_pygame()
    pygame.image.save(render_surface(problem, state, tour, cost, size), str(path))
    return str(path)
