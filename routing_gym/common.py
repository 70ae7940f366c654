"""What the single env (:mod:`routing_gym.env`) and the vector env (:mod:`routing_gym.vector`) share:
the checks of their arguments and seeds, the observation space, seeding of instance generation and the
classes of registered sizes."""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from gymnasium.utils import seeding

INVALID_ACTION_MODES = ("terminate", "raise")
DEFAULT_NUM_NODES = 20
MAX_RENDER_SIDE = 8192  # pixels: a larger frame (8192 x 8192 x 3 is 200 MB) is refused


def check_render_size(size: tuple[int, int]) -> tuple[int, int]:
    """``size`` (``(W, H)``, already checked by the renderer's ``frame_size``), or ``ValueError`` when a
    side is above :data:`MAX_RENDER_SIDE`."""
    if max(size) > MAX_RENDER_SIDE:
        raise ValueError(f"render_size must be at most {MAX_RENDER_SIDE} pixels a side, got {size}")
    return size


def check_flag(value: Any, name: str) -> bool:
    """``value`` if it is a bool, else ``ValueError`` naming the argument (``compile="no"`` is not false)."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


COMPILE_MIN_TORCH = (2, 13)


def check_compile(value: Any) -> bool:
    """``compile``'s value (:func:`check_flag`); ``True`` needs torch :data:`COMPILE_MIN_TORCH` or newer, else a
    ``RuntimeError`` that says so: torch 2.11's compiler failed on these steps on CUDA (dynamo with an internal
    ``AssertionError`` or a state that was no state, inductor unable to lower the masks), where 2.13 compiles
    every problem's step and the tests compare it with the eager one."""
    flag = check_flag(value, "compile")
    have = tuple(int(part) for part in torch.__version__.split("+")[0].split(".")[:2])
    if flag and have < COMPILE_MIN_TORCH:
        need = ".".join(map(str, COMPILE_MIN_TORCH))
        raise RuntimeError(f"compile=True needs torch {need} or newer (this is torch {torch.__version__}, whose "
                           f"compiler failed on these steps); use compile=False, which steps the same dynamics eagerly")
    return flag


def check_choice(value: Any, name: str, choices: tuple) -> Any:
    """``value`` if it is one of ``choices``, else ``ValueError`` naming the argument and the choices."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")
    return value


def check_seed(seed: Any) -> None:
    """Refuse what Gymnasium's ``np_random`` refuses (``gymnasium.error.Error`` for a float, a string or a
    negative number), and a bool, which it would take as 0 or 1."""
    if isinstance(seed, (bool, np.bool_)):
        raise gym.error.Error(f"Seed must be a python integer, actual type: {type(seed)}")
    seeding.np_random(seed)


def seeded_generator(np_random: np.random.Generator) -> torch.Generator:
    """A CPU torch generator seeded from a Gymnasium ``np_random`` stream (one draw)."""
    return torch.Generator().manual_seed(int(np_random.integers(0, 2**63 - 1)))


def observation_space(problem, n_total: int) -> spaces.Dict:
    """The single-env observation space: float32 Boxes from the problem's bounds, node indices as
    ``Discrete(N)``, and ``action_mask`` as ``MultiBinary(N)`` (int8, 1 = allowed)."""
    entries: dict[str, spaces.Space] = {}
    for key, (shape, low, high) in problem.bounds(n_total).items():
        entries[key] = spaces.Box(low=np.float32(low), high=np.float32(high), shape=shape, dtype=np.float32)
    for key in problem.node_indices:
        entries[key] = spaces.Discrete(n_total)
    entries["action_mask"] = spaces.MultiBinary(n_total)
    return spaces.Dict(entries)


def resolve_num_nodes(env_cls, num_nodes: Any) -> int:
    """The ``num_nodes`` an env class is made with (single or vector): the argument, checked (default
    :data:`DEFAULT_NUM_NODES`); the class of a registered size (``routing/TSP-20``: ``fixed_num_nodes``)
    defaults to its size and refuses another with ``ValueError`` naming the id."""
    problem, fixed = env_cls.problem, env_cls.fixed_num_nodes
    if num_nodes is None:
        num_nodes = DEFAULT_NUM_NODES if fixed is None else fixed
    num_nodes = problem.check_num_nodes(num_nodes)
    if fixed is not None and num_nodes != fixed:
        raise ValueError(f"routing/{problem.label}-{fixed} has num_nodes={fixed}, got num_nodes={num_nodes}; "
                         f"make routing/{problem.label}-v0 for another size")
    return num_nodes


def sized_classes(classes: dict[str, type]) -> dict[str, type]:
    """The entry points of the registered sized ids: ``routing/{P}-{n}`` -> the problem's class (single or
    vector env) with ``fixed_num_nodes = n`` (``TSPEnv`` -> ``TSP20Env``), for each declared size."""
    out = {}
    for base in classes.values():
        label = base.problem.label
        for n in base.problem.sizes:
            out[f"routing/{label}-{n}"] = type(
                f"{label}{n}{base.__name__[len(label):]}", (base,),
                {"fixed_num_nodes": n, "__module__": base.__module__,
                 "__doc__": f"``routing/{label}-{n}``: :class:`{base.__name__}` with ``num_nodes`` fixed to {n}."})
    return out
