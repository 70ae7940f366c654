"""One frame of an episode as an off-screen pygame surface: :func:`render_surface`.

The frame is drawn in steps: the paper, the routes, the nodes, the depot, the current node, then the
header (``LABEL-n  step k  cost c`` plus the problem's ``drawing.header``, the status on the right:
``running``, ``done`` or ``ended: invalid action``, and the legend) and the footer (the problem's
``gauge(state)`` as a bar and its text). What the glyphs mean:

- each depot (node 0 of problems with one; the problem's ``depots_by``) is a ``DEPOT_COLOUR`` square; a
  tour's start node a diamond; a ``kind_by`` customer (a second kind, e.g. backhaul pickups) a triangle;
- a node the mask allows is filled with ``NODE_COLOUR``; an unvisited node the mask forbids (and, once
  the episode is over, every unvisited node) is hollow, a ``UNAVAILABLE_COLOUR`` outline; a visited
  node takes the colour of the route that visited it, a node served by several routes a rim of theirs;
- route k is drawn in ``ROUTE_COLOURS[k % len(ROUTE_COLOURS)]`` with an arrowhead at the middle of each
  edge (:func:`~routing_gym.render.scene.arrow_edges`); the gauge takes the colour of the route in
  progress (``GAUGE_DONE_COLOUR`` once the problem says a threshold is reached);
- the current node is filled with ``CURRENT_COLOUR`` inside a ring of that colour (at the depot only
  the ring, so the depot keeps its colour);
- ``trips`` routes return to the depot they left, except where ``open_by`` marks open routes (no return
  arc);
- ``size_by`` draws node area in proportion to that field; ``ring_by`` rings each unvisited node in
  ``PENALTY_COLOUR``, the ring's width growing with that field; ``window_by`` puts a bar under each
  customer, the horizon, filled in the node's colour where its time window is open.

Drawing happens at ``SUPERSAMPLE`` times the size and is smoothed down; the centre pixels of nodes
keep their exact colours.
"""
from __future__ import annotations

import numpy as np

from ..problems.base import LegendEntry
from . import primitives as draw
from .layout import Layout, layout, node_radius, paper_rect, to_pixel
from .legend import LEGEND_PX, draw_legend, frame_legend, legend_plan
from .scene import Look, Snapshot, _radii, arrow_edges, footer_text, header_text, look, snapshot
from .style import (BACKGROUND, DONE_COLOUR, FRAME_COLOUR, GAUGE_BACK_COLOUR, GAUGE_DONE_COLOUR, INVALID_COLOUR,
                    MUTED_TEXT_COLOUR, NODE_COLOUR, NOTE_COLOUR, PAPER_COLOUR, ROUTE_COLOURS, SUPERSAMPLE,
                    UNAVAILABLE_COLOUR, import_pygame)
from .text import fitted_text, get_font


def render_surface(problem, state, tour, cost: float, size: tuple[int, int] = (600, 600),
                   note: str | None = None, invalid: bool = False, legend: list[LegendEntry] | None = None):
    """The frame as an off-screen ``pygame.Surface`` of ``size`` (the work of
    :class:`~routing_gym.render.window.Viewer`) for ``problem`` (a unit or its name); a ``note`` replaces
    the legend line, in ``NOTE_COLOUR`` (e.g. why a click was refused); ``invalid``: the episode ended on
    a masked action; ``legend``: the entries to show instead of the frame's own (:func:`frame_legend`),
    e.g. :func:`~routing_gym.render.legend.shared_legend` of panels side by side."""
    pygame = import_pygame()
    snap = snapshot(problem, state, tour, cost, invalid)
    ss = SUPERSAMPLE
    lay = layout(size, snap.problem)
    surf = _paper(pygame, size, snap.problem)
    u = lay.scale * ss  # one pixel of a 600-pixel frame, in supersampled pixels
    pts = [tuple(int(v) for v in p) for p in to_pixel(snap.locs, size, snap.problem) * ss + ss // 2]
    base = node_radius(len(snap.locs), size, snap.problem)
    radii = _radii(snap, base) * ss
    drawn = look(snap)
    _draw_routes(pygame, surf, drawn.paths, pts, u)
    outline = max(1, round(1.2 * u))
    _draw_nodes(pygame, surf, snap, drawn, pts, radii, outline, u)
    half = round(base * ss * 1.35)  # the depot's half side
    for i in np.flatnonzero(snap.depots):
        draw.depot_square(pygame, surf, pts[i], half, outline)
    if drawn.current is not None:
        at_depot = bool(snap.depots[drawn.current])
        draw.current_mark(pygame, surf, pts[drawn.current], half * 1.45 if at_depot else radii[drawn.current], u,
                          filled=not at_depot)
    drawn_routes = [ROUTE_COLOURS[k % len(ROUTE_COLOURS)] for k, p in enumerate(drawn.paths) if len(p) > 1]
    _draw_header(pygame, surf, snap, lay, ss, note, drawn, drawn_routes or ROUTE_COLOURS[:1], legend)
    _draw_footer(pygame, surf, snap, lay, ss, sum(1 for p in drawn.paths if len(p) > 1))
    return pygame.transform.smoothscale(surf, (int(size[0]), int(size[1])))


def _paper(pygame, size: tuple[int, int], problem):
    """A supersampled surface of ``size``: the background with the framed paper on it."""
    ss = SUPERSAMPLE
    surf = pygame.Surface((int(size[0]) * ss, int(size[1]) * ss))
    surf.fill(BACKGROUND)
    px, py, pw, ph = paper_rect(size, problem)
    paper = pygame.Rect(px * ss, py * ss, pw * ss, ph * ss)
    pygame.draw.rect(surf, PAPER_COLOUR, paper)
    pygame.draw.rect(surf, FRAME_COLOUR, paper, width=ss)
    return surf


def _draw_routes(pygame, surf, paths: list[list[int]], pts: list, u: float) -> None:
    """Each path of more than one node in its route colour, with its arrowheads."""
    for k, (path, arrows) in enumerate(zip(paths, arrow_edges(paths))):
        if len(path) > 1:
            draw.route(pygame, surf, ROUTE_COLOURS[k % len(ROUTE_COLOURS)], [pts[i] for i in path], arrows, u)


def _node_colours(snap: Snapshot, drawn: Look, i: int) -> tuple:
    """(fill, edge) of node i: hollow, in the colour of the route that visited it, or plain."""
    if drawn.hollow[i]:  # not allowed now, or (once done) not visited
        return PAPER_COLOUR, UNAVAILABLE_COLOUR
    if drawn.route_of[i] >= 0 and snap.visited[i]:
        return ROUTE_COLOURS[drawn.route_of[i]], PAPER_COLOUR
    return NODE_COLOUR, PAPER_COLOUR


def _draw_nodes(pygame, surf, snap: Snapshot, drawn: Look, pts: list, radii: np.ndarray, outline: int,
                u: float) -> None:
    """Every node but the depots: its rim of several routes, its ``ring_by`` ring, its glyph (a ``kind_by``
    node a triangle), then its ``window_by`` bar."""
    ring_by = snap.problem.drawing.ring_by
    ring_field = snap.fields.get(ring_by) if ring_by else None
    for i, (p, r) in enumerate(zip(pts, radii)):
        if snap.depots[i]:
            continue
        fill, edge = _node_colours(snap, drawn, i)
        if i in drawn.split:  # a rim in the colours of the routes that served it, one sector each
            draw.sectors(pygame, surf, p, r + outline + max(2, round(2.4 * u)),
                         [ROUTE_COLOURS[k] for k in drawn.split[i]])
        if drawn.ringed[i]:
            draw.penalty_ring(pygame, surf, p, r, ring_field[i] / max(float(ring_field.max()), 1e-9), outline, u)
        if i == drawn.start:
            draw.diamond(pygame, surf, p, r, outline, fill, edge)
        elif snap.kind[i]:
            draw.triangle(pygame, surf, p, r, outline, fill, edge, hollow=bool(drawn.hollow[i]), u=u)
        elif drawn.hollow[i]:
            draw.hollow_disc(pygame, surf, p, r, outline, fill, edge, u)
        else:
            draw.disc(pygame, surf, p, r, outline, fill, edge)
        if snap.windows is not None:
            draw.window_bar(pygame, surf, p, r, snap.windows[i], UNAVAILABLE_COLOUR if drawn.hollow[i] else
                            fill, u)


def _status(snap: Snapshot) -> tuple[str, tuple]:
    """The header's status word and its colour."""
    if not snap.done:
        return "running", MUTED_TEXT_COLOUR
    return ("ended: invalid action", INVALID_COLOUR) if snap.invalid else ("done", DONE_COLOUR)


def _draw_header(pygame, surf, snap: Snapshot, lay: Layout, ss: int, note: str | None, drawn: Look,
                 route_colours: list, legend: list[LegendEntry] | None = None) -> None:
    """The title line (label, step, cost; the status on the right) and, below it, the legend or ``note``."""
    t = lay.text * ss
    left = round(14 * lay.scale * ss)
    width = surf.get_width() - 2 * left
    problem = snap.problem
    n = problem.num_customers(len(snap.locs))
    status, colour = _status(snap)
    badge = get_font(pygame, 19 * t, bold=True).render(status, True, colour)
    top = round(9 * t)
    surf.blit(badge, (surf.get_width() - left - badge.get_width(), top + round(2 * t)))
    (bold, name), (regular, rest) = fitted_text(pygame, [
        (f"{problem.label}-{n}", 21 * t, True),
        (header_text(snap), 21 * t, False)],
        width - badge.get_width() - round(16 * t))
    surf.blit(name, (left, top))
    surf.blit(rest, (left + name.get_width(), top + bold.get_ascent() - regular.get_ascent()))
    legend_y = round(38 * t)
    if note:
        (_, text), = fitted_text(pygame, [(note, LEGEND_PX * t, True)], width, NOTE_COLOUR)
        surf.blit(text, (left, legend_y))
        return
    _, px = legend_plan(problem.name, surf.get_width() // ss, surf.get_height() // ss)
    entries = frame_legend(snap, drawn) if legend is None else legend
    draw_legend(pygame, surf, entries, get_font(pygame, px), left, legend_y, width, round(19 * t), route_colours)


def _draw_footer(pygame, surf, snap: Snapshot, lay: Layout, ss: int, route_count: int) -> None:
    """The gauge: a bar filled to the problem's fraction, and its text (:func:`footer_text`)."""
    u = lay.scale * ss
    t = lay.text * ss
    fraction, _, reached = snap.gauge
    text = footer_text(snap)
    # the colour of the route in progress, GAUGE_DONE_COLOUR once the problem's threshold is reached
    colour = GAUGE_DONE_COLOUR if reached else ROUTE_COLOURS[(max(route_count, 1) - 1) % len(ROUTE_COLOURS)]
    top = surf.get_height() - round(lay.footer * ss)
    bar_h = round(12 * u)
    bar = pygame.Rect(round(14 * u), top + (round(lay.footer * ss) - bar_h) // 2, round(170 * u), bar_h)
    pygame.draw.rect(surf, GAUGE_BACK_COLOUR, bar, border_radius=bar_h // 2)
    filled = round(bar.width * float(np.clip(fraction, 0.0, 1.0)))
    if filled > 0:
        pygame.draw.rect(surf, colour, pygame.Rect(bar.x, bar.y, max(filled, bar_h), bar_h), border_radius=bar_h // 2)
    (_, label), = fitted_text(pygame, [(text, 17 * t, False)], surf.get_width() - bar.right - round(26 * u))
    surf.blit(label, (bar.right + round(12 * u), bar.centery - label.get_height() // 2))
