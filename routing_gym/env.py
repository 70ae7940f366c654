"""Gymnasium single environments: one instance (batch 1 of the problem core), numpy in and out."""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces

from .problems import CVRP, OP, PCTSP, TSP, invalid_penalty, step
from .problems.op import PRIZE_TYPES

INVALID_ACTION_MODES = ("terminate", "raise")


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


def seeded_generator(np_random: np.random.Generator) -> torch.Generator:
    """A CPU torch generator seeded from a Gymnasium ``np_random`` stream (one draw)."""
    return torch.Generator().manual_seed(int(np_random.integers(0, 2**63 - 1)))


class RoutingEnv(gym.Env):
    """Base of the four routing envs: a thin view over a problem's batched core, with batch 1.

    Subclasses set ``problem`` and document themselves in Gymnasium's template.
    """

    metadata = {"render_modes": ["human", "rgb_array"], "render_fps": 4}
    problem: Any = None

    def __init__(self, num_nodes: int, *, render_mode: str | None = None, invalid_action: str = "terminate",
                 render_size: tuple[int, int] = (600, 600), **variant: Any):
        if isinstance(num_nodes, bool) or not isinstance(num_nodes, (int, np.integer)) or num_nodes < 2:
            raise ValueError(f"num_nodes must be an integer >= 2, got {num_nodes!r}")
        if invalid_action not in INVALID_ACTION_MODES:
            raise ValueError(f"invalid_action must be one of {INVALID_ACTION_MODES}, got {invalid_action!r}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']} or None, got {render_mode!r}")
        self.num_nodes = int(num_nodes)
        self.n_total = self.problem.num_nodes_total(self.num_nodes)
        self.invalid_action = invalid_action
        self.render_mode = render_mode
        self.render_size = (int(render_size[0]), int(render_size[1]))
        if min(self.render_size) < 64:
            raise ValueError(f"render_size must be at least (64, 64) pixels, got {render_size!r}")
        self._variant = variant
        self.observation_space = observation_space(self.problem, self.n_total)
        self.action_space = spaces.Discrete(self.n_total)
        self.invalid_penalty = invalid_penalty(self.n_total)
        self._action_tensors = tuple(torch.tensor([i]) for i in range(self.n_total))  # (1,) int64, never written
        self._terminated = False
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
            options: ``{"instance": {...}}``, a user instance keyed as the observation (``locs`` and the
                problem's per-node fields; OP also ``max_length``); validated, ``ValueError`` names a
                bad field.
        """
        super().reset(seed=seed)
        options = dict(options or {})
        data = options.pop("instance", None)
        if options:
            raise ValueError(f"unknown reset option(s) {sorted(options)}; the only option is 'instance'")
        if data is None:
            instance = self.problem.generate(1, self.num_nodes, generator=seeded_generator(self.np_random),
                                             **self._variant)
        else:
            instance = self.problem.instance_from(data)
            if instance.locs.shape[1] != self.n_total:
                raise ValueError(f"instance field 'locs' has {instance.locs.shape[1]} nodes; this env has "
                                 f"{self.n_total} (make one with num_nodes={self._num_nodes_for(instance)})")
        self.state = self.problem.reset(instance)
        self._static = {key: value[0].numpy().astype(np.float32, copy=True)
                        for key, value in instance._asdict().items() if key in self.observation_space.spaces}
        self._tour = []
        self._return = 0.0
        self._terminated = False
        if self.render_mode == "human":
            self.render()
        return self._observation(), {}

    def _num_nodes_for(self, instance) -> int:
        return instance.locs.shape[1] - (1 if self.problem.has_depot else 0)

    def step(self, action):
        if self.state is None:
            raise RuntimeError("call reset() before step()")
        if self._terminated:
            raise RuntimeError("the episode has ended (terminated); call reset() before stepping again")
        a = self._as_action(action)
        if self.invalid_action == "raise" and not bool(self.state.mask[0, a]):
            allowed = torch.nonzero(self.state.mask[0]).flatten().tolist()
            raise ValueError(f"action {a} is masked in this state; allowed actions: {allowed}")
        with torch.inference_mode():  # no autograd bookkeeping: the single env's state never needs gradients
            self.state, reward, invalid = step(self.problem, self.state, self._action_tensors[a])
        r = reward.item()
        self._return += r
        terminated = self._terminated = self.state.done.item()
        info: dict[str, Any] = {}
        if invalid.item():
            info["invalid_action"] = True
        else:
            self._tour.append(a)
        if terminated:
            info.setdefault("invalid_action", False)
            info["cost"] = -self._return
            info["tour"] = list(self._tour)  # a list: Gymnasium's vector envs stack ndarray infos by shape
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
        return self.state.mask[0].numpy().copy()

    # -- rendering ---------------------------------------------------------------------------------
    def render(self):
        if self.render_mode is None:
            gym.logger.warn("render() called without a render_mode; make the env with render_mode='rgb_array' "
                            "or 'human'")
            return None
        from .render import Viewer

        if self._viewer is None:
            self._viewer = Viewer(self.problem.name, render_mode=self.render_mode, fps=self.metadata["render_fps"],
                                  size=self.render_size)
        return self._viewer.draw(self.problem, self.state, self._tour, -self._return)

    def close(self):
        if self._viewer is not None:
            self._viewer.close()
            self._viewer = None


class TSPEnv(RoutingEnv):
    """Travelling salesman: visit each of N nodes once and return to the start, minimising length.

    ## Description
    N nodes uniform in the unit square (Kool, van Hoof & Welling, ICLR 2019). The first action chooses
    the start node; every action appends a node to the tour.

    ## Action Space
    ``Discrete(N)``: the next node.
    Actions forbidden by ``action_mask`` follow ``invalid_action`` (see Arguments). Stepping after the
    episode ended raises ``RuntimeError``.

    ## Observation Space
    ``Dict``:

    | key | dtype | shape | meaning |
    |---|---|---|---|
    | ``locs`` | float32 | (N, 2) | coordinates in [0, 1] |
    | ``first_node`` | int64 (``Discrete(N)``) | () | start node (0 before the first action) |
    | ``current_node`` | int64 (``Discrete(N)``) | () | last node visited (0 before the first action) |
    | ``step`` | float32 | (1,) | actions taken, in [0, N] |
    | ``action_mask`` | int8 (``MultiBinary(N)``) | (N,) | 1 = allowed: the unvisited nodes |

    ## Rewards
    Minus the length of the edge added by the step (0 for the first action); the last step also adds
    the closing edge back to the start. The episode's rewards sum to minus the tour length.

    ## Starting State
    A fresh random instance from ``self.np_random``, or ``options["instance"] = {"locs": (N, 2)}``.

    ## Episode End
    Terminates when every node is visited (or on a masked action); never truncates.
    When the episode ends, ``info`` holds ``cost`` (float, minus the episode's return: the sum of the
    rewards is exactly ``-cost``), ``tour`` (list of the actions taken, as ints) and ``invalid_action``.

    ## Arguments
    - ``num_nodes``: N, default 20 (``routing/TSP-20``, ``-50``, ``-100``; ``routing/TSP-v0`` takes it).
    - ``render_mode``: ``None``, ``"human"`` (a pygame window at ``metadata["render_fps"]``) or
      ``"rgb_array"`` ((H, W, 3) uint8 frames).
    - ``invalid_action``: ``"terminate"`` (default; a masked action ends the episode with reward
      ``-2 * sqrt(2) * N`` and ``info["invalid_action"] = True``) or ``"raise"`` (``ValueError`` naming
      the allowed actions; the state is unchanged).
    - ``render_size``: ``(width, height)`` of the frames in pixels, default ``(600, 600)``.

    ## Example
    >>> import gymnasium as gym, routing_gym
    >>> env = gym.make("routing/TSP-20")
    >>> obs, info = env.reset(seed=0)
    >>> obs["locs"].shape, int(obs["action_mask"].sum())
    ((20, 2), 20)

    ## Version History
    - v0: initial release.
    """

    problem = TSP

    def __init__(self, num_nodes: int = 20, *, render_mode: str | None = None, invalid_action: str = "terminate",
                 render_size: tuple[int, int] = (600, 600)):
        super().__init__(num_nodes, render_mode=render_mode, invalid_action=invalid_action, render_size=render_size)


class CVRPEnv(RoutingEnv):
    """Capacitated vehicle routing: serve every customer's demand with routes from the depot.

    ## Description
    Depot (node 0) and n customers uniform in the unit square; integer demands U{1..9} divided by
    the capacity 20/30/40/50 for n = 10/20/50/100, interpolated for other n (Kool et al. 2019). The
    vehicle refills at the depot.

    ## Action Space
    ``Discrete(n + 1)``: the next node (0 = back to the depot).
    Actions forbidden by ``action_mask`` follow ``invalid_action`` (see Arguments). Stepping after the
    episode ended raises ``RuntimeError``.

    ## Observation Space
    ``Dict`` (N = n + 1):

    | key | dtype | shape | meaning |
    |---|---|---|---|
    | ``locs`` | float32 | (N, 2) | coordinates in [0, 1], depot first |
    | ``demand`` | float32 | (N,) | demand / capacity in (0, 1], depot 0 |
    | ``remaining_capacity`` | float32 | (1,) | capacity left on the current route, in [0, 1] |
    | ``current_node`` | int64 (``Discrete(N)``) | () | where the vehicle is (0 = depot) |
    | ``step`` | float32 | (1,) | actions taken, in [0, 2n] |
    | ``action_mask`` | int8 (``MultiBinary(N)``) | (N,) | 1 = allowed |

    A customer is allowed when unserved and its demand fits the remaining capacity (1e-5 float
    slack); the depot is allowed unless the vehicle is at the depot while a customer is allowed (so
    never as the first action, never twice in a row while customers remain).

    ## Rewards
    Minus the edge length of the step; the step serving the last customer also adds the return to the
    depot. The rewards sum to minus the total length of all routes.

    ## Starting State
    At the depot with a full vehicle: a random instance, or ``options["instance"] = {"locs": (N, 2),
    "demand": (N,)}`` (demand as a fraction of capacity; a demand above 1 is refused as infeasible).

    ## Episode End
    Terminates when the last customer is served (or on a masked action); never truncates.
    When the episode ends, ``info`` holds ``cost`` (float, minus the episode's return: the sum of the
    rewards is exactly ``-cost``), ``tour`` (list of the actions taken, as ints) and ``invalid_action``.

    ## Arguments
    - ``num_nodes``: n customers, default 20 (``routing/CVRP-20``, ``-50``, ``-100``, ``routing/CVRP-v0``).
    - ``render_mode``: ``None``, ``"human"`` (a pygame window at ``metadata["render_fps"]``) or
      ``"rgb_array"`` ((H, W, 3) uint8 frames).
    - ``invalid_action``: ``"terminate"`` (default; a masked action ends the episode with reward
      ``-2 * sqrt(2) * N`` and ``info["invalid_action"] = True``) or ``"raise"`` (``ValueError`` naming
      the allowed actions; the state is unchanged).
    - ``render_size``: ``(width, height)`` of the frames in pixels, default ``(600, 600)``.

    ## Example
    >>> import gymnasium as gym, routing_gym
    >>> env = gym.make("routing/CVRP-20")
    >>> obs, info = env.reset(seed=0)
    >>> obs["locs"].shape, float(obs["remaining_capacity"][0]), int(obs["action_mask"][0])
    ((21, 2), 1.0, 0)

    ## Version History
    - v0: initial release.
    """

    problem = CVRP

    def __init__(self, num_nodes: int = 20, *, render_mode: str | None = None, invalid_action: str = "terminate",
                 render_size: tuple[int, int] = (600, 600)):
        super().__init__(num_nodes, render_mode=render_mode, invalid_action=invalid_action, render_size=render_size)


class OPEnv(RoutingEnv):
    """Orienteering: collect the most prize on a tour from the depot no longer than ``max_length``.

    ## Description
    Depot (node 0) and n nodes uniform in the unit square; max length 2/3/4 for n = 20/50/100,
    interpolated for other n; prizes ``const`` (1), ``unif`` ({1..100}/100) or ``dist`` (default,
    ``(1 + floor(99 d0i / max_j d0j)) / 100``), as Kool et al. 2019.

    ## Action Space
    ``Discrete(n + 1)``: the next node; 0 returns to the depot and ends the tour.
    Actions forbidden by ``action_mask`` follow ``invalid_action`` (see Arguments). Stepping after the
    episode ended raises ``RuntimeError``.

    ## Observation Space
    ``Dict`` (N = n + 1):

    | key | dtype | shape | meaning |
    |---|---|---|---|
    | ``locs`` | float32 | (N, 2) | coordinates in [0, 1], depot first |
    | ``prize`` | float32 | (N,) | prize in [0, 1], depot 0 |
    | ``remaining_length`` | float32 | (1,) | max length minus the length so far, in [0, sqrt(2) N] |
    | ``current_node`` | int64 (``Discrete(N)``) | () | where the tour is (0 = depot) |
    | ``step`` | float32 | (1,) | actions taken, in [0, N] |
    | ``action_mask`` | int8 (``MultiBinary(N)``) | (N,) | 1 = allowed |

    A node is allowed when unvisited and the depot can still be reached through it:
    ``length + d(current, i) + d(i, 0) <= max_length - 1e-6``. The depot is always allowed.

    ## Rewards
    The prize of the node visited (0 for the depot). The rewards sum to the prize collected, i.e. minus
    the cost.

    ## Starting State
    At the depot: a random instance, or ``options["instance"] = {"locs": (N, 2), "prize": (N,),
    "max_length": float}`` (max length in (0, sqrt(2) N]).

    ## Episode End
    Terminates when the depot is chosen (or on a masked action); never truncates.
    When the episode ends, ``info`` holds ``cost`` (float, minus the episode's return: the sum of the
    rewards is exactly ``-cost``), ``tour`` (list of the actions taken, as ints) and ``invalid_action``.

    ## Arguments
    - ``num_nodes``: n, default 20 (``routing/OP-20``, ``-50``, ``-100``, ``routing/OP-v0``).
    - ``prize_type``: ``"const"``, ``"unif"`` or ``"dist"`` (default).
    - ``render_mode``: ``None``, ``"human"`` (a pygame window at ``metadata["render_fps"]``) or
      ``"rgb_array"`` ((H, W, 3) uint8 frames).
    - ``invalid_action``: ``"terminate"`` (default; a masked action ends the episode with reward
      ``-2 * sqrt(2) * N`` and ``info["invalid_action"] = True``) or ``"raise"`` (``ValueError`` naming
      the allowed actions; the state is unchanged).
    - ``render_size``: ``(width, height)`` of the frames in pixels, default ``(600, 600)``.

    ## Example
    >>> import gymnasium as gym, routing_gym
    >>> env = gym.make("routing/OP-20")
    >>> obs, info = env.reset(seed=0)
    >>> float(obs["remaining_length"][0]), float(obs["prize"].max())
    (2.0, 1.0)

    ## Version History
    - v0: initial release.
    """

    problem = OP

    def __init__(self, num_nodes: int = 20, *, prize_type: str = "dist", render_mode: str | None = None,
                 invalid_action: str = "terminate", render_size: tuple[int, int] = (600, 600)):
        if prize_type not in PRIZE_TYPES:
            raise ValueError(f"prize_type must be one of {PRIZE_TYPES}, got {prize_type!r}")
        super().__init__(num_nodes, render_mode=render_mode, invalid_action=invalid_action, render_size=render_size,
                         prize_type=prize_type)


class PCTSPEnv(RoutingEnv):
    """Prize-collecting TSP: collect a prize of at least 1, minimising length plus the penalties of the
    nodes left out.

    ## Description
    Depot (node 0) and n nodes uniform in the unit square; penalties U(0, 3K/n) with K = 2/3/4 for
    n = 20/50/100 (interpolated for other n), prizes U(0, 4/n), as Kool et al. 2019 (deterministic
    prizes).

    ## Action Space
    ``Discrete(n + 1)``: the next node; 0 returns to the depot and ends the tour.
    Actions forbidden by ``action_mask`` follow ``invalid_action`` (see Arguments). Stepping after the
    episode ended raises ``RuntimeError``.

    ## Observation Space
    ``Dict`` (N = n + 1):

    | key | dtype | shape | meaning |
    |---|---|---|---|
    | ``locs`` | float32 | (N, 2) | coordinates in [0, 1], depot first |
    | ``prize`` | float32 | (N,) | prize in [0, 1], depot 0 |
    | ``penalty`` | float32 | (N,) | penalty in [0, sqrt(2) N] if left unvisited, depot 0 |
    | ``prize_to_collect`` | float32 | (1,) | ``max(0, 1 - prize collected)`` |
    | ``current_node`` | int64 (``Discrete(N)``) | () | where the tour is (0 = depot) |
    | ``step`` | float32 | (1,) | actions taken, in [0, N] |
    | ``action_mask`` | int8 (``MultiBinary(N)``) | (N,) | 1 = allowed |

    Every unvisited node is allowed; the depot once the prize collected reaches 1, or when every node
    has been visited.

    ## Rewards
    Minus the edge length of the step; the final (depot) step also subtracts the penalties of the
    unvisited nodes. The rewards sum to minus the cost.

    ## Starting State
    At the depot: a random instance, or ``options["instance"] = {"locs": (N, 2), "prize": (N,),
    "penalty": (N,)}``.

    ## Episode End
    Terminates when the depot is chosen (or on a masked action); never truncates.
    When the episode ends, ``info`` holds ``cost`` (float, minus the episode's return: the sum of the
    rewards is exactly ``-cost``), ``tour`` (list of the actions taken, as ints) and ``invalid_action``.

    ## Arguments
    - ``num_nodes``: n, default 20 (``routing/PCTSP-20``, ``-50``, ``-100``, ``routing/PCTSP-v0``).
    - ``render_mode``: ``None``, ``"human"`` (a pygame window at ``metadata["render_fps"]``) or
      ``"rgb_array"`` ((H, W, 3) uint8 frames).
    - ``invalid_action``: ``"terminate"`` (default; a masked action ends the episode with reward
      ``-2 * sqrt(2) * N`` and ``info["invalid_action"] = True``) or ``"raise"`` (``ValueError`` naming
      the allowed actions; the state is unchanged).
    - ``render_size``: ``(width, height)`` of the frames in pixels, default ``(600, 600)``.

    ## Example
    >>> import gymnasium as gym, routing_gym
    >>> env = gym.make("routing/PCTSP-20")
    >>> obs, info = env.reset(seed=0)
    >>> float(obs["prize_to_collect"][0]), int(obs["action_mask"][0])
    (1.0, 0)

    ## Version History
    - v0: initial release.
    """

    problem = PCTSP

    def __init__(self, num_nodes: int = 20, *, render_mode: str | None = None, invalid_action: str = "terminate",
                 render_size: tuple[int, int] = (600, 600)):
        super().__init__(num_nodes, render_mode=render_mode, invalid_action=invalid_action, render_size=render_size)
