"""Fonts and the numbers a frame writes.

Text is set in DejaVu Sans (matplotlib's copy where installed, else a system sans with a true bold
face, else pygame's font), cached per (pixel size, bold), and shrinks more slowly than the drawing in
small frames (:func:`text_scale`). A cost never reads ``-0.000`` (:func:`format_cost`) and reads ``-``
before the first action (:func:`cost_text`).
"""
from __future__ import annotations

import importlib.util
import os
from typing import Any

from .style import TEXT_COLOUR

_FONTS: dict[tuple[int, bool], Any] = {}
_FONT_FILES: dict[bool, str | None] = {}
# a sans-serif with a true bold face, the first found: matplotlib's copy of DejaVu Sans, where matplotlib is
# installed (the same letters on every machine), else one of the system's (fontconfig's names), else pygame's own
SYSTEM_FONTS = "dejavusans,liberationsans,arial,helvetica,freesans"


def text_scale(scale: float) -> float:
    """The scale of text for a frame whose lengths scale by ``scale`` (``min(W, H) / 600``): the same at 600
    pixels and above, shrinking more slowly below (``scale ** 0.6``) so that small frames stay readable."""
    return scale if scale >= 1 else scale ** 0.6


def format_cost(cost: float, digits: int = 3) -> str:
    """``cost`` with ``digits`` decimals, never as a negative zero (``-0.000`` reads ``0.000``)."""
    text = f"{float(cost):.{digits}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def cost_text(cost: float, steps: int) -> str:
    """The cost a header or caption shows after ``steps`` actions: ``-`` before the first (nothing has been
    built to cost yet), else :func:`format_cost`."""
    return format_cost(cost) if steps > 0 else "-"


def _matplotlib_font(bold: bool) -> str | None:
    """matplotlib's copy of DejaVu Sans (regular or bold), where matplotlib is installed."""
    spec = importlib.util.find_spec("matplotlib")
    for where in (spec.submodule_search_locations or []) if spec else []:
        candidate = os.path.join(where, "mpl-data", "fonts", "ttf", "DejaVuSans-Bold.ttf" if bold else "DejaVuSans.ttf")
        if os.path.isfile(candidate):
            return candidate
    return None


def _font_file(pygame, bold: bool) -> str | None:
    """The font file of the regular or bold face, or None for pygame's default font (a bold face only)."""
    if bold not in _FONT_FILES:
        path = _matplotlib_font(bold)
        if path is None:
            try:
                regular = pygame.font.match_font(SYSTEM_FONTS)
                path = pygame.font.match_font(SYSTEM_FONTS, bold=True) if bold else regular
                path = path if path and (not bold or path != regular) else None  # no synthetic bold
            except Exception:  # no font listing on this system
                path = None
        _FONT_FILES[bold] = path
    return _FONT_FILES[bold]


def font_px(px: float) -> int:
    return max(int(round(px)), 6)


def get_font(pygame, px: float, bold: bool = False):
    """A font of ``px`` pixels, regular or bold (a true bold face: pygame's synthetic bold spreads the
    letters apart)."""
    if not pygame.font.get_init():
        pygame.font.init()
        _FONTS.clear()
    key = (font_px(px), bold)
    if key not in _FONTS:
        _FONTS[key] = pygame.font.Font(_font_file(pygame, bold), key[0])
    return _FONTS[key]


def fitted_text(pygame, parts: list[tuple[str, float, bool]], width: float, colour=TEXT_COLOUR) -> list:
    """``parts`` (text, size, bold) rendered side by side as (font, surface), all smaller where together
    they would be wider than ``width``."""
    fonts = [get_font(pygame, px, bold) for _, px, bold in parts]
    need = sum(f.size(text)[0] for f, (text, _, _) in zip(fonts, parts))
    if need > width > 0:
        fonts = [get_font(pygame, px * width / need, bold) for _, px, bold in parts]
    return [(f, f.render(text, True, colour)) for f, (text, _, _) in zip(fonts, parts)]
