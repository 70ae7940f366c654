"""Capacitated vehicle routing with time windows: serve every customer's demand in routes from the depot
(node 0), starting each service inside the customer's time window.

Generator as RL4CO's ``CVRPTWGenerator`` (ai4co/rl4co, ``rl4co/envs/routing/cvrptw/generator.py``) with its
defaults ``max_loc = 150``, ``max_time = 480``, service durations 0, expressed in units of ``max_loc`` so
that coordinates lie in [0, 1] as in every unit here (time runs at unit speed in the same units; RL4CO's
``scale=True`` divides by ``max_time`` instead, which would put the coordinates in [0, 0.3125]):

- depot and n customers uniform in [0, 1]^2; demands as CVRP (integers U{1..9} / capacity 20/30/40/50 for
  n = 10/20/50/100, :func:`routing_gym.problems.cvrp.capacity`; RL4CO's ``CVRPGenerator`` draws the same);
- horizon ``H = 480 / 150 = 3.2`` (:data:`MAX_TIME`): the depot's window is [0, H];
- a customer at distance d from the depot draws two times uniform in [d, H - d] (in RL4CO's units of
  1/150, truncated to integers), its window is [min, max] of them; a window that collapses to a point is
  widened by one unit (the opening moved down, not below d, else the closing up, not above H - d);
- service times 0 (RL4CO's generator sets every duration to 0); a user instance may give any.

Rules (RL4CO's ``CVRPTWEnv``, ``rl4co/envs/routing/cvrptw/env.py``, plus the return to the depot in time):
the vehicle's clock starts at 0 on each route (it resets at the depot); travelling an edge takes its
length; the vehicle may wait: service at node j starts at ``max(arrival, open_j)`` and ends
``service_time_j`` later. A customer is allowed when unserved, its demand fits (CVRP's rule, 1e-5 slack)
and it is reached before its window closes (``arrival <= close_j``) with the depot still reachable
before the depot's window closes after serving it (``start + service_time_j + d(j, 0) <= close_0``), both
with a 1e-5 slack for float32 sums (:data:`TIME_TOLERANCE`). The depot is not allowed twice in a row while
a customer is allowed. The episode ends when the last customer is served, the return to the depot added
to that step's cost. Cost = total distance (waiting is free).

Every customer of a valid instance can be served alone from the depot (``instance_from`` checks it), so a
vehicle back at the depot can always continue: the mask never leaves an episode stuck.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import torch
from torch import Tensor

from .base import ZERO_AT_DEPOT, Drawing, EnvDoc, Field, LegendEntry, Obs, PolicyInputs, Problem, check_num_nodes, \
    distance, gather_nodes, generation_device, node_index, steps_taken
from .cvrp import CVRP, CVRPState
from .masks import empty_mask

MAX_LOC = 150.0  # RL4CO's coordinate range [0, 150]: its times are in units of 1/MAX_LOC of ours
MAX_TIME = 480.0 / MAX_LOC  # the horizon (the depot's closing time), 3.2; the bound of every time
TIME_TOLERANCE = 1e-5  # float32 slack when comparing times with a window's closing (in the mask only)


class CVRPTWInstance(NamedTuple):
    locs: Tensor  # (B, N, 2) float32, node 0 = depot
    demand: Tensor  # (B, N) float32 demand / capacity, depot 0
    time_windows: Tensor  # (B, N, 2) float32 (open, close) of each node's service start; depot (0, horizon)
    service_time: Tensor  # (B, N) float32 service duration, depot 0


class CVRPTWState(NamedTuple):
    instance: CVRPTWInstance
    back: Tensor  # (B, N) float32 distance from each node to the depot (fixed)
    current: Tensor  # (B,) int64 current node (0 = depot)
    current_loc: Tensor  # (B, 2) float32
    used: Tensor  # (B,) float32 load on the current route, fraction of capacity
    time: Tensor  # (B,) float32 clock of the current route: when the last service ended (0 at the depot)
    visited: Tensor  # (B, N) int8 mask, customers served (the depot column is unused)
    num_steps: Tensor  # (B,) int64 actions taken
    length: Tensor  # (B,) float32 length of all routes so far
    done: Tensor  # (B,) bool
    mask: Tensor  # (B, N) int8 mask, 1 = allowed


def _in_time(inst: CVRPTWInstance, back: Tensor, time: Tensor, current_loc: Tensor) -> Tensor:
    """(B, N) bool: each node reached from ``current_loc`` (B, 2) at ``time`` (B,) before its window closes,
    and its service ending early enough to return to the depot before the depot's window closes."""
    arrival = time[:, None] + distance(inst.locs, current_loc[:, None])  # (B, N)
    start = torch.maximum(arrival, inst.time_windows[..., 0])
    close = inst.time_windows[..., 1]
    return (arrival <= close + TIME_TOLERANCE) & (start + inst.service_time + back <= close[:, :1] + TIME_TOLERANCE)


class CVRPTW(Problem):
    name = "cvrptw"
    label = "CVRPTW"
    has_depot = True
    Instance = CVRPTWInstance
    fields = CVRP.fields + (
        Field("time_windows", ("N", 2), 0.0, MAX_TIME, rules=(
            (lambda w, n: w[..., 0] <= w[..., 1], "must open no later than it closes (open <= close) at every node"),
            (lambda w, n: w[:, 0, 0] == 0, "must open at 0 at the depot (each route's clock starts at 0)"))),
        Field("service_time", ("N",), 0.0, MAX_TIME, rules=(ZERO_AT_DEPOT,)))
    observation = (Obs("locs", ("N", 2), "coordinates in [0, 1], depot first"),
                   Obs("demand", ("N",), "demand / capacity in (0, 1], depot 0"),
                   Obs("time_windows", ("N", 2), f"(open, close) of each node's service start, in [0, {MAX_TIME:g}]; "
                       "the depot's close is the horizon", high=MAX_TIME),
                   Obs("service_time", ("N",), f"service duration, in [0, {MAX_TIME:g}], depot 0", high=MAX_TIME),
                   Obs("remaining_capacity", (1,), "capacity left on the current route, in [0, 1]"),
                   Obs("current_time", (1,), f"clock of the current route (0 at the depot), in [0, {MAX_TIME:g}]",
                       high=MAX_TIME),
                   node_index("current_node", "where the vehicle is (0 = depot)"),
                   steps_taken(lambda n: 2.0 * (n - 1), "2n"))
    policy = PolicyInputs(node_features=("demand", "time_windows", "service_time"), context_nodes=("current_node",),
                          context_scalars=("remaining_capacity", "current_time"))
    drawing = Drawing(legend=(LegendEntry("depot", "depot"), LegendEntry("routes", "one colour per route"),
                              LegendEntry("window", "time window"),
                              LegendEntry("unavailable", "too late or does not fit")), paths="trips",
                      window_by="time_windows",
                      header=lambda state: f"  (time {float(state.time[0]):.2f})",
                      depot_refusal="the depot cannot be chosen twice in a row (or before any customer)",
                      node_refusal="node {i} is reached after its window closes, leaves no time to return to the "
                                   "depot, or does not fit: return to the depot first")
    doc = EnvDoc(
        cost="length of all routes",
        summary="Capacitated vehicle routing with time windows: serve every customer inside its time window.",
        description="Depot (node 0) and n customers uniform in the unit square, demands as CVRP; each node has a "
                    f"time window (open, close) for the start of its service and a service time (RL4CO's "
                    f"CVRPTWGenerator in units of its max_loc 150: horizon {MAX_TIME:g}, service times 0). Unit "
                    "speed; each route's clock starts at 0 at the depot; the vehicle may wait for a window to open.",
        action="the next node (0 = back to the depot).",
        mask="a customer when unserved, its demand fits the remaining capacity, it is reached before its window "
             "closes and, after its service, the depot is reached before the depot's window closes (1e-5 float "
             "slack); the depot unless the vehicle is at the depot while a customer is allowed.",
        rewards="Minus the edge length of the step (waiting is free); the step serving the last customer also adds "
                "the return to the depot. The rewards sum to minus the total length of all routes.",
        starting_state='At the depot at time 0 with a full vehicle: a random instance, or ``options["instance"] = '
                       '{"locs": (N, 2), "demand": (N,), "time_windows": (N, 2), "service_time": (N,)}`` (every '
                       'customer must be servable alone from the depot and back within the depot\'s window).',
        episode_end="Terminates when the last customer is served",
        example='>>> obs["time_windows"].shape, float(obs["time_windows"][0, 1]), float(obs["current_time"][0])\n'
                '((21, 2), 3.200000047683716, 0.0)')

    @staticmethod
    def gauge(state) -> tuple[float, str, bool]:
        """The renderer's footer for a batch-1 state: the route's clock against the horizon."""
        time, horizon = float(state.time[0]), float(state.instance.time_windows[0, 0, 1])
        served, n = int(state.visited[0, 1:].sum()), state.visited.shape[1] - 1
        return min(time / max(horizon, 1e-9), 1.0), \
            f"time {time:.2f} / {horizon:.2f}    load {float(state.used[0]):.0%}    served {served} / {n}", False

    @staticmethod
    def generate(batch_size: int, num_nodes: int, *, generator: torch.Generator | None = None,
                 device: Any = None) -> CVRPTWInstance:
        """B instances of ``num_nodes`` customers plus a depot (node 0), by RL4CO's generator (module docstring)."""
        n = check_num_nodes(num_nodes, minimum=1)
        dev = generation_device(generator, device)
        locs, demand = CVRP.generate(batch_size, n, generator=generator, device=dev)  # CVRP's draws, in order
        # RL4CO's steps 1-7, in its units (1/150 of ours)
        dist = distance(locs, locs[:, :1]) * MAX_LOC  # (B, N)
        upper = MAX_TIME * MAX_LOC - dist  # service durations 0
        t1, t2 = ((dist + (upper - dist) * torch.rand(batch_size, n + 1, generator=generator, device=dev)).floor()
                  for _ in range(2))
        low, high = torch.minimum(t1, t2), torch.maximum(t1, t2)
        low[:, 0], high[:, 0] = 0.0, MAX_TIME * MAX_LOC
        low = torch.where(low == high, torch.maximum(dist.floor(), low - 1), low)
        high = torch.where(low == high, torch.minimum(upper.floor(), high + 1), high)
        time_windows = torch.stack([low, high], dim=-1) / MAX_LOC
        time_windows[:, 0, 1] = MAX_TIME  # exactly the bound (480 / 150 rounds differently)
        return CVRPTWInstance(locs=locs, demand=demand, time_windows=time_windows,
                              service_time=torch.zeros(batch_size, n + 1, device=dev))

    @staticmethod
    def check_instance(instance: CVRPTWInstance) -> None:
        """Every customer can be served alone from the depot and back in time (the mask's own rule)."""
        locs = instance.locs
        b = locs.shape[0]
        alone = _in_time(instance, distance(locs, locs[:, :1]), torch.zeros(b, device=locs.device), locs[:, 0])
        late = (~alone[:, 1:]).nonzero()
        if len(late):
            i, j = (int(v) for v in late[0])
            which = f" of instance {i}" if b > 1 else ""
            raise ValueError(f"instance field 'time_windows' makes customer {j + 1}{which} "
                             "unservable: from the depot it is reached after its window closes, or its service ends "
                             "too late to return before the depot's window closes (time_windows, service_time, locs)")

    @classmethod
    def field_at_bound(cls, data: dict, field: str, node: int, value: float) -> dict | None:
        """``field`` at ``node`` set to ``value`` (a window's opening for ``time_windows``); the node's other
        time fields relaxed so that it stays servable (its window [0, horizon], service 0; moved onto the
        depot where its own opening or service time is at the bound), the depot's window closing at the
        horizon :data:`MAX_TIME`."""
        out = super().field_at_bound(data, field, node, value)
        if field == "demand":
            return out
        horizon = max(float(value), MAX_TIME) if field == "time_windows" else MAX_TIME
        out["time_windows"][0, 1] = horizon
        out["time_windows"][node, 1] = horizon
        if field != "time_windows":
            out["time_windows"][node, 0] = 0.0
        if field != "service_time":
            out["service_time"][node] = 0.0
        if field in ("time_windows", "service_time"):
            out["locs"][node] = out["locs"][0]
        return out

    @staticmethod
    def reset(instance: CVRPTWInstance) -> CVRPTWState:
        locs = instance.locs
        b, n, _ = locs.shape
        dev = locs.device
        zeros = torch.zeros(b, dtype=torch.long, device=dev)
        zero = torch.zeros(b, device=dev)
        visited = empty_mask(b, n, dev)
        state = CVRPTWState(instance=instance, back=distance(locs, locs[:, :1]), current=zeros, current_loc=locs[:, 0],
                            used=zero, time=zero, visited=visited, num_steps=zeros, length=zero,
                            done=torch.zeros(b, dtype=torch.bool, device=dev), mask=visited)
        return state._replace(mask=CVRPTW._mask(state, visited, zeros, locs[:, 0], zero, zero))

    @staticmethod
    def _mask(state: CVRPTWState, visited: Tensor, current: Tensor, current_loc: Tensor, used: Tensor,
              time: Tensor) -> Tensor:
        """CVRP's rules (:meth:`CVRP._mask`) with the customers further restricted to those in time."""
        return CVRP._mask(state.instance, visited, current, used,
                          within=_in_time(state.instance, state.back, time, current_loc))

    @staticmethod
    def transition(state: CVRPTWState, action: Tensor, active: Tensor) -> tuple[CVRPTWState, Tensor]:
        """CVRP's routes, loads and costs (:meth:`CVRP.move`), then the route's clock: service starts at
        ``max(arrival, open)`` and ends ``service_time`` later; the clock restarts at 0 at the depot.
        Inactive sub-envs arrive with ``action == current`` (see ``base.step``)."""
        inst = state.instance
        routes = CVRPState(instance=inst, current=state.current, current_loc=state.current_loc, used=state.used,
                           visited=state.visited, num_steps=state.num_steps, length=state.length, done=state.done,
                           mask=state.mask)
        s, cost = CVRP.move(routes, action, active)
        refill = (action == 0) | (s.done & ~state.done)
        arrival = state.time + distance(gather_nodes(inst.locs, action), state.current_loc)
        start = torch.maximum(arrival, gather_nodes(inst.time_windows[..., 0], action))
        time = torch.where(refill, 0.0, torch.where(active, start + gather_nodes(inst.service_time, action), state.time))
        new = state._replace(current=s.current, current_loc=s.current_loc, used=s.used, time=time, visited=s.visited,
                             num_steps=s.num_steps, length=s.length, done=s.done)
        return new._replace(mask=CVRPTW._mask(new, s.visited, s.current, s.current_loc, s.used, time)), cost

    @staticmethod
    def observe(state: CVRPTWState) -> dict[str, Tensor]:
        inst = state.instance
        return {"locs": inst.locs, "demand": inst.demand, "time_windows": inst.time_windows,
                "service_time": inst.service_time, "remaining_capacity": (1.0 - state.used).clamp(0.0, 1.0)[:, None],
                "current_time": state.time.clamp(0.0, MAX_TIME)[:, None], "current_node": state.current,
                "num_steps": state.num_steps[:, None].float()}
