"""Depot instances larger than a model's training size, constructed as sub-problems of about that size.

The customers are ordered by their polar angle around the depot and cut into consecutive sectors of at most
``size`` customers (as the sweep heuristic of Gillett & Miller, 1974, groups them; the sector lengths differ
by one at most). Each sector with the depot is an instance of the same unit, moved into the unit square by the
revision's affine map (:func:`agents.inference.revision.normalise`, which keeps ratios of distances), so the
model sees about the size and the density it was trained on. Every sector is decoded greedily, the best of
``augment`` symmetric copies, and an instance's routes are its sectors' routes one after the other. The cut
is made for several sector sizes, and ``rotations`` times for each, each rotation moving the sectors' first
customer on by a fraction of a sector; all sectors of all cuts are decoded together (one batch per sector
length), and each instance keeps its cheapest cut, replayed through the problem unit.

For units whose instances are the coordinates and the demands alone and whose routes may be joined at the
depot (CVRP, SDVRP): :func:`applies`. Measured in ``benchmarks/subproblems.py``.

Dimension names: B batch, N nodes (the depot and n customers), C candidate cuts, L customers of a sector, M
sub-problems of one length, T actions of a tour.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from routing_gym.problems.base import replay

from .local_search import giant_actions, pad_like, with_depot
from .revision import normalise
from .search import Decoded, greedy, greedy_tours

SIZES = (20, 30, 50)  # sector sizes tried by default: the shipped depot models' n = 20, and 1.5 and 2.5 times it


def applies(problem) -> bool:
    """Routes from a depot that serve every customer, in instances of ``locs`` and ``demand`` alone: a sector
    with the depot is an instance of the same unit, and routes of disjoint sectors join at the depot."""
    return problem.has_depot and problem.optional_visits is None and set(problem.Instance._fields) == {"locs", "demand"}


def sector_bounds(n: int, size: int) -> list[tuple[int, int]]:
    """``(first, end)`` positions of the sectors that cut ``n`` customers into ``ceil(n / size)`` runs whose
    lengths differ by one at most (the longer ones first)."""
    count = math.ceil(n / size)
    lengths = [n // count + (k < n % count) for k in range(count)]
    ends = torch.tensor(lengths).cumsum(0).tolist()
    return [(end - length, end) for length, end in zip(lengths, ends)]


@torch.no_grad()
def sector_decode(policy, problem, instances, sizes: Sequence[int] = SIZES, *, rotations: int = 4,
                  augment: int = 8, batch_size: int = 1000) -> Decoded:
    """Tours of ``instances`` (B instances of N nodes) built from sub-problems (the module's docstring): for
    each sector size of ``sizes`` (the most customers of a sector) the cut is made ``rotations`` times, every
    sector of every cut decoded in one batch per sector length, and each instance takes its cheapest cut; a
    size of n customers or more decodes the whole instance. Rows whose routes the unit's replay refuses cost
    +inf."""
    if not applies(problem):
        raise ValueError(f"sector decoding needs routes from a depot that serve every customer, over instances "
                         f"of locs and demand alone (CVRP, SDVRP); {problem.name} is not such a problem")
    if not sizes or min(sizes) < 1 or rotations < 1:
        raise ValueError(f"sizes must be sector sizes >= 1 and rotations >= 1, got {list(sizes)} and {rotations}")
    locs, demand = instances.locs, instances.demand
    b, n = locs.shape[0], locs.shape[1] - 1
    offset = locs[:, 1:] - locs[:, :1]
    order = torch.atan2(offset[..., 1], offset[..., 0]).argsort(dim=1) + 1  # (B, n) customer node ids by angle
    cuts = []  # per candidate cut, its sectors (B, L) in order
    for size in dict.fromkeys(s for s in sizes if s < n):
        bounds = sector_bounds(n, size)
        shortest = min(end - first for first, end in bounds)
        cuts += [[order.roll(-(r * shortest // rotations), dims=1)[:, first:end] for first, end in bounds]
                 for r in range(rotations)]
    sectors = [sector for cut in cuts for sector in cut]
    routes = [None] * len(sectors)  # each sector's tour in the instance's node ids, (B, T)
    for length in sorted({s.shape[1] for s in sectors}):
        which = [i for i, s in enumerate(sectors) if s.shape[1] == length]
        nodes = torch.stack([sectors[i] for i in which], dim=1).flatten(0, 1)  # (M, L), M = B * len(which)
        nodes = torch.cat([torch.zeros_like(nodes[:, :1]), nodes], dim=1)  # the depot first
        rows = torch.arange(b, device=locs.device).repeat_interleave(len(which))[:, None]
        sub = type(instances)(locs=normalise(locs[rows, nodes]), demand=demand[rows, nodes])
        tours = nodes.gather(1, greedy_tours(policy, problem, sub, augment=augment, batch_size=batch_size)[1])
        for i, tour in zip(which, tours.view(b, len(which), -1).unbind(1)):
            routes[i] = tour
    joined, first = [], 0
    for cut in cuts:
        joined.append(giant_actions(with_depot(torch.cat(routes[first:first + len(cut)], dim=1))))
        first += len(cut)
    if max(sizes) >= n:  # a size that holds every customer: the instance decoded whole, as it is
        joined.append(greedy(policy, problem, instances, augment=augment, batch_size=batch_size).tours)
    width = max(t.shape[1] for t in joined)
    tours = torch.stack([pad_like(t, width, True) for t in joined], dim=1)  # (B, C, T), C candidates
    copies = type(instances)(*(x.repeat_interleave(len(joined), dim=0) for x in instances))
    cost, ok, _ = replay(problem, copies, tours.flatten(0, 1))
    cost, pick = cost.masked_fill(~ok, float("inf")).view(b, len(joined)).min(dim=1)
    return Decoded(cost=cost, tours=tours[torch.arange(b, device=locs.device), pick])
