"""pygame drawing of a routing episode: ``human`` windows, ``rgb_array`` frames and PNG pictures.

Generic over the problem units: what differs between problems is what each declares in its
``drawing`` (:class:`routing_gym.problems.base.Drawing`: legend, how actions become paths, which
instance field sizes nodes and which rings them) and its ``gauge(state)``; the renderer re-states no
rule (whether an episode ended on a masked action is passed in by the env).

A frame has three bands, laid out by :func:`layout` for any size:

- a header: ``LABEL-n  step k  cost c`` (plus the problem's ``drawing.header``), the episode's status on
  the right (``running``, ``done`` or ``ended: invalid action``), and the problem's legend;
- the unit square (y pointing up, as in a plot), scaled to the largest square that fits; every node
  position goes through :func:`to_pixel`;
- a footer gauge: the problem's ``gauge(state)`` (TSP nodes visited, CVRP the load of the route in
  progress, OP the length left, PCTSP the prize collected against the threshold 1).

What the nodes and edges mean (the colours are the constants below, fixed so tests can read pixels):

- the depot (problems with one) is a ``DEPOT_COLOUR`` square; a tour's start node a diamond;
- a node the mask allows is ``NODE_COLOUR``; an unvisited node the mask forbids is dimmed
  (``DIMMED_COLOUR``); a visited node takes the colour of the route that visited it;
- the tour so far is drawn in ``ROUTE_COLOURS[0]``; ``trips`` split it at depot visits and give route k
  the colour ``ROUTE_COLOURS[k % len(ROUTE_COLOURS)]``, the gauge taking the colour of the route in
  progress (``GAUGE_DONE_COLOUR`` once the problem says a threshold is reached);
- the current node is filled with ``CURRENT_COLOUR`` inside a ring of that colour (at the depot only
  the ring is drawn, so the depot keeps its colour; a tour has no current node before its first action);
- ``size_by`` draws node area in proportion to that field (OP's and PCTSP's prize); ``ring_by`` rings
  each unvisited node in ``PENALTY_COLOUR``, the ring's width growing with that field (PCTSP's penalty);
- once an episode is done by the rules, a ``tour``'s closing edge and each ``trip``'s return to the depot
  are drawn (``from_depot`` paths end by choosing the depot, so the return is already in the tour).

Drawing happens at twice the size and is smoothed down (anti-aliasing); the centre pixels of nodes
keep their exact colours. pygame is imported only when something is drawn.
"""
from __future__ import annotations

import math
import os
from typing import Any, NamedTuple

import numpy as np
from gymnasium.error import DependencyNotInstalled

from .problems import get_problem

BACKGROUND = (246, 246, 243)
PAPER_COLOUR = (255, 255, 255)  # the unit square
FRAME_COLOUR = (205, 205, 200)
TEXT_COLOUR = (30, 30, 35)
MUTED_TEXT_COLOUR = (120, 120, 125)
DEPOT_COLOUR = (35, 35, 45)
CURRENT_COLOUR = (255, 140, 0)
NODE_COLOUR = (82, 86, 96)
DIMMED_COLOUR = (222, 222, 222)
DIMMED_OUTLINE_COLOUR = (195, 195, 195)
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


class Layout(NamedTuple):
    scale: float  # min(W, H) / 600
    header: int  # header height, pixels
    footer: int  # footer height, pixels
    x0: float  # left edge of the unit square, pixels
    y0: float  # top edge of the unit square, pixels
    side: float  # side of the unit square, pixels


def layout(size: tuple[int, int]) -> Layout:
    """Where the bands and the unit square lie in a frame of ``size`` = (W, H) pixels."""
    w, h = int(size[0]), int(size[1])
    s = min(w, h) / BASE_SIZE
    header, footer, pad = round(54 * s), round(38 * s), round(22 * s)
    plot_h = h - header - footer
    side = max(1.0, min(w - 2 * pad, plot_h - 2 * pad))
    return Layout(scale=s, header=header, footer=footer, x0=(w - side) / 2, y0=header + (plot_h - side) / 2, side=side)


def to_pixel(locs, size: tuple[int, int]) -> np.ndarray:
    """Pixel (x, y) of each location (N, 2) in [0, 1]^2 in a frame of ``size`` = (W, H): (N, 2) int64,
    x to the right, y down (the unit square's y axis points up)."""
    lay = layout(size)
    xy = np.asarray(locs, dtype=np.float64).reshape(-1, 2)
    px = lay.x0 + xy[:, 0] * lay.side
    py = lay.y0 + (1.0 - xy[:, 1]) * lay.side
    return np.rint(np.stack([px, py], axis=1)).astype(np.int64)


def node_radius(num_nodes: int, size: tuple[int, int]) -> float:
    """Radius in pixels of a plain node: smaller for many nodes, in proportion to the frame."""
    return layout(size).side / 470 * float(np.clip(45 / math.sqrt(max(num_nodes, 1)), 3.5, 8.0))


# -- what a state shows ---------------------------------------------------------------------------
def _np(x) -> np.ndarray:
    return x.detach().cpu().numpy() if hasattr(x, "detach") else np.asarray(x)


class Snapshot(NamedTuple):
    """A batch-1 state as numpy, plus the tour and cost the env keeps, and what the problem declares
    for drawing it."""
    problem: Any  # the problem unit
    locs: np.ndarray  # (N, 2)
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
    n = inst["locs"].shape[1]
    per_node = [*inst.items(), *state._asdict().items()]  # a state field shadows an instance field of its name
    fields = {k: _np(v)[0] for k, v in per_node
              if hasattr(v, "dim") and v.dim() == 2 and v.shape[1] == n and v.is_floating_point()}
    drawing = problem.drawing
    return Snapshot(problem=problem, locs=_np(inst["locs"])[0], mask=_np(state.mask)[0].astype(bool),
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


def _radii(snap: Snapshot, base: float) -> np.ndarray:
    key = snap.problem.drawing.size_by
    size = snap.fields.get(key) if key else None
    if size is None or size[1:].max(initial=0.0) <= 0:
        return np.full(len(snap.locs), base)
    rel = np.sqrt(np.clip(size / size[1:].max(), 0.0, 1.0))  # area in proportion to the field
    return base * (0.55 + 0.85 * rel)


# -- drawing ----------------------------------------------------------------------------------------
_FONTS: dict[tuple[int, bool], Any] = {}


def _font(pygame, px: int, bold: bool = False):
    if not pygame.font.get_init():
        pygame.font.init()
        _FONTS.clear()
    key = (max(int(px), 6), bold)
    if key not in _FONTS:
        font = pygame.font.Font(None, key[0])
        font.set_bold(bold)
        _FONTS[key] = font
    return _FONTS[key]


def render_surface(problem, state, tour, cost: float, size: tuple[int, int] = (600, 600),
                   note: str | None = None, invalid: bool = False):
    """The frame as an off-screen ``pygame.Surface`` of ``size`` (the work of :class:`Viewer`) for
    ``problem`` (a unit or its name); a ``note`` replaces the legend line, in ``NOTE_COLOUR`` (e.g. why
    a click was refused); ``invalid``: the episode ended on a masked action."""
    pygame = import_pygame()
    snap = snapshot(problem, state, tour, cost, invalid)
    ss = SUPERSAMPLE
    w, h = int(size[0]), int(size[1])
    lay = layout(size)
    surf = pygame.Surface((w * ss, h * ss))
    surf.fill(BACKGROUND)
    u = lay.scale * ss  # one pixel of a 600-pixel frame, in supersampled pixels

    side = round(lay.side * ss)
    paper = pygame.Rect(round(lay.x0 * ss), round(lay.y0 * ss), side, side)
    pygame.draw.rect(surf, PAPER_COLOUR, paper)
    pygame.draw.rect(surf, FRAME_COLOUR, paper, width=max(1, round(u)))

    pix = to_pixel(snap.locs, size) * ss + ss // 2
    pts = [tuple(int(v) for v in p) for p in pix]
    radii = _radii(snap, node_radius(len(snap.locs), size)) * ss
    paths = routes(snap)
    colour_of = np.zeros(len(pts), dtype=np.int64) - 1
    for k, path in enumerate(paths):
        colour = ROUTE_COLOURS[k % len(ROUTE_COLOURS)]
        if len(path) > 1:
            pygame.draw.lines(surf, colour, False, [pts[i] for i in path], max(2, round(2.6 * u)))
            for a, b in zip(path, path[1:]):
                _arrow(pygame, surf, colour, pts[a], pts[b], 5.5 * u)
        for i in path:
            colour_of[i] = k % len(ROUTE_COLOURS)

    depot = snap.problem.has_depot
    ring_by = snap.problem.drawing.ring_by
    ring_field = snap.fields.get(ring_by) if ring_by else None
    started = depot or snap.step > 0
    outline = max(1, round(1.2 * u))
    for i, (p, r) in enumerate(zip(pts, radii)):
        if depot and i == 0:
            continue
        if snap.visited[i] and colour_of[i] >= 0:
            fill, edge = ROUTE_COLOURS[colour_of[i]], PAPER_COLOUR
        elif snap.mask[i] and not snap.done:
            fill, edge = NODE_COLOUR, PAPER_COLOUR
        else:
            fill, edge = DIMMED_COLOUR, DIMMED_OUTLINE_COLOUR
        if ring_field is not None and not snap.visited[i]:
            rel = ring_field[i] / max(float(ring_field.max()), 1e-9)
            ring = max(1, round((1.0 + 3.0 * rel) * u))
            pygame.draw.circle(surf, PENALTY_COLOUR, p, round(r + ring + outline))
        if not depot and snap.tour and i == snap.tour[0]:  # the start node
            d = round(r * 1.45)
            pygame.draw.polygon(surf, edge, [(p[0], p[1] - d - outline), (p[0] + d + outline, p[1]),
                                             (p[0], p[1] + d + outline), (p[0] - d - outline, p[1])])
            pygame.draw.polygon(surf, fill, [(p[0], p[1] - d), (p[0] + d, p[1]), (p[0], p[1] + d), (p[0] - d, p[1])])
        else:
            pygame.draw.circle(surf, edge, p, round(r + outline))
            pygame.draw.circle(surf, fill, p, round(r))

    if depot:
        half = round(node_radius(len(pts), size) * ss * 1.35)
        pygame.draw.rect(surf, PAPER_COLOUR, pygame.Rect(pts[0][0] - half - outline, pts[0][1] - half - outline,
                                                         2 * (half + outline) + 1, 2 * (half + outline) + 1))
        square = pygame.Rect(pts[0][0] - half, pts[0][1] - half, 2 * half + 1, 2 * half + 1)
        pygame.draw.rect(surf, DEPOT_COLOUR, square)

    if started and not snap.done:
        c = snap.current
        r = half * 1.45 if depot and c == 0 else radii[c]
        pygame.draw.circle(surf, CURRENT_COLOUR, pts[c], round(r + 5 * u), max(2, round(2.4 * u)))
        if not (depot and c == 0):
            pygame.draw.circle(surf, CURRENT_COLOUR, pts[c], round(radii[c]))

    _draw_header(pygame, surf, snap, lay, ss, note)
    _draw_footer(pygame, surf, snap, lay, ss, sum(1 for p in paths if len(p) > 1))
    return pygame.transform.smoothscale(surf, (w, h))


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


def _draw_header(pygame, surf, snap: Snapshot, lay: Layout, ss: int, note: str | None) -> None:
    u = lay.scale * ss
    left = round(14 * u)
    problem = snap.problem
    n = problem.num_customers(len(snap.locs))
    header = f"{problem.label}-{n}    step {snap.step}    cost {snap.cost:.3f}{snap.header}"
    title = _font(pygame, round(22 * u), bold=True).render(header, True, TEXT_COLOUR)
    surf.blit(title, (left, round(9 * u)))
    if snap.done:
        status, colour = ("ended: invalid action", INVALID_COLOUR) if snap.invalid else ("done", DONE_COLOUR)
    else:
        status, colour = "running", MUTED_TEXT_COLOUR
    badge = _font(pygame, round(20 * u), bold=True).render(status, True, colour)
    surf.blit(badge, (surf.get_width() - left - badge.get_width(), round(10 * u)))
    legend = _font(pygame, round(17 * u), bold=bool(note)).render(note or problem.drawing.legend, True,
                                                                 NOTE_COLOUR if note else MUTED_TEXT_COLOUR)
    surf.blit(legend, (left, round(33 * u)))


def _draw_footer(pygame, surf, snap: Snapshot, lay: Layout, ss: int, route_count: int) -> None:
    u = lay.scale * ss
    fraction, text, reached = snap.gauge
    # the route in progress's colour (CVRP: route k's), green once a threshold is reached (PCTSP's prize)
    colour = GAUGE_DONE_COLOUR if reached else ROUTE_COLOURS[(max(route_count, 1) - 1) % len(ROUTE_COLOURS)]
    top = surf.get_height() - round(lay.footer * ss)
    bar_h = round(12 * u)
    bar = pygame.Rect(round(14 * u), top + (round(lay.footer * ss) - bar_h) // 2, round(170 * u), bar_h)
    pygame.draw.rect(surf, GAUGE_BACK_COLOUR, bar, border_radius=bar_h // 2)
    filled = round(bar.width * float(np.clip(fraction, 0.0, 1.0)))
    if filled > 0:
        pygame.draw.rect(surf, colour, pygame.Rect(bar.x, bar.y, max(filled, bar_h), bar_h), border_radius=bar_h // 2)
    label = _font(pygame, round(18 * u)).render(text, True, TEXT_COLOUR)
    surf.blit(label, (bar.right + round(12 * u), bar.centery - label.get_height() // 2))


def surface_to_array(surf) -> np.ndarray:
    """(H, W, 3) uint8 copy of a pygame surface."""
    pygame = import_pygame()
    return np.ascontiguousarray(pygame.surfarray.array3d(surf).transpose(1, 0, 2), dtype=np.uint8)


def side_by_side(frames: list[np.ndarray], captions: list[str], caption_height: int | None = None) -> np.ndarray:
    """Frames (H, W, 3) placed left to right, each under a caption strip: (H + c, sum W, 3) uint8."""
    pygame = import_pygame()
    h = max(f.shape[0] for f in frames)
    c = caption_height if caption_height is not None else max(20, round(min(h, frames[0].shape[1]) / BASE_SIZE * 34))
    out = np.empty((h + c, sum(f.shape[1] for f in frames), 3), dtype=np.uint8)
    out[:] = BACKGROUND
    x = 0
    for frame, caption in zip(frames, captions):
        strip = pygame.Surface((frame.shape[1], c))
        strip.fill(PAPER_COLOUR)
        pygame.draw.line(strip, FRAME_COLOUR, (0, c - 1), (frame.shape[1], c - 1))
        text = _font(pygame, round(c * 0.62), bold=True).render(caption, True, TEXT_COLOUR)
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
