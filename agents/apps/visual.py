"""Watching policies build tours: record rollouts to GIF/MP4 or a window, and play an instance by hand.

A policy here is any callable ``policy(env, obs) -> int`` acting on the single Gymnasium env
(``obs`` is its observation dict, ``env`` the env, for what the observation lacks). Two are built in
(:func:`builtin_policy`): ``"random"`` and ``"nearest"`` (the heuristic of
:mod:`agents.references.heuristics`, as ``routing-gym eval --policy nearest`` and compare's table run it).

The command line (``routing-gym render`` / ``routing-gym play``) calls :func:`record` and :func:`play`.
"""
from __future__ import annotations

import errno
import importlib.util
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np

import routing_gym  # noqa: F401  (registers the envs)
from routing_gym.problems import get_problem
from routing_gym.render import (cost_text, format_cost, import_pygame, node_radius, render_surface, shared_legend,
                                side_by_side, snapshot, surface_to_array, to_pixel)

Policy = Callable[[gym.Env, dict], int]
FINAL_HOLD_S = 2.0  # how long a GIF/MP4 shows the finished solutions


# -- policies ------------------------------------------------------------------------------------------
def random_policy(seed: int | None = None) -> Policy:
    """Uniform over the nodes the mask allows, from its own ``numpy`` generator seeded with ``seed``."""
    rng = np.random.default_rng(seed)

    def policy(env, obs) -> int:
        return int(rng.choice(np.flatnonzero(obs["action_mask"])))

    policy.name = "random"
    return policy


_NEAREST: dict = {}  # problem unit -> its nearest neighbour on the single env


def nearest_policy(env, obs) -> int:
    """Nearest neighbour for the env's problem: :class:`agents.references.heuristics.NearestNeighbour` (its
    rules: the allowed node closest to the current one, see there) acting on the single env
    (:func:`agents.inference.rollout.env_policy`), so it takes the actions of ``routing-gym eval --policy
    nearest`` and of ``heuristic_tours(problem, instances, "nearest")``."""
    problem = env.unwrapped.problem
    if problem not in _NEAREST:
        from ..inference.rollout import env_policy
        from ..references.heuristics import NearestNeighbour

        _NEAREST[problem] = env_policy(NearestNeighbour(problem), "nearest")
    return _NEAREST[problem](env, obs)


nearest_policy.name = "nearest"
BUILTIN_POLICIES = {"random": lambda seed=0: random_policy(seed), "nearest": lambda seed=0: nearest_policy}


def builtin_policy(name: str, seed: int = 0) -> Policy:
    """The built-in policy ``"random"`` (seeded with ``seed``) or ``"nearest"``."""
    try:
        return BUILTIN_POLICIES[name](seed)
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; built-in ones are {sorted(BUILTIN_POLICIES)}") from None


def policy_name(policy, index: int = 0) -> str:
    return getattr(policy, "name", None) or getattr(policy, "__name__", None) or f"policy {index}"


def checkpoint_labels(specs: list[str]) -> list[str]:
    """Short labels, one per ``--policy`` value, that tell the policies apart: a built-in name or
    ``pretrained`` as it is; a checkpoint by its file name, extension included (so that a caption reads
    as a file), led by its folder and by as many more as it takes to differ from the other checkpoints'
    labels (``runs/a/last.pt``: ``a/last.pt``; with ``x/a/last.pt``, ``runs/a/last.pt`` and
    ``x/a/last.pt``). The same file given twice keeps one label (``record`` numbers repeated names)."""
    paths = [None if spec in BUILTIN_POLICIES or spec == "pretrained"
             else os.path.normpath(spec).replace("\\", "/").split("/") for spec in specs]
    labels = []
    for spec, parts in zip(specs, paths):
        if parts is None:
            labels.append(spec)
            continue
        others = [q for q in paths if q is not None and q != parts]
        k = min(2, len(parts) - (parts[0] == ""))  # the file and its folder (not the root's empty name)
        while k < len(parts) and any(q[-k:] == parts[-k:] for q in others):
            k += 1
        labels.append("/".join(parts[-k:]))
    return labels


# -- episodes ------------------------------------------------------------------------------------------
def make_env(problem_name: str, num_nodes: int, render_mode: str | None = None,
             size: tuple[int, int] = (600, 600), **variant: Any) -> gym.Env:
    return gym.make(f"routing/{get_problem(problem_name).label}-v0", num_nodes=num_nodes, render_mode=render_mode,
                    render_size=tuple(size), **variant)


class Episode(NamedTuple):
    frames: list  # S + 1 frames (H, W, 3) uint8: before each of the S steps, then the finished solution
    costs: list  # S + 1 floats, the cost so far at each frame (the last is the episode's cost)
    tour: list  # the S actions taken
    states: list  # with ``states=True``, S + 1 (state, tour so far, cost so far, invalid): what each frame draws


FRAME_CHOICES = ("all", "last", "none")


def run_episode(policy: Policy, problem_name: str, num_nodes: int, seed: int, size=(600, 600), *,
                frames: str = "all", states: bool = False, **variant: Any) -> Episode:
    """One episode of ``policy`` on the instance of ``seed`` (``env.reset(seed=seed)``), keeping
    ``frames``: ``"all"`` (S + 1), ``"last"`` (the finished solution only) or ``"none"``; with ``states``,
    what every frame draws (to draw it again, e.g. with another legend)."""
    if frames not in FRAME_CHOICES:
        raise ValueError(f"frames must be one of {FRAME_CHOICES}, got {frames!r}")
    env = make_env(problem_name, num_nodes, None if frames == "none" else "rgb_array", size, **variant)
    try:
        obs, _ = env.reset(seed=seed)
        shots, costs, tour, cost, done = [env.render()] if frames == "all" else [], [0.0], [], 0.0, False
        core, kept = env.unwrapped, []
        if states:
            kept.append((core.state, [], -float(core._return), core._invalid))  # what env.render() draws
        while not done:
            action = int(policy(env, obs))
            obs, reward, terminated, truncated, info = env.step(action)
            tour.append(action)
            cost -= reward
            done = terminated or truncated
            costs.append(float(info.get("cost", cost)) if done else cost)
            if frames == "all" or (frames == "last" and done):
                shots.append(env.render())
            if states:
                kept.append((core.state, list(tour), -float(core._return), core._invalid))
        return Episode(shots, costs, tour, kept)
    finally:
        env.close()


MAX_RECORD_NODES = 1000  # customers (TSP: nodes) a recording takes


def record(problem_name: str, num_nodes: int, policies: list, seed: int, out: str | None, fps: int = 4,
           size: tuple[int, int] = (600, 600), **variant: Any) -> dict[str, float]:
    """Roll out each policy on the same instance (``reset(seed=seed)``) and save or show the frames.

    An episode of S steps gives S + 1 frames: frame t (t < S) shows the state in which the policy chose
    its (t+1)-th action, frame S the finished solution (shown for ``FINAL_HOLD_S`` seconds in a file,
    still one frame). With several policies the frames are placed side by side under captions with each
    policy's name and cost (so far, then final), the panels of a frame under one legend
    (:func:`routing_gym.render.shared_legend`); a shorter episode repeats its last frame, so the
    recording has max(S) + 1 frames. A ``.png`` is the last of these frames: the finished solutions.

    Args:
        problem_name: a problem's name in the registry (:data:`routing_gym.problems.PROBLEMS`).
        num_nodes: customers (TSP: nodes).
        policies: callables ``policy(env, obs) -> int``, named by their ``name`` attribute (else
            ``__name__``).
        seed: the instance's seed.
        out: ``*.gif`` (Pillow, else imageio), ``*.mp4`` (imageio-ffmpeg), ``*.png`` (the final frame
            only: pygame), or None to play the frames in a window (held at the end until it is closed, or
            Esc / Q is pressed).
        fps: frames per second.
        size: (W, H) of one policy's frame.
        variant: problem options passed to ``gym.make`` (those the problem declares in ``variants``).

    Returns:
        ``{policy name: cost}``; a repeated name gets ``#2``, ``#3``, ...

    Raises:
        ValueError: no policies, or ``num_nodes`` above :data:`MAX_RECORD_NODES` (a frame per step, each
            drawing every node: the work grows as N^2).
    """
    if not policies:
        raise ValueError("record needs at least one policy")
    if num_nodes > MAX_RECORD_NODES:
        raise ValueError(f"--num-nodes {num_nodes}: a recording draws a frame per step, each with every node; "
                         f"it is limited to {MAX_RECORD_NODES} nodes (it would take minutes beyond)")
    picture = out is not None and check_writer(str(out)) == "pygame"  # a .png: the final frame only
    single = len(policies) == 1
    names, runs = [], []
    for i, policy in enumerate(policies):
        name = policy_name(policy, i)
        names.append(name if name not in names else f"{name}#{names.count(name) + 1}")
        runs.append(run_episode(policy, problem_name, num_nodes, seed, size, states=not single,
                                frames=("last" if picture else "all") if single else "none", **variant))
    if single:
        frames = runs[0].frames
    else:
        length = max(len(r.states) for r in runs)
        frames = [compare_frame(problem_name, names, runs, t, size) for t in range(length - 1 if picture else 0, length)]
    if out is None:
        show(frames, fps, title=f"routing-gym: {get_problem(problem_name).label}-{num_nodes}")
    elif picture:
        write_png(frames[-1], str(out))
    else:
        write_video(frames, str(out), fps)
    return {name: run.costs[-1] for name, run in zip(names, runs)}


def compare_frame(problem_name: str, names: list[str], runs: list[Episode], t: int, size) -> np.ndarray:
    """Frame ``t`` of episodes recorded with ``states``, side by side under captions (name, cost so far or
    final) and one legend (:func:`routing_gym.render.shared_legend`); a finished episode shows its last."""
    shown = [run.states[min(t, len(run.states) - 1)] for run in runs]
    legend = shared_legend([snapshot(problem_name, *s) for s in shown])
    panels = [surface_to_array(render_surface(problem_name, state, tour, cost, size, invalid=invalid, legend=legend))
              for state, tour, cost, invalid in shown]
    captions = []
    for name, run in zip(names, runs):
        k = min(t, len(run.states) - 1)
        final = " (final)" if k == len(run.states) - 1 else ""
        captions.append(f"{name}: cost {cost_text(run.costs[k], k)}{final}")
    return side_by_side(panels, captions)


# -- windows ---------------------------------------------------------------------------------------------
HEADLESS_DRIVERS = ("dummy", "offscreen")  # SDL video drivers that open no window


class DisplayUnavailable(OSError):
    """A window was asked for where there is no display to open it on."""


def display_problem() -> str | None:
    """Why no window can be opened here (``SDL_VIDEODRIVER`` set to a headless driver, or on Linux
    neither ``DISPLAY`` nor ``WAYLAND_DISPLAY`` set with no other driver chosen), or None if one can."""
    driver = os.environ.get("SDL_VIDEODRIVER", "").strip().lower()
    if driver in HEADLESS_DRIVERS:
        return f"SDL_VIDEODRIVER is {driver!r}"
    if sys.platform.startswith("linux") and driver in ("", "x11", "wayland") \
            and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        return "neither DISPLAY nor WAYLAND_DISPLAY is set"
    return None


def require_display(what: str, hint: str) -> None:
    """``DisplayUnavailable`` saying that ``what`` needs a window, why there is none, and ``hint``."""
    why = display_problem()
    if why is not None:
        raise DisplayUnavailable(f"{what} needs a display, and there is none ({why}); {hint}")


# -- output ----------------------------------------------------------------------------------------------
def check_writer(path: str) -> str:
    """The library that will write ``path`` (``"pillow"``, ``"imageio"`` or ``"imageio-ffmpeg"``; ``"pygame"``
    for a ``.png``, a still picture), or an error saying what to install."""
    ext = os.path.splitext(path)[1].lower()
    if ext == ".gif":
        for module, lib in (("PIL", "pillow"), ("imageio", "imageio")):
            if importlib.util.find_spec(module) is not None:
                return lib
        raise ModuleNotFoundError("writing a GIF needs Pillow: pip install pillow")
    if ext == ".mp4":
        if importlib.util.find_spec("imageio_ffmpeg") is None:
            raise ModuleNotFoundError("writing an MP4 needs imageio-ffmpeg: pip install imageio-ffmpeg")
        return "imageio-ffmpeg"
    if ext == ".png":
        return "pygame"
    raise ValueError(f"unknown format {ext or path!r}: use .gif or .mp4, or .png for the final frame")


def written_atomically(path: str, write: Callable[[str], Any]) -> str:
    """``write(name)`` to a temporary name beside ``path`` (its suffix kept: the writers choose the format
    by it), then renamed into place: a failed write (a full disk) leaves any earlier ``path`` whole and no
    partial file, and is an ``OSError`` naming ``path`` (the writers' own errors, pygame's and ffmpeg's
    RuntimeErrors, included). Returns ``path``."""
    target = Path(path)
    tmp = target.with_name(f"{target.stem}.tmp{target.suffix}")
    try:
        write(str(tmp))
        os.replace(tmp, target)
    except BaseException as e:
        tmp.unlink(missing_ok=True)
        if isinstance(e, OSError) and e.errno is not None:
            raise type(e)(e.errno, e.strerror or str(e), str(path)) from None
        if isinstance(e, RuntimeError):
            raise OSError(errno.EIO, f"cannot write the picture ({e})", str(path)) from None
        raise
    return path


def write_png(frame: np.ndarray, path: str) -> str:
    """Write one (H, W, 3) uint8 frame to ``path`` as PNG (:func:`written_atomically`); returns the path."""
    pygame = import_pygame()
    surface = pygame.surfarray.make_surface(np.ascontiguousarray(frame.transpose(1, 0, 2)))
    return written_atomically(path, lambda name: pygame.image.save(surface, name))


def write_video(frames: list[np.ndarray], path: str, fps: int = 4) -> str:
    """Write (H, W, 3) uint8 frames to ``path`` (.gif or .mp4), one image per frame, the last held for
    ``FINAL_HOLD_S`` seconds (a .png: the last frame only); returns the path."""
    lib = check_writer(path)
    if lib == "pygame":  # a still picture: the last frame
        return write_png(frames[-1], path)
    return written_atomically(path, lambda name: write_frames(frames, name, lib, fps))


def write_frames(frames: list[np.ndarray], path: str, lib: str, fps: int) -> None:
    """:func:`write_video`'s writing, by the library ``lib`` (:func:`check_writer`)."""
    step_ms = round(1000 / fps)
    hold_ms = max(step_ms, round(FINAL_HOLD_S * 1000))
    if lib == "pillow":
        from PIL import Image

        images = [Image.fromarray(f) for f in frames]
        images[0].save(path, save_all=True, append_images=images[1:], loop=0, optimize=False,
                       duration=[step_ms] * (len(frames) - 1) + [hold_ms], disposal=1)
    elif lib == "imageio":
        import imageio

        imageio.mimsave(path, frames, duration=[step_ms / 1000] * (len(frames) - 1) + [hold_ms / 1000], loop=0)
    else:
        import imageio_ffmpeg

        h, w = frames[0].shape[:2]
        pad = ((0, h % 2), (0, w % 2), (0, 0))  # yuv420p wants even sides
        writer = imageio_ffmpeg.write_frames(path, (w + w % 2, h + h % 2), fps=fps, macro_block_size=2)
        writer.send(None)
        repeats = [1] * (len(frames) - 1) + [max(1, round(FINAL_HOLD_S * fps))]
        for frame, k in zip(frames, repeats):
            data = np.ascontiguousarray(np.pad(frame, pad, mode="edge"))
            for _ in range(k):
                writer.send(data)
        writer.close()


def _quit_requested(pygame, event) -> bool:
    return event.type == pygame.QUIT or (event.type == pygame.KEYDOWN and event.key in (pygame.K_ESCAPE, pygame.K_q))


def show(frames: list[np.ndarray], fps: int = 4, title: str = "routing-gym", hold: bool = True) -> None:
    """Play frames in a window at ``fps``; then, with ``hold``, keep the last one up until the window is
    closed (or Esc / Q). Closing the window earlier stops at once."""
    pygame = import_pygame()
    pygame.display.init()
    try:
        h, w = frames[0].shape[:2]
        window = pygame.display.set_mode((w, h))
        pygame.display.set_caption(title)
        clock = pygame.time.Clock()
        t = 0
        while True:
            if any(_quit_requested(pygame, e) for e in pygame.event.get()):
                return
            window.blit(pygame.surfarray.make_surface(frames[t].transpose(1, 0, 2)), (0, 0))
            pygame.display.flip()
            clock.tick(fps)
            if t == len(frames) - 1 and not hold:
                return
            t = min(t + 1, len(frames) - 1)
    finally:
        pygame.display.quit()


# -- playing by hand -------------------------------------------------------------------------------------
def node_at(click_xy, locs, size: tuple[int, int], radius: float, problem=None) -> int | None:
    """The node drawn nearest the pixel ``click_xy`` in a frame of ``size`` drawing ``problem``, if it lies
    within ``radius`` pixels of it, else None. ``locs`` (N, 2) in [0, 1]^2, placed as :func:`to_pixel` does."""
    pix = to_pixel(locs, size, problem)
    d = np.hypot(pix[:, 0] - float(click_xy[0]), pix[:, 1] - float(click_xy[1]))
    i = int(np.argmin(d))
    return i if d[i] <= radius else None


def refusal(problem, node: int, visited: np.ndarray, depots: np.ndarray | None = None) -> str:
    """Why a click on the masked ``node`` is refused (shown in the header in place of the legend): the
    problem's ``drawing.depot_refusal`` / ``node_refusal``, or that the node is already visited.
    ``depots`` (N,) bool: the depots (default: node 0 where the problem has one)."""
    problem = get_problem(problem)
    if (depots[node] if depots is not None else problem.has_depot and node == 0):
        return problem.drawing.depot_refusal
    if visited[node]:
        return f"node {node} is already visited"
    return problem.drawing.node_refusal.format(i=node)


def play(problem_name: str, num_nodes: int, seed: int, opponent: Policy | None = None,
         size: tuple[int, int] = (600, 600), **variant: Any) -> dict[str, float | None]:
    """A window in which a person builds a tour by clicking nodes, then compares it with ``opponent``.

    A click picks the node drawn nearest to it (within a few node radii); a node the mask forbids
    refuses the click with a message saying why. Backspace takes the last action back. When the tour is
    finished the window shows it beside ``opponent``'s (default: ``nearest``) on the same instance
    (``reset(seed=seed)``), each with its cost. The window closes with its close button, Esc or Q.

    Returns:
        ``{"you": your cost (None if unfinished), opponent's name: its cost}``.
    """
    problem_name = problem_name.lower()
    opponent = opponent or nearest_policy
    opp_name = policy_name(opponent, 1)
    opp = run_episode(opponent, problem_name, num_nodes, seed, size, frames="last", **variant)
    env = make_env(problem_name, num_nodes, None, size, **variant)
    core = env.unwrapped
    pygame = import_pygame()
    pygame.display.init()
    try:
        window = pygame.display.set_mode(size)
        pygame.display.set_caption(f"routing-gym play: {core.problem.label}-{num_nodes} (seed {seed})")
        clock = pygame.time.Clock()
        tour: list[int] = []
        (obs, cost), message, dirty = _replay(env, seed, tour), "", True
        locs = core.problem.layout(core.state.instance)[0].numpy()  # where the frame draws the nodes
        radius = max(2.5 * node_radius(len(locs), size, core.problem), 12.0)
        while True:
            for event in pygame.event.get():
                if _quit_requested(pygame, event):
                    return {"you": cost if bool(core.state.done[0]) else None, opp_name: opp.costs[-1]}
                if event.type == pygame.KEYDOWN and event.key == pygame.K_BACKSPACE and tour:
                    tour.pop()
                    (obs, cost), message, dirty = _replay(env, seed, tour), "", True
                elif event.type == pygame.MOUSEBUTTONDOWN and event.button == 1 and not bool(core.state.done[0]):
                    node = node_at(event.pos, locs, size, radius, core.problem)
                    if node is None:
                        message = "click on a node"
                    elif not obs["action_mask"][node]:
                        depots = obs[core.problem.depots_by] > 0 if core.problem.depots_by else None
                        message = refusal(core.problem, node, core.state.visited[0].numpy(), depots)
                    else:
                        obs, reward, _, _, _ = env.step(node)
                        tour.append(node)
                        cost -= reward
                        message = ""
                    dirty = True
            if dirty:
                frame = _board(problem_name, core, tour, cost, size, message, opp, opp_name)
                if window.get_size() != (frame.shape[1], frame.shape[0]):
                    window = pygame.display.set_mode((frame.shape[1], frame.shape[0]))
                window.blit(pygame.surfarray.make_surface(frame.transpose(1, 0, 2)), (0, 0))
                pygame.display.flip()
                dirty = False
            clock.tick(30)
    finally:
        env.close()
        pygame.display.quit()


def _replay(env, seed: int, tour: list[int]) -> tuple[dict, float]:
    """Reset to the instance of ``seed`` and take ``tour``'s actions: (observation, cost so far)."""
    obs, _ = env.reset(seed=seed)
    cost = 0.0
    for a in tour:
        obs, reward, _, _, _ = env.step(a)
        cost -= reward
    return obs, cost


def _board(problem_name: str, core, tour: list[int], cost: float, size, message: str, opp: Episode,
           opp_name: str) -> np.ndarray:
    """The frame to show: the board with a message line while playing, both solutions once done."""
    surf = render_surface(problem_name, core.state, tour, cost, size, note=message or None)
    if not bool(core.state.done[0]):
        return surface_to_array(surf)
    mine, theirs = cost, opp.costs[-1]
    verdict = "tie" if abs(mine - theirs) < 1e-6 else ("you win" if mine < theirs else f"{opp_name} wins")
    return side_by_side([surface_to_array(surf), opp.frames[-1]],
                        [f"you: cost {format_cost(mine)} ({verdict})", f"{opp_name}: cost {format_cost(theirs)}"])
