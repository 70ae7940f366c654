"""Batched local search on decoded tours, in torch on any device: every instance of a batch searches at
once (a loop over improvement rounds, none over instances).

One entry point, :func:`improve`, for every problem of the registry. It reads only what a unit declares
(``has_depot``, ``optional_visits``) and replays tours through the unit (:func:`routing_gym.problems.base.replay`)
for their feasibility and cost:

- a closed tour over all nodes (no depot, no optional visits): best-improvement 2-opt and or-opt (a block of
  1-3 consecutive nodes moved elsewhere, either way round), one move per instance and round, the best of
  (B, L, L) tensors of length changes, until no move shortens a tour. Every such move keeps a permutation
  of the nodes, which is all a tour without a depot or optional visits is, so only the result is replayed;
- routes from a depot (node 0) that serve every customer (no optional visits): relocate and or-opt,
  swap, 2-opt within a route and 2-opt* between routes (tails exchanged, or head joined to head), on the
  giant tour (the routes one after another, a depot visit between two). A move may break the problem's
  constraints (capacity), so each round the ``candidates`` most improving moves of each kind are applied,
  replayed through the unit, and the cheapest feasible one is kept when it is cheaper, or the feasible ones
  that change no edge in common applied together where that replays feasible and cheaper (up to
  ``combine`` a round; by default more candidates and moves where few tours are searched); a round that
  keeps none tries the next ``candidates`` of each kind. A giant tour is searched up to its last route and
  :data:`NEW_ROUTES` empty ones (places for a new route);
- one route from the depot (optional visits): the same moves within that route, replayed;
- nodes without coordinates (``policy.coordinates`` None: a cost matrix): no move; the tours are
  returned as given (the length changes above are Euclidean and symmetric, a reversed block costs the same).

Every move is one operation, :func:`exchange` of two blocks of the sequence, either of which may be empty
and either reversed: 2-opt reverses a block, relocate / or-opt moves a block past a stretch, swap and 2-opt*
exchange two blocks.

Dimension names: B batch, N nodes, S steps, L positions of a closed sequence (its first and last positions
fixed: a closed tour repeats its start, a giant tour starts and ends at the depot), K candidates.
"""
from __future__ import annotations

import time
from typing import Callable, NamedTuple

import torch
from torch import Tensor

from routing_gym.problems import get_problem, tour_cost
from routing_gym.problems.base import as_tours, distance, replay

from ..policies.protocol import select_rows

EPS = 1e-9  # a move must shorten a sequence by more than this (float64 lengths)
REPLAY_ROWS = 512  # tours a round of :func:`replayed_descent` replays at most, by default (see ``improve``)
CANDIDATES = (4, 32)  # the fewest and most candidates per kind of move a default round replays
NEW_ROUTES = 2  # empty routes after the last one where a round's moves may start a route
INF = float("inf")


class Move(NamedTuple):
    """Moves as :func:`exchange`'s blocks, one per row and candidate."""

    delta: Tensor  # (B, K) float64 change of the sequence's length (inf: no move)
    a: Tensor  # (B, K) int64 first position of block 1 (empty when b = a - 1)
    b: Tensor  # (B, K) int64 last position of block 1
    c: Tensor  # (B, K) int64 first position of block 2, > b (empty when d = c - 1)
    d: Tensor  # (B, K) int64 last position of block 2
    rev1: Tensor  # (B, K) bool, block 1 reversed
    rev2: Tensor  # (B, K) bool, block 2 reversed


class Layout(NamedTuple):
    """Where moves may act on sequences (B, L)."""

    movable: Tensor  # (B, L) bool: positions a block may hold (customers; not a closed tour's two ends)
    route: Tensor  # (B, L) int64: fixed positions up to each; the edge (q, q + 1) lies in route[q]
    end: Tensor  # (B, L) int64: the first fixed position after each (L where none)
    between: bool  # moves between routes allowed


def distances(locs: Tensor) -> Tensor:
    """(B, N, N) float64 Euclidean distances of (B, N, 2) coordinates, elementwise (the same in any batch)."""
    x = locs.double()
    return distance(x[:, :, None], x[:, None, :])


def exchange(seq: Tensor, move: Move) -> Tensor:
    """Sequences (B, L) with blocks ``seq[a..b]`` and ``seq[c..d]`` swapped, each reversed where asked, for
    moves of K = 1 (fields (B, 1) or (B,))."""
    pos = torch.arange(seq.shape[1], device=seq.device)[None]
    a, b, c, d, rev1, rev2 = (f.reshape(-1, 1) for f in move[1:])
    len1, len2, mid = b - a + 1, d - c + 1, c - b - 1
    k2 = pos - a  # offset in block 2's new place, then the stretch between, then block 1
    km = k2 - len2
    k1 = km - mid
    src = torch.where((k1 >= 0) & (k1 < len1), torch.where(rev1, b - k1, a + k1), pos)
    src = torch.where((km >= 0) & (km < mid), b + 1 + km, src)
    src = torch.where((k2 >= 0) & (k2 < len2), torch.where(rev2, d - k2, c + k2), src)
    return seq.gather(1, src)


def layout(fixed: Tensor, between: bool) -> Layout:
    length = fixed.shape[1]
    pos = torch.arange(length, device=fixed.device)
    at = torch.where(fixed, pos, length)
    first_from = at.flip(1).cummin(1).values.flip(1)  # the first fixed position >= p
    end = torch.cat([first_from[:, 1:], torch.full_like(first_from[:, :1], length)], dim=1)
    return Layout(movable=~fixed, route=fixed.long().cumsum(1), end=end, between=between)


# -- the kinds of move: (length changes (B, M), flat index (B, K) -> Move fields) -------------------------
Kind = Callable[[Tensor, Layout], tuple[Tensor, Callable[[Tensor], tuple]]]


def two_opt_moves(pair: Tensor, lay: Layout):
    """Reverse ``s[i+1 .. j]``, 0 <= i < j <= L-2: within a route or, ``between`` routes, across depot
    visits (2-opt*: the head of one route joined to the reversed head of a later one, tail to tail)."""
    length = pair.shape[1]
    edge = pair.diagonal(offset=1, dim1=1, dim2=2)  # (B, L-1): (s_i, s_i+1)
    delta = pair[:, :-1, :-1] + pair[:, 1:, 1:] - edge[:, :, None] - edge[:, None, :]
    ok = torch.ones(length - 1, length - 1, dtype=torch.bool, device=pair.device).triu(1)  # i < j
    if not lay.between:
        ok = ok & (lay.route[:, None, :-1] == lay.route[:, :-1, None])  # no fixed position in i+1 .. j
    delta = delta.masked_fill(~ok, INF).flatten(1)

    def decode(flat):
        i, j = flat // (length - 1), flat % (length - 1)
        return i + 1, j, j + 1, j, torch.ones_like(i, dtype=torch.bool), torch.zeros_like(i, dtype=torch.bool)
    return delta, decode


def or_opt_moves(k: int, reverse: bool) -> Kind:
    """Move the block ``s[p .. p+k-1]`` (movable positions) between ``s[q]`` and ``s[q+1]``, reversed or
    not: relocate for k = 1. Within its route, or anywhere ``between`` routes (between two adjacent depot
    visits: a new route)."""
    def moves(pair: Tensor, lay: Layout):
        length = pair.shape[1]
        dev = pair.device
        pos = torch.arange(length, device=dev)
        edge = pair.diagonal(offset=1, dim1=1, dim2=2)  # (B, L-1)
        first = (pos + (k - 1) * reverse).clamp(max=length - 1)  # the node next to s[q] once inserted
        last = (pos + (k - 1) * (not reverse)).clamp(max=length - 1)  # the node next to s[q+1]
        insert = pair[:, first, :-1] + pair[:, last, 1:] - edge[:, None, :]  # (B, P=L, Q=L-1)
        before, after = (pos - 1).clamp(min=0), (pos + k).clamp(max=length - 1)
        saved = pair[:, before, pos] + pair[:, (pos + k - 1).clamp(max=length - 1), after] - pair[:, before, after]
        ok_p = (pos >= 1) & (pos + k <= length - 1)
        ok_p = ok_p & torch.stack([lay.movable[:, (pos + t).clamp(max=length - 1)] for t in range(k)]).all(0)
        q = pos[:-1]
        ok = ok_p[:, :, None] & ((q[None] < pos[:, None] - 1) | (q[None] > pos[:, None] + k - 1))  # (B, P, Q)
        if not lay.between:
            ok = ok & (lay.route[:, None, :-1] == lay.route[:, :, None])
        delta = (insert - saved[:, :, None]).masked_fill(~ok, INF).flatten(1)

        def decode(flat):
            p, q = flat // (length - 1), flat % (length - 1)
            fwd = q > p
            return (torch.where(fwd, p, q + 1), torch.where(fwd, p + k - 1, q), torch.where(fwd, q + 1, p),
                    torch.where(fwd, q, p + k - 1), fwd & reverse, ~fwd & reverse)
        return delta, decode
    moves.__name__ = f"or_opt_{k}{'_reversed' if reverse else ''}"
    return moves


def swap_moves(pair: Tensor, lay: Layout):
    """Swap the nodes at movable positions p and r >= p + 2 (adjacent ones: a 2-opt move)."""
    length = pair.shape[1]
    pos = torch.arange(length, device=pair.device)
    prev, nxt = (pos - 1).clamp(min=0), (pos + 1).clamp(max=length - 1)
    p, r = pos[:, None], pos[None, :]
    added = pair[:, prev[:, None], r] + pair[:, nxt[:, None], r] + pair[:, p, prev[None]] + pair[:, p, nxt[None]]
    removed = pair[:, prev, pos] + pair[:, pos, nxt]  # (B, L): the two edges at each position
    delta = added - removed[:, :, None] - removed[:, None, :]
    ok = lay.movable[:, :, None] & lay.movable[:, None, :] & (r >= p + 2)
    if not lay.between:
        ok = ok & (lay.route[:, :, None] == lay.route[:, None, :])
    delta = delta.masked_fill(~ok, INF).flatten(1)

    def decode(flat):
        p, r = flat // length, flat % length
        return p, p, r, r, torch.zeros_like(p, dtype=torch.bool), torch.zeros_like(p, dtype=torch.bool)
    return delta, decode


def tail_moves(pair: Tensor, lay: Layout):
    """2-opt* between routes: the tail after position i of one route exchanged with the tail after j of a
    later one (i or j a depot visit: a whole route)."""
    length = pair.shape[1]
    edge = pair.diagonal(offset=1, dim1=1, dim2=2)  # (B, L-1)
    delta = pair[:, :-1, 1:] + pair[:, 1:, :-1] - edge[:, :, None] - edge[:, None, :]  # d(i, j+1) + d(i+1, j)
    j = torch.arange(length - 1, device=pair.device)
    ok = lay.end[:, :-1, None] <= j[None, None, :]  # j lies in a later route than i
    delta = delta.masked_fill(~ok, INF).flatten(1)

    def decode(flat):
        i, j = flat // (length - 1), flat % (length - 1)
        no = torch.zeros_like(i, dtype=torch.bool)
        return i + 1, lay.end.gather(1, i) - 1, j + 1, lay.end.gather(1, j) - 1, no, no
    return delta, decode


OR_OPT = (or_opt_moves(1, False), or_opt_moves(2, False), or_opt_moves(2, True), or_opt_moves(3, False),
          or_opt_moves(3, True))
CLOSED_TOUR = (two_opt_moves, *OR_OPT)  # a tour over all nodes
ONE_ROUTE = (two_opt_moves, *OR_OPT, swap_moves)  # within routes
ROUTES = (*ONE_ROUTE, tail_moves)  # and between them


def best_moves(pair: Tensor, lay: Layout, kinds, k: int, floor: Tensor | None = None) -> Move:
    """The ``k`` most improving moves of each kind, (B, k * len(kinds)); only moves whose change exceeds
    ``floor`` (B, len(kinds)) where given. With k = 1 the first best move of each (argmin's tie rule)."""
    found = []
    for t, kind in enumerate(kinds):
        delta, decode = kind(pair, lay)
        if floor is not None:
            delta = delta.masked_fill(delta <= floor[:, t, None], INF)
        if k == 1:
            value, flat = delta.min(dim=1, keepdim=True)
        else:
            value, flat = delta.topk(min(k, delta.shape[1]), dim=1, largest=False)
        found.append(Move(value, *decode(flat)))
    return Move(*(torch.cat(field, dim=1) for field in zip(*found)))


def pairs(dist: Tensor, seq: Tensor) -> Tensor:
    """(B, L, L) distances between the nodes at each pair of positions of ``seq`` (B, L)."""
    rows = torch.arange(seq.shape[0], device=seq.device)[:, None, None]
    return dist[rows, seq[:, :, None], seq[:, None, :]]


class Rounds:
    """Whether another round may start before ``deadline`` (``time.monotonic()``; None: always): only where
    it would end in time, judged by the time the previous round took (so a search overruns its deadline
    only by what one round takes more than the one before)."""

    def __init__(self, deadline: float | None, first: float = 0.0):
        self.deadline, self.began, self.last = deadline, None, first  # first: what the first round may take

    def may_start(self) -> bool:
        now = time.monotonic()
        if self.began is not None:
            self.last = now - self.began
        self.began = now
        return self.deadline is None or now + self.last <= self.deadline


# -- the searches -------------------------------------------------------------------------------------
def descend(dist: Tensor, seq: Tensor, fixed: Tensor | None = None, kinds=(two_opt_moves,), max_rounds: int = 1000,
            deadline: float | None = None) -> tuple[Tensor, int]:
    """Best improvement without replay: each round, every sequence still improving takes its most
    improving move among ``kinds`` (one that shortens it by more than 1e-9) until none does.

    Args:
        dist: (B, N, N) float64 distances (:func:`distances`).
        seq: (B, L) node sequences whose first and last entries stay in place.
        fixed: (B, L) bool, positions no move may move or cross (depot visits: moves within routes); None: none.
        kinds: the kinds of move (:data:`CLOSED_TOUR`, say). max_rounds: moves per sequence at most.
        deadline: ``time.monotonic()`` by which the rounds end (:class:`Rounds`).

    Returns:
        ``(seq (B, L), rounds)``: the improved sequences and the rounds that moved at least one.
    """
    fixed = torch.zeros_like(seq, dtype=torch.bool) if fixed is None else fixed
    seq, fixed = seq.clone(), fixed.clone()
    active = torch.ones(seq.shape[0], dtype=torch.bool, device=seq.device)
    rounds, clock = 0, Rounds(deadline)
    while rounds < max_rounds:
        idx = active.nonzero().squeeze(1)
        if idx.numel() == 0 or not clock.may_start():
            break
        rounds += 1
        s, f = seq[idx], fixed[idx]
        found = best_moves(pairs(dist[idx], s), layout(f, between=False), kinds, k=1)
        best, kind = found.delta.min(dim=1, keepdim=True)
        move = Move(*(field.gather(1, kind) for field in found))
        better = best.squeeze(1) < -EPS
        seq[idx] = torch.where(better[:, None], exchange(s, move), s)
        fixed[idx] = torch.where(better[:, None], exchange(f, move), f)
        active[idx] = better
    return seq, rounds


def two_opt(locs: Tensor, seq: Tensor, fixed: Tensor | None = None, max_iterations: int = 1000) -> Tensor:
    """Best-improvement 2-opt on closed node sequences (B, L) of instances with coordinates ``locs``
    (B, N, 2), whose first and last entries stay in place (a TSP tour repeated to its start; a depot
    problem's ``0, ..., 0``); ``fixed`` (B, L) bool positions no move may move (the depot visits: each move
    reverses a stretch of one route, intra-route 2-opt), None for none; at most ``max_iterations`` moves
    per sequence, each reversing ``seq[i+1 .. j]`` where that shortens it by more than 1e-9."""
    return descend(distances(locs), seq, fixed, (two_opt_moves,), max_iterations)[0]


def giant_actions(seq: Tensor) -> Tensor:
    """The actions (R, L-1) of giant tours (R, L) (``0, routes with a 0 between, 0 ...``): the leading
    depot and every depot visit right after another dropped (an empty route), padded with 0."""
    depot = seq == 0
    repeated = depot & torch.nn.functional.pad(depot[:, :-1], (1, 0), value=True)
    order = torch.sort(repeated.to(torch.uint8), dim=1, stable=True).indices  # kept positions first, in order
    kept = (~repeated).sum(dim=1, keepdim=True)
    pos = torch.arange(seq.shape[1], device=seq.device)
    return seq.gather(1, order).masked_fill(pos >= kept, 0)[:, :-1]


def used_width(seq: Tensor) -> int:
    """Columns of sequences (B, L) up to the last one where any row holds a customer (0 where none does)."""
    used = (seq != 0).any(dim=0).nonzero()
    return int(used.max()) + 1 if used.numel() else 0


def with_depot(actions: Tensor) -> Tensor:
    zero = torch.zeros_like(actions[:, :1])
    return torch.cat([zero, actions], dim=1)


def independent(found: Move, score: Tensor, most: int) -> Tensor:
    """(b, most) columns of ``found`` (b, C): per row, the moves that replayed feasible and cheaper (``score``
    finite), cheapest first, each kept only where the edges it changes (``a - 1 .. d``) are none of those
    already kept changes (-1 past the last). Such moves leave each other's positions in place and their
    length changes add up."""
    b, c = score.shape
    order = score.argsort(dim=1)
    lo, hi = (found.a - 1).gather(1, order), found.d.gather(1, order)  # (b, C) edge spans, cheapest first
    kept = torch.zeros(b, c, dtype=torch.bool, device=score.device)
    for t in range(int((score < INF).sum(dim=1).max())):  # the finite scores come first in the order
        clash = (kept & (lo <= hi[:, t, None]) & (lo[:, t, None] <= hi)).any(dim=1)
        kept[:, t] = (score.gather(1, order[:, t, None]).squeeze(1) < INF) & ~clash & (kept.sum(dim=1) < most)
    rank = torch.where(kept, kept.long().cumsum(dim=1) - 1, most)  # the t-th kept move goes to column t
    cols = torch.full((b, most + 1), -1, dtype=torch.long, device=score.device)
    return cols.scatter_(1, rank, torch.where(kept, order, -1))[:, :most]


def combined(problem, instance, s: Tensor, found: Move, score: Tensor, best: Tensor, chosen: Tensor,
             most: int) -> tuple[Tensor, Tensor]:
    """Up to ``most`` :func:`independent` moves applied together to the giant tours ``s`` (b, L), as
    prefixes (the first two, the first three, ...) replayed through the unit (moves feasible alone may not
    be together: two customers moved into one route); per row the cheapest feasible of these and of the
    single best move (``best`` (b,), its giant tour ``chosen``) is returned as ``(cost, giant tour)``."""
    cols = independent(found, score, most)
    b = s.shape[0]
    none = torch.tensor([1, 0, 1, 0], device=s.device)  # empty blocks: the identity
    prefixes, seq = [], s
    for t in range(int((cols >= 0).sum(dim=1).max())):  # past the most kept moves of a row, every prefix is whole
        col = cols[:, t, None]
        move = Move(None, *(f.gather(1, col.clamp(min=0)) for f in found[1:]))
        ends = [torch.where(col >= 0, f, none[k]) for k, f in enumerate(move[1:5])]
        seq = exchange(seq, Move(None, *ends, move.rev1, move.rev2))
        prefixes.append(seq)
    many = (cols >= 0).sum(dim=1)  # moves kept per row
    row, t = (many[:, None] > torch.arange(1, most, device=s.device)).nonzero().unbind(1)
    if row.numel() == 0:
        return best, chosen
    t = t + 1  # prefix t holds t + 1 moves
    tried = torch.stack(prefixes, dim=1)[row, t]
    actions = giant_actions(tried)
    new_cost, feasible, _ = replay(problem, select_rows(instance, row), actions)
    better = feasible & (new_cost < best[row])
    score = torch.full((b, most), INF, dtype=torch.float64, device=s.device)  # column t: prefix t, 0 the single move
    score[:, 0] = best
    score[row[better], t[better]] = new_cost[better]
    slot = torch.full((b, most), -1, dtype=torch.long, device=s.device)
    slot[row, t] = torch.arange(row.shape[0], device=s.device)
    rows = torch.arange(b, device=s.device)
    pick = most - 1 - score.flip(1).argmin(dim=1)  # the cheapest; on a tie the longer prefix
    pick = torch.where(score[rows, pick] < INF, pick, 0)  # no feasible move at all: the single one's entry
    prefix = with_depot(actions[slot[rows, pick].clamp(min=0)])
    return score[rows, pick], torch.where((pick > 0)[:, None], prefix, chosen)


def replayed_descent(problem, instance, seq: Tensor, cost: Tensor, kinds, between: bool, candidates: int | None,
                     max_rounds: int, deadline: float | None, combine: int | None = 1) -> Tensor:
    """Giant tours (B, L) improved by rounds of: the ``candidates`` most improving moves of each kind
    (beyond those a round already tried in vain), applied and replayed through the unit; the cheapest
    feasible one that is cheaper than ``cost`` (B,) (the current replayed cost) kept. ``combine`` > 1: up to
    that many of the feasible ones that change no edge in common are also tried together (:func:`combined`),
    so that a round may make several moves. None: ``candidates`` as many as keep a round's replay within
    :data:`REPLAY_ROWS` tours (within :data:`CANDIDATES`; a replay of few tours costs its steps' overhead,
    whatever their number), ``combine`` twice that."""
    dist = distances(instance.locs)
    b_all, dev = seq.shape[0], seq.device
    seq, cost = seq.clone(), cost.clone()
    floor = torch.full((b_all, len(kinds)), -INF, dtype=torch.float64, device=dev)  # changes tried in vain
    active = torch.ones(b_all, dtype=torch.bool, device=dev)
    clock = Rounds(deadline)
    for _ in range(max_rounds):
        idx = active.nonzero().squeeze(1)
        if idx.numel() == 0 or not clock.may_start():
            break
        width = min(seq.shape[1], used_width(seq[idx]) + 1 + NEW_ROUTES)
        s = seq[idx, :width]  # the routes, then NEW_ROUTES empty ones (positions beyond hold only the depot)
        k = candidates or min(max(REPLAY_ROWS // (len(idx) * len(kinds)), CANDIDATES[0]), CANDIDATES[1])
        found = best_moves(pairs(dist[idx], s), layout(s == 0, between), kinds, k, floor[idx])
        b, c = found.delta.shape
        valid = found.delta < -EPS  # (b, C)
        if not bool(valid.any()):
            break
        row, col = valid.nonzero().unbind(1)  # only the improving candidates are replayed
        tried = exchange(s[row], Move(*(f[row, col] for f in found)))
        actions = giant_actions(tried)  # (R, L-1)
        new_cost, feasible, _ = replay(problem, select_rows(instance, idx[row]), actions)
        score = torch.full((b, c), INF, dtype=torch.float64, device=dev)
        score[row, col] = torch.where(feasible & (new_cost < cost[idx[row]]), new_cost, INF)
        best, pick = score.min(dim=1)
        take = best < INF
        slot = torch.full((b, c), -1, dtype=torch.long, device=dev)
        slot[row, col] = torch.arange(row.shape[0], device=dev)
        chosen = with_depot(actions[slot[torch.arange(b, device=dev), pick].clamp(min=0)])
        most = combine or 2 * k
        if most > 1:
            best, chosen = combined(problem, select_rows(instance, idx), s, found, score, best, chosen, most)
        seq[idx, :width] = torch.where(take[:, None], chosen, s)
        cost[idx] = torch.where(take, best, cost[idx])
        per_kind = found.delta.view(b, len(kinds), -1).masked_fill(~valid.view(b, len(kinds), -1), -INF)
        floor[idx] = torch.where(take[:, None], -INF, torch.maximum(floor[idx], per_kind.amax(dim=2)))
        more = valid.view(b, len(kinds), -1).all(dim=2).any(dim=1)  # a kind may have improving moves left
        active[idx] = take | more
    return seq


def pad_like(tours: Tensor, width: int, has_depot: bool) -> Tensor:
    """Tours (B, S) padded on the right to ``width`` with the no-op (the depot, or a closed tour's last node)."""
    fill = torch.zeros_like(tours[:, :1]) if has_depot else tours[:, -1:]
    return torch.cat([tours, fill.expand(-1, width - tours.shape[1])], dim=1)


@torch.no_grad()
def improve(problem, instance, tours, *, max_rounds: int = 1000, time_limit: float | None = None,
            candidates: int | None = None, combine: int | None = None,
            cost: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Local search from ``tours`` (see the module docstring for the moves each problem gets).

    Args:
        problem: the problem unit (or its name).
        instance: a batch of B instances.
        tours: (B, S) feasible tours in the env's action format (:func:`~routing_gym.problems.tour_cost`
            validates them: ``ValueError`` for an infeasible one).
        max_rounds: improvement rounds at most (a round makes one move per instance; up to ``combine`` with a
            depot).
        time_limit: seconds by which the search ends, its final replay included (no round starts that the
            previous one says would end later, and the rounds leave the final replay as long as the first
            took; None: none); the batch shares it.
        candidates: moves of each kind replayed per instance and round (tours with a depot); None: as many
            as keep a round's replay within :data:`REPLAY_ROWS` tours (4 to 32 per kind: more for a few
            instances, so the result of an instance may depend on the batch it is searched in).
        combine: moves per instance and round at most (tours with a depot): the feasible candidates that
            change no edge in common are also tried together (1: one move a round); None: twice
            ``candidates``.
        cost: (B,) float64 the tours' :func:`~routing_gym.problems.tour_cost` where the caller has just replayed
            them (their replay is then not repeated, nor their feasibility checked again); None: computed here.

    Returns:
        ``(tours (B, S') int64, cost (B,) float64)``: each tour the improved one where that replays feasible
        and strictly cheaper, else the input; ``cost`` their :func:`~routing_gym.problems.tour_cost`. S' >= S
        (routes added may need more depot visits); padded with the no-op.
    """
    problem = get_problem(problem)
    tours = as_tours(instance, tours)
    began = time.monotonic()
    cost = tour_cost(problem, instance, tours) if cost is None else cost
    checked = time.monotonic() - began  # the final replay takes about as long (where this one ran)
    deadline = None if time_limit is None else began + time_limit - checked  # the rounds leave it that time
    if problem.policy.coordinates is None:  # no Euclidean lengths to search with (see the module docstring)
        return tours, cost
    n = instance.locs.shape[1]
    if not problem.has_depot and problem.optional_visits is None:
        better = closed_tour_descent(instance, tours[:, :n], max_rounds, deadline)
    else:
        seq = with_depot(giant_actions(with_depot(pad_like(tours, tours.shape[1] + 2, True))))
        kinds = ROUTES if problem.optional_visits is None else ONE_ROUTE
        better = giant_actions(replayed_descent(problem, instance, seq, cost, kinds, problem.optional_visits is None,
                                                candidates, max_rounds, deadline, combine))
        better = better[:, :min(better.shape[1], used_width(better) + 1)]
    width = max(tours.shape[1], better.shape[1])
    tours, better = pad_like(tours, width, problem.has_depot), pad_like(better, width, problem.has_depot)
    new_cost, feasible, _ = replay(problem, instance, better)
    keep = feasible & (new_cost < cost)
    return torch.where(keep[:, None], better, tours), torch.where(keep, new_cost, cost)


def closed_tour_descent(instance, tours: Tensor, max_rounds: int, deadline: float | None) -> Tensor:
    """TSP tours (B, N) after 2-opt and or-opt (:data:`CLOSED_TOUR`), each starting from its own first node.
    A second descent starts from each tour rotated by half, since or-opt's blocks never hold a sequence's
    fixed ends."""
    dist = distances(instance.locs)
    b, n = tours.shape
    pos = torch.arange(n + 1, device=tours.device)
    fixed = ((pos == 0) | (pos == n))[None].expand(b, -1)
    pos = pos[:-1]
    seq = tours
    for shift in (0, n // 2):
        seq = seq.roll(-shift, dims=1)
        seq, rounds = descend(dist, torch.cat([seq, seq[:, :1]], dim=1), fixed, CLOSED_TOUR, max_rounds, deadline)
        seq, max_rounds = seq[:, :-1], max_rounds - rounds
    start = (seq == tours[:, :1]).long().argmax(dim=1, keepdim=True)  # back to the input's first node
    return seq.gather(1, (pos[None] + start) % n)
