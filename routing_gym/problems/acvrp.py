"""Capacitated vehicle routing on a cost matrix (ACVRP, the asymmetric CVRP: Toth & Vigo, "The Vehicle Routing
Problem", SIAM 2002, section 1.2.1): CVRP's routes, loads and rules, where going from node i to node j costs
``cost_matrix[i, j]`` (which need not equal ``cost_matrix[j, i]``). No coordinates. CVRPLIB's
``EDGE_WEIGHT_TYPE: EXPLICIT`` files load into it (``routing_gym.tsplib``), and PyVRP solves it from the matrix.

Generator: the matrix as the ATSP unit draws it (MatNet's: uniform in [0, 1], zero diagonal, closed under
shortest paths) over the depot (node 0) and n customers, and the demands and capacities of Kool's CVRP
(:func:`~routing_gym.problems.cvrp.capacity`). Rules: CVRP's (:meth:`CVRP._mask`); a step costs the matrix
entry from the current node to the chosen one, and the step serving the last customer also the entry back to
the depot. Drawn where classical MDS of the symmetrised matrix places the nodes, as ATSP's.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import torch
from torch import Tensor

from .atsp import ATSP, edge_costs
from .base import Drawing, EnvDoc, Field, LegendEntry, Obs, PolicyInputs, Problem, check_num_nodes, \
    gather_nodes, generation_device, node_count
from .cvrp import CVRP, capacity
from .masks import all_marked, empty_mask, mark


class ACVRPInstance(NamedTuple):
    cost_matrix: Tensor  # (B, N, N) float32 travel cost from row node to column node, in [0, 1], diagonal 0
    demand: Tensor  # (B, N) float32 demand / capacity, depot 0


class ACVRPState(NamedTuple):
    instance: ACVRPInstance
    current: Tensor  # (B,) int64 current node (0 = depot)
    used: Tensor  # (B,) float32 load on the current route, fraction of capacity
    visited: Tensor  # (B, N) int8 mask, customers served (the depot column is unused)
    num_steps: Tensor  # (B,) int64 actions taken
    length: Tensor  # (B,) float32 cost of all routes so far
    cost_bound: Tensor  # (B,) float32 more than one step can cost (``step_cost_bound``), fixed at reset
    done: Tensor  # (B,) bool
    mask: Tensor  # (B, N) int8 mask, 1 = allowed


class ACVRP(Problem):
    name = "acvrp"
    label = "ACVRP"
    has_depot = True
    Instance = ACVRPInstance
    fields = (Field("cost_matrix", ("N", "N"), 0.0, 1.0, rules=(
        node_count(lambda n: n >= 2, "the depot and at least one customer"),
        (lambda m, n: torch.diagonal(m, dim1=1, dim2=2) == 0, "must have a zero diagonal"))),
        CVRP.fields[1])  # CVRP's demand
    observation = (Obs("cost_matrix", ("N", "N"), "travel cost from row node to column node, in [0, 1], diagonal 0"),
                   *CVRP.observation[1:])  # CVRP's demand, remaining capacity, current node and step count
    policy = PolicyInputs(node_features=("demand",), context_nodes=("current_node",),
                          context_scalars=("remaining_capacity",), coordinates=None, edge_weights="cost_matrix")
    drawing = Drawing(legend=(*CVRP.drawing.legend, LegendEntry("", "placed by the costs (MDS)")), paths="trips",
                      size_by="demand", depot_refusal=CVRP.drawing.depot_refusal,
                      node_refusal=CVRP.drawing.node_refusal)
    doc = EnvDoc(
        cost="length of all routes by the matrix",
        summary="Capacitated vehicle routing on a cost matrix: serve every customer's demand with routes from "
                "the depot, where i -> j costs cost_matrix[i, j].",
        description="Depot (node 0) and n customers; an (N, N) cost matrix as ATSP's (uniform in [0, 1], zero "
                    "diagonal, closed under\nshortest paths; no coordinates) and Kool et al.'s CVRP demands and "
                    "capacities. The vehicle refills at the depot.",
        action="the next node (0 = back to the depot).",
        mask=CVRP.doc.mask,
        rewards="Minus ``cost_matrix[current, next]`` of the step; the step serving the last customer also adds "
                "the entry back to\nthe depot. The rewards sum to minus the cost of all routes.",
        starting_state='At the depot with a full vehicle: a random instance, or ``options["instance"] = '
                       '{"cost_matrix": (N, N), "demand": (N,)}`` (demand as a fraction of capacity).',
        episode_end="Terminates when the last customer is served",
        example='>>> obs["cost_matrix"].shape, float(obs["remaining_capacity"][0]), int(obs["action_mask"][0])\n'
                '((21, 21), 1.0, 0)')
    gauge = staticmethod(CVRP.gauge)

    @classmethod
    def layout(cls, instance: ACVRPInstance) -> Tensor:
        """(B, N, 2) drawing positions: ATSP's MDS of the symmetrised matrix."""
        return ATSP.layout(instance)

    @staticmethod
    def generate(batch_size: int, num_nodes: int, *, generator: torch.Generator | None = None,
                 device: Any = None) -> ACVRPInstance:
        """B instances of ``num_nodes`` customers plus a depot (node 0): the matrix first, then the demands."""
        n = check_num_nodes(num_nodes, minimum=1)
        dev = generation_device(generator, device)
        matrix = ATSP.generate(batch_size, n + 1, generator=generator, device=dev).cost_matrix
        units = torch.randint(1, 10, (batch_size, n), generator=generator, device=dev).float()
        demand = torch.cat([torch.zeros(batch_size, 1, device=dev), units / capacity(n)], dim=1)
        return ACVRPInstance(cost_matrix=matrix, demand=demand)

    @staticmethod
    def reset(instance: ACVRPInstance) -> ACVRPState:
        matrix = instance.cost_matrix
        b, n, _ = matrix.shape
        dev = matrix.device
        zeros = torch.zeros(b, dtype=torch.long, device=dev)
        visited, used = empty_mask(b, n, dev), torch.zeros(b, device=dev)
        return ACVRPState(instance=instance, current=zeros, used=used, visited=visited, num_steps=zeros,
                          length=torch.zeros(b, device=dev), cost_bound=1.0 + 2.0 * matrix.amax(dim=(1, 2)),
                          done=torch.zeros(b, dtype=torch.bool, device=dev),
                          mask=CVRP._mask(instance, visited, zeros, used))

    @staticmethod
    def transition(state: ACVRPState, action: Tensor, active: Tensor) -> tuple[ACVRPState, Tensor]:
        """Inactive sub-envs arrive with ``action == current`` (see ``base.step``): a zero diagonal entry."""
        inst = state.instance
        visited = mark(state.visited, action)
        finished = active & all_marked(visited[:, 1:])
        used = torch.where((action == 0) | finished, 0.0, state.used + gather_nodes(inst.demand, action) * active)
        depot = torch.zeros_like(action)
        cost = edge_costs(inst.cost_matrix, state.current, action) \
            + edge_costs(inst.cost_matrix, action, depot) * finished
        current = torch.where(finished, depot, action)
        new = state._replace(current=current, used=used, visited=visited, num_steps=state.num_steps + active,
                             length=state.length + cost, done=state.done | finished,
                             mask=CVRP._mask(inst, visited, current, used))
        return new, cost

    @staticmethod
    def step_cost_bound(state: ACVRPState) -> Tensor:
        """(B,) 1 + 2 x the largest matrix entry: a step adds at most an entry and the one back to the depot."""
        return state.cost_bound

    @staticmethod
    def observe(state: ACVRPState) -> dict[str, Tensor]:
        return {"cost_matrix": state.instance.cost_matrix, "demand": state.instance.demand,
                "remaining_capacity": (1.0 - state.used).clamp(0.0, 1.0)[:, None],
                "current_node": state.current, "num_steps": state.num_steps[:, None].float()}
