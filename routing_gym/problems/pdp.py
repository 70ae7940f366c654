"""Pickup and delivery (one vehicle, a TSP with precedences): from the depot (node 0), visit every pickup and
delivery node once, each delivery after its pickup, and return to the depot.

As RL4CO's ``PDPEnv`` and ``PDPGenerator`` (ai4co/rl4co, ``rl4co/envs/routing/pdp/env.py`` and
``generator.py``; after Li et al., "Heterogeneous Attentions for Solving Pickup and Delivery Problem via
Deep Reinforcement Learning", IEEE T-ITS 2021): the depot and n customers uniform in [0, 1]^2, n even,
customers 1..n/2 the pickups and customer i + n/2 the delivery of pickup i; the vehicle has no capacity
limit. A delivery is allowed once its pickup is visited; every unvisited pickup is allowed. The episode
ends when the last node is visited, the return to the depot added to that step's cost; cost = tour
length. One difference from RL4CO: its first action must be the depot (a step that moves nowhere); here
the vehicle starts at the depot and the first action is a pickup.

The network reads each node's role (1 pickup, -1 delivery, 0 depot) and its partner's coordinates (a
pickup's delivery, a delivery's pickup), as Li et al.'s and RL4CO's pickup embedding reads the pair.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import torch
from torch import Tensor

from .base import Drawing, EnvDoc, LegendEntry, Obs, PolicyInputs, Problem, generation_device, locs_field, node_count, \
    node_index, route_step, steps_taken
from .masks import empty_mask, flags, mark, with_first


class PDPInstance(NamedTuple):
    locs: Tensor  # (B, N, 2) float32, node 0 = depot, then n/2 pickups, then their n/2 deliveries in order


class PDPState(NamedTuple):
    instance: PDPInstance
    role: Tensor  # (B, N) float32 1 = pickup, -1 = delivery, 0 = depot (fixed)
    partner_locs: Tensor  # (B, N, 2) float32 coordinates of each node's partner (the depot: its own; fixed)
    current: Tensor  # (B,) int64 current node (0 = depot)
    current_loc: Tensor  # (B, 2) float32
    visited: Tensor  # (B, N) int8 mask (the depot column is unused)
    num_steps: Tensor  # (B,) int64 actions taken
    length: Tensor  # (B,) float32 tour length so far
    done: Tensor  # (B,) bool
    mask: Tensor  # (B, N) int8 mask, 1 = allowed


def pairs(locs: Tensor, num_depots: int = 1) -> tuple[Tensor, Tensor]:
    """``(role (B, N) float32, partner_locs (B, N, 2))`` of ``locs`` (B, N, 2) holding ``num_depots`` depots, then
    n/2 pickups and their n/2 deliveries in the same order: role 0 for a depot, 1 for a pickup, -1 for a
    delivery; the partner of pickup i is delivery i + n/2 and back, a depot's is itself."""
    b, n_total, _ = locs.shape
    half = (n_total - num_depots) // 2
    nodes = torch.arange(n_total, device=locs.device)
    depot = nodes < num_depots
    role = torch.where(depot, 0.0, torch.where(nodes < num_depots + half, 1.0, -1.0))
    partner = torch.where(depot, nodes, (nodes - num_depots + half) % (2 * half) + num_depots)
    return role.repeat(b, 1), locs[:, partner]


# the node count of a depot and pickup-delivery pairs (PDP, MPDP)
PAIR_COUNT = node_count(lambda n: n >= 3 and (n - 1) % 2 == 0,
                        "the depot and an even number (>= 2) of pickup and delivery nodes")


class PDP(Problem):
    name = "pdp"
    label = "PDP"
    has_depot = True
    min_num_nodes = 2
    num_nodes_multiple = 2  # pickup-delivery pairs
    Instance = PDPInstance
    fields = (locs_field(PAIR_COUNT),)  # the depot, the n/2 pickups, then their deliveries in the same order
    observation = (Obs("locs", ("N", 2), "coordinates in [0, 1]: depot, n/2 pickups, their n/2 deliveries"),
                   Obs("role", ("N",), "1 for a pickup, -1 for a delivery, 0 for the depot", low=-1.0),
                   Obs("partner_locs", ("N", 2), "coordinates of the node's partner (a pickup's delivery, a "
                       "delivery's pickup; the depot's own), in [0, 1]"),
                   node_index("current_node", "where the vehicle is (0 = depot)"),
                   steps_taken(lambda n: float(n - 1), "n"))
    policy = PolicyInputs(node_features=("role", "partner_locs"), context_nodes=("current_node",))
    drawing = Drawing(legend=(LegendEntry("depot", "depot"), LegendEntry("size", "pickup (large), delivery (small)"),
                              LegendEntry("routes", "the tour"), LegendEntry("unavailable", "delivery before its pickup")),
                      paths="trips", size_by="role",
                      depot_refusal="the depot ends the tour: it comes after the last node",
                      node_refusal="node {i} is visited, or a delivery whose pickup is not visited yet")
    doc = EnvDoc(
        cost="tour length",
        summary="Pickup and delivery: visit every pickup and delivery node once, each delivery after its pickup.",
        description="Depot (node 0) and n customers uniform in the unit square, n even: customers 1..n/2 are "
                    "pickups, customer i + n/2 the delivery of pickup i (RL4CO's PDP); one vehicle without a "
                    "capacity limit, starting at the depot.",
        action="the next node to visit.",
        mask="the unvisited pickups, and the unvisited deliveries whose pickup is visited; never the depot (the "
             "return to it closes the tour).",
        rewards="Minus the edge length of the step; the step visiting the last node also adds the return to the "
                "depot. The rewards sum to minus the tour length.",
        starting_state='At the depot: a random instance, or ``options["instance"] = {"locs": (N, 2)}`` (the depot, '
                       'then the pickups, then their deliveries in the same order; N - 1 even).',
        episode_end="Terminates when the last node is visited",
        example='>>> obs["locs"].shape, int(obs["action_mask"][1:11].sum()), int(obs["action_mask"][11:].sum())\n'
                '((21, 2), 10, 0)')

    @classmethod
    def start_nodes(cls, n_total: int, device: Any = None) -> Tensor:
        """The first actions of multi-start decoding: the pickups (a delivery cannot come first)."""
        return torch.arange(1, (n_total - 1) // 2 + 1, device=device)

    @staticmethod
    def gauge(state) -> tuple[float, str, bool]:
        """The renderer's footer for a batch-1 state: the nodes visited."""
        k, n = int(flags(state.visited[0, 1:]).sum()), state.visited.shape[1] - 1
        return k / n, f"visited {k} / {n}", False

    @staticmethod
    def generate(batch_size: int, num_nodes: int, *, generator: torch.Generator | None = None,
                 device: Any = None) -> PDPInstance:
        """B instances of ``num_nodes`` (even) customers plus a depot (node 0)."""
        n = PDP.check_num_nodes(num_nodes)
        dev = generation_device(generator, device)
        return PDPInstance(locs=torch.rand(batch_size, n + 1, 2, generator=generator, device=dev))

    @staticmethod
    def reset(instance: PDPInstance) -> PDPState:
        locs = instance.locs
        b, n, _ = locs.shape
        dev = locs.device
        role, partner_locs = pairs(locs)
        zeros = torch.zeros(b, dtype=torch.long, device=dev)
        visited = empty_mask(b, n, dev)
        return PDPState(instance=instance, role=role, partner_locs=partner_locs, current=zeros,
                        current_loc=locs[:, 0], visited=visited, num_steps=zeros, length=torch.zeros(b, device=dev),
                        done=torch.zeros(b, dtype=torch.bool, device=dev), mask=PDP._mask(visited))

    @staticmethod
    def _mask(visited: Tensor) -> Tensor:
        half = (visited.shape[1] - 1) // 2
        seen = flags(visited)
        picked = torch.cat([torch.ones_like(seen[:, :half + 1]), seen[:, 1:half + 1]], dim=1)  # pickups, done pickups
        return with_first(~seen & picked, False)  # the depot only closes the tour (the finished sub-env's no-op)

    @staticmethod
    def transition(state: PDPState, action: Tensor, active: Tensor) -> tuple[PDPState, Tensor]:
        """Inactive sub-envs arrive with ``action == current`` (see ``base.step``)."""
        locs = state.instance.locs
        visited = mark(state.visited, action)
        taken = state.num_steps + active
        finished = active & (taken == locs.shape[1] - 1)
        cost, current, current_loc = route_step(locs, state.current_loc, action, finished)
        new = state._replace(current=current, current_loc=current_loc, visited=visited, num_steps=taken,
                             length=state.length + cost, done=state.done | finished, mask=PDP._mask(visited))
        return new, cost

    @staticmethod
    def observe(state: PDPState) -> dict[str, Tensor]:
        return {"locs": state.instance.locs, "role": state.role, "partner_locs": state.partner_locs,
                "current_node": state.current, "num_steps": state.num_steps[:, None].float()}
