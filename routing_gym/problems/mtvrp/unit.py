"""The multi-attribute VRP unit (``routing/MTVRP-v0`` and RouteFinder's 48 variants by name): instance
validation, state, transition and observation. The rules are :mod:`.attributes`', the generator
:mod:`.generator`'s.

Rules (RouteFinder's ``MTVRPEnv``, ai4co/routefinder ``routefinder/envs/mtvrp/env.py``, and RL4CO's
``rl4co/envs/routing/mtvrp/env.py``, composed in :meth:`MTVRP._mask`): a customer is allowed when unserved and
its demand fits (C, B, MB), it is reached before its window closes and the route's depot after its service
before the depot's closes (TW; not on open routes), and the route stays within the duration limit with the
return to its depot (L; the return not counted on open routes). Each route's clock and length start at 0
at its depot. From a customer the vehicle may return to the route's depot; at a depot it may move to
another depot (MD, free: a new route starts there) unless it just did. The episode ends when the last
customer is served, the return (not on open routes) added to that step. Cost = the length of all routes,
return arcs of open routes not counted (RouteFinder's ``_get_reward``).

Every customer of a valid instance can be served alone from every depot (``instance_from`` checks it), so
a vehicle at a depot can always continue.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor

from ..base import Drawing, EnvDoc, Field, LegendEntry, Obs, PolicyInputs, Problem, Variant, distance, gather_nodes, \
    locs_field, node_index, steps_taken
from ..masks import empty_mask, flags, mark, mask_of
from . import generator
from .attributes import TOLERANCE, VARIANTS, Flags, capacity_allows, depots_allow, duration_allows, load_after, \
    time_windows_allow, variant_name

TIME_CAP = 10.0  # observed times (and finite times a user may give) stay below it; no window (inf) is observed as it
LENGTH_CAP = 10.0  # the same for distance limits
SPEED_CAP = 10.0
CAPACITY_CAP = 1e4  # capacity_original


def _below(cap: float) -> tuple:
    """The rule (``Field.rules``) of a time or length: >= 0 and below ``cap``, or +inf (none)."""
    return lambda v, n: (v >= 0) & ((v < cap) | torch.isinf(v)), f"must be >= 0 and below {cap:g} (inf: none)"


class MTVRPInstance(NamedTuple):
    locs: Tensor  # (B, N, 2) float32, depots first
    demand_linehaul: Tensor  # (B, N) float32 delivery / capacity, 0 at depots (C)
    demand_backhaul: Tensor  # (B, N) float32 pickup / capacity, 0 at depots and linehaul customers (B)
    time_windows: Tensor  # (B, N, 2) float32 (open, close) of the start of service, [0, inf] = none (TW)
    service_time: Tensor  # (B, N) float32 (TW)
    distance_limit: Tensor  # (B, 1) float32 most length of a route, inf = none (L)
    open_route: Tensor  # (B, 1) bool (O)
    backhaul_class: Tensor  # (B, 1) int64 1 = linehauls first (B), 2 = mixed (MB)
    speed: Tensor  # (B, 1) float32 travel time = distance / speed
    num_depots: Tensor  # (B, 1) int64 nodes 0 .. num_depots - 1 are depots (MD)
    capacity_original: Tensor  # (B, 1) float32 the capacity the demands were divided by (informative)


class MTVRPState(NamedTuple):
    instance: MTVRPInstance
    is_depot: Tensor  # (B, N) int8 mask of the depots (fixed)
    current: Tensor  # (B,) int64 current node
    current_loc: Tensor  # (B, 2) float32
    route_depot: Tensor  # (B,) int64 the depot the current route left from (and returns to)
    linehaul: Tensor  # (B,) float32 delivered on the current route
    backhaul: Tensor  # (B,) float32 picked up on the current route
    peak: Tensor  # (B,) float32 most that pickups exceeded deliveries on the route (>= 0)
    time: Tensor  # (B,) float32 the route's clock: when the last service ended (0 at a depot)
    route_length: Tensor  # (B,) float32 length of the current route so far
    relocated: Tensor  # (B,) bool the last action moved between depots
    visited: Tensor  # (B, N) int8 mask, customers served (depot columns unused)
    num_steps: Tensor  # (B,) int64 actions taken
    length: Tensor  # (B,) float32 cost so far
    done: Tensor  # (B,) bool
    mask: Tensor  # (B, N) int8 mask, 1 = allowed


def flags_of(instance: MTVRPInstance) -> Flags:
    """(B,) bool per attribute: what each instance of the batch has (RouteFinder's ``check_variants``)."""
    backhaul = (instance.demand_backhaul > 0).any(dim=1)
    return Flags(open_route=instance.open_route[:, 0], backhaul=backhaul,
                 mixed=backhaul & (instance.backhaul_class[:, 0] == 2), limit=torch.isfinite(instance.distance_limit[:, 0]),
                 time_windows=torch.isfinite(instance.time_windows[..., 1]).any(dim=1) | (instance.service_time > 0).any(dim=1),
                 multi_depot=instance.num_depots[:, 0] > 1)


def variant_names(instance: MTVRPInstance) -> list[str]:
    """RouteFinder's variant name of each instance of a batch (``get_variant_names``)."""
    return [variant_name(Flags(*(bool(v) for v in f))) for f in zip(*flags_of(instance))]


class MTVRP(Problem):
    name = "mtvrp"
    label = "MTVRP"
    has_depot = True
    depots_by = "is_depot"
    Instance = MTVRPInstance
    # ``locs`` and ``demand_linehaul`` required, the attributes optional (absent: the neutral value)
    fields = (locs_field(),
              Field("demand_linehaul", ("N",), 0.0, 1.0),
              Field("demand_backhaul", ("N",), 0.0, 1.0, default=0.0),
              Field("time_windows", ("N", 2), kind="float_or_inf", default=(0.0, math.inf), rules=(
                  _below(TIME_CAP), (lambda w, n: w[..., 0] <= w[..., 1], "must open before it closes"))),
              Field("service_time", ("N",), 0.0, TIME_CAP, default=0.0),
              Field("distance_limit", (1,), kind="float_or_inf", default=math.inf, rules=(
                  _below(LENGTH_CAP), (lambda v, n: v > 0, "must be > 0"))),
              Field("open_route", (1,), kind="flag", default=False),
              Field("backhaul_class", (1,), 1, 2, kind="int", default=1),
              Field("speed", (1,), 1e-6, SPEED_CAP, default=1.0),
              Field("num_depots", (1,), 1, lambda n: n - 1, kind="int", default=1),
              Field("capacity_original", (1,), 1e-6, CAPACITY_CAP, default=1.0))
    min_num_nodes = 5  # a multi-depot instance keeps a customer with up to 5 depots
    variants = {"variant": Variant("all", (*VARIANTS, *generator.MIXED_VARIANTS),
                                   "one of RouteFinder's 48 variant names (``CVRP``, ``OVRP``, ``VRPBLTW``, "
                                   "``MDOVRPMBLTW``...), or ``\"all\"`` (default: O, TW, L, B each with probability "
                                   "0.5 per instance, RouteFinder's default) or ``\"mixed\"`` (every one of the 48)"),
                "num_depots": Variant(3, (2, 3, 4, 5), "depots of the multi-depot (MD) instances, default 3")}
    presets = {name: {"variant": name} for name in VARIANTS}
    num_reward_groups = 2 ** len(Flags._fields)  # an attribute a bit
    observation = (
        Obs("locs", ("N", 2), "coordinates in [0, 1], depots first"),
        Obs("is_depot", ("N",), "1 at the depots (the first ``num_depots`` nodes)"),
        Obs("demand_linehaul", ("N",), "delivery / capacity in [0, 1], 0 at depots and backhaul customers"),
        Obs("demand_backhaul", ("N",), "pickup / capacity in [0, 1], 0 at depots and linehaul customers"),
        Obs("windows", ("N", 2), f"``time_windows`` with times above {TIME_CAP:g} (no window: inf) shown as "
            f"{TIME_CAP:g}", high=TIME_CAP),
        Obs("service_time", ("N",), f"service duration, in [0, {TIME_CAP:g}]", high=TIME_CAP),
        Obs("open_route", (1,), "1 where routes are open"),
        Obs("backhaul_class", (1,), "1: linehauls before backhauls (B), 2: mixed (MB)", low=1.0, high=2.0),
        Obs("speed", (1,), f"travel time = distance / speed, in (0, {SPEED_CAP:g}]", high=SPEED_CAP),
        Obs("num_depots", (1,), "depots, in [1, N - 1]", low=1.0, high=lambda n: n - 1.0),
        Obs("capacity_original", (1,), "the capacity the demands were divided by", high=CAPACITY_CAP),
        Obs("used_capacity_linehaul", (1,), "delivered on the current route, in [0, 1]"),
        Obs("used_capacity_backhaul", (1,), "picked up on the current route, in [0, 1]"),
        Obs("current_time", (1,), f"the route's clock (0 at a depot), up to {TIME_CAP:g}", high=TIME_CAP),
        Obs("remaining_length", (1,), f"distance_limit minus the route's length, up to {LENGTH_CAP:g} (no limit: "
            f"{LENGTH_CAP:g})", high=LENGTH_CAP),
        node_index("current_node", "where the vehicle is"),
        node_index("route_depot", "the depot the current route returns to"),
        steps_taken(lambda n: 3.0 * (n - 1), "3n"))
    policy = PolicyInputs(node_features=("is_depot", "demand_linehaul", "demand_backhaul", "windows", "service_time"),
                          context_nodes=("current_node", "route_depot"),
                          context_scalars=("used_capacity_linehaul", "used_capacity_backhaul", "current_time",
                                           "remaining_length", "open_route", "backhaul_class"))
    drawing = Drawing(legend=(LegendEntry("depot", "depot"), LegendEntry("kind", "backhaul (pickup)"),
                              LegendEntry("routes", "one colour per route"), LegendEntry("window", "time window"),
                              LegendEntry("unavailable", "late, far or full")), paths="trips",
                      kind_by="demand_backhaul", open_by="open_route", window_by="time_windows",
                      header=lambda state: f"    {variant_names(state.instance)[0]}",
                      depot_refusal="that depot is not allowed now (a route returns to its own depot; no two "
                                    "depot moves in a row)",
                      node_refusal="node {i} does not fit, is reached too late or makes the route too long")
    doc = EnvDoc(
        cost="length of all routes (open routes: no return arcs)",
        summary="The multi-attribute VRP (RouteFinder's 48 variants): capacity with open routes, backhauls, "
                "duration limits, time windows and several depots as per-instance attributes.",
        description="RouteFinder's MTVRP (Berto et al. 2024): depots first, then customers, uniform in the unit "
                    "square; demands U{1..9} / (30 + n // 5); attributes per instance: open routes, backhauls "
                    "(linehauls first, or mixed), a duration limit, time windows with service times, 1-5 depots. "
                    "``variant`` picks one of the 48 variants (also registered by name, ``routing/VRPBLTW-50``) or "
                    "mixes them.",
        action="the next node (a depot: back to the route's depot, or from a depot to another).",
        mask="a customer when unserved, its demand fits (linehauls before backhauls under B; the load never above "
             "the capacity under MB), it is reached before its window closes with the route's depot reachable in "
             "time after its service (closed routes), and the route stays within its length limit; from a customer "
             "the route's depot; at a depot another depot unless the last action moved between depots.",
        rewards="Minus the edge length of the step (0 for a return on an open route and for a move between depots; "
                "waiting is free); the step serving the last customer also adds the return to the route's depot on "
                "closed routes. The rewards sum to minus the cost.",
        starting_state='At depot 0 with an empty route: a random instance, or ``options["instance"]`` with '
                       '``locs`` and ``demand_linehaul`` and any of RL4CO\'s ``demand_backhaul``, '
                       '``backhaul_class``, ``time_windows``, ``service_time``, ``distance_limit``, ``open_route``, '
                       '``speed``, ``num_depots``, ``capacity_original`` (absent: the neutral value).',
        episode_end="Terminates when the last customer is served",
        example='>>> obs["locs"].shape, obs["windows"].shape, int(obs["action_mask"][0])\n'
                '((21, 2), (21, 2), 0)')

    generate = staticmethod(generator.generate)

    @staticmethod
    def reward_groups(instance: MTVRPInstance) -> Tensor:
        """(B,) each instance's variant as a code: bit i set when it has attribute i of ``Flags``."""
        return sum(flag.long() << i for i, flag in enumerate(flags_of(instance)))

    @staticmethod
    def gauge(state) -> tuple[float, str, bool]:
        """The renderer's footer: the route's delivered load, clock (against its depot's closing time, where
        finite: TW) and the customers served."""
        load = float(state.linehaul[0] + state.peak[0])
        customers = ~flags(state.is_depot[0])
        served = int((flags(state.visited[0]) & customers).sum())
        horizon = float(state.instance.time_windows[0, int(state.route_depot[0]), 1])
        clock = f"{float(state.time[0]):.2f}" + (f" / {horizon:.2f}" if np.isfinite(horizon) else "")
        return min(max(load, 0.0), 1.0), f"load {load:.0%}    time {clock}    " \
                                         f"served {served} / {int(customers.sum())}", False

    # ---------------------------------------------------------------------------------- instances
    @staticmethod
    def check_instance(instance: MTVRPInstance) -> None:
        """The constraints between fields: the demands 0 at the depots (the first ``num_depots`` nodes, a count
        another field gives), each customer a linehaul or a backhaul with a demand, and every customer
        servable alone from every depot."""
        linehaul, backhaul = instance.demand_linehaul, instance.demand_backhaul
        is_depot = torch.arange(linehaul.shape[1], device=linehaul.device)[None, :] < instance.num_depots
        for key, value in (("demand_linehaul", linehaul), ("demand_backhaul", backhaul)):
            if (value * is_depot).any():
                raise ValueError(f"instance field '{key}' must be 0 at the depots (the first num_depots nodes)")
        if ((linehaul > 0) & (backhaul > 0)).any():
            raise ValueError("instance field 'demand_backhaul' must be 0 where 'demand_linehaul' is > 0: a customer "
                             "is a linehaul or a backhaul")
        if ((linehaul <= 0) & (backhaul <= 0) & ~is_depot).any():
            raise ValueError("instance field 'demand_linehaul' (or 'demand_backhaul') must be > 0 for every customer")
        _check_servable(instance, is_depot)

    @classmethod
    def field_at_bound(cls, data: dict, field: str, node: int, value: float) -> dict | None:
        """``data`` with ``field`` at ``value`` (at ``node`` for per-node fields), and what the joint
        constraints tie to it: a customer's other demand 0 (a linehaul or a backhaul); without time windows
        (a service time, a speed or depots where the windows would no longer let a vehicle serve alone);
        with ``num_depots`` depots first, zero demands at them and no duration limit."""
        out = {k: np.array(v, copy=True) for k, v in data.items()}
        out[field] = out[field].astype(np.float32)  # a bool or integer field takes the value as given
        if out[field].shape == (1,):
            out[field][0] = value
        else:
            out[field].reshape(out[field].shape[0], -1)[node, 0] = value
        other = {"demand_linehaul": "demand_backhaul", "demand_backhaul": "demand_linehaul"}.get(field)
        if other is not None:
            out[other][node] = 0.0
        if field in ("service_time", "speed", "num_depots"):
            out["time_windows"][:, 0], out["time_windows"][:, 1] = 0.0, np.inf
            out["service_time"] = np.where(np.arange(len(out["service_time"])) == node, out["service_time"], 0.0) \
                if field == "service_time" else np.zeros_like(out["service_time"])
        if field == "num_depots" and value <= len(out["locs"]) - 1:
            depot = np.arange(len(out["locs"])) < value
            out["demand_linehaul"] = np.where(depot, 0.0, np.maximum(out["demand_linehaul"], 0.1 * (out["demand_backhaul"] <= 0)))
            out["demand_backhaul"] = np.where(depot, 0.0, out["demand_backhaul"])
            out["distance_limit"][:] = np.inf
        return out

    @classmethod
    def instance_from_observation(cls, obs) -> MTVRPInstance:
        """The instances behind a first observation: ``windows`` and ``remaining_length`` at their caps read
        as no window / no limit (inf)."""
        windows = obs["windows"].masked_fill(obs["windows"] >= TIME_CAP, torch.inf)
        limit = obs["remaining_length"].masked_fill(obs["remaining_length"] >= LENGTH_CAP, torch.inf)
        return MTVRPInstance(locs=obs["locs"], demand_linehaul=obs["demand_linehaul"],
                             demand_backhaul=obs["demand_backhaul"], time_windows=windows,
                             service_time=obs["service_time"], distance_limit=limit, open_route=obs["open_route"] > 0.5,
                             backhaul_class=obs["backhaul_class"].round().long(), speed=obs["speed"],
                             num_depots=obs["num_depots"].round().long(), capacity_original=obs["capacity_original"])

    # ---------------------------------------------------------------------------------- dynamics
    @staticmethod
    def reset(instance: MTVRPInstance) -> MTVRPState:
        locs = instance.locs
        b, n, _ = locs.shape
        dev = locs.device
        zeros = torch.zeros(b, dtype=torch.long, device=dev)
        zero = torch.zeros(b, device=dev)
        no = torch.zeros(b, dtype=torch.bool, device=dev)
        visited = empty_mask(b, n, dev)
        is_depot = mask_of(torch.arange(n, device=dev)[None, :] < instance.num_depots)
        state = MTVRPState(instance=instance, is_depot=is_depot, current=zeros, current_loc=locs[:, 0], route_depot=zeros,
                           linehaul=zero, backhaul=zero, peak=zero, time=zero, route_length=zero, relocated=no,
                           visited=visited, num_steps=zeros, length=zero, done=no, mask=visited)
        return state._replace(mask=MTVRP._mask(state))

    @staticmethod
    def _mask(s: MTVRPState) -> Tensor:
        """The rules of :mod:`.attributes`, composed."""
        inst = s.instance
        is_depot = flags(s.is_depot)
        open_route, speed = inst.open_route[:, 0], inst.speed
        to_node = distance(inst.locs, s.current_loc[:, None])  # (B, N)
        depot_loc = gather_nodes(inst.locs, s.route_depot)
        back = distance(inst.locs, depot_loc[:, None])  # (B, N) to the route's depot
        horizon = gather_nodes(inst.time_windows[..., 1], s.route_depot)
        allowed = ~flags(s.visited) & ~is_depot \
            & capacity_allows(inst.demand_linehaul, inst.demand_backhaul, inst.backhaul_class[:, 0] == 2, s.linehaul,
                              s.backhaul, s.peak) \
            & time_windows_allow(s.time[:, None] + to_node / speed, inst.time_windows, inst.service_time, back / speed,
                                 horizon, open_route) \
            & duration_allows(s.route_length, to_node, back, inst.distance_limit[:, 0], open_route)
        at_depot = gather_nodes(is_depot, s.current)
        return mask_of(allowed | depots_allow(is_depot, s.current, at_depot, s.route_depot, s.relocated, allowed))

    @staticmethod
    def transition(state: MTVRPState, action: Tensor, active: Tensor) -> tuple[MTVRPState, Tensor]:
        """Inactive sub-envs arrive with ``action == current`` (see ``base.step``): nothing accumulates."""
        inst = state.instance
        is_depot = flags(state.is_depot)
        open_route = inst.open_route[:, 0]
        to_depot = gather_nodes(is_depot, action)
        from_depot = gather_nodes(is_depot, state.current)
        loc = gather_nodes(inst.locs, action)
        edge = distance(loc, state.current_loc)
        cost = torch.where(to_depot & (from_depot | open_route), 0.0, edge)
        visited = mark(state.visited, action)
        finished = active & (torch.count_nonzero(flags(visited) | is_depot, dim=1) == visited.shape[1])
        route_depot = torch.where(to_depot, action, state.route_depot)
        depot_loc = gather_nodes(inst.locs, route_depot)
        closing = distance(depot_loc, loc) * (finished & ~open_route)
        ends = to_depot | finished  # at a depot afterwards: a new route

        linehaul, backhaul, peak = load_after(state.linehaul, state.backhaul, state.peak,
                                              gather_nodes(inst.demand_linehaul, action) * active,
                                              gather_nodes(inst.demand_backhaul, action) * active)
        arrival = state.time + edge / inst.speed[:, 0]
        served = torch.maximum(arrival, gather_nodes(inst.time_windows[..., 0], action)) \
            + gather_nodes(inst.service_time, action)
        time = torch.where(active, served, state.time)
        zero = torch.zeros_like(state.time)
        new = MTVRPState(
            instance=inst, is_depot=state.is_depot, current=torch.where(finished, route_depot, action),
            current_loc=torch.where(finished[:, None], depot_loc, loc), route_depot=route_depot,
            linehaul=torch.where(ends, zero, linehaul), backhaul=torch.where(ends, zero, backhaul),
            peak=torch.where(ends, zero, peak), time=torch.where(ends, zero, time),
            route_length=torch.where(ends, zero, state.route_length + edge),
            relocated=torch.where(active, to_depot & from_depot & (action != state.current), state.relocated),
            visited=visited, num_steps=state.num_steps + active, length=state.length + cost + closing,
            done=state.done | finished, mask=state.mask)
        return new._replace(mask=MTVRP._mask(new)), cost + closing

    @staticmethod
    def observe(state: MTVRPState) -> dict[str, Tensor]:
        inst = state.instance
        remaining = (inst.distance_limit[:, 0] - state.route_length).clamp(0.0, LENGTH_CAP)
        return {"locs": inst.locs, "is_depot": state.is_depot.float(), "demand_linehaul": inst.demand_linehaul,
                "demand_backhaul": inst.demand_backhaul, "windows": inst.time_windows.clamp(max=TIME_CAP),
                "service_time": inst.service_time, "open_route": inst.open_route.float(),
                "backhaul_class": inst.backhaul_class.float(), "speed": inst.speed, "num_depots": inst.num_depots.float(),
                "capacity_original": inst.capacity_original,
                "used_capacity_linehaul": state.linehaul.clamp(0.0, 1.0)[:, None],
                "used_capacity_backhaul": state.backhaul.clamp(0.0, 1.0)[:, None],
                "current_time": state.time.clamp(0.0, TIME_CAP)[:, None], "remaining_length": remaining[:, None],
                "current_node": state.current, "route_depot": state.route_depot, "num_steps": state.num_steps[:, None].float()}


# -------------------------------------------------------------------------------------- validation helpers
def _check_servable(inst: MTVRPInstance, is_depot: Tensor) -> None:
    """Every customer can be served alone from every depot (and closed routes back to it)."""
    k = int(inst.num_depots.max())
    d = distance(inst.locs[:, :k, None], inst.locs[:, None, :])  # (B, k, N) depot -> node
    own = torch.arange(k, device=d.device)[None, :, None] < inst.num_depots[:, :, None]
    closed = ~inst.open_route[:, :, None]
    back = d * closed
    arrival = d / inst.speed[:, :, None]
    start = torch.maximum(arrival, inst.time_windows[:, None, :, 0])
    ok = (arrival <= inst.time_windows[:, None, :, 1] + TOLERANCE) \
        & (~closed | (start + inst.service_time[:, None] + arrival <= inst.time_windows[:, :k, 1, None] + TOLERANCE))
    if ((~ok) & own & ~is_depot[:, None]).any():
        raise ValueError("instance field 'time_windows' leaves a customer that no vehicle from a depot can serve "
                         "in time (and return to its depot before it closes)")
    if (((d + back) > inst.distance_limit[:, :, None] + TOLERANCE) & own & ~is_depot[:, None]).any():
        raise ValueError("instance field 'distance_limit' is shorter than a depot -> customer (-> depot) trip")
