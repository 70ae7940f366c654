"""A test-side judge shared by the problems' own tests: every feasible episode of a tiny instance, followed
through the unit's mask and checked against an independent model of the rules."""
import math

import numpy as np
import pytest
import torch

from routing_gym.problems import step, tour_cost


def every_episode(problem, inst, new_model, cost, at_end=None) -> list[tuple[list[int], float]]:
    """Follow the mask of ``problem`` depth-first through every feasible episode of the batch-1 instance
    ``inst``. After each prefix of actions the unit's mask must allow exactly what ``new_model()`` (an object
    with ``apply(action)``, ``allowed() -> set`` and ``done``) allows after the same prefix; a finished
    episode's rewards must sum to ``-cost(actions)``, and :func:`tour_cost` of the episodes (padded with 0)
    must equal ``cost``; ``at_end(state)``, if given, checks each finished state. Returns the (actions, cost)
    pairs."""
    episodes = []

    def dfs(state, actions, ret):
        model = new_model()
        for a in actions:
            model.apply(a)
        if state.done.item():
            assert model.done and ret == pytest.approx(-cost(actions), abs=1e-5)
            if at_end is not None:
                at_end(state)
            episodes.append((actions, cost(actions)))
            return
        assert not model.done
        allowed = set(state.mask[0].nonzero().flatten().tolist())
        assert allowed == model.allowed(), f"after {actions}"
        for a in sorted(allowed):
            nxt, r, invalid = step(problem, state, torch.tensor([a]))
            assert not invalid.item()
            dfs(nxt, actions + [a], ret + float(r[0]))

    dfs(problem.reset(inst), [], 0.0)
    width = max(len(a) for a, _ in episodes)
    tours = torch.tensor([a + [0] * (width - len(a)) for a, _ in episodes])
    batch = problem.Instance(*(f.expand(len(episodes), *f.shape[1:]) for f in inst))
    for (_, expected), c in zip(episodes, tour_cost(problem, batch, tours).tolist()):
        assert c == pytest.approx(expected, abs=1e-5)
    return episodes


def routes_of(tour) -> list[list[int]]:
    """The routes (node lists) of a finished tour of vehicles from the depot (node 0): split at the depot,
    padding dropped."""
    seq = [int(a) for a in tour]
    while seq and seq[-1] == 0:
        seq.pop()
    routes = [[]]
    for a in seq:
        if a == 0:
            routes.append([])
        else:
            routes[-1].append(a)
    return routes


def route_lengths(locs, tour) -> list[float]:
    """Each route's length in float64, from the depot through its nodes and back."""
    locs = np.asarray(locs, np.float64)
    return [sum(math.hypot(*(locs[a] - locs[b])) for a, b in zip([0] + r, r + [0])) for r in routes_of(tour)]
