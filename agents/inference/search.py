"""Inference-time search for policies of the protocol of :mod:`agents.policies.protocol`: best of k
samples, beam search, and POMO's multi-start with the 8 symmetries of the unit square.

- **Sampling** (Kool et al. 2019, "sampling 1280 solutions"): k rollouts sampled from the policy (at a
  softmax ``temperature``), the cheapest kept per instance.
- **Beam search**: the ``beam_width`` partial tours of highest summed log-probability are extended at
  every step; the cheapest finished tour in the final beam is kept (beam width 1 is greedy decoding).

Sampling and beam search count the greedy tour among their candidates, so they are never worse than
greedy decoding: on instances unlike the training distribution (a real instance in a thin strip, say)
the policy's confidence can collapse, and a search over its distribution alone can then lose to its
argmax.
- **Multi-start** (Kwon et al. 2020, POMO): one greedy rollout per first action (every node for TSP,
  every customer for the depot problems), optionally on each of the 8 coordinate transforms
  ``(x, y) -> (x or 1 - x, y or 1 - y)``, possibly swapped (:func:`augment`), which keep every distance.
  Instances without coordinates (no ``locs`` field: a cost matrix) have no such transform: their copies
  are the instance itself, so augmentation only repeats (greedy) or multiplies (sampling) the decoding.

Everything is batched over ``batch_size`` rows (instance copies) at a time, so memory stays bounded
whatever k, the beam width or the number of starts. Greedy, sampling and multi-start step the vector
env of :func:`agents.inference.rollout.make_env`; beam search steps the problem core directly, because
its beams are re-ranked (rows re-indexed, the policy's cache with them) at every step. Every returned
tour is validated by :func:`routing_gym.problems.tour_cost` on the original instances, which also gives
the returned cost.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import torch
from torch import Tensor

from routing_gym.problems import get_problem, step, tour_cost
from routing_gym.problems.masks import is_marked

from ..policies.protocol import Policy, select_rows
from .rollout import make_env, replay, rollout

STRATEGIES = ("greedy", "sample", "beam", "multistart")
NUM_AUGMENTATIONS = 8


class Decoded(NamedTuple):
    cost: Tensor  # (B,) float64 cost of each returned tour, by tour_cost
    tours: Tensor  # (B, S) int64 actions, padded with the no-op node


# -- instance copies ------------------------------------------------------------------------------
def augment_locs(locs: Tensor, index: Tensor) -> Tensor:
    """Coordinates (R, N, 2) under transform ``index`` (R,) in 0..7: bit 1 flips x, bit 2 flips y, bit
    0 swaps x and y (after the flips). Transform 0 is the identity."""
    x, y = locs[..., 0], locs[..., 1]
    x = torch.where((index & 2).bool()[:, None], 1 - x, x)
    y = torch.where((index & 4).bool()[:, None], 1 - y, y)
    swap = (index & 1).bool()[:, None]
    return torch.stack([torch.where(swap, y, x), torch.where(swap, x, y)], dim=-1)


def transformed(instances, index: Tensor):
    """Instances (R rows) with their coordinates under transform ``index`` (R,) (:func:`augment_locs`);
    unchanged where they have no coordinates (no ``locs`` field)."""
    return instances._replace(locs=augment_locs(instances.locs, index)) if "locs" in instances._fields else instances


def augment(instances, k: int = NUM_AUGMENTATIONS):
    """``k`` (1..8) transformed copies of each instance, copies of one instance adjacent (B * k rows)."""
    if not 1 <= k <= NUM_AUGMENTATIONS:
        raise ValueError(f"augment must be between 1 and {NUM_AUGMENTATIONS}, got {k}")
    b, dev = instances[0].shape[0], instances[0].device
    rows = select_rows(instances, torch.arange(b, device=dev).repeat_interleave(k))
    return transformed(rows, torch.arange(k, device=dev).repeat(b))


class Copies(NamedTuple):
    """How each of an instance's C copies is decoded: copy c uses transform ``transform[c]`` and first
    action ``first[c]`` (-1: chosen by the policy)."""

    transform: Tensor  # (C,) int64 in 0..7
    first: Tensor  # (C,) int64 node or -1


def check_batch_size(batch_size: int) -> None:
    """``ValueError`` unless ``batch_size`` (rows decoded at a time) is a positive integer."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")


# -- the engine: best of many rollouts ------------------------------------------------------------
@torch.no_grad()
def best_of_copies(policy: Policy, problem, instances, copies: Copies, *, strategy: str = "greedy",
                   batch_size: int = 1000, generator: torch.Generator | None = None,
                   temperature: float = 1.0) -> tuple[Tensor, Tensor]:
    """The cheapest of C rollouts per instance: ``(cost (B,), tours (B, S_max))``, cost +inf where no
    copy gave a feasible tour.

    The B * C (instance, copy) rows are decoded ``batch_size`` at a time. Rows whose forced first action
    is masked at the start (an OP customer out of reach) count as infeasible. With transforms, each
    tour is re-costed (and re-validated) on the original instance.
    """
    check_batch_size(batch_size)
    dev = instances[0].device
    b, n_total = instances[0].shape[0], problem.n_total_of(instances)
    c = copies.transform.shape[0]
    transform, first = copies.transform.to(dev), copies.first.to(dev)
    max_steps = int(problem.bounds(n_total)["num_steps"][2])
    best = torch.full((b,), float("inf"), dtype=torch.float64, device=dev)
    tours = torch.zeros(b, max_steps, dtype=torch.long, device=dev)
    envs: dict[int, Any] = {}
    forced = bool((first >= 0).any())
    recost = bool((transform != 0).any())
    for f0 in range(0, b * c, batch_size):
        flat = torch.arange(f0, min(f0 + batch_size, b * c), device=dev)
        inst, copy = flat // c, flat % c
        original = select_rows(instances, inst)
        rows = transformed(original, transform[copy]) if recost else original
        starts = first[copy]
        if forced and bool((starts < 0).any()):
            raise ValueError("multi-start copies must all force a first action")
        if len(flat) not in envs:
            envs[len(flat)] = make_env(problem.name, problem.size_of(instances), len(flat), dev)
        out = rollout(policy, envs[len(flat)], rows, strategy=strategy, generator=generator,
                      first_actions=starts if forced else None, temperature=temperature)
        cost = out.cost.double()
        ok = torch.ones_like(cost, dtype=torch.bool)
        if forced:
            ok &= is_marked(problem.reset(rows).mask, starts)
        if recost:
            cost, feasible = replay(problem, original, out.actions)
            ok &= feasible
        cost = cost.masked_fill(~ok, float("inf"))
        chunk_best = torch.full_like(best, float("inf")).scatter_reduce(0, inst, cost, "amin")
        winner = torch.full((b,), -1, dtype=torch.long, device=dev)
        is_min = (cost == chunk_best[inst]) & torch.isfinite(cost)
        winner.scatter_(0, inst[is_min], torch.arange(len(flat), device=dev)[is_min])
        better = (winner >= 0) & (chunk_best < best)
        best = torch.where(better, chunk_best, best)
        s = out.actions.shape[1]
        padded = torch.zeros(b, max_steps, dtype=torch.long, device=dev)
        padded[better, :s] = out.actions[winner[better]]  # TSP tours always take N = max_steps steps
        tours = torch.where(better[:, None], padded, tours)
    return best, tours


def with_greedy(policy: Policy, problem, instances, found: Decoded, *, augment: int, batch_size: int) -> Decoded:
    """``found``, where the greedy tour (best over ``augment`` transforms) is not cheaper, else that."""
    plain = greedy(policy, problem, instances, augment=augment, batch_size=batch_size)
    take = plain.cost < found.cost
    if not bool(take.any()):
        return found
    s = max(plain.tours.shape[1], found.tours.shape[1])
    tours = torch.where(take[:, None], pad_tours(plain.tours, s), pad_tours(found.tours, s))
    return finish_tours(problem, instances, tours)


def pad_tours(tours: Tensor, width: int) -> Tensor:
    """Tours (B, S) padded on the right to (B, width) with node 0 (the depot: a no-op once a tour ends)."""
    return torch.nn.functional.pad(tours, (0, width - tours.shape[1]), value=0)


def finish_tours(problem, instances, tours: Tensor) -> Decoded:
    """Trim trailing padding and validate: the :class:`Decoded` of tours (B, S_max)."""
    if problem.has_depot:
        used = int((tours != 0).any(dim=0).nonzero().max()) + 2 if bool((tours != 0).any()) else 1
        tours = tours[:, :min(used, tours.shape[1])]
    return Decoded(cost=tour_cost(problem, instances, tours), tours=tours)


# -- strategies -----------------------------------------------------------------------------------
def transforms(k: int) -> Tensor:
    if not 1 <= k <= NUM_AUGMENTATIONS:
        raise ValueError(f"augment must be between 1 and {NUM_AUGMENTATIONS}, got {k}")
    return torch.arange(k)


@torch.no_grad()
def greedy(policy: Policy, problem, instances, *, augment: int = 1, batch_size: int = 1000) -> Decoded:
    """Greedy decoding, the best over ``augment`` coordinate transforms."""
    problem = get_problem(problem) if isinstance(problem, str) else problem
    _, tours = greedy_tours(policy, problem, instances, augment=augment, batch_size=batch_size)
    return finish_tours(problem, instances, tours)


@torch.no_grad()
def greedy_tours(policy: Policy, problem, instances, *, augment: int = 1,
                 batch_size: int = 1000) -> tuple[Tensor, Tensor]:
    """:func:`greedy`'s ``(cost, tours)`` before its final replay: the rollouts' costs (transformed copies
    costed by the unit's replay, see :func:`best_of_copies`), for callers that cost or join the tours
    themselves."""
    t = transforms(augment)
    return best_of_copies(policy, problem, instances, Copies(t, torch.full_like(t, -1)), batch_size=batch_size)


@torch.no_grad()
def sample_best(policy: Policy, problem, instances, num_samples: int, *, augment: int = 1, batch_size: int = 1000,
                generator: torch.Generator | None = None, temperature: float = 1.0) -> Decoded:
    """The cheapest of ``num_samples`` rollouts sampled at ``temperature`` per instance (per transform, with
    ``augment``) and of the greedy tour."""
    problem = get_problem(problem) if isinstance(problem, str) else problem
    if num_samples < 1:
        raise ValueError(f"num_samples must be >= 1, got {num_samples}")
    t = transforms(augment).repeat_interleave(num_samples)
    cost, tours = best_of_copies(policy, problem, instances, Copies(t, torch.full_like(t, -1)), strategy="sample",
                                 batch_size=batch_size, generator=generator, temperature=temperature)
    found = finish_tours(problem, instances, tours)
    return with_greedy(policy, problem, instances, found, augment=augment, batch_size=batch_size)


@torch.no_grad()
def multistart(policy: Policy, problem, instances, *, augment: int = NUM_AUGMENTATIONS,
               batch_size: int = 1000) -> Decoded:
    """POMO inference: a greedy rollout from every start node (the problem's ``start_nodes``)
    on each of ``augment`` transforms; the cheapest per instance. Instances where no start is feasible (OP with
    every customer out of reach) fall back to plain greedy decoding."""
    problem = get_problem(problem) if isinstance(problem, str) else problem
    starts = problem.start_nodes(problem.n_total_of(instances))
    t = transforms(augment)
    copies = Copies(t.repeat_interleave(len(starts)), starts.repeat(len(t)))
    cost, tours = best_of_copies(policy, problem, instances, copies, batch_size=batch_size)
    missing = ~torch.isfinite(cost)
    if bool(missing.any()):
        rows = missing.nonzero().flatten()
        fallback = greedy(policy, problem, select_rows(instances, rows), batch_size=batch_size).tours
        tours[rows] = 0
        tours[rows, :fallback.shape[1]] = fallback
    return finish_tours(problem, instances, tours)


@torch.no_grad()
def beam_search(policy: Policy, problem, instances, beam_width: int, *, augment: int = 1,
                batch_size: int = 1000) -> Decoded:
    """Beam search of width ``beam_width`` (best over ``augment`` transforms, and never worse than the greedy
    tour): see the module docstring."""
    problem = get_problem(problem) if isinstance(problem, str) else problem
    if beam_width < 1:
        raise ValueError(f"beam_width must be >= 1, got {beam_width}")
    check_batch_size(batch_size)
    dev = instances[0].device
    b, n_total = instances[0].shape[0], problem.n_total_of(instances)
    max_steps = int(problem.bounds(n_total)["num_steps"][2])
    per_chunk = max(1, batch_size // (beam_width * augment))
    best = torch.full((b,), float("inf"), dtype=torch.float64, device=dev)
    tours = torch.zeros(b, max_steps, dtype=torch.long, device=dev)
    for i0 in range(0, b, per_chunk):
        idx = torch.arange(i0, min(i0 + per_chunk, b), device=dev)
        original = select_rows(instances, idx.repeat_interleave(augment))
        rows = transformed(original, torch.arange(augment, device=dev).repeat(len(idx)))
        cost, actions, _ = beam_rows(policy, problem, rows, beam_width, max_steps)
        if augment > 1:
            cost, feasible = replay(problem, original, actions)
            cost = cost.masked_fill(~feasible, float("inf"))
        cost, pick = cost.view(len(idx), augment).min(dim=1)
        best[idx] = cost
        tours[idx] = actions.view(len(idx), augment, -1)[torch.arange(len(idx), device=dev), pick]
    found = finish_tours(problem, instances, tours)
    return with_greedy(policy, problem, instances, found, augment=augment, batch_size=batch_size)


def beam_rows(policy: Policy, problem, instances, width: int, max_steps: int) -> tuple[Tensor, Tensor, Tensor]:
    """Beam search on R instances: ``(cost (R,), actions (R, max_steps), log-likelihood (R,))`` of each
    one's cheapest final beam."""
    dev = instances[0].device
    r, n = instances[0].shape[0], problem.n_total_of(instances)
    rep = torch.arange(r, device=dev).repeat_interleave(width)
    state = problem.reset(instances)
    cache = initial = select_rows(policy.precompute(observe(problem, state)), rep)  # an instance's beams alike
    state = problem.reset(select_rows(instances, rep))
    score = torch.full((r, width), float("-inf"), device=dev)
    score[:, 0] = 0.0
    cost = torch.zeros(r * width, dtype=torch.float64, device=dev)
    actions = torch.zeros(r * width, max_steps, dtype=torch.long, device=dev)
    base = (torch.arange(r, device=dev) * width)[:, None]
    nodes = torch.arange(n, device=dev)
    for t in range(max_steps):
        logp, cache = policy.log_probs(cache, observe(problem, state))
        noop = nodes == problem.noop(state)[:, None]
        logp = torch.where(state.done[:, None], torch.where(noop, 0.0, float("-inf")), logp)
        total = (score.view(-1, 1) + logp).view(r, width * n)
        score, top = total.topk(width, dim=1)
        src = (base + top // n).flatten()
        state, cost, actions = select_rows((state, cost, actions), src)  # rows follow their beams
        # so does the policy's cache; src stays within each instance's beams, so while the cache is still
        # the initial one (every step so far returned it unchanged), selecting its rows would change nothing
        if cache is not initial:
            cache = select_rows(cache, src)
        action = (top % n).flatten()
        state, reward, invalid = step(problem, state, action)
        actions[:, t] = action
        cost = cost - reward.double()
        score = score.masked_fill(invalid.view(r, width), float("-inf"))
        if bool(state.done.all()):
            break
    cost = cost.masked_fill(~torch.isfinite(score.flatten()), float("inf")).view(r, width)
    best, pick = cost.min(dim=1)
    rows = torch.arange(r, device=dev)
    return best, actions.view(r, width, -1)[rows, pick], score[rows, pick]


def observe(problem, state) -> dict[str, Tensor]:
    """The vector env's torch-mode observation of a core state."""
    obs = problem.observe(state)
    obs["action_mask"] = state.mask
    return obs


@torch.no_grad()
def decode(policy: Policy, problem, instances, strategy: str = "greedy", *, num_samples: int = 128,
           beam_width: int = 16, augment: int = 1, batch_size: int = 1000,
           generator: torch.Generator | None = None, temperature: float = 1.0) -> Decoded:
    """One entry for every strategy of :data:`STRATEGIES` (what ``routing-gym eval --decode`` calls)."""
    if strategy == "greedy":
        return greedy(policy, problem, instances, augment=augment, batch_size=batch_size)
    if strategy == "sample":
        return sample_best(policy, problem, instances, num_samples, augment=augment, batch_size=batch_size,
                           generator=generator, temperature=temperature)
    if strategy == "beam":
        return beam_search(policy, problem, instances, beam_width, augment=augment, batch_size=batch_size)
    if strategy == "multistart":
        return multistart(policy, problem, instances, augment=augment, batch_size=batch_size)
    raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
