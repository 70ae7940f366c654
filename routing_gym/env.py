"""Gymnasium single environments: one instance (batch 1 of the problem core), numpy in and out."""
from __future__ import annotations

import textwrap
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces

from .common import (INVALID_ACTION_MODES, check_choice, check_compile, check_render_size, check_seed, observation_space,
                     resolve_num_nodes, seeded_generator, sized_classes)
from .problems import PROBLEMS, step
from .problems.base import fixed_layout_step
from .render import frame_size

# the eager step without autograd bookkeeping (the single env's state never needs gradients); the compiled one
# (:func:`fixed_layout_step`) records none either, and runs without the mode's cost of entering and leaving
eager_step = torch.inference_mode()(step)


def padded_tour(actions: list[int], length: int) -> np.ndarray:
    """``info["tour"]``: the actions taken, in order, as an int64 array of the fixed ``length`` S (the most
    actions an episode can take) padded with -1, so that every episode's info has one shape (replay buffers
    that store infos stack them). The tour itself is ``tour[tour >= 0]``."""
    tour = np.full(length, -1, dtype=np.int64)
    tour[:len(actions)] = actions
    return tour


class RoutingEnv(gym.Env):
    """Base of the routing envs: a thin view over a problem's batched core, with batch 1.

    One subclass per problem unit (:func:`env_class`) sets ``problem`` and the docstring in Gymnasium's
    template, assembled from what the problem declares; a subclass of that per registered size (``TSP20Env``,
    the entry point of ``routing/TSP-20``, :func:`~routing_gym.common.sized_classes`) sets ``fixed_num_nodes``.
    """

    metadata = {"render_modes": ["human", "rgb_array"], "render_fps": 4}
    problem: Any = None
    fixed_num_nodes: int | None = None  # the size of a registered sized id; None: any num_nodes

    def __init__(self, num_nodes: int | None = None, *, render_mode: str | None = None,
                 invalid_action: str = "terminate", render_size: tuple[int, int] = (600, 600), compile: bool = False,
                 **variant: Any):
        if self.problem is None:
            raise TypeError("RoutingEnv is the base class; make an env with gym.make('routing/TSP-20') or env_class()")
        num_nodes = resolve_num_nodes(type(self), num_nodes)
        check_choice(invalid_action, "invalid_action", INVALID_ACTION_MODES)
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']} or None, got {render_mode!r}")
        self.num_nodes = int(num_nodes)
        self.n_total = self.problem.num_nodes_total(self.num_nodes)
        self.invalid_action = invalid_action
        self.render_mode = render_mode
        self.render_size = check_render_size(frame_size(render_size))
        self.compile = check_compile(compile)
        self._step = eager_step  # compile=True: the step compiled for each episode's state layout, set by reset()
        self._variant = self.problem.check_variant(variant)
        self.observation_space = observation_space(self.problem, self.n_total)
        self.action_space = spaces.Discrete(self.n_total)
        self._action_tensors = tuple(torch.tensor([i]) for i in range(self.n_total))  # (1,) int64, never written
        self._terminated = self._invalid = False
        self.state = None
        self._static: dict[str, np.ndarray] = {}
        self._tour: list[int] = []
        self._return = 0.0
        self._viewer = None

    # -- core view -------------------------------------------------------------------------------
    def _observation(self) -> dict[str, np.ndarray]:
        obs = {key: value.copy() for key, value in self._static.items()}
        for key, value in self.problem.observe(self.state).items():
            if key in self._static:
                continue
            if key in self.problem.node_indices:
                obs[key] = np.int64(value.item())
            else:
                obs[key] = value.numpy()[0].astype(np.float32)  # astype copies
        obs["action_mask"] = self.state.mask.numpy()[0].astype(np.int8)
        return obs

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Start an episode on a fresh random instance, or on ``options["instance"]``.

        Args:
            seed: seeds ``self.np_random``, from which the instance generator's seed is drawn.
            options: ``{"instance": ...}``, a user instance: a dict keyed as the observation (``locs`` and
                the problem's per-node fields; OP also ``max_length``), or the problem's ``Instance`` of
                batch 1; both validated alike, ``ValueError`` names a bad field.
        """
        if seed is not None:
            check_seed(seed)
        super().reset(seed=seed)
        options = dict(options or {})
        data = options.pop("instance", None)
        if options:
            raise ValueError(f"unknown reset option(s) {sorted(options)}; the only option is 'instance'")
        if data is None:
            instance = self.problem.generate(1, self.num_nodes, generator=seeded_generator(self.np_random),
                                             **self._variant)
        else:
            instance = self.problem.instance_from(data, batched=isinstance(data, self.problem.Instance), device="cpu")
            if instance[0].shape[0] != 1:
                raise ValueError(f"options['instance'] holds {instance[0].shape[0]} instances; a single env plays one")
            if self.problem.n_total_of(instance) != self.n_total:
                raise ValueError(f"instance field '{instance._fields[0]}' has {self.problem.n_total_of(instance)} nodes; "
                                 f"this env has {self.n_total} (make one with num_nodes={self.problem.size_of(instance)})")
        self.state = self.problem.reset(instance)
        if self.compile:
            self.state, self._step = fixed_layout_step(self.problem, self.state)
        self._static = {key: value[0].numpy().astype(np.float32, copy=True)
                        for key, value in instance._asdict().items()
                        if key in self.observation_space.spaces and key not in self.problem.dynamic_fields}
        self._tour = []
        self._return = 0.0
        self._terminated = self._invalid = False
        if self.render_mode == "human":
            self.render()
        return self._observation(), {}

    def step(self, action):
        if self.state is None:
            raise RuntimeError("call reset() before step()")
        if self._terminated:
            raise RuntimeError("the episode has ended (terminated); call reset() before stepping again")
        a = self._as_action(action)
        if self.invalid_action == "raise" and not bool(self.state.mask[0, a]):
            allowed = torch.nonzero(self.state.mask[0]).flatten().tolist()
            raise ValueError(f"action {a} is masked in this state; allowed actions: {allowed}")
        self.state, reward, invalid = self._step(self.problem, self.state, self._action_tensors[a])
        r = reward.item()
        self._return += r
        terminated = self._terminated = self.state.done.item()
        info: dict[str, Any] = {}
        if invalid.item():
            self._invalid = True
            info["invalid_action"] = True
        else:
            self._tour.append(a)
        if terminated:
            info.setdefault("invalid_action", False)
            info["cost"] = np.float64(-self._return)
            info["tour"] = padded_tour(self._tour, self.problem.max_steps(self.n_total))
        if self.render_mode == "human":
            self.render()
        return self._observation(), r, terminated, False, info

    def _as_action(self, action) -> int:
        if isinstance(action, (int, np.integer)) and not isinstance(action, bool) and 0 <= action < self.n_total:
            return int(action)  # the common case, without the array round trip below
        arr = np.asarray(action)
        if arr.size != 1 or not np.issubdtype(arr.dtype, np.integer) and not (
                np.issubdtype(arr.dtype, np.floating) and float(arr.reshape(-1)[0]).is_integer()):
            raise ValueError(f"action must be one node index (an integer), got {action!r}")
        a = int(arr.reshape(-1)[0])
        if not 0 <= a < self.n_total:
            raise ValueError(f"action {a} is outside Discrete({self.n_total}) (node indices 0..{self.n_total - 1})")
        return a

    def action_masks(self) -> np.ndarray:
        """The current action mask as bools (N,), True = allowed: sb3-contrib's ``MaskablePPO`` calls it."""
        if self.state is None:
            raise RuntimeError("call reset() before action_masks()")
        return self.state.mask[0].numpy().astype(bool)

    # -- rendering ---------------------------------------------------------------------------------
    def render(self):
        if self.render_mode is None:
            gym.logger.warn("render() called without a render_mode; make the env with render_mode='rgb_array' "
                            "or 'human'")
            return None
        if self.state is None:
            raise gym.error.ResetNeeded("call reset() before render()")
        from .render import Viewer

        if self._viewer is None:
            self._viewer = Viewer(self.problem, render_mode=self.render_mode, fps=self.metadata["render_fps"],
                                  size=self.render_size)
        return self._viewer.draw(self.state, self._tour, -self._return, invalid=self._invalid)

    def close(self):
        if self._viewer is not None:
            self._viewer.close()
            self._viewer = None

    def __getstate__(self):
        """Pickled without the compiled step and the window, which are made anew when unpickled."""
        return {**self.__dict__, "_step": None, "_viewer": None}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._step = eager_step
        if self.compile and self.state is not None:
            self.state, self._step = fixed_layout_step(self.problem, self.state)


ENV_TEMPLATE = """{doc.summary}

## Description
{description}

## Action Space
``Discrete({n_symbol})``: {doc.action}
Actions forbidden by ``action_mask`` follow ``invalid_action`` (see Arguments). Stepping after the
episode ended raises ``RuntimeError``.

## Observation Space
``Dict``{n_note}:

| key | dtype | shape | meaning |
|---|---|---|---|
{rows}
| ``action_mask`` | int8 (``MultiBinary(N)``) | (N,) | 1 = allowed |

{mask}

## Rewards
{rewards}

A masked action (with ``invalid_action="terminate"``, the default) ends the episode with the reward
``-(3 * (S - step) + left_out)``: S is the most actions an episode can take (the ``step`` bound), ``step``
the actions taken so far, and ``left_out`` what ending now would charge for the unvisited nodes (their
penalties where the problem has any, else 0). It is finite, above the cost of any feasible way to finish,
and drops by more than each valid step costs, so progress always pays: an agent that learns without the
mask never gains by failing early. Masking (``action_mask``, ``action_masks()``) remains the recommended
path.

## Starting State
{starting_state}

## Episode End
{doc.episode_end} (or on a masked action); never truncates.
When the episode ends, ``info`` holds ``cost`` (float, minus the episode's return: the sum of the
rewards is exactly ``-cost``), ``invalid_action`` (bool) and ``tour``: the actions taken, in order (not
the masked one), as an int64 array of shape (S,) padded with -1, one shape for every episode so that
replay buffers can store it; the tour itself is ``info["tour"][info["tour"] >= 0]``.

## Arguments
- ``num_nodes``: {nodes}, default 20; {ids} fix it (another value raises ``ValueError``),
  ``routing/{label}-v0`` takes it.
{variants}- ``render_mode``: ``None``, ``"human"`` (a pygame window at ``metadata["render_fps"]``) or
  ``"rgb_array"`` ((H, W, 3) uint8 frames).
- ``invalid_action``: ``"terminate"`` (default; a masked action ends the episode with the reward of
  Rewards and ``info["invalid_action"] = True``) or ``"raise"`` (``ValueError`` naming the allowed
  actions; the state is unchanged).
- ``render_size``: ``(width, height)`` of the frames, integers from 64 to 8192 pixels, default ``(600, 600)``.
- ``compile``: ``True`` steps the dynamics compiled with ``torch.compile`` (the first step compiles, for
  seconds, and needs a C++ compiler and torch 2.13 or newer; what it buys is measured in benchmarks/README.md);
  default ``False``.

## Example
>>> import gymnasium as gym, routing_gym
>>> env = gym.make("routing/{label}-20")
>>> obs, info = env.reset(seed=0)
{doc.example}

## Version History
- v0: initial release.
"""


def _fill(text: str, indent: str = "") -> str:
    return textwrap.fill(text, width=100, initial_indent=indent, subsequent_indent=indent or "")


def env_docstring(problem) -> str:
    """The Gymnasium-template docstring of ``problem``'s env, from the sections the problem declares."""
    doc = problem.doc
    rows = "\n".join(f"| ``{o.key}`` | {o.dtype} | {o.shape_text} | {o.meaning} |" for o in problem.observation)
    variants = "".join(_fill(f"- ``{key}``: {v.doc}.", "") .replace("\n", "\n  ") + "\n"
                       for key, v in problem.variants.items())
    ids = ", ".join(f"``routing/{problem.label}-{n}``" for n in problem.sizes)
    return ENV_TEMPLATE.format(
        doc=doc, label=problem.label, description=_fill(doc.description), rows=rows,
        n_symbol="n + 1" if problem.has_depot else "N", n_note=" (N = n + 1)" if problem.has_depot else "",
        mask=_fill("The mask allows " + doc.mask), rewards=_fill(doc.rewards), starting_state=_fill(doc.starting_state),
        nodes="n customers (the depot is node 0)" if problem.has_depot else "N nodes", ids=ids, variants=variants)


def env_class(problem) -> type[RoutingEnv]:
    """The single-env class of a problem unit (``TSPEnv``, ...): :class:`RoutingEnv` with ``problem`` set
    and the problem's docstring."""
    return type(f"{problem.label}Env", (RoutingEnv,),
                {"problem": problem, "__doc__": env_docstring(problem), "__module__": __name__})


ENV_CLASSES: dict[str, type[RoutingEnv]] = {name: env_class(problem) for name, problem in PROBLEMS.items()}
SIZED_ENV_CLASSES: dict[str, type[RoutingEnv]] = sized_classes(ENV_CLASSES)
# importable by name (entry points, pickle)
globals().update({cls.__name__: cls for cls in (*ENV_CLASSES.values(), *SIZED_ENV_CLASSES.values())})
__all__ = ["ENV_CLASSES", "SIZED_ENV_CLASSES", "RoutingEnv", "env_class",
           *(c.__name__ for c in ENV_CLASSES.values())]
