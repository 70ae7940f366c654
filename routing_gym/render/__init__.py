"""pygame drawing of a routing episode: ``human`` windows, ``rgb_array`` frames and PNG pictures.

Generic over the problem units: what differs between problems is what each declares in its
``drawing`` (:class:`routing_gym.problems.base.Drawing`: legend, how actions become paths, which
instance field sizes nodes and which rings them), its ``layout`` (where nodes are drawn) and its
``gauge(state)`` (the footer); the renderer re-states no rule (whether an episode ended on a masked
action is passed in by the env). One module per concern:

- :mod:`.style`: colours, scale constants and pygame's import (pygame is imported only when drawing);
- :mod:`.text`: fonts and the cost's text;
- :mod:`.scene`: what a frame shows of a state (:func:`snapshot`, :func:`look`);
- :mod:`.layout`: frame geometry, node positions (:func:`layout`, :func:`to_pixel`);
- :mod:`.legend`: legend entries, plan and drawing;
- :mod:`.primitives`: the shapes;
- :mod:`.frame`: one frame, step by step (:func:`render_surface`);
- :mod:`.window`: the :class:`Viewer` (window or arrays), PNG pictures, panels side by side.
"""
from __future__ import annotations

from ..problems.base import LEGEND_GLYPHS, LegendEntry
from .frame import render_surface
from .layout import NODE_REACH, Layout, frame_size, layout, node_radius, paper_rect, to_pixel
from .legend import NOT_VISITED, frame_legend, legend_entries, legend_plan, shared_legend
from .scene import Look, Snapshot, _radii, arrow_edges, footer_text, header_text, look, routes, snapshot  # noqa: F401
from .style import (BACKGROUND, BASE_SIZE, CURRENT_COLOUR, DEPOT_COLOUR, LEGEND_TEXT_COLOUR, MIN_SIZE, NODE_COLOUR,
                    PENALTY_COLOUR, ROUTE_COLOURS, SUPERSAMPLE, UNAVAILABLE_COLOUR, PygameNotInstalled, import_pygame)
from .text import _font_file, cost_text, format_cost, text_scale  # noqa: F401  (_font_file: read by tests)
from .window import Viewer, save_png, side_by_side, surface_to_array

__all__ = [
    "BACKGROUND", "BASE_SIZE", "CURRENT_COLOUR", "DEPOT_COLOUR", "LEGEND_GLYPHS", "LEGEND_TEXT_COLOUR", "MIN_SIZE",
    "NODE_COLOUR", "NODE_REACH", "NOT_VISITED", "PENALTY_COLOUR", "ROUTE_COLOURS", "SUPERSAMPLE", "UNAVAILABLE_COLOUR",
    "Layout", "LegendEntry", "Look", "PygameNotInstalled", "Snapshot", "Viewer", "arrow_edges", "cost_text",
    "footer_text", "format_cost", "frame_legend", "frame_size", "header_text", "import_pygame", "layout",
    "legend_entries", "legend_plan", "look", "node_radius", "paper_rect", "render_surface", "routes", "save_png",
    "shared_legend", "side_by_side", "snapshot", "surface_to_array", "text_scale", "to_pixel",
]
