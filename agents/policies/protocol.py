"""The policy protocol that every decoder in :mod:`agents.inference` steps, and the two helpers its users share.

A policy is any object with two methods (the Attention Model, the Pointer Network and the heuristics of
:mod:`agents.references.heuristics` all are):

- ``precompute(obs) -> cache``: work done once per instance batch (the encoder), from an episode's first
  observation (a dict of tensors on the env's device, keys as in docs/contract.md);
- ``log_probs(cache, obs) -> (log_probs, cache)``: log-probabilities (B, N) of the next action, ``-inf``
  where ``obs["action_mask"]`` forbids it, and the cache for the next step.

A stateless policy may also score a recorded episode in one pass (the Attention Model does): ``parallel_steps``
(True when it can), ``step_keys`` (the observation keys that change between steps) and
``log_probs_steps(cache, obs, steps) -> (B, T, N)``, ``steps`` holding those keys' values of T observations
stacked on axis 1. With gradients on, :func:`agents.inference.rollout.rollout` then decodes without them and
back-propagates through that one pass (T queries against the same keys) instead of through T steps.

A step never mutates its inputs: a stateless policy (the Attention Model) returns its cache unchanged, a
recurrent one (the Pointer Network) a new cache holding its advanced decoder state, and every caller
steps on with the returned cache. Every tensor of a cache has the batch as its leading axis, so that
:func:`select_rows` reorders a cache with the rows it serves (beam search re-ranks its beams so).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch
from torch import Tensor


@runtime_checkable
class Policy(Protocol):
    """What :func:`agents.inference.rollout.rollout` and :mod:`agents.inference.search` step; see the module
    docstring."""

    def precompute(self, obs: dict[str, Tensor]) -> Any:
        """The cache of an instance batch, from an episode's first observation."""

    def log_probs(self, cache: Any, obs: dict[str, Tensor]) -> tuple[Tensor, Any]:
        """``(log_probs (B, N), next cache)``; neither ``cache`` nor ``obs`` is modified."""


def batch_observation(obs: dict, device=None, batched: bool = False) -> dict[str, Tensor]:
    """A numpy observation (one env's, or a batch of them when ``batched``) as a dict of tensors with a
    leading batch axis (``action_mask`` as bools, indices int64, the rest float32)."""
    out = {}
    for key, value in obs.items():
        t = torch.as_tensor(np.asarray(value), device=device)
        t = t.bool() if key == "action_mask" else t.float() if t.is_floating_point() else t.long()
        out[key] = t if batched else t[None]
    return out


def select_rows(tree: Any, index: Tensor | slice) -> Any:
    """``tree`` (a tensor, or a (named) tuple, dict or dataclass of them, nested, or None) with rows
    ``index`` (an int64 tensor, which may repeat and reorder rows, or a slice) of every tensor.

    >>> from typing import NamedTuple
    >>> class Pair(NamedTuple):
    ...     a: Tensor
    ...     b: tuple
    >>> rows = select_rows(Pair(torch.arange(4), (torch.arange(8).view(4, 2), None)), torch.tensor([3, 0, 0]))
    >>> rows.a.tolist(), rows.b[0].tolist(), rows.b[1]
    ([3, 0, 0], [[6, 7], [0, 1], [0, 1]], None)
    >>> select_rows({"x": torch.arange(5)}, slice(1, 3))
    {'x': tensor([1, 2])}
    """
    if tree is None:
        return None
    if isinstance(tree, Tensor):
        return tree[index]
    if isinstance(tree, tuple):
        fields = [select_rows(f, index) for f in tree]
        return type(tree)(*fields) if hasattr(tree, "_fields") else type(tree)(fields)
    if isinstance(tree, dict):
        return {k: select_rows(v, index) for k, v in tree.items()}
    if dataclasses.is_dataclass(tree) and not isinstance(tree, type):
        return dataclasses.replace(tree, **{f.name: select_rows(getattr(tree, f.name), index)
                                            for f in dataclasses.fields(tree) if f.init})
    raise TypeError(f"cannot select rows of a {type(tree).__name__}")
