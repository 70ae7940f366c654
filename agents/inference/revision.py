"""Revision of long tours by a small model trained on short paths (GLOP, LCP): windows of a tour re-solved as
shortest-Hamiltonian-path (SHPP) instances, each new path kept only where it is strictly shorter.

A round cuts every tour, from position ``offset``, into windows of ``window + 1`` consecutive nodes (a window's
first and last node fixed, ``window - 1`` between; the windows of a round share only their ends, and the
``N mod window`` positions left over stay as they are). Each window becomes an SHPP-``window`` instance: its
start first, its end last, its coordinates moved into the unit square by an affine map that keeps ratios of
distances (translated to the window's bounding box's corner, divided by the box's larger side). Every window
of every tour is decoded in one batch by the SHPP policy (greedy, on ``augment`` mirror images of the window,
plus ``samples`` sampled paths); a window takes the shortest of its new paths where that is shorter, in the
tour's own coordinates, than its current path. The next round moves the offset by ``window // 2``; a tour
stops once two rounds in a row improved none of its windows (each offset met again with the tour unchanged
would decode the same), or when ``rounds`` or ``time_limit`` end.

Dimension names: B batch, N nodes, K windows per tour, W = window + 1 nodes per window, A paths per window.
"""
from __future__ import annotations

import time
from typing import Any

import torch
from torch import Tensor

from routing_gym.problems import get_problem, tour_cost
from routing_gym.problems.base import as_tours, distance
from routing_gym.problems.shpp import SHPPInstance

from .rollout import make_env, rollout

EPS = 1e-9  # a new path must be shorter than the current one by more than this (float64 lengths)
STALE_ROUNDS = 2  # rounds in a row without an improvement after which a tour stops
# the eight symmetries of the unit square, (x, y) -> (x', y'), as (swap x and y, mirror x, mirror y)
SYMMETRIES = ((False, False, False), (False, True, False), (False, False, True), (False, True, True),
              (True, False, False), (True, True, False), (True, False, True), (True, True, True))


def normalise(locs: Tensor) -> Tensor:
    """Windows' coordinates (..., W, 2) mapped into [0, 1]^2: translated by their bounding box's lower corner
    and divided by its larger side (1 where every node lies at one point), so ratios of distances are kept."""
    low = locs.amin(dim=-2, keepdim=True)
    side = (locs.amax(dim=-2, keepdim=True) - low).amax(dim=-1, keepdim=True)  # (..., 1, 1)
    return ((locs - low) / torch.where(side > 0, side, torch.ones_like(side))).clamp(0.0, 1.0)


def mirror(locs: Tensor, augment: int) -> Tensor:
    """(M, W, 2) unit-square coordinates -> (M * augment, W, 2): each window's first ``augment`` images
    under :data:`SYMMETRIES` (the identity first), the images of one window in a run."""
    images = []
    for swap, flip_x, flip_y in SYMMETRIES[:augment]:
        x, y = locs.unbind(-1)
        x, y = (y, x) if swap else (x, y)
        images.append(torch.stack((1 - x if flip_x else x, 1 - y if flip_y else y), dim=-1))
    return torch.stack(images, dim=1).flatten(0, 1)


def path_length(locs: Tensor, order: Tensor) -> Tensor:
    """(...,) float64 length of the paths through ``locs`` (..., W, 2) in the order ``order`` (..., W)."""
    x = locs.double().gather(-2, order[..., None].expand(*order.shape, 2))
    return distance(x[..., 1:, :], x[..., :-1, :]).sum(-1)


@torch.no_grad()
def decode_paths(policy, locs: Tensor, *, augment: int, samples: int,
                 generator: torch.Generator | None) -> Tensor:
    """Inner orders (M, A, W - 2) of SHPP windows ``locs`` (M, W, 2) in [0, 1]^2 (start first, end last),
    their local node ids 1 .. W - 2: the greedy path of each of ``augment`` images, then ``samples`` paths
    sampled on the window itself. One batch per strategy, on ``locs``' device."""
    m, w, _ = locs.shape
    found = []
    images = mirror(locs, augment)  # (M * augment, W, 2)
    env = make_env("shpp", w - 1, images.shape[0], locs.device)
    found.append(rollout(policy, env, SHPPInstance(images), strategy="greedy").actions.view(m, augment, -1))
    if samples:
        many = locs.repeat_interleave(samples, dim=0)  # (M * samples, W, 2), a window's samples in a run
        env = make_env("shpp", w - 1, many.shape[0], locs.device)
        found.append(rollout(policy, env, SHPPInstance(many), strategy="sample", generator=generator,
                             repeats=samples).actions.view(m, samples, -1))
    return torch.cat(found, dim=1)[:, :, : w - 2]  # the last action is the end


def revise_round(policy, locs: Tensor, tours: Tensor, offset: int, window: int, *, augment: int, samples: int,
                 generator: torch.Generator | None) -> tuple[Tensor, Tensor]:
    """One round on closed tours (B, N) of coordinates ``locs`` (B, N, 2), windows from position ``offset``:
    ``(tours (B, N), improved (B,) bool)``."""
    b, n = tours.shape
    dev = tours.device
    k = n // window
    pos = (offset + torch.arange(k, device=dev)[:, None] * window + torch.arange(window + 1, device=dev)) % n
    nodes = tours[:, pos]  # (B, K, W) the windows' nodes, in tour order
    rows = torch.arange(b, device=dev)[:, None, None]
    win_locs = locs[rows, nodes]  # (B, K, W, 2)
    inner = decode_paths(policy, normalise(win_locs).flatten(0, 1).float(), augment=augment, samples=samples,
                         generator=generator)  # (B * K, A, W - 2)
    a = inner.shape[1]
    first = torch.zeros_like(inner[..., :1])
    orders = torch.cat([first, inner, torch.full_like(first, window)], dim=-1).view(b, k, a, window + 1)
    current = path_length(win_locs, torch.arange(window + 1, device=dev).expand(b, k, -1))  # (B, K)
    length = path_length(win_locs[:, :, None].expand(-1, -1, a, -1, -1), orders)  # (B, K, A)
    best, pick = length.min(dim=-1)
    better = best < current - EPS  # (B, K)
    order = orders.gather(2, pick[:, :, None, None].expand(-1, -1, 1, window + 1)).squeeze(2)  # (B, K, W)
    new_nodes = torch.where(better[..., None], nodes.gather(2, order), nodes)
    revised = tours.clone()
    revised[torch.arange(b, device=dev)[:, None], pos[:, 1:-1].reshape(-1)] = new_nodes[:, :, 1:-1].flatten(1)
    return revised, better.any(dim=1)


@torch.no_grad()
def revise(policy, problem, instances, tours, *, window: int = 20, rounds: int = 100,
           time_limit: float | None = None, augment: int = 1, samples: int = 0,
           generator: torch.Generator | None = None, device: Any = None) -> tuple[Tensor, Tensor]:
    """Tours revised window by window by an SHPP policy (see the module docstring).

    Args:
        policy: a policy of the protocol for ``"shpp"`` (an attention model trained on SHPP-``window``, say;
            put in evaluation mode here).
        problem: the problem unit or its name; tours over all nodes without a depot (TSP).
        instances: a batch of B instances with ``locs`` (B, N, 2).
        tours: (B, N) feasible tours (:func:`~routing_gym.problems.tour_cost` validates them).
        window: the SHPP size n of the windows: ``window + 1`` consecutive nodes each, at most N - 1.
        rounds: rounds at most (each decodes every still-improving tour's windows in one batch).
        time_limit: seconds after which no round starts (None: none); the batch shares it.
        augment: greedy paths per window, on its first ``augment`` images under the square's 8 symmetries.
        samples: paths sampled per window besides (with ``generator``).
        device: where the policy runs (None: the tours' device); tours and costs come back on the tours' device.

    Returns:
        ``(tours (B, N) int64, cost (B,) float64)``: every tour a permutation of the nodes no longer than the
        input (each window's path replaced only by a strictly shorter one), ``cost`` its ``tour_cost``.
    """
    problem = get_problem(problem)
    if problem.has_depot or problem.profits is not None or problem.policy.coordinates is None:
        raise ValueError(f"revise works on closed tours over Euclidean nodes (TSP), not on {problem.name}")
    if not 1 <= augment <= len(SYMMETRIES) or samples < 0 or rounds < 0:
        raise ValueError(f"augment must lie in 1..8, samples and rounds be >= 0; got {augment}, {samples}, {rounds}")
    tours = as_tours(instances, tours)
    start_cost = tour_cost(problem, instances, tours)
    home = tours.device
    device = home if device is None else torch.device(device)
    locs, seq = instances.locs.to(device), tours.to(device).clone()  # the input stays as given
    b, n = seq.shape
    window = min(window, n - 1)
    if window < 3:  # no window holds two inner nodes to reorder
        return tours, start_cost
    if hasattr(policy, "eval"):
        policy.eval()
    deadline = None if time_limit is None else time.monotonic() + time_limit
    stale = torch.zeros(b, dtype=torch.long, device=device)  # rounds in a row without an improvement
    step = max(window // 2, 1)
    for r in range(rounds):
        idx = (stale < STALE_ROUNDS).nonzero().squeeze(1)
        if idx.numel() == 0 or (deadline is not None and time.monotonic() > deadline):
            break
        revised, improved = revise_round(policy, locs[idx], seq[idx], (r * step) % n, window, augment=augment,
                                         samples=samples, generator=generator)
        seq[idx] = revised
        stale[idx] = torch.where(improved, 0, stale[idx] + 1)
    seq = seq.to(home)
    cost = tour_cost(problem, instances, seq)
    keep = cost < start_cost  # never worse, whatever the float32 replay says of equal lengths
    return torch.where(keep[:, None], seq, tours), torch.where(keep, cost, start_cost)
