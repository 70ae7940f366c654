"""Frame output: the :class:`Viewer` an env draws with (a pygame window or arrays), PNG pictures,
frames as arrays and panels side by side."""
from __future__ import annotations

import numpy as np

from ..problems import get_problem
from .frame import render_surface
from .layout import frame_size
from .style import BACKGROUND, BASE_SIZE, FRAME_COLOUR, PAPER_COLOUR, TEXT_COLOUR, import_pygame
from .text import get_font, text_scale


def surface_to_array(surf) -> np.ndarray:
    """(H, W, 3) uint8 copy of a pygame surface."""
    pygame = import_pygame()
    return np.ascontiguousarray(pygame.surfarray.array3d(surf).transpose(1, 0, 2), dtype=np.uint8)


def _caption(pygame, caption: str, width: int, height: int):
    """A ``width`` x ``height`` strip with ``caption`` centred in bold (smaller where it would not fit)."""
    strip = pygame.Surface((width, height))
    strip.fill(PAPER_COLOUR)
    pygame.draw.line(strip, FRAME_COLOUR, (0, height - 1), (width, height - 1))
    font = get_font(pygame, height * 0.55, bold=True)
    text = font.render(caption, True, TEXT_COLOUR)
    if text.get_width() > width - 8:  # a long caption: smaller, so that it fits
        font = get_font(pygame, height * 0.55 * (width - 8) / text.get_width(), bold=True)
        text = font.render(caption, True, TEXT_COLOUR)
    strip.blit(text, ((width - text.get_width()) // 2, (height - text.get_height()) // 2))
    return strip


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
        out[:c, x:x + frame.shape[1]] = surface_to_array(_caption(pygame, caption, frame.shape[1], c))
        out[c:c + frame.shape[0], x:x + frame.shape[1]] = frame
        if x:
            out[:, x] = FRAME_COLOUR
        x += frame.shape[1]
    return out


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
