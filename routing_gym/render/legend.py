"""The legend: which entries a frame shows, how they are laid out, and their glyphs.

Each entry is a glyph drawn as the plot draws it and its meaning (:class:`LegendEntry`). A frame shows
only the entries for what it shows (:func:`frame_legend`; panels side by side share one,
:func:`shared_legend`), in one row or, where a problem's widest legend does not fit in one, two, at one
font size for every frame of a problem and size (:func:`legend_plan`).
"""
from __future__ import annotations

import functools
import math

from ..problems import get_problem
from ..problems.base import LegendEntry
from .primitives import sectors
from .scene import Look, Snapshot, look
from .style import (BASE_SIZE, CURRENT_COLOUR, DEPOT_COLOUR, GAUGE_BACK_COLOUR, LEGEND_TEXT_COLOUR, NODE_COLOUR, PAPER_COLOUR,
                    PENALTY_COLOUR, ROUTE_COLOURS, SUPERSAMPLE, UNAVAILABLE_COLOUR, import_pygame)
from .text import font_px, get_font, text_scale

NOT_VISITED = "not visited"  # what a hollow node means once the episode is over
LEGEND_PX = 16  # the legend's text, in pixels of a 600-pixel frame (times ``text_scale``)
LEGEND_SHRINK = 0.88  # the legend keeps to one row where that takes shrinking its text to no less than this


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


def frame_legend(snap: Snapshot, drawn: Look | None = None) -> list[LegendEntry]:
    """The legend entries of the frame of ``snap`` (drawn as ``drawn``, by default :func:`look`): those of
    :func:`legend_entries` whose glyph the frame shows (text entries always), the hollow node's meaning
    ``not visited`` once the episode is over."""
    drawn = look(snap) if drawn is None else drawn
    shown = {"depot": snap.problem.has_depot, "start": drawn.start is not None, "current": drawn.current is not None,
             "routes": any(len(p) > 1 for p in drawn.paths), "unavailable": bool(drawn.hollow.any()),
             "size": drawn.sized, "ring": bool(drawn.ringed.any()), "split": bool(drawn.split),
             "kind": bool(snap.kind.any()), "window": snap.windows is not None}
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
    need = _legend_width(get_font(pygame, px), entries)
    if need * LEGEND_SHRINK <= width:
        fitted = px * min(1.0, width / need)
        while font_px(fitted) > 6 and _legend_width(get_font(pygame, fitted), entries) > width:
            fitted *= 0.98
        return 1, font_px(fitted)
    for _ in range(40):
        font = get_font(pygame, px)
        if len(_wrap(font, entries, width)) <= 2 or font_px(px) <= 6:
            break
        px *= 0.95
    return 2, font_px(px)


def _wrap(font, entries: list[LegendEntry], width: float) -> list[list[LegendEntry]]:
    """The entries in rows no wider than ``width`` (greedily; an entry wider than a row gets one)."""
    rows: list[list[LegendEntry]] = [[]]
    for entry in entries:
        if rows[-1] and _legend_width(font, rows[-1] + [entry]) > width:
            rows.append([])
        rows[-1].append(entry)
    return rows


def _glyph_width(glyph: str, px: int) -> int:
    return 0 if not glyph else round(px * (1.5 if glyph in ("routes", "size", "window") else 0.8))


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
        sectors(pygame, surf, (round(cx), cy), r * 1.25, list(ROUTE_COLOURS[:2]))  # served by routes 1 and 2
        pygame.draw.circle(surf, PAPER_COLOUR, (round(cx), cy), round(r * 0.95))
        pygame.draw.circle(surf, ROUTE_COLOURS[1], (round(cx), cy), round(r * 0.75))
    elif glyph == "kind":
        h = r * 1.3
        pygame.draw.polygon(surf, NODE_COLOUR, [(cx + h * math.cos(a), cy - h * math.sin(a))
                                                for a in (math.pi / 2, 7 * math.pi / 6, 11 * math.pi / 6)])
    elif glyph == "window":  # a track with its middle third filled
        w, h = _glyph_width(glyph, px), max(3, round(px * 0.28))
        pygame.draw.rect(surf, GAUGE_BACK_COLOUR, pygame.Rect(x, cy - h // 2, w, h))
        pygame.draw.rect(surf, NODE_COLOUR, pygame.Rect(round(x + w / 3), cy - h // 2, round(w / 3), h))
    elif glyph == "routes":
        colours = route_colours[:3]
        step = _glyph_width(glyph, px) / len(colours)
        for k, colour in enumerate(colours):
            pygame.draw.line(surf, colour, (round(x + k * step + px * 0.06), cy),
                             (round(x + (k + 1) * step - px * 0.06), cy), max(2, round(px / 6)))


def draw_legend(pygame, surf, entries: list[LegendEntry], font, x0: int, y: int, width: int, row_height: int,
                route_colours: list) -> None:
    """``entries`` from (``x0``, ``y``) in rows no wider than ``width``, ``row_height`` apart, in ``font``;
    the routes glyph in ``route_colours``."""
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
