"""Travelling salesman problem: visit every node once and return to the start.

Generator as Kool, van Hoof & Welling, "Attention, Learn to Solve Routing Problems!", ICLR 2019
(code: wouterkool/attention-learn-to-route, ``problems/tsp/problem_tsp.py``): N coordinates uniform in
[0, 1]^2. The first action chooses the start node; the closing edge back to it is added to the last
step's cost.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import torch
from torch import Tensor

from .base import Drawing, EnvDoc, LegendEntry, Obs, PolicyInputs, Problem, check_num_nodes, distance, gather_nodes, \
    generation_device, locs_field, node_count, node_index, stay, steps_taken
from .masks import empty_mask, flags, full_mask, mark, mask_of


class TSPInstance(NamedTuple):
    locs: Tensor  # (B, N, 2) float32 coordinates in [0, 1]^2


class TSPState(NamedTuple):
    instance: TSPInstance
    first: Tensor  # (B,) int64 start node (0 before the first action)
    current: Tensor  # (B,) int64 last visited node (0 before the first action)
    first_loc: Tensor  # (B, 2) float32 coordinates of the start node
    current_loc: Tensor  # (B, 2) float32 coordinates of the current node
    visited: Tensor  # (B, N) int8 mask (``masks``)
    num_steps: Tensor  # (B,) int64 actions taken
    length: Tensor  # (B,) float32 tour length so far
    done: Tensor  # (B,) bool
    mask: Tensor  # (B, N) int8 mask, 1 = allowed


class TSP(Problem):
    name = "tsp"
    label = "TSP"
    has_depot = False
    min_num_nodes = 2
    Instance = TSPInstance
    fields = (locs_field(node_count(lambda n: n >= 2, "at least 2 nodes")),)
    observation = (Obs("locs", ("N", 2), "coordinates in [0, 1]"),
                   node_index("first_node", "start node (0 before the first action)"),
                   node_index("current_node", "last node visited (0 before the first action)"),
                   steps_taken(float, "N"))
    policy = PolicyInputs(node_features=(), context_nodes=("first_node", "current_node"), placeholder_at_start=True)
    drawing = Drawing(legend=(LegendEntry("start", "start"), LegendEntry("current", "current node")), paths="tour")
    doc = EnvDoc(
        cost="tour length",
        summary="Travelling salesman: visit each of N nodes once and return to the start, minimising length.",
        description="N nodes uniform in the unit square (Kool, van Hoof & Welling, ICLR 2019). The first action "
                    "chooses\nthe start node; every action appends a node to the tour.",
        action="the next node.",
        mask="the unvisited nodes.",
        rewards="Minus the length of the edge added by the step (0 for the first action); the last step also "
                "adds\nthe closing edge back to the start. The episode's rewards sum to minus the tour length.",
        starting_state='A fresh random instance from ``self.np_random``, or ``options["instance"] = {"locs": (N, 2)}``.',
        episode_end="Terminates when every node is visited",
        example='>>> obs["locs"].shape, int(obs["action_mask"].sum())\n((20, 2), 20)')

    @staticmethod
    def generate(batch_size: int, num_nodes: int, *, generator: torch.Generator | None = None,
                 device: Any = None) -> TSPInstance:
        """B instances of N nodes, coordinates uniform in [0, 1]^2 (drawn on the generator's device)."""
        n = check_num_nodes(num_nodes)
        dev = generation_device(generator, device)
        return TSPInstance(locs=torch.rand(batch_size, n, 2, generator=generator, device=dev))

    @staticmethod
    def reset(instance: TSPInstance) -> TSPState:
        locs = instance.locs
        b, n, _ = locs.shape
        zeros = torch.zeros(b, dtype=torch.long, device=locs.device)
        return TSPState(
            instance=instance, first=zeros, current=zeros, first_loc=locs[:, 0], current_loc=locs[:, 0],
            visited=empty_mask(b, n, locs.device), num_steps=zeros,
            length=torch.zeros(b, device=locs.device), done=torch.zeros(b, dtype=torch.bool, device=locs.device),
            mask=full_mask(b, n, locs.device))

    @staticmethod
    def transition(state: TSPState, action: Tensor, active: Tensor) -> tuple[TSPState, Tensor]:
        """Inactive sub-envs arrive with ``action == current`` (see ``base.step``)."""
        n = state.mask.shape[-1]
        loc = gather_nodes(state.instance.locs, action)
        started = state.num_steps > 0
        first = torch.where(started, state.first, action)
        first_loc = torch.where(started[:, None], state.first_loc, loc)
        taken = state.num_steps + active
        finished = active & (taken == n)
        cost = distance(loc, state.current_loc) * started \
            + distance(loc, first_loc) * finished
        visited = mark(state.visited, action)
        new = TSPState(instance=state.instance, first=first, current=action, first_loc=first_loc, current_loc=loc,
                       visited=visited, num_steps=taken, length=state.length + cost, done=state.done | finished,
                       mask=mask_of(~flags(visited)))
        return new, cost

    noop = staticmethod(stay)  # a finished sub-env stays at its current node


    @staticmethod
    def observe(state: TSPState) -> dict[str, Tensor]:
        return {"locs": state.instance.locs, "first_node": state.first, "current_node": state.current,
                "num_steps": state.num_steps[:, None].float()}
