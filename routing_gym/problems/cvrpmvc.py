"""Fixed-fleet CVRP: CVRP with at most ``num_vehicles`` (k) routes, the setting of CVRPLIB's A/B/E/P sets,
whose names carry k (``E-n51-k5``).

After RL4CO's CVRPMVC ("CVRP with maximum vehicle constraint", ai4co/rl4co
``rl4co/envs/routing/cvrpmvc/env.py``, ``CVRPMVCEnv``): CVRP's instances and rules plus a fleet of k vehicles,
each making one route; RL4CO derives k in ``_reset`` as ``max_vehicle = ceil(total demand / capacity) + 1``,
here it is the instance field ``num_vehicles`` (so that CVRPLIB's k can be given), generated the same way.

Generator: :meth:`CVRP.generate` draw for draw (Kool et al. 2019: demands U{1..9} / capacity 20/30/40/50),
plus ``num_vehicles = ceil(D) + 1`` with D the total demand in capacities (a slack of one vehicle, RL4CO's).

Rules: CVRP's (:meth:`CVRP._mask`, reused, not restated: a customer when unserved and its demand fits the
remaining capacity, 1e-5 slack; the depot never twice in a row while a customer fits), and on top the fleet.
Let R be the demand of the unserved customers and L the routes that may still start after the current one
(``num_vehicles`` minus the routes started, the first starting at reset):

- the vehicle may return to the depot only if ``R <= L`` (with a float32 slack of 1e-5 per vehicle): the
  remaining demand still fits in the routes left, a necessary condition (RL4CO's ``demand_remaining >
  capacity_remaining`` masks the depot). Serving customers never breaks it (R only shrinks), so on the last
  route (L = 0) every unserved customer fits and the depot is never needed: R + load <= 1 there.
- The bound is necessary, not sufficient (bin packing: two routes of capacity 1 cannot carry three
  demands of 0.6). Where a vehicle at a customer has no customer that fits and may not return (R > L), no
  completion within the fleet exists from here: the depot is then allowed anyway, as RL4CO allows it
  ("unless there's no other choices"), and the route it starts beyond the fleet is charged
  :data:`EXTRA_ROUTE_PENALTY` (10, about the length of a whole CVRP-50 solution in the unit square) at that
  step. So every episode finishes, serving every customer, and its cost is the length of all routes plus
  10 per route beyond k: a cost of at least 10 more than the length tells that the fleet was exceeded
  (:func:`routes_beyond_fleet` counts them from a tour). The penalty is a price, not a proof that exceeding
  never pays.

The episode ends when the last customer is served, the return to the depot added to that step (CVRP's).
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import Tensor

from .base import Drawing, EnvDoc, Field, LegendEntry, Obs, PolicyInputs, Problem, gather_nodes, whole
from .cvrp import CAPACITY_TOLERANCE, CVRP, CVRPState
from .masks import any_marked, flags, with_first

EXTRA_ROUTE_PENALTY = 10.0  # charged for each route started beyond num_vehicles
FLEET_SLACK = 1  # generated num_vehicles = ceil(total demand) + FLEET_SLACK (RL4CO's max_vehicle)


class CVRPMVCInstance(NamedTuple):
    locs: Tensor  # (B, N, 2) float32, node 0 = depot
    demand: Tensor  # (B, N) float32 demand / capacity, depot 0
    num_vehicles: Tensor  # (B,) float32 whole number k in [1, N]: the most routes


class CVRPMVCState(NamedTuple):
    instance: CVRPMVCInstance
    current: Tensor  # (B,) int64 current node (0 = depot)
    current_loc: Tensor  # (B, 2) float32
    used: Tensor  # (B,) float32 load on the current route, fraction of capacity
    visited: Tensor  # (B, N) int8 mask, customers served (the depot column is unused)
    num_steps: Tensor  # (B,) int64 actions taken
    length: Tensor  # (B,) float32 length of all routes so far (penalties not included)
    routes: Tensor  # (B,) float32 routes started (1 at reset, RL4CO's vehicles_used)
    remaining: Tensor  # (B,) float32 demand of the unserved customers, in capacities (R; less each customer served)
    done: Tensor  # (B,) bool
    mask: Tensor  # (B, N) int8 mask, 1 = allowed


def total_demand(instance) -> Tensor:
    """(B,) float64 total demand in capacities."""
    return instance.demand.double().sum(1)


def fleet_for(demand_total: Tensor) -> Tensor:
    """The generated ``num_vehicles`` for total demands (B,): ``ceil(D) + 1`` (a sum within 1e-6 of a whole
    number counts as that number: float32 demands of whole units add up with rounding)."""
    return (torch.ceil(demand_total - 1e-6) + FLEET_SLACK).clamp(min=1)


def routes_beyond_fleet(tour, num_vehicles: int) -> int:
    """Routes of a finished tour (actions, depot visits separating routes) beyond ``num_vehicles``."""
    seq = [int(a) for a in tour]
    while seq and seq[-1] == 0:  # padding with the no-op
        seq.pop()
    return max(0, 1 + seq.count(0) - int(num_vehicles)) if seq else 0


class CVRPMVC(Problem):
    name = "cvrpmvc"
    label = "CVRPMVC"
    has_depot = True
    Instance = CVRPMVCInstance
    # at most N routes: more than there are customers cannot be used
    fields = CVRP.fields + (Field("num_vehicles", (), rules=((
        lambda k, n: whole(k, 1, n), lambda k, n: f"must be a whole number in [1, N = {n}], got {k.tolist()}"),)),)
    observation = CVRP.observation + (
        Obs("vehicles_left", (1,), "routes that may still start after the current one, in [0, N - 1]",
            high=lambda n: n - 1.0),)
    policy = PolicyInputs(node_features=("demand",), context_nodes=("current_node",),
                          context_scalars=("remaining_capacity", "vehicles_left"))
    drawing = Drawing(legend=(LegendEntry("depot", "depot"), LegendEntry("routes", "one colour per vehicle"),
                              LegendEntry("unavailable", "does not fit")), paths="trips",
                      depot_refusal="the depot is not allowed: twice in a row, or the remaining demand would not "
                                    "fit in the vehicles left",
                      node_refusal="node {i} does not fit in the vehicle: return to the depot first")
    doc = EnvDoc(
        cost="length of all routes (+ 10 per route beyond the fleet)",
        summary="Fixed-fleet CVRP: serve every customer's demand with at most ``num_vehicles`` routes.",
        description="CVRP's instances (Kool et al. 2019) with a fleet of ``num_vehicles`` = ceil(total demand) + 1 "
                    "(RL4CO's CVRPMVC). The vehicle may return to the depot only while the remaining demand fits in "
                    "the vehicles left; where nothing fits and that bound forbids the return, the return is allowed "
                    "and the route beyond the fleet costs 10.",
        action="the next node (0 = back to the depot, starting the next vehicle's route).",
        mask="CVRP's (a customer when unserved and it fits; the depot not twice in a row), and the depot only "
             "while the unserved demand fits in the vehicles left (1e-5 slack per vehicle), unless no customer fits.",
        rewards="Minus the edge length of the step (CVRP's), minus 10 for a return that starts a route beyond "
                "``num_vehicles``. The rewards sum to minus the cost.",
        starting_state='At the depot with the first vehicle: a random instance, or ``options["instance"] = {"locs": '
                       '(N, 2), "demand": (N,), "num_vehicles": k}`` (CVRP\'s fields; k whole, in [total demand, N]).',
        episode_end="Terminates when the last customer is served",
        example='>>> obs["vehicles_left"].shape, int(obs["action_mask"][0])\n((1,), 0)')

    @staticmethod
    def gauge(state) -> tuple[float, str, bool]:
        """The renderer's footer for a batch-1 state: (fill fraction, text, fleet exceeded)."""
        used, routes, k = float(state.used[0]), int(state.routes[0]), int(state.instance.num_vehicles[0])
        served, n = int(state.visited[0, 1:].sum()), state.visited.shape[1] - 1
        return used, f"load {used:.0%}    vehicle {routes} / {k}    served {served} / {n}", routes > k

    @staticmethod
    def generate(batch_size: int, num_nodes: int, *, generator: torch.Generator | None = None,
                 device: Any = None) -> CVRPMVCInstance:
        """B instances: CVRP's draw for draw, with ``num_vehicles = ceil(total demand) + 1``."""
        inst = CVRP.generate(batch_size, num_nodes, generator=generator, device=device)
        k = fleet_for(total_demand(inst)).float()
        return CVRPMVCInstance(locs=inst.locs, demand=inst.demand, num_vehicles=k)

    @staticmethod
    def check_instance(instance: CVRPMVCInstance) -> None:
        """The fleet carries the total demand (1e-5 slack per vehicle), else no solution exists."""
        k = instance.num_vehicles.double()
        short = total_demand(instance) > k + CAPACITY_TOLERANCE * k
        if short.any():
            i = int(short.nonzero()[0])
            raise ValueError(f"instance field 'num_vehicles' ({int(k[i])}) cannot carry the total demand "
                             f"{float(total_demand(instance)[i]):.6g} (in capacities) of instance {i}: infeasible")

    @classmethod
    def field_at_bound(cls, data: dict, field: str, node: int, value: float) -> dict | None:
        """As the default, then ``num_vehicles`` raised to carry the new total demand where it must (None
        where even N vehicles could not)."""
        out = super().field_at_bound(data, field, node, value)
        need = math.ceil(float(np.asarray(out["demand"], np.float64).sum()) - 1e-6)
        if need > len(out["demand"]):
            return None
        out["num_vehicles"] = np.float32(max(float(out["num_vehicles"]), need))
        return out

    @classmethod
    def instance_from_observation(cls, obs) -> CVRPMVCInstance:
        """The instances behind a first observation: ``num_vehicles`` is ``vehicles_left`` + 1 there."""
        return CVRPMVCInstance(locs=obs["locs"], demand=obs["demand"], num_vehicles=obs["vehicles_left"][:, 0] + 1)

    @staticmethod
    def step_cost_bound(state) -> float:
        """An edge and a return (< 3) plus the penalty of a route beyond the fleet."""
        return 3.0 + EXTRA_ROUTE_PENALTY

    @staticmethod
    def reset(instance: CVRPMVCInstance) -> CVRPMVCState:
        s = CVRP.reset(instance)
        routes, remaining = torch.ones_like(s.used), instance.demand.sum(1)  # (the depot's demand is 0)
        return CVRPMVCState(instance=instance, current=s.current, current_loc=s.current_loc, used=s.used,
                            visited=s.visited, num_steps=s.num_steps, length=s.length, routes=routes,
                            remaining=remaining, done=s.done,
                            mask=CVRPMVC._mask(instance, s.mask, remaining, s.current, routes))

    @staticmethod
    def _mask(instance: CVRPMVCInstance, cvrp_mask: Tensor, remaining: Tensor, current: Tensor,
              routes: Tensor) -> Tensor:
        """CVRP's mask with the depot further allowed only while the unserved demand ``remaining`` (B,) fits in the
        vehicles left, or when no customer is allowed (the fleet cannot be kept: see the module docstring)."""
        allowed = flags(cvrp_mask).clone()
        k = instance.num_vehicles
        fits = remaining <= (k - routes) + CAPACITY_TOLERANCE * k
        customers = any_marked(allowed[:, 1:])
        return with_first(allowed, allowed[:, 0] & ((fits & (current != 0)) | ~customers))

    @staticmethod
    def transition(state: CVRPMVCState, action: Tensor, active: Tensor) -> tuple[CVRPMVCState, Tensor]:
        """CVRP's transition, then the fleet: a return from a customer starts the next route, charged
        :data:`EXTRA_ROUTE_PENALTY` beyond ``num_vehicles``. Inactive sub-envs arrive with ``action ==
        current`` (see ``base.step``)."""
        inst = state.instance
        inner = CVRPState(instance=inst, current=state.current, current_loc=state.current_loc, used=state.used,
                          visited=state.visited, num_steps=state.num_steps, length=state.length, done=state.done,
                          mask=state.mask)
        s, cost = CVRP.transition(inner, action, active)
        returned = active & (action == 0) & (state.current != 0)
        routes = state.routes + returned
        # kept up to date rather than summed anew: a float sum over the nodes is a scalar loop in the compiled step
        # (a dependent addition per node, 25-35 µs of a B = 1024 step), and the slack absorbs the rounding
        remaining = state.remaining - gather_nodes(inst.demand, action) * active  # (the depot's demand is 0)
        cost = cost + EXTRA_ROUTE_PENALTY * (returned & (routes > inst.num_vehicles))
        new = CVRPMVCState(instance=inst, current=s.current, current_loc=s.current_loc, used=s.used,
                           visited=s.visited, num_steps=s.num_steps, length=s.length, routes=routes,
                           remaining=remaining, done=s.done,
                           mask=CVRPMVC._mask(inst, s.mask, remaining, s.current, routes))
        return new, cost

    @staticmethod
    def observe(state: CVRPMVCState) -> dict[str, Tensor]:
        obs = CVRP.observe(state)
        obs["vehicles_left"] = (state.instance.num_vehicles - state.routes).clamp(min=0.0)[:, None]
        return obs
