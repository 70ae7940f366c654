"""The shapes a frame is drawn with, on a pygame surface, in supersampled pixels.

Each function draws one shape at given pixel positions and sizes and reads nothing else: what a node
means (and so its colours) is decided by :func:`~routing_gym.render.scene.look`; ``u`` is one pixel of a
600-pixel frame in the surface's pixels, ``outline`` the width of the paper-coloured edge that keeps a
node apart from what lies under it.
"""
from __future__ import annotations

import math

from .style import CURRENT_COLOUR, DEPOT_COLOUR, GAUGE_BACK_COLOUR, PAPER_COLOUR, PENALTY_COLOUR


def sectors(pygame, surf, centre, radius: float, colours: list) -> None:
    """A disc of ``radius`` around ``centre`` cut into equal sectors, one per colour, the first on the left."""
    cx, cy, radius = float(centre[0]), float(centre[1]), float(radius)
    k = len(colours)
    for j, colour in enumerate(colours):
        a0, a1 = math.pi / 2 + 2 * math.pi * j / k, math.pi / 2 + 2 * math.pi * (j + 1) / k
        steps = max(4, round(24 / k))
        arc = [(cx + radius * math.cos(a0 + (a1 - a0) * s / steps), cy + radius * math.sin(a0 + (a1 - a0) * s / steps))
               for s in range(steps + 1)]
        pygame.draw.polygon(surf, colour, [(cx, cy), *arc])


def arrowhead(pygame, surf, colour, a, b, size: float) -> None:
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


def route(pygame, surf, colour, points: list, arrows: list[bool], u: float) -> None:
    """A polyline through ``points`` with an arrowhead at the middle of each edge that ``arrows`` marks."""
    pygame.draw.lines(surf, colour, False, points, max(2, round(2.6 * u)))
    for a, b, arrow in zip(points, points[1:], arrows):
        if arrow:
            arrowhead(pygame, surf, colour, a, b, 5.5 * u)


def penalty_ring(pygame, surf, p, r: float, rel: float, outline: int, u: float) -> None:
    """A ring in ``PENALTY_COLOUR`` around a node of radius ``r``, wider as ``rel`` (in [0, 1]) grows."""
    ring = max(1, round((1.0 + 3.0 * rel) * u))
    pygame.draw.circle(surf, PENALTY_COLOUR, p, round(r + ring + outline))


def diamond(pygame, surf, p, r: float, outline: int, fill, edge) -> None:
    """A tour's start node: a diamond of half-diagonal ``1.45 r`` in ``fill`` inside an ``edge`` outline."""
    d = round(r * 1.45)
    pygame.draw.polygon(surf, edge, [(p[0], p[1] - d - outline), (p[0] + d + outline, p[1]),
                                     (p[0], p[1] + d + outline), (p[0] - d - outline, p[1])])
    pygame.draw.polygon(surf, fill, [(p[0], p[1] - d), (p[0] + d, p[1]), (p[0], p[1] + d), (p[0] - d, p[1])])


def triangle(pygame, surf, p, r: float, outline: int, fill, edge, hollow: bool, u: float) -> None:
    """A node of a second kind: an upward triangle of the area of a disc of radius ``r`` (side ``2.7 r``) in
    ``fill`` inside an ``edge`` outline; where ``hollow``, an ``edge``-coloured outline around ``fill`` on a
    paper outline (as :func:`hollow_disc`)."""
    def points(h: float) -> list:  # circumradius h, centred on p
        return [(p[0] + h * math.cos(a), p[1] - h * math.sin(a))
                for a in (math.pi / 2, 7 * math.pi / 6, 11 * math.pi / 6)]

    h = 1.56 * r  # a triangle of side 2.7 r has about the area of the disc of radius r
    if hollow:
        pygame.draw.polygon(surf, PAPER_COLOUR, points(h + 2 * outline))
        pygame.draw.polygon(surf, edge, points(h))
        pygame.draw.polygon(surf, fill, points(max(1.0, h - 2 * max(2, round(1.6 * u)))))
    else:
        pygame.draw.polygon(surf, edge, points(h + 2 * outline))
        pygame.draw.polygon(surf, fill, points(h))


def hollow_disc(pygame, surf, p, r: float, outline: int, fill, edge, u: float) -> None:
    """A hollow node: an ``edge``-coloured circle of radius ``r`` around ``fill``, on a paper outline."""
    pygame.draw.circle(surf, PAPER_COLOUR, p, round(r + outline))
    pygame.draw.circle(surf, edge, p, round(r))
    pygame.draw.circle(surf, fill, p, max(1, round(r - max(2, round(1.6 * u)))))


def disc(pygame, surf, p, r: float, outline: int, fill, edge) -> None:
    """A plain node: a disc of radius ``r`` in ``fill`` inside an ``edge`` outline."""
    pygame.draw.circle(surf, edge, p, round(r + outline))
    pygame.draw.circle(surf, fill, p, round(r))


def depot_square(pygame, surf, p, half: int, outline: int) -> None:
    """The depot: a ``DEPOT_COLOUR`` square of side ``2 half + 1`` on a paper outline."""
    pygame.draw.rect(surf, PAPER_COLOUR, pygame.Rect(p[0] - half - outline, p[1] - half - outline,
                                                     2 * (half + outline) + 1, 2 * (half + outline) + 1))
    pygame.draw.rect(surf, DEPOT_COLOUR, pygame.Rect(p[0] - half, p[1] - half, 2 * half + 1, 2 * half + 1))


def current_mark(pygame, surf, p, r: float, u: float, filled: bool) -> None:
    """The current node: a ``CURRENT_COLOUR`` ring beyond radius ``r`` and, where ``filled``, the node itself
    in that colour."""
    pygame.draw.circle(surf, CURRENT_COLOUR, p, round(r + 5 * u), max(2, round(2.4 * u)))
    if filled:
        pygame.draw.circle(surf, CURRENT_COLOUR, p, round(r))


def window_bar(pygame, surf, p, r: float, window, colour, u: float) -> None:
    """A time window under a node of radius ``r``: a ``GAUGE_BACK_COLOUR`` track of width ``5 r`` (the
    horizon) on a paper outline, filled in ``colour`` from ``window[0]`` to ``window[1]`` (fractions)."""
    width, height, gap = 5 * r, max(3, round(4 * u)), max(2, round(2.5 * u))
    left, top = p[0] - width / 2, p[1] + r + gap
    pad = max(1, round(u))
    pygame.draw.rect(surf, PAPER_COLOUR, pygame.Rect(round(left) - pad, top - pad, round(width) + 2 * pad, height + 2 * pad))
    pygame.draw.rect(surf, GAUGE_BACK_COLOUR, pygame.Rect(round(left), top, round(width), height))
    start, end = round(left + width * float(window[0])), round(left + width * float(window[1]))
    pygame.draw.rect(surf, colour, pygame.Rect(start, top, max(end - start, max(1, round(u))), height))
