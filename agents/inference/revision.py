"""Revision of long tours by a small model trained on short paths (GLOP, LCP): windows of a tour re-solved as
shortest-Hamiltonian-path (SHPP) instances, each new path kept only where it is strictly shorter.

A round cuts every tour into windows of up to ``window`` edges (``window + 1`` consecutive nodes, the first
and last fixed; the windows of a round share only their ends). A closed tour is cut from position ``offset``
all round, the last window shorter where ``window`` does not divide N; a depot problem's routes are
revised route by route, each cut at the depot and at every ``window`` edges from ``offset`` modulo
``window``, so no customer changes route and every load stays. Each window becomes an SHPP-``window``
instance: its start first, its end last (a shorter window padded with copies of its end), its coordinates
moved into the unit square by an affine map that keeps ratios of distances (translated to the window's
bounding box's corner, divided by the box's larger side). Every window of every tour is decoded in one batch
by the SHPP policy (greedy, on ``augment`` mirror images of the window, plus ``samples`` sampled paths); a
window takes the shortest of its new paths where that is shorter, in the tour's own coordinates, than its
current path. The next round moves the offset by ``window // 2``; a tour stops once two rounds in a row
improved none of its windows (each offset met again with the tour unchanged would decode the same), or when
``rounds`` or ``time_limit`` end. The result is replayed through the problem unit and kept only where
feasible and cheaper.

Dimension names: B batch, N nodes, L positions of a sequence, R windows of a batch, W = window + 1 nodes per
window, A paths per window.
"""
from __future__ import annotations

import time
from typing import Any

import torch
from torch import Tensor

from routing_gym.problems import get_problem, tour_cost
from routing_gym.problems.base import as_tours, distance, replay
from routing_gym.problems.shpp import SHPPInstance

from .local_search import giant_actions, pad_like, with_depot
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


def windows(fixed: Tensor, phase: int, window: int) -> tuple[Tensor, Tensor, Tensor]:
    """The windows of sequences whose positions ``fixed`` (B, L) bool (both ends among them) stay in place:
    a window ends at each fixed position and, within a stretch between two, at each position whose offset
    from the stretch's start is ``phase`` modulo ``window``. ``(row, start, size)`` (R,) of the R windows
    with two inner positions or more (``size``: edges, at most ``window``)."""
    length = fixed.shape[1]
    pos = torch.arange(length, device=fixed.device)
    from_start = pos - torch.where(fixed, pos, 0).cummax(dim=1).values  # (B, L) 0 at fixed positions
    cut = fixed | (from_start % window == phase % window)
    after = torch.where(cut, pos, length).flip(1).cummin(1).values.flip(1)  # the first cut >= p
    nxt = torch.cat([after[:, 1:], torch.full_like(after[:, :1], length)], dim=1)  # the first cut > p
    row, start = (cut & (nxt - pos >= 3) & (nxt < length)).nonzero().unbind(1)
    return row, start, nxt[row, start] - start


def revise_round(policy, locs: Tensor, seq: Tensor, fixed: Tensor, phase: int, window: int, *, augment: int,
                 samples: int, generator: torch.Generator | None) -> tuple[Tensor, Tensor]:
    """One round on node sequences ``seq`` (B, L) of coordinates ``locs`` (B, N, 2), positions ``fixed``
    (B, L) in place, windows cut at ``phase`` (:func:`windows`): ``(seq (B, L), improved (B,) bool)``.

    A window of ``size`` < ``window`` edges is padded to W nodes with copies of its end, placed just before
    it; a decoded path drops them, which makes it no longer (the triangle inequality)."""
    b, length = seq.shape
    dev = seq.device
    row, start, size = windows(fixed, phase, window)  # (R,)
    improved = torch.zeros(b, dtype=torch.bool, device=dev)
    if row.numel() == 0:
        return seq, improved
    slot = torch.arange(window + 1, device=dev)  # (W,) the local node ids
    nodes = seq[row[:, None], start[:, None] + torch.minimum(slot, size[:, None])]  # (R, W) pads = the end
    win_locs = locs[row[:, None], nodes]  # (R, W, 2)
    inner = decode_paths(policy, normalise(win_locs).float(), augment=augment, samples=samples,
                         generator=generator)  # (R, A, W - 2)
    r, a = inner.shape[:2]
    ends = torch.zeros_like(inner[..., :1])
    orders = torch.cat([ends, inner, ends + window], dim=-1)  # (R, A, W)
    is_pad = (orders >= size[:, None, None]) & (orders < window)
    orders = orders.gather(-1, is_pad.long().sort(dim=-1, stable=True).indices)  # pads after the end: 0 long
    length_of = path_length(win_locs[:, None].expand(-1, a, -1, -1), orders)  # (R, A)
    best, pick = length_of.min(dim=1)
    better = best < path_length(win_locs, slot.expand(r, -1)) - EPS  # (R,)
    order = orders[torch.arange(r, device=dev), pick]  # (R, W): start, the inner nodes, end, pads
    keep = better[:, None] & (slot[None, 1:] < size[:, None])  # (R, W - 1) inner slots of improved windows
    at = (start[:, None] + slot[None, 1:])[keep]
    revised = seq.clone()
    revised[row[:, None].expand_as(keep)[keep], at] = nodes.gather(1, order[:, 1:])[keep]
    return revised, improved.index_put((row,), better, accumulate=True)


def closed_tour_round(policy, locs: Tensor, tours: Tensor, offset: int, window: int, **kwargs) -> tuple[Tensor, Tensor]:
    """A round on closed tours (B, N): the tour from position ``offset``, closed by its first node, both ends
    fixed, windows of ``window`` edges from there."""
    n = tours.shape[1]
    seq = tours.roll(-offset, dims=1)
    seq = torch.cat([seq, seq[:, :1]], dim=1)
    pos = torch.arange(n + 1, device=tours.device)
    fixed = ((pos == 0) | (pos == n)).expand_as(seq)
    revised, improved = revise_round(policy, locs, seq, fixed, 0, window, **kwargs)
    return revised[:, :-1].roll(offset, dims=1), improved


def routes_round(policy, locs: Tensor, seq: Tensor, offset: int, window: int, **kwargs) -> tuple[Tensor, Tensor]:
    """A round on giant tours (B, L) (``0, route, 0, route, ..., 0``): the depot visits fixed, each route cut
    into windows ``offset`` modulo ``window`` edges from its start."""
    return revise_round(policy, locs, seq, seq == 0, offset, window, **kwargs)


@torch.no_grad()
def revise(policy, problem, instances, tours, *, window: int = 20, rounds: int = 100,
           time_limit: float | None = None, augment: int = 1, samples: int = 0,
           generator: torch.Generator | None = None, device: Any = None) -> tuple[Tensor, Tensor]:
    """Tours revised window by window by an SHPP policy (see the module docstring).

    Args:
        policy: a policy of the protocol for ``"shpp"`` (an attention model trained on SHPP-``window``, say;
            put in evaluation mode here).
        problem: the problem unit or its name: a closed tour over Euclidean nodes, or routes from a
            depot (node 0) serving every customer, revised route by route (no customer changes route).
            Other depot problems without optional visits are accepted, but a revised tour that breaks their own
            rules (time windows, pickup before delivery) is dropped whole: their input comes back.
        instances: a batch of B instances with ``locs`` (B, N, 2).
        tours: (B, S) feasible tours in the env's action format (:func:`~routing_gym.problems.tour_cost`
            validates them: ``ValueError`` for an infeasible one).
        window: the SHPP size n of the windows: ``window + 1`` consecutive nodes each (shorter ones, at a
            route's or a TSP tour's end, padded), at most N - 1.
        rounds: rounds at most (each decodes every still-improving tour's windows in one batch).
        time_limit: seconds after which no round starts (None: none); the batch shares it.
        augment: greedy paths per window, on its first ``augment`` images under the square's 8 symmetries.
        samples: paths sampled per window besides (with ``generator``).
        device: where the policy runs (None: the tours' device); tours and costs come back on the tours' device.

    Returns:
        ``(tours (B, S') int64, cost (B,) float64)``: each tour the revised one where that replays feasible and
        strictly cheaper, else the input (every window's path replaced only by a strictly shorter one);
        ``cost`` its ``tour_cost``. TSP: S' = N; routes: the giant tour's actions, padded with the depot.
    """
    problem = get_problem(problem)
    if problem.optional_visits is not None or problem.policy.coordinates is None:
        raise ValueError(f"revise works on closed tours or routes over Euclidean nodes (TSP, CVRP), not on "
                         f"{problem.name}")
    if not 1 <= augment <= len(SYMMETRIES) or samples < 0 or rounds < 0:
        raise ValueError(f"augment must lie in 1..8, samples and rounds be >= 0; got {augment}, {samples}, {rounds}")
    tours = as_tours(instances, tours)
    start_cost = tour_cost(problem, instances, tours)
    home = tours.device
    device = home if device is None else torch.device(device)
    locs = instances.locs.to(device)
    if problem.has_depot:
        seq = with_depot(giant_actions(with_depot(pad_like(tours.to(device), tours.shape[1] + 2, True))))
        one_round = routes_round
    else:
        seq = tours.to(device).clone()  # the input stays as given
        one_round = closed_tour_round
    b, n = seq.shape[0], locs.shape[1]
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
        revised, improved = one_round(policy, locs[idx], seq[idx], (r * step) % n, window, augment=augment,
                                      samples=samples, generator=generator)
        seq[idx] = revised
        stale[idx] = torch.where(improved, 0, stale[idx] + 1)
    revised = giant_actions(seq) if problem.has_depot else seq
    width = max(tours.shape[1], revised.shape[1])
    tours, revised = pad_like(tours, width, problem.has_depot), pad_like(revised.to(home), width, problem.has_depot)
    cost, feasible, _ = replay(problem, instances, revised)
    keep = feasible & (cost < start_cost)  # never worse, whatever the float32 replay says of equal lengths
    return torch.where(keep[:, None], revised, tours), torch.where(keep, cost.double(), start_cost)
