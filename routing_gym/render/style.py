"""The palette and scale every frame shares, and pygame's import.

Colours are fixed constants so that tests can read pixels. Lengths are given in pixels of a
:data:`BASE_SIZE` frame and scale with ``min(W, H)``; drawing happens at :data:`SUPERSAMPLE` times the
size and is smoothed down. pygame is imported only when something is drawn (:func:`import_pygame`).
"""
from __future__ import annotations

import os

from gymnasium.error import DependencyNotInstalled

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
GAUGE_DONE_COLOUR = (60, 150, 80)  # a gauge once the problem says its threshold is reached
DONE_COLOUR = (60, 150, 80)
INVALID_COLOUR = (200, 30, 30)
NOTE_COLOUR = (200, 30, 30)
ROUTE_COLOURS = (  # route k gets ROUTE_COLOURS[k % 10]; a single tour the first
    (31, 119, 180), (44, 160, 44), (148, 103, 189), (214, 39, 40), (23, 190, 207),
    (140, 86, 75), (227, 119, 194), (188, 189, 34), (57, 59, 121), (0, 128, 128),
)
SUPERSAMPLE = 2
BASE_SIZE = 600  # lengths are in pixels of a 600-pixel frame and scale with min(W, H)
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
