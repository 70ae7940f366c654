"""Capacitated vehicle routing: serve every customer's demand in routes from the depot (node 0).

Generator as Kool, van Hoof & Welling, ICLR 2019 (code: wouterkool/attention-learn-to-route,
``problems/vrp/problem_vrp.py``, after Nazari et al. 2018): depot and n customers uniform in [0, 1]^2,
integer demands uniform in {1, ..., 9} divided by the vehicle capacity 20/30/40/50 for
n = 10/20/50/100 (:data:`CAPACITY`; other n interpolate linearly, constant beyond 10 and 100).

Rules (Kool's ``StateCVRP``): a customer is allowed when unvisited and its demand fits the remaining
capacity (``used + demand <= 1``, with a 1e-5 slack for float32 sums, so an exactly full vehicle is
feasible; Kool's code compares ``used + demand > 1`` in float32 without slack, which refuses some exactly
full routes by rounding); the depot is not allowed twice in a row while a customer is still allowed (so
also not as the first action). Visiting the depot refills the vehicle. The episode ends when the last
customer is served; the return to the depot is added to that step's cost.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import torch
from torch import Tensor

from .base import ZERO_AT_DEPOT, Drawing, EnvDoc, Field, LegendEntry, Obs, PolicyInputs, Problem, check_num_nodes, \
    gather_nodes, generation_device, interpolate_table, locs_field, node_count, node_index, route_step, steps_taken
from .masks import all_marked, any_marked, empty_mask, flags, mark, with_first

CAPACITY = {10: 20.0, 20: 30.0, 50: 40.0, 100: 50.0}
CAPACITY_TOLERANCE = 1e-5  # float32 slack when comparing loads with the capacity 1 (in the mask only)


def capacity(num_customers: int) -> float:
    """Vehicle capacity in demand units for n customers (Kool's table, interpolated)."""
    return interpolate_table(CAPACITY, num_customers)


def with_depot(allowed: Tensor, current: Tensor) -> Tensor:
    """The mask of the customers ``allowed`` (B, N) bool (its depot column is overwritten, see ``masks.with_first``)
    and CVRP's depot rule: the depot unless the vehicle is at it while a customer is allowed (so never first, never
    twice in a row)."""
    return with_first(allowed, (current != 0) | ~any_marked(allowed[:, 1:]))


class CVRPInstance(NamedTuple):
    locs: Tensor  # (B, N, 2) float32, node 0 = depot
    demand: Tensor  # (B, N) float32 demand / capacity, depot 0


class CVRPState(NamedTuple):
    instance: CVRPInstance
    current: Tensor  # (B,) int64 current node (0 = depot)
    current_loc: Tensor  # (B, 2) float32
    used: Tensor  # (B,) float32 load on the current route, fraction of capacity
    visited: Tensor  # (B, N) int8 mask, customers served (the depot column is unused)
    num_steps: Tensor  # (B,) int64 actions taken
    length: Tensor  # (B,) float32 length of all routes so far
    done: Tensor  # (B,) bool
    mask: Tensor  # (B, N) int8 mask, 1 = allowed


class CVRP(Problem):
    name = "cvrp"
    label = "CVRP"
    has_depot = True
    Instance = CVRPInstance
    fields = (locs_field(node_count(lambda n: n >= 2, "the depot and at least one customer")),
              Field("demand", ("N",), rules=(  # a fraction of the capacity
                  ZERO_AT_DEPOT,
                  # no slack: the observation space bounds demand by 1
                  (lambda d, n: d[:, 1:] <= 1.0, "exceeds the capacity (1.0) at a customer: infeasible"),
                  (lambda d, n: d[:, 1:] > 0, "must be > 0 for every customer"))))
    observation = (Obs("locs", ("N", 2), "coordinates in [0, 1], depot first"),
                   Obs("demand", ("N",), "demand / capacity in (0, 1], depot 0"),
                   Obs("remaining_capacity", (1,), "capacity left on the current route, in [0, 1]"),
                   node_index("current_node", "where the vehicle is (0 = depot)"),
                   steps_taken(lambda n: 2.0 * (n - 1), "2n"))
    policy = PolicyInputs(node_features=("demand",), context_nodes=("current_node",),
                          context_scalars=("remaining_capacity",))
    drawing = Drawing(legend=(LegendEntry("depot", "depot"), LegendEntry("routes", "one colour per route"),
                              LegendEntry("size", "demand"), LegendEntry("unavailable", "does not fit")),
                      paths="trips", size_by="demand",
                      depot_refusal="the depot cannot be chosen twice in a row (or before any customer)",
                      node_refusal="node {i} does not fit in the vehicle: return to the depot first")
    doc = EnvDoc(
        cost="length of all routes",
        summary="Capacitated vehicle routing: serve every customer's demand with routes from the depot.",
        description="Depot (node 0) and n customers uniform in the unit square; integer demands U{1..9} divided "
                    "by the capacity 20/30/40/50 for n = 10/20/50/100, interpolated for other n (Kool et al. 2019). "
                    "The vehicle refills at the depot.",
        action="the next node (0 = back to the depot).",
        mask="a customer when unserved and its demand fits the remaining capacity (1e-5 float slack); the depot "
             "unless the vehicle is at the depot while a customer is allowed (so never as the first action, "
             "never twice in a row while customers remain).",
        rewards="Minus the edge length of the step; the step serving the last customer also adds the return to "
                "the depot. The rewards sum to minus the total length of all routes.",
        starting_state='At the depot with a full vehicle: a random instance, or ``options["instance"] = {"locs": '
                       '(N, 2), "demand": (N,)}`` (demand as a fraction of capacity; a demand above 1 is refused as '
                       'infeasible).',
        episode_end="Terminates when the last customer is served",
        example='>>> obs["locs"].shape, float(obs["remaining_capacity"][0]), int(obs["action_mask"][0])\n'
                '((21, 2), 1.0, 0)')

    @staticmethod
    def gauge(state) -> tuple[float, str, bool]:
        """The renderer's footer for a batch-1 state: (fill fraction, text, threshold reached): the load of the
        route in progress, and once done (no route in progress) the customers served."""
        used = float(state.used[0])
        served, n = int(state.visited[0, 1:].sum()), state.visited.shape[1] - 1
        if bool(state.done[0]):
            return served / n, f"served {served} / {n}", served == n
        return used, f"load {used:.0%}    served {served} / {n}", False

    @staticmethod
    def generate(batch_size: int, num_nodes: int, *, generator: torch.Generator | None = None,
                 device: Any = None) -> CVRPInstance:
        """B instances of ``num_nodes`` customers plus a depot (node 0)."""
        n = check_num_nodes(num_nodes, minimum=1)
        dev = generation_device(generator, device)
        locs = torch.rand(batch_size, n + 1, 2, generator=generator, device=dev)
        units = torch.randint(1, 10, (batch_size, n), generator=generator, device=dev).float()
        demand = torch.cat([torch.zeros(batch_size, 1, device=dev), units / capacity(n)], dim=1)
        return CVRPInstance(locs=locs, demand=demand)

    @staticmethod
    def reset(instance: CVRPInstance) -> CVRPState:
        locs = instance.locs
        b, n, _ = locs.shape
        dev = locs.device
        zeros = torch.zeros(b, dtype=torch.long, device=dev)
        visited = empty_mask(b, n, dev)
        state = CVRPState(instance=instance, current=zeros, current_loc=locs[:, 0], used=torch.zeros(b, device=dev),
                          visited=visited, num_steps=zeros, length=torch.zeros(b, device=dev),
                          done=torch.zeros(b, dtype=torch.bool, device=dev), mask=visited)
        return state._replace(mask=CVRP._mask(instance, visited, zeros, state.used))

    @staticmethod
    def _mask(instance: CVRPInstance, visited: Tensor, current: Tensor, used: Tensor,
              within: Tensor | None = None) -> Tensor:
        """CVRP's rules; ``within`` (B, N) bool restricts the customers further (a unit built on CVRP's routes:
        time windows) before the depot's rule reads them."""
        allowed = ~flags(visited) & (instance.demand + used[:, None] <= 1.0 + CAPACITY_TOLERANCE)
        if within is not None:
            allowed = allowed & within
        return with_depot(allowed, current)

    @staticmethod
    def transition(state: CVRPState, action: Tensor, active: Tensor) -> tuple[CVRPState, Tensor]:
        """Inactive sub-envs arrive with ``action == current`` (see ``base.step``)."""
        new, cost = CVRP.move(state, action, active)
        return new._replace(mask=CVRP._mask(new.instance, new.visited, new.current, new.used)), cost

    @staticmethod
    def move(state: CVRPState, action: Tensor, active: Tensor) -> tuple[CVRPState, Tensor]:
        """The transition without the new mask (``mask`` left as it was): the routes, loads and costs that
        units built on CVRP's routes extend before computing their own mask."""
        inst = state.instance
        visited = mark(state.visited, action)
        finished = active & all_marked(visited[:, 1:])
        refill = (action == 0) | finished
        used = torch.where(refill, 0.0, state.used + gather_nodes(inst.demand, action) * active)
        cost, current, current_loc = route_step(inst.locs, state.current_loc, action, finished)
        new = CVRPState(instance=inst, current=current, current_loc=current_loc, used=used, visited=visited,
                        num_steps=state.num_steps + active, length=state.length + cost, done=state.done | finished,
                        mask=state.mask)
        return new, cost

    @staticmethod
    def observe(state: CVRPState) -> dict[str, Tensor]:
        return {"locs": state.instance.locs, "demand": state.instance.demand,
                "remaining_capacity": (1.0 - state.used).clamp(0.0, 1.0)[:, None],
                "current_node": state.current, "num_steps": state.num_steps[:, None].float()}
