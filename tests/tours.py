"""Test helpers for tours: seeded instances and permutations, and a depot-problem tour read as its routes."""
import torch

from agents.references.pipeline import route_lists


def instances(problem, batch, n, seed=0):
    """``batch`` seeded instances of ``problem`` with ``n`` customers (TSP: nodes)."""
    return problem.generate(batch, n, generator=torch.Generator().manual_seed(seed))


def random_tours(batch, n, seed=0):
    """(batch, n) seeded permutations of the nodes 0..n-1."""
    gen = torch.Generator().manual_seed(seed)
    return torch.stack([torch.randperm(n, generator=gen) for _ in range(batch)])


def ordered_routes(tour):
    """A depot-problem tour's routes (split at node 0), each its customers in order."""
    return route_lists(tour.tolist())


def routes(tour):
    """A depot-problem tour's routes as customer sets: each route's customers sorted, the routes sorted."""
    return sorted(sorted(r) for r in ordered_routes(tour))
