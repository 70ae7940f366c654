"""Wrappers other libraries need: episode statistics for vector envs in torch mode (CleanRL's one line), the
action mask declared as a ``Box`` (skrl, whose spaces exclude ``MultiBinary``), and infos as numpy scalars
(TorchRL's info readers, which read a value's ``dtype``).

The env itself stays as the contract states it; each wrapper changes one thing and says which.
"""
from __future__ import annotations

import time
from collections import deque
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper
from gymnasium.vector.utils import batch_space
from torch import Tensor

__all__ = ["MaskAsBox", "NumpyInfos", "RecordEpisodeStatistics", "VectorMaskAsBox", "mask_as_box"]


def first_leaf(value: Any) -> Any:
    """The first array of a (nested dict / tuple) observation."""
    while isinstance(value, (dict, tuple, list)):
        value = next(iter(value.values())) if isinstance(value, dict) else value[0]
    return value


class RecordEpisodeStatistics(VectorWrapper):
    """Gymnasium's ``gymnasium.wrappers.vector.RecordEpisodeStatistics`` for vector envs that return numpy
    arrays or torch tensors (the native vector env in either ``array_type``; Gymnasium's own wrapper is
    numpy-only and fails in torch mode).

    In a step where episodes end, ``info["episode"]`` holds ``"r"`` (B,) float64, the episodes' returns,
    ``"l"`` (B,) int64, their lengths in steps, and ``"t"`` (B,) float64, the seconds since they began
    (rounded to microseconds), each 0 in the rows where no episode ended; ``info["_episode"]`` (B,) bool
    says which rows hold one. The layout is Gymnasium's, whatever the autoreset mode (with ``SAME_STEP``
    too, ``"episode"`` is a top-level key, beside ``final_info``).

    - numpy arrays (``array_type="numpy"``, ``SyncVectorEnv``, ...): as Gymnasium's wrapper, the keys are
      numpy arrays and appear only in steps where an episode ended.
    - torch tensors (``array_type="torch"``): the keys are tensors on the env's device, present in every
      step (checking whether an episode ended would synchronise with the device; no step reads a tensor
      on the host).

    Autoreset modes, read from ``env.metadata["autoreset_mode"]`` (``NEXT_STEP`` if absent): ``NEXT_STEP``
    (the resetting step counts for no episode), ``SAME_STEP`` (every step counts) and ``DISABLED``, where a
    finished sub-env keeps reporting done until ``reset(options={"reset_mask": m})``: its episode is
    reported once, in the step where it ended (Gymnasium's wrapper reports it again, empty, every step).

    ``return_queue``, ``length_queue`` and ``time_queue`` (deques of the last ``buffer_length`` episodes,
    oldest first) and ``episode_count`` are Gymnasium's attributes; in torch mode they are kept on the
    device and read from it (a synchronisation) only when asked for.

    Example:
        >>> import gymnasium as gym
        >>> import routing_gym
        >>> from routing_gym.wrappers import RecordEpisodeStatistics
        >>> envs = RecordEpisodeStatistics(gym.make_vec("routing/TSP-v0", num_envs=2, num_nodes=3,
        ...     vectorization_mode="vector_entry_point", array_type="torch"))
        >>> obs, _ = envs.reset(seed=0)
        >>> for _ in range(3):  # node 0, then 1, then 2: the tour ends
        ...     obs, reward, terminated, truncated, info = envs.step(obs["action_mask"].argmax(1))
        >>> info["_episode"], info["episode"]["l"]
        (tensor([True, True]), tensor([3, 3]))
        >>> bool(((info["episode"]["r"] + info["cost"]).abs() < 1e-5).all())  # the return is minus the cost
        True
    """

    def __init__(self, env: VectorEnv, buffer_length: int = 100, stats_key: str = "episode"):
        super().__init__(env)
        if not isinstance(buffer_length, (int, np.integer)) or isinstance(buffer_length, bool) or buffer_length < 1:
            raise ValueError(f"buffer_length must be a positive integer, got {buffer_length!r}")
        self._autoreset_mode = AutoresetMode(env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP))
        self._stats_key = stats_key
        self._buffer_length = int(buffer_length)
        self._tensors: bool | None = None  # torch mode; known from the first reset's observation
        self._device = torch.device("cpu")

    # -- records, as tensors on the env's device (the CPU for numpy) ---------------------------------------
    def _allocate(self, obs: Any) -> None:
        leaf = first_leaf(obs)
        self._tensors = isinstance(leaf, Tensor)
        self._device = leaf.device if self._tensors else torch.device("cpu")
        b, n, dev = self.num_envs, self._buffer_length, self._device
        self._start = torch.full((b,), time.perf_counter(), dtype=torch.float64, device=dev)
        self._returns = torch.zeros(b, dtype=torch.float64, device=dev)
        self._lengths = torch.zeros(b, dtype=torch.int64, device=dev)
        self._prev_dones = torch.zeros(b, dtype=torch.bool, device=dev)
        # the last ``buffer_length`` episodes (r, l, t) in a ring, plus one spare slot that takes the writes
        # of the rows where no episode ended; ``_count`` episodes so far
        self._ring = torch.zeros(3, n + 1, dtype=torch.float64, device=dev)
        self._count = torch.zeros((), dtype=torch.int64, device=dev)

    def reset(self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None):
        """Reset the env and the records of the sub-envs it resets (all, or ``options["reset_mask"]``)."""
        obs, info = self.env.reset(seed=seed, options=options)
        mask = (options or {}).get("reset_mask")
        if mask is None or self._tensors is None:
            self._allocate(obs)
        else:
            rows = torch.as_tensor(mask.detach() if isinstance(mask, Tensor) else np.asarray(mask), device=self._device)
            self._start = torch.where(rows, time.perf_counter(), self._start)
            self._returns.masked_fill_(rows, 0.0)
            self._lengths.masked_fill_(rows, 0)
            self._prev_dones.masked_fill_(rows, False)
        return obs, info

    def step(self, actions):
        """Step the env and add ``info["episode"]``, ``info["_episode"]`` as the class docstring says."""
        obs, rewards, terminations, truncations, infos = self.env.step(actions)
        if self._tensors is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        r, term, trunc = (torch.as_tensor(np.asarray(x) if not isinstance(x, Tensor) else x, device=self._device)
                          for x in (rewards, terminations, truncations))
        dones = term.bool() | trunc.bool()
        counts = torch.ones_like(dones) if self._autoreset_mode == AutoresetMode.SAME_STEP else ~self._prev_dones
        if self._autoreset_mode == AutoresetMode.NEXT_STEP:  # the resetting step starts the next episode
            self._start = torch.where(self._prev_dones, time.perf_counter(), self._start)
            self._returns.masked_fill_(self._prev_dones, 0.0)
            self._lengths.masked_fill_(self._prev_dones, 0)
        self._returns += torch.where(counts, r.double(), 0.0)
        self._lengths += counts
        # DISABLED: a finished sub-env reports done until reset; its episode ended in the first of those steps
        ended = dones & ~self._prev_dones if self._autoreset_mode == AutoresetMode.DISABLED else dones
        self._prev_dones = dones
        elapsed = torch.round(time.perf_counter() - self._start, decimals=6)
        self._record(ended, elapsed)
        if self._tensors or bool(ended.any()):
            if self._stats_key in infos or f"_{self._stats_key}" in infos:
                raise ValueError(f"Attempted to add episode stats with key '{self._stats_key}' but this key already "
                                 f"exists in info: {list(infos)}")
            stats = {"r": torch.where(ended, self._returns, 0.0), "l": torch.where(ended, self._lengths, 0),
                     "t": torch.where(ended, elapsed, 0.0)}
            flags = ended
            if not self._tensors:
                stats, flags = {k: v.numpy() for k, v in stats.items()}, ended.numpy()
            infos = {**infos, self._stats_key: stats, f"_{self._stats_key}": flags}
        if self._autoreset_mode == AutoresetMode.SAME_STEP:  # the ended sub-envs already began their next episode
            self._start = torch.where(ended, time.perf_counter(), self._start)
            self._returns.masked_fill_(ended, 0.0)
            self._lengths.masked_fill_(ended, 0)
        return obs, rewards, terminations, truncations, infos

    def _record(self, ended: Tensor, elapsed: Tensor) -> None:
        """Write the episodes that ended into the ring, in row order (no host synchronisation): the k-th of
        them goes to slot ``(count + k) % buffer_length``, the rows without one (and, if more than
        ``buffer_length`` ended at once, the oldest of them) to the spare slot."""
        size = self._buffer_length
        rank = ended.cumsum(0) - 1
        total = ended.sum()
        keep = ended & (rank >= total - size)
        slot = torch.where(keep, (self._count + rank) % size, size)
        values = torch.stack([self._returns, self._lengths.double(), elapsed])  # (3, B)
        self._ring.scatter_(1, slot.expand(3, -1), values)
        self._count += total

    # -- Gymnasium's attributes (read from the device when asked for) --------------------------------------
    @property
    def episode_count(self) -> int:
        """Episodes ended since the wrapper was made."""
        return 0 if self._tensors is None else int(self._count)

    def _queue(self, row: int) -> deque:
        count = self.episode_count
        size = self._buffer_length
        slots = [(count - k) % size for k in range(min(count, size), 0, -1)]  # oldest first
        values = self._ring[row, slots].cpu().numpy() if slots else np.zeros(0)
        return deque(values.astype(np.int64) if row == 1 else values, maxlen=size)

    @property
    def return_queue(self) -> deque:
        """The returns of the last ``buffer_length`` episodes, oldest first."""
        return self._queue(0)

    @property
    def length_queue(self) -> deque:
        """The lengths of the last ``buffer_length`` episodes, oldest first."""
        return self._queue(1)

    @property
    def time_queue(self) -> deque:
        """The durations (seconds) of the last ``buffer_length`` episodes, oldest first."""
        return self._queue(2)


def mask_as_box(space: spaces.Dict) -> spaces.Dict:
    """``space`` with its ``action_mask`` entry (``MultiBinary``) declared as ``Box(0, 1, shape, int8)``."""
    mask = space["action_mask"]
    if not isinstance(mask, spaces.MultiBinary):
        raise TypeError(f"the space's action_mask must be MultiBinary, got {mask}")
    return spaces.Dict({**space.spaces, "action_mask": spaces.Box(0, 1, mask.shape, np.int8)})


class MaskAsBox(gym.ObservationWrapper):
    """A single env whose observation space declares ``action_mask`` as ``Box(0, 1, (N,), int8)`` instead of
    ``MultiBinary(N)``, for libraries whose spaces exclude ``MultiBinary`` (skrl's ``wrap_env`` raises
    "Unsupported space"). The observations are unchanged (int8, 1 = allowed), so they are in both spaces.

    With skrl, the policy receives the observation flattened, its keys in sorted order;
    ``skrl.utils.spaces.torch.unflatten_tensorized_space(self.observation_space, inputs["observations"])``
    gives the dict back, whose ``action_mask`` masks the logits (``examples/skrl_ppo.py``).

    Example:
        >>> import gymnasium as gym
        >>> import routing_gym
        >>> from routing_gym.wrappers import MaskAsBox
        >>> env = MaskAsBox(gym.make("routing/TSP-v0", num_nodes=5))
        >>> env.observation_space["action_mask"]
        Box(0, 1, (5,), int8)
        >>> obs, _ = env.reset(seed=0)
        >>> obs["action_mask"]
        array([1, 1, 1, 1, 1], dtype=int8)
    """

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.observation_space = mask_as_box(env.observation_space)

    def observation(self, observation):
        return observation


class VectorMaskAsBox(VectorWrapper):
    """:class:`MaskAsBox` for a vector env (the native one in either ``array_type``, or ``SyncVectorEnv``; any
    autoreset mode): ``single_observation_space["action_mask"]`` is ``Box(0, 1, (N,), int8)`` and
    ``observation_space`` batches it to ``Box(0, 1, (B, N), int8)``; the observations are unchanged."""

    def __init__(self, env: VectorEnv):
        super().__init__(env)
        self.single_observation_space = mask_as_box(env.single_observation_space)
        self.observation_space = batch_space(self.single_observation_space, env.num_envs)


class NumpyInfos(gym.Wrapper):
    """The single env with every Python ``bool`` / ``int`` / ``float`` in ``info`` given as a numpy scalar
    (``invalid_action`` a ``np.bool_``; ``cost`` is a ``np.float64`` already), for readers that read a
    value's ``dtype``, such as TorchRL's ``default_info_dict_reader``. The env itself keeps the contract's
    Python bool (``info["invalid_action"] is True``).

    >>> import gymnasium as gym, routing_gym
    >>> from routing_gym.wrappers import NumpyInfos
    >>> env = NumpyInfos(gym.make("routing/TSP-10"))
    >>> _ = env.reset(seed=0)
    >>> *_, info = env.step(0); *_, info = env.step(0)  # node 0 again: a masked action
    >>> import numpy as np
    >>> isinstance(info["invalid_action"], np.bool_), bool(info["invalid_action"])
    (True, True)
    """

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, {k: numpy_scalar(v) for k, v in info.items()}


def numpy_scalar(value: Any) -> Any:
    """A Python bool, int or float as the numpy scalar of its kind; anything else unchanged."""
    if isinstance(value, bool):
        return np.bool_(value)
    if isinstance(value, int):
        return np.int64(value)
    if isinstance(value, float) and not isinstance(value, np.floating):
        return np.float64(value)
    return value
