"""Exact TSP solutions by the Held-Karp dynamic program, vectorised over subsets and instances.

Bellman (1962), Held & Karp (1962): with node 0 as the start, ``C(S, j)`` is the length of the shortest
path from 0 through every node of ``S`` ending at ``j in S``;
``C(S, j) = min_{k in S - {j}} C(S - {j}, k) + d(k, j)`` and the tour length is
``min_j C(all, j) + d(j, 0)``. Time O(2^n n^2), memory O(2^n n) per instance (float64), so n <= 20.

The table is filled layer by layer (subsets of equal size), one ``min`` over k per layer and end
node j, for a chunk of instances at once; the tour is read back by recomputing the argmin from the end,
so no predecessor table is stored. Measured on 2 shared CPU cores (torch 2.13): see
``docs/quality.md``.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable
from functools import lru_cache

import numpy as np
import torch
from torch import Tensor

MAX_NODES = 20
MEMORY_BUDGET = 2 ** 28  # bytes for one chunk's DP table (256 MiB)


@lru_cache(maxsize=None)
def layers(m: int) -> tuple[tuple[np.ndarray, ...], ...]:
    """For m nodes: ``layers(m)[s][j]`` = the subsets (bitmasks) of size s + 1 that contain node j."""
    masks = np.arange(1 << m, dtype=np.int64)
    size = np.zeros(1 << m, dtype=np.int64)
    for j in range(m):
        size += (masks >> j) & 1
    return tuple(tuple(masks[(size == s + 1) & (((masks >> j) & 1) == 1)] for j in range(m)) for s in range(m))


def held_karp(locs: Tensor, *, chunk_size: int | None = None,
              done: Callable[[int], object] | None = None) -> tuple[Tensor, Tensor]:
    """Optimal TSP tours of a batch of instances.

    Args:
        locs: (B, N, 2) coordinates, 2 <= N <= 20 (any device; computed in float64 there).
        chunk_size: instances per DP table (default: as many as fit in 256 MiB).
        done: called with the number of instances of each chunk once it is solved (a progress bar's update).

    Returns:
        ``(cost, tours)``: cost (B,) float64 optimal tour length, tours (B, N) int64 starting at node 0.
    """
    b, n, _ = locs.shape
    if not 2 <= n <= MAX_NODES:
        raise ValueError(f"held_karp handles 2 <= N <= {MAX_NODES} nodes, got {n}")
    per_instance = (1 << (n - 1)) * (n - 1) * 8
    chunk = chunk_size or max(1, MEMORY_BUDGET // per_instance)
    costs, tours = [], []
    for start in range(0, b, chunk):
        c, t = solve_chunk(locs[start:start + chunk])
        costs.append(c)
        tours.append(t)
        if done is not None:
            done(len(c))
    return torch.cat(costs), torch.cat(tours)


def label_tsp(locs: Tensor) -> Tensor:
    """Optimal tours (B, N) int64, 0-based, starting at node 0, of TSP instances ``locs`` (B, N, 2): the
    labels of supervised training (:func:`agents.training.supervised.train_supervised`)."""
    return held_karp(locs)[1]


def solve_chunk(locs: Tensor) -> tuple[Tensor, Tensor]:
    b, n, _ = locs.shape
    m = n - 1  # nodes 1 .. n-1 are bits 0 .. m-1
    dev = locs.device
    dist = torch.cdist(locs.double(), locs.double())  # (B, N, N)
    inner = dist[:, 1:, 1:]  # (B, M, M): d(k, j) between bits
    full = (1 << m) - 1
    table = torch.full((b, 1 << m, m), float("inf"), dtype=torch.float64, device=dev)
    bits = torch.arange(m, device=dev)
    table[:, 1 << bits, bits] = dist[:, 0, 1:]
    for layer in layers(m)[1:]:
        for j, subsets in enumerate(layer):
            s = torch.as_tensor(subsets, device=dev)
            prev = table[:, s ^ (1 << j)]  # (B, |S|, M) paths over S - {j} ending at k (a copy)
            prev += inner[:, None, :, j]  # ... extended by the edge k -> j
            table[:, s, j] = prev.amin(dim=2)
    rows = torch.arange(b, device=dev)
    closing = table[:, full] + dist[:, 1:, 0]  # (B, M)
    cost, last = closing.min(dim=1)
    path = [last]
    subset = torch.full((b,), full, dtype=torch.long, device=dev)
    for _ in range(m - 1):
        subset = subset ^ (1 << path[-1])
        prev = table[rows, subset] + inner[rows, :, path[-1]]  # (B, M)
        path.append(prev.argmin(dim=1))
    tour = torch.stack([torch.zeros_like(last)] + [p + 1 for p in reversed(path)], dim=1)
    return cost, tour


def brute_force(locs: Tensor) -> Tensor:
    """Optimal tour length (B,) by enumerating all (N-1)! tours from node 0: a check for tiny N."""
    b, n, _ = locs.shape
    dist = torch.cdist(locs.double(), locs.double())
    best = torch.full((b,), float("inf"), dtype=torch.float64, device=locs.device)
    for perm in itertools.permutations(range(1, n)):
        order = torch.tensor((0,) + perm, device=locs.device)
        best = torch.minimum(best, dist[:, order, order.roll(-1)].sum(dim=1))
    return best
