"""Stable-Baselines3 adapter: a :class:`routing_gym.vector.RoutingVectorEnv` presented as an SB3 ``VecEnv``.

SB3 algorithms step a ``VecEnv``. Its usual implementation, ``DummyVecEnv``, loops in Python over
single envs; this adapter hands the whole batch to the native vector env instead, which steps all B
instances in one call of the batched core::

    from sb3_contrib import MaskablePPO
    from routing_gym.sb3 import make_sb3_vec_env

    venv = make_sb3_vec_env("routing/TSP-20", num_envs=256, seed=0)
    model = MaskablePPO("MultiInputPolicy", venv, gamma=1.0, n_steps=20)
    model.learn(100_000)

The single env needs no adapter: ``MaskablePPO("MultiInputPolicy", gym.make("routing/TSP-20"))`` finds
its ``action_masks()`` method, also through SB3's ``DummyVecEnv`` and ``SubprocVecEnv``.

Only this module imports ``stable_baselines3``; ``import routing_gym`` does not import it.

SB3's ``VecEnv`` contract, as this adapter keeps it:

- ``reset()`` returns the batched observation dict (the keys of the single env, a leading B axis;
  node indices such as ``current_node`` are (B,) int64). Seeds set by ``seed(s)`` (sub-env i gets
  ``s + i``, the instance a single env gets from ``reset(seed=s + i)``) and options set by
  ``set_options`` apply to the next ``reset`` only.
- ``step(actions)`` returns ``(obs, rewards (B,) float32, dones (B,) bool, infos)``, ``infos`` a list
  of B dicts. A finished sub-env is reset within the same step (the vector env's ``SAME_STEP``
  autoreset): ``obs`` already shows the new episode, and its info holds ``terminal_observation`` (the
  last observation of the finished episode, a single-env observation dict), ``TimeLimit.truncated``,
  and the episode's ``cost``, ``tour`` and ``invalid_action``.
- ``env_method("action_masks")`` returns B bool masks (N,), True = allowed, for the current
  observations (after any automatic reset), which is what sb3-contrib's ``get_action_masks`` stacks.
- The B sub-envs are one Python object. ``get_attr``, ``set_attr`` and any other ``env_method`` act
  on the vector env itself, and the answer is repeated once per requested index.
- ``get_images()`` returns one frame per sub-env and ``render()`` tiles them into one image, as SB3's
  ``DummyVecEnv`` does (the vector env made with ``render_mode="rgb_array"``).

Rewards are dense and sum to minus the episode's cost, so ``gamma=1.0`` makes the value of a state
minus the expected remaining cost: use it for these finite-horizon problems (SB3's default 0.99
discounts the closing edge of a tour).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from stable_baselines3.common.vec_env import VecEnv, VecMonitor
from stable_baselines3.common.vec_env.base_vec_env import VecEnvIndices, VecEnvObs, VecEnvStepReturn

MASK_METHOD = "action_masks"


class SB3VecEnv(VecEnv):
    """A :class:`routing_gym.vector.RoutingVectorEnv` as a Stable-Baselines3 ``VecEnv`` (see the module
    docstring for the contract).

    Args:
        venv: a routing vector env made with ``autoreset_mode=AutoresetMode.SAME_STEP`` and
            ``array_type="numpy"`` (Gymnasium vector wrappers around it are allowed), e.g.
            ``gym.make_vec("routing/TSP-20", num_envs=256, vectorization_mode="vector_entry_point",
            autoreset_mode=AutoresetMode.SAME_STEP)``; :func:`make_sb3_vec_env` builds it.

    Raises:
        ValueError: if ``venv`` has another autoreset mode or array type.

    Example:
        >>> import gymnasium as gym
        >>> from gymnasium.vector import AutoresetMode
        >>> from routing_gym.sb3 import SB3VecEnv
        >>> venv = SB3VecEnv(gym.make_vec("routing/TSP-20", num_envs=4, vectorization_mode="vector_entry_point",
        ...                               autoreset_mode=AutoresetMode.SAME_STEP))
        >>> _ = venv.seed(0)
        >>> obs = venv.reset()
        >>> obs["locs"].shape, venv.env_method("action_masks")[0].shape
        ((4, 20, 2), (20,))
    """

    def __init__(self, venv: VectorEnv):
        mode = venv.metadata.get("autoreset_mode")
        if mode != AutoresetMode.SAME_STEP:
            raise ValueError(f"SB3VecEnv needs a vector env with autoreset_mode=AutoresetMode.SAME_STEP (SB3 resets "
                             f"finished sub-envs within the step), got {mode!r}")
        array_type = getattr(venv.unwrapped, "array_type", "numpy")
        if array_type != "numpy":
            raise ValueError(f"SB3VecEnv needs a vector env with array_type='numpy', got {array_type!r}")
        self.venv = venv
        super().__init__(venv.num_envs, venv.single_observation_space, venv.single_action_space)
        self._actions: np.ndarray | None = None

    # -- stepping ----------------------------------------------------------------------------------
    def reset(self) -> VecEnvObs:
        seed = None if self._seeds[0] is None else [int(s) for s in self._seeds]
        options = self._shared_options()
        obs, _ = self.venv.reset(seed=seed, options=options)
        self._reset_seeds()
        self._reset_options()
        self.reset_infos = [{} for _ in range(self.num_envs)]
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions).reshape(self.num_envs)

    def step_wait(self) -> VecEnvStepReturn:
        if self._actions is None:
            raise RuntimeError("step_wait() called without step_async()")
        obs, reward, terminated, truncated, info = self.venv.step(self._actions)
        self._actions = None
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        if "final_obs" in info:
            final_obs, final_info = info["final_obs"], info["final_info"]
            for i in np.flatnonzero(info["_final_obs"]):
                entry = infos[i]
                entry["terminal_observation"] = final_obs[i]
                entry["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
                for key, value in final_info.items():
                    if not key.startswith("_") and final_info[f"_{key}"][i]:
                        # as the single env's: a Python bool flag, numpy scalars otherwise (np.float64 cost)
                        entry[key] = value[i].item() if value.dtype == bool else value[i]
        return obs, reward.astype(np.float32), terminated | truncated, infos

    def _shared_options(self) -> dict[str, Any] | None:
        """The options of ``set_options``: one dict for the whole batch (the vector env's
        ``reset`` options, e.g. ``{"instances": ...}``)."""
        first = self._options[0]  # set_options(dict) gives every sub-env the same (copied) dict
        if any(self._options) and not all(o is first for o in self._options):
            raise ValueError("SB3VecEnv resets all sub-envs in one call: pass one options dict to set_options() "
                             "(the vector env's reset options, e.g. {'instances': batch}), not one per sub-env")
        return dict(first) if first else None

    # -- attributes and methods --------------------------------------------------------------------
    def _lookup(self, name: str) -> Any:
        try:
            return getattr(self.venv, name)
        except AttributeError:
            return getattr(self.venv.unwrapped, name)

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """The vector env's attribute, once per requested index."""
        value = self._lookup(attr_name)
        return [value for _ in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        """Set the attribute on the vector env (shared by all sub-envs; ``indices`` cannot pick some)."""
        chosen = list(self._get_indices(indices))
        if sorted(chosen) != list(range(self.num_envs)):
            raise ValueError("SB3VecEnv's sub-envs share one vector env: set_attr applies to all of them "
                             "(indices=None)")
        setattr(self.venv if hasattr(self.venv, attr_name) else self.venv.unwrapped, attr_name, value)

    def has_attr(self, attr_name: str) -> bool:
        try:
            self._lookup(attr_name)
            return True
        except AttributeError:
            return False

    def env_method(self, method_name: str, *method_args, indices: VecEnvIndices = None, **method_kwargs) -> list[Any]:
        """``"action_masks"``: the B current masks, one (N,) bool array per requested index. Any other
        method is called once on the vector env and its result repeated per requested index."""
        chosen = self._get_indices(indices)
        if method_name == MASK_METHOD:
            masks = np.array(self._lookup(MASK_METHOD)(), dtype=bool)  # (B, N), a copy: callers may write to it
            return list(masks) if indices is None else [masks[i] for i in chosen]
        result = self._lookup(method_name)(*method_args, **method_kwargs)
        return [result for _ in chosen]

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        """Always False: the sub-envs are rows of one vector env, not wrappable single envs."""
        return [False for _ in self._get_indices(indices)]

    # -- rendering and closing ---------------------------------------------------------------------
    def get_images(self) -> Sequence[np.ndarray | None]:
        """One (H, W, 3) uint8 frame per sub-env (SB3's ``render()`` tiles them); Nones without
        ``render_mode="rgb_array"``."""
        frames = self.venv.render()
        return [None] * self.num_envs if frames is None else list(frames)

    def close(self) -> None:
        self.venv.close()


def evaluate_costs(model: Any, venv: VecEnv, *, deterministic: bool = True) -> np.ndarray:
    """Costs (B,) of one episode in each sub-env, from a fresh ``reset()`` (seeds or instances set with
    ``seed``/``set_options`` apply), acting with the current action masks.

    Args:
        model: anything with sb3-contrib's ``predict(obs, action_masks=..., deterministic=...)``, e.g.
            a ``MaskablePPO`` model.
        venv: an :class:`SB3VecEnv`, possibly wrapped (``VecMonitor``).
        deterministic: passed to ``predict``.

    Episodes that start after a sub-env's first one (automatic resets) are stepped but not counted.
    """
    obs = venv.reset()
    costs = np.full(venv.num_envs, np.nan)
    finished = np.zeros(venv.num_envs, dtype=bool)
    while not finished.all():
        masks = np.stack(venv.env_method(MASK_METHOD))
        actions, _ = model.predict(obs, action_masks=masks, deterministic=deterministic)
        obs, _, dones, infos = venv.step(actions)
        for i in np.flatnonzero(dones & ~finished):
            costs[i] = infos[i]["cost"]
        finished |= dones
    return costs


def make_sb3_vec_env(env_id: str, num_envs: int, *, seed: int | None = None, monitor: bool = True,
                     info_keywords: tuple[str, ...] = ("cost",), **env_kwargs: Any) -> VecEnv:
    """An SB3 ``VecEnv`` of ``num_envs`` sub-envs of a registered routing env, batched natively.

    Args:
        env_id: a ``routing/...`` id, e.g. ``"routing/TSP-20"`` or ``"routing/OP-v0"``.
        num_envs: B.
        seed: if given, the first ``reset`` gives sub-env i the instance of ``reset(seed=seed + i)``.
        monitor: wrap in SB3's ``VecMonitor``, so that ``info["episode"]`` and the ``rollout/ep_rew_mean``
            log exist (what SB3's ``Monitor`` gives a single env).
        info_keywords: the episode info keys ``VecMonitor`` records with each episode (``cost`` by default).
        env_kwargs: passed to the vector env (``num_nodes``, ``device``, ``invalid_action``, ``prize_type``,
            ``max_episode_steps``, ``render_mode``); ``autoreset_mode`` and ``array_type`` are fixed to
            what SB3 needs (``SAME_STEP``, ``"numpy"``).
    """
    for fixed in ("autoreset_mode", "array_type", "vectorization_mode"):
        if fixed in env_kwargs:
            raise ValueError(f"make_sb3_vec_env fixes {fixed!r} to what SB3 needs; do not pass it")
    venv: VecEnv = SB3VecEnv(gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="vector_entry_point",
                                          autoreset_mode=AutoresetMode.SAME_STEP, array_type="numpy", **env_kwargs))
    if seed is not None:
        venv.seed(seed)
    return VecMonitor(venv, info_keywords=info_keywords) if monitor else venv
