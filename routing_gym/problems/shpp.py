"""Shortest Hamiltonian path: from a fixed start (node 0) visit every node once and end at a fixed end node
(the last node, N - 1); the cost is the path's length, with no closing edge.

As RL4CO's ``SHPPEnv`` and ``SHPPGenerator`` (ai4co/rl4co, ``rl4co/envs/routing/shpp/env.py`` and
``generator.py``): N nodes uniform in [0, 1]^2 (``min_loc = 0``, ``max_loc = 1``, uniform
``loc_distribution``), node 0 the start (RL4CO's ``first_node``), node N - 1 the end (RL4CO's ``last_node``);
a node is allowed when unvisited, the end only once every other node is visited (RL4CO's ``_step``), and the
episode ends when the end is reached. Two differences from RL4CO, both leaving its optimal paths unchanged:

- the path starts at node 0, visited at reset, so the first action is the second node of the path (RL4CO's
  mask allows only node 0 at reset: a first step that moves nowhere);
- the cost is the path's length: RL4CO's ``_get_reward`` takes ``get_tour_length`` of the visited order,
  which closes the cycle and so adds the edge from the end back to the start, a constant of the instance.

Sizes: ``num_nodes`` n counts the nodes after the start (the end included), so an instance has N = n + 1
nodes (RL4CO's ``num_loc`` is N); node 0 plays the depot's part in the shared code (``has_depot``: it is
where the vehicle starts, never an action). So SHPP-20 has 21 nodes. The problem is kept exactly "fixed
start, fixed end, every node between once", the form that re-solves a window of a longer tour.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import torch
from torch import Tensor

from .base import Drawing, EnvDoc, LegendEntry, Obs, PolicyInputs, Problem, check_num_nodes, distance, gather_nodes, \
    generation_device, locs_field, node_count, node_index, stay, steps_taken
from .masks import any_marked, empty_mask, flags, mark, mask_of


class SHPPInstance(NamedTuple):
    locs: Tensor  # (B, N, 2) float32 coordinates in [0, 1]^2: node 0 the start, node N - 1 the end


class SHPPState(NamedTuple):
    instance: SHPPInstance
    is_end: Tensor  # (B, N) float32 1 at the end node (N - 1), 0 elsewhere (fixed; drawn as node size)
    current: Tensor  # (B,) int64 last node of the path (0 = the start)
    current_loc: Tensor  # (B, 2) float32
    visited: Tensor  # (B, N) int8 mask, the start visited from reset
    num_steps: Tensor  # (B,) int64 actions taken
    length: Tensor  # (B,) float32 path length so far
    done: Tensor  # (B,) bool
    mask: Tensor  # (B, N) int8 mask, 1 = allowed


class SHPP(Problem):
    name = "shpp"
    label = "SHPP"
    has_depot = True  # node 0, the start: where the path begins, never an action
    Instance = SHPPInstance
    # the start first, the end last
    fields = (locs_field(node_count(lambda n: n >= 2, "the start and the end node at least")),)
    observation = (Obs("locs", ("N", 2), "coordinates in [0, 1]: node 0 the start, node N - 1 the end"),
                   node_index("current_node", "last node of the path (0 = the start)"),
                   node_index("last_node", "the end node, N - 1 (RL4CO's name)"),
                   steps_taken(lambda n: n - 1.0, "n"))
    policy = PolicyInputs(node_features=(), context_nodes=("current_node", "last_node"))
    drawing = Drawing(legend=(LegendEntry("depot", "start (node 0)"), LegendEntry("size", "the end node (large)"),
                              LegendEntry("routes", "the path"),
                              LegendEntry("unavailable", "the end, before every other node is visited")),
                      paths="from_depot", size_by="is_end",
                      depot_refusal="the start is where the path begins: it is never chosen",
                      node_refusal="node {i} is visited, or the end while other nodes are unvisited")
    doc = EnvDoc(
        cost="path length (no closing edge)",
        summary="Shortest Hamiltonian path: from a fixed start (node 0) visit every node once, ending at node N - 1.",
        description="N = n + 1 nodes uniform in the unit square (RL4CO's SHPP): the path starts at node 0 and "
                    "must end at node N - 1;\nits length counts no closing edge.",
        action="the next node of the path.",
        mask="the unvisited nodes other than the end; the end (N - 1) once every other node is visited; never "
             "the start.",
        rewards="Minus the length of the edge added by the step. The rewards sum to minus the path length.",
        starting_state='At the start (node 0): a random instance, or ``options["instance"] = {"locs": (N, 2)}`` '
                       '(the start first, the end last).',
        episode_end="Terminates when the end node is reached (after every other node)",
        example='>>> obs["locs"].shape, int(obs["action_mask"].sum()), int(obs["last_node"])\n((21, 2), 19, 20)')

    @classmethod
    def start_nodes(cls, n_total: int, device: Any = None) -> Tensor:
        """The first actions of multi-start decoding: every node between the start and the end (the end itself
        when there is none)."""
        return torch.arange(1, max(n_total - 1, 2), device=device)

    @staticmethod
    def generate(batch_size: int, num_nodes: int, *, generator: torch.Generator | None = None,
                 device: Any = None) -> SHPPInstance:
        """B instances of the start plus ``num_nodes`` nodes (the last one the end), uniform in [0, 1]^2."""
        n = check_num_nodes(num_nodes, minimum=1)
        dev = generation_device(generator, device)
        return SHPPInstance(locs=torch.rand(batch_size, n + 1, 2, generator=generator, device=dev))

    @staticmethod
    def reset(instance: SHPPInstance) -> SHPPState:
        locs = instance.locs
        b, n, _ = locs.shape
        dev = locs.device
        zeros = torch.zeros(b, dtype=torch.long, device=dev)
        is_end = (torch.arange(n, device=dev) == n - 1).float().expand(b, n)
        visited = mark(empty_mask(b, n, dev), zeros)
        return SHPPState(instance=instance, is_end=is_end, current=zeros, current_loc=locs[:, 0], visited=visited,
                         num_steps=zeros, length=torch.zeros(b, device=dev),
                         done=torch.zeros(b, dtype=torch.bool, device=dev), mask=SHPP._mask(visited))

    @staticmethod
    def _mask(visited: Tensor) -> Tensor:
        allowed = ~flags(visited)
        allowed[:, -1] = False  # the end only last: once no other node is left
        allowed[:, -1] = ~any_marked(allowed) & ~flags(visited[:, -1])
        return mask_of(allowed)

    @staticmethod
    def transition(state: SHPPState, action: Tensor, active: Tensor) -> tuple[SHPPState, Tensor]:
        """Inactive sub-envs arrive with ``action == current`` (see ``base.step``)."""
        locs = state.instance.locs
        loc = gather_nodes(locs, action)
        visited = mark(state.visited, action)
        finished = active & (action == locs.shape[1] - 1)
        cost = distance(loc, state.current_loc)
        new = state._replace(current=action, current_loc=loc, visited=visited, num_steps=state.num_steps + active,
                             length=state.length + cost, done=state.done | finished, mask=SHPP._mask(visited))
        return new, cost

    noop = staticmethod(stay)  # a finished sub-env stays at its current node


    @staticmethod
    def observe(state: SHPPState) -> dict[str, Tensor]:
        last = torch.full_like(state.current, state.mask.shape[1] - 1)
        return {"locs": state.instance.locs, "current_node": state.current, "last_node": last,
                "num_steps": state.num_steps[:, None].float()}
