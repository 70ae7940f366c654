"""Frame geometry: where the bands, the paper and each node lie in a frame of (W, H) pixels.

A frame has three bands, laid out by :func:`layout` for any size: a header (the title line and the
legend, one row or two: :func:`~routing_gym.render.legend.legend_plan`), the framed paper (the largest
square that fits: the unit square, y pointing up as in a plot, inside a margin that holds a node on its
edge whole; every node position goes through :func:`to_pixel`) and a footer (the problem's gauge).
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from ..problems import get_problem
from .legend import legend_plan
from .style import BASE_SIZE, MIN_SIZE
from .text import text_scale

# how far a node's glyphs reach beyond its centre, at most: NODE_REACH * side + RING_REACH * scale pixels (the
# start diamond of the largest node, 1.45 * 1.4 * 8 / 470 of the side; the current node's ring and a
# ``ring_by`` ring, up to 6.2 pixels of a 600-pixel frame, beyond the node), plus a clear gap of at least
# CLEAR_GAP pixels before the frame line
NODE_REACH = 0.035
RING_REACH = 10.0
CLEAR_GAP = 2.0


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
