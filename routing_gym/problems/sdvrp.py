"""Split-delivery vehicle routing: CVRP where a customer's demand may be delivered over several visits.

Generator as Kool, van Hoof & Welling, ICLR 2019 (code: wouterkool/attention-learn-to-route,
``problems/vrp/problem_vrp.py``, ``SDVRP`` on the same ``VRPDataset`` as CVRP, after Nazari et al. 2018):
exactly :meth:`CVRP.generate`, the same draws in the same order, so a seed gives the CVRP instance.

Rules (Kool's ``problems/vrp/state_sdvrp.py``, ``StateSDVRP``):

- a visit delivers ``min(remaining demand, 1 - used)`` (``delivered_demand = torch.min(selected_demand,
  self.VEHICLE_CAPACITY - self.used_capacity)``), subtracted from the customer's remaining demand and
  added to the load; the depot delivers nothing and empties the vehicle (``used_capacity = (self.used_capacity
  + delivered_demand) * (prev_a != 0).float()``);
- a customer is masked when its remaining demand is 0 or the vehicle is full (``(demands_with_depot[:, :, 1:]
  == 0) | (used_capacity >= VEHICLE_CAPACITY)``); the depot is masked when the vehicle is at it while a
  customer is allowed (``(prev_a == 0) & (mask_loc == 0).sum(-1) > 0``), so never first nor twice in a row;
- it ends when no remaining demand is > 0 (``all_finished``); as in our CVRP the return to the depot is
  added to that step's cost, so the rewards sum to minus the length of all routes (Kool's final cost adds
  the same return).

Float tolerance: none, as in the reference (no slack in ``== 0``, ``>= 1`` or ``> 0``), and none is
needed for feasibility: a delivery never exceeds the remaining capacity, a full delivery leaves exactly 0
(``r - r``), and a partial one leaves the vehicle exactly full (``fl(u + fl(1 - u)) == 1`` for float32
``u`` in [0, 1): exact by Sterbenz for u >= 1/2, else within half an ulp of 1; checked for every such
float32). But where float32 rounding makes a load of whole units exceed 1 (demands 3/20, 9/20, 8/20 in
that order leave 3e-8 of the last), that remainder stays and costs another trip, in the reference too.
:meth:`instance_from` accepts CVRP's demands, each in (0, 1].

Step bound (:func:`max_steps`): every customer visit either finishes the customer (n of them) or fills
the vehicle, which ends that route; so with F filling visits there are n + F customer visits, and the
depot is never first, last or twice in a row, so steps <= 2 (n + F) - 1. Each filled route carries a load
of 1 and the last route is not filled, so F < D, the total demand, up to float32 rounding (at most 2^-23 per
visit: F (1 - 2^-22) < D + n 2^-23); with D <= n for accepted demands, F < n (1 + 1e-4).
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple

import torch
from torch import Tensor

from .base import Drawing, EnvDoc, LegendEntry, Obs, Problem, gather_nodes, node_index, route_step, steps_taken
from .masks import any_marked, mask_of
from .cvrp import CAPACITY_TOLERANCE, CVRP, with_depot


def max_steps(num_customers: int) -> int:
    """Most actions an SDVRP episode of n customers can take: ``2 (n + F) - 1`` with at most
    ``ceil(n (1 + 1e-4)) - 1`` filling visits F (module docstring), i.e. ``4n - 1`` for n < 10^4."""
    n = num_customers
    return 2 * (n + math.ceil(n * (1 + 10 * CAPACITY_TOLERANCE)) - 1) - 1


class SDVRPInstance(NamedTuple):
    locs: Tensor  # (B, N, 2) float32, node 0 = depot
    demand: Tensor  # (B, N) float32 demand / capacity, depot 0


class SDVRPState(NamedTuple):
    instance: SDVRPInstance
    current: Tensor  # (B,) int64 current node (0 = depot)
    current_loc: Tensor  # (B, 2) float32
    used: Tensor  # (B,) float32 load on the current route, fraction of capacity
    remaining: Tensor  # (B, N) float32 demand not yet delivered, depot 0
    visited: Tensor  # (B, N) int8 mask, customers fully served (remaining == 0; the depot column is unused)
    num_steps: Tensor  # (B,) int64 actions taken
    length: Tensor  # (B,) float32 length of all routes so far
    done: Tensor  # (B,) bool
    mask: Tensor  # (B, N) int8 mask, 1 = allowed


class SDVRP(Problem):
    name = "sdvrp"
    label = "SDVRP"
    has_depot = True
    Instance = SDVRPInstance
    fields = CVRP.fields
    # Kool's AM for SDVRP re-projects the remaining demand at every step (``project_node_step``)
    observation = (Obs("locs", ("N", 2), "coordinates in [0, 1], depot first"),
                   Obs("demand", ("N",), "demand not yet delivered / capacity, in [0, 1], depot 0"),
                   Obs("remaining_capacity", (1,), "capacity left on the current route, in [0, 1]"),
                   node_index("current_node", "where the vehicle is (0 = depot)"),
                   steps_taken(lambda n: float(max_steps(n - 1)), "4n - 1"))
    dynamic_fields = ("demand",)  # what is still to deliver
    policy = CVRP.policy
    drawing = Drawing(legend=(LegendEntry("depot", "depot"), LegendEntry("routes", "one colour per route"),
                              LegendEntry("size", "demand left"), LegendEntry("split", "split delivery")),
                      paths="trips",
                      size_by="remaining",
                      depot_refusal="the depot cannot be chosen twice in a row (or before any customer)",
                      node_refusal="node {i} has nothing left to deliver or the vehicle is full: "
                                   "return to the depot first")
    doc = EnvDoc(
        cost="length of all routes",
        summary="Split-delivery vehicle routing: deliver every customer's demand, possibly over several visits.",
        description="CVRP's instances (Kool et al. 2019, after Nazari et al. 2018): depot (node 0) and n customers "
                    "uniform in the unit square, integer demands U{1..9} divided by the capacity 20/30/40/50 for "
                    "n = 10/20/50/100. A visit delivers min(remaining demand, remaining capacity); the vehicle "
                    "refills at the depot.",
        action="the next node (0 = back to the depot).",
        mask="a customer while some of its demand remains and the vehicle is not full; the depot unless the "
             "vehicle is at the depot while a customer is allowed (so never first, never twice in a row while "
             "customers remain).",
        rewards="Minus the edge length of the step; the step that delivers the last demand also adds the return "
                "to the depot. The rewards sum to minus the total length of all routes.",
        starting_state='At the depot with an empty vehicle: a random instance, or ``options["instance"] = '
                       '{"locs": (N, 2), "demand": (N,)}`` (as CVRP\'s).',
        episode_end="Terminates when every demand is delivered",
        example='>>> obs["demand"].shape, float(obs["remaining_capacity"][0]), int(obs["action_mask"][0])\n'
                '((21,), 1.0, 0)')
    gauge = staticmethod(CVRP.gauge)  # load of the route in progress, customers fully served

    @staticmethod
    def generate(batch_size: int, num_nodes: int, *, generator: torch.Generator | None = None,
                 device: Any = None) -> SDVRPInstance:
        """B instances of ``num_nodes`` customers plus a depot (node 0): CVRP's, draw for draw."""
        inst = CVRP.generate(batch_size, num_nodes, generator=generator, device=device)
        return SDVRPInstance(locs=inst.locs, demand=inst.demand)

    @staticmethod
    def reset(instance: SDVRPInstance) -> SDVRPState:
        locs = instance.locs
        b = locs.shape[0]
        dev = locs.device
        zeros = torch.zeros(b, dtype=torch.long, device=dev)
        used = torch.zeros(b, device=dev)
        remaining = instance.demand
        return SDVRPState(instance=instance, current=zeros, current_loc=locs[:, 0], used=used, remaining=remaining,
                          visited=mask_of(remaining == 0), num_steps=zeros, length=torch.zeros(b, device=dev),
                          done=torch.zeros(b, dtype=torch.bool, device=dev),
                          mask=SDVRP._mask(remaining, zeros, used))

    @staticmethod
    def _mask(remaining: Tensor, current: Tensor, used: Tensor) -> Tensor:
        # remaining is never negative: > 0 is Kool's != 0
        return with_depot((remaining > 0) & (used < 1.0)[:, None], current)

    @staticmethod
    def transition(state: SDVRPState, action: Tensor, active: Tensor) -> tuple[SDVRPState, Tensor]:
        """Inactive sub-envs arrive with ``action == current`` (see ``base.step``)."""
        inst = state.instance
        wanted = gather_nodes(state.remaining, action)  # 0 at the depot
        delivered = torch.minimum(wanted, 1.0 - state.used) * active
        remaining = state.remaining.scatter(1, action[:, None], (wanted - delivered)[:, None])
        finished = active & ~any_marked(remaining > 0)
        used = torch.where((action == 0) | finished, 0.0, state.used + delivered)
        cost, current, current_loc = route_step(inst.locs, state.current_loc, action, finished)
        new = SDVRPState(instance=inst, current=current, current_loc=current_loc, used=used, remaining=remaining,
                         visited=mask_of(remaining == 0), num_steps=state.num_steps + active, length=state.length + cost,
                         done=state.done | finished, mask=SDVRP._mask(remaining, current, used))
        return new, cost

    @staticmethod
    def observe(state: SDVRPState) -> dict[str, Tensor]:
        return {"locs": state.instance.locs, "demand": state.remaining,
                "remaining_capacity": (1.0 - state.used).clamp(0.0, 1.0)[:, None],
                "current_node": state.current, "num_steps": state.num_steps[:, None].float()}
