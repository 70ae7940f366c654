"""Multi-depot capacitated pickup and delivery (MDCPDP): five depots, one vehicle each; the vehicles leave their
depots in turn and together visit every pickup and delivery node once, each delivery after its pickup by the same
vehicle, carrying at most ``capacity`` orders at once.

After RL4CO's ``MDCPDPEnv`` and ``MDCPDPGenerator`` (ai4co/rl4co, ``rl4co/envs/routing/mdcpdp/env.py`` and
``generator.py``):

- Nodes: the ``num_agents`` = 5 depots first (RL4CO's default; fixed here, since the env's spaces are sized
  from ``num_nodes`` = n: N = n + 5), then n/2 pickups, then their n/2 deliveries in the same order (RL4CO's
  ``pd_split_idx``; pickup i's delivery is i + n/2).
- Generator defaults: customers then depots uniform in [0, 1]^2 (``depot_mode="multiple"``), ``capacity`` 3
  orders per vehicle (``min_capacity = max_capacity = 3``), ``lateness_weight`` 1 (``min = max = 1``).
- Rules (RL4CO's ``_step``): between routes (at reset, and after a vehicle is back) the next action is an
  unused depot, whose vehicle then leaves (RL4CO's ``start_mode="order"`` forces depot 0 first; here any, which
  covers ``"random"``). On the road: an unvisited pickup while the vehicle carries fewer than its depot's
  ``capacity`` orders, an unvisited delivery whose pickup is visited (:class:`.pdp.PDP`'s rule, reused on the
  customers), and the vehicle's own depot when it is at a customer, carries nothing and an unused depot is left
  (RL4CO: ``carry_flag`` and ``last_depot_flag``): the last vehicle serves every order left. A step between
  depots costs nothing (RL4CO's). The episode ends when the last customer is visited, the return to the
  vehicle's depot added to that step in closed mode.
- ``reward_mode`` (RL4CO's names; default ``"lateness"``, RL4CO's): ``"lateness"``: ``(1 - w) * (length of all
  routes) + w * (sum over deliveries of the arrival time)``, w the instance's ``lateness_weight`` and a
  delivery's arrival time its vehicle's route length when it arrives (RL4CO's ``arrivetime_record``); with the
  default w = 1 the cost is the total arrival time at the deliveries. ``"minsum"``: all routes' length;
  ``"minmax"``: the longest route. ``problem_mode`` ``"close"`` (default) or ``"open"`` (the returns to the
  depots are free). Both are instance data (``reward_mode`` (B, 1): 0 lateness, 1 minsum, 2 minmax;
  ``problem_mode`` (B, 1): 0 close, 1 open), as mTSP's ``cost_type``; the observation shows them.

Not followed: RL4CO's ``"lateness_square"`` (listed, but its ``_get_reward`` raises for it), ``dist_mode="L1"``
(Euclidean only), ``depot_mode="single"`` (give the depots equal coordinates in a user instance), other depot
counts. RL4CO lets a vehicle leave and come straight back and ends only once every depot is visited; here a
vehicle leaves only to serve and unused ones stay home (the same costs). RL4CO's route lengths leave out the
last vehicle's return in closed mode (the episode ends before it); here it is counted.

Rewards: minus the step's increase of the cost (``"minmax"``: of the longest route so far, the route in progress
at its length so far); they sum to minus the cost.
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import Tensor

from .base import Drawing, EnvDoc, Field, LegendEntry, Obs, PolicyInputs, Problem, Variant, distance, gather_nodes, \
    generation_device, locs_field, node_count, node_index, steps_taken, whole
from .masks import all_marked, any_marked, empty_mask, flags, mark, mask_of
from .mtsp import route_bound
from .pdp import PDP, pairs

NUM_DEPOTS = 5  # RL4CO's MDCPDPGenerator num_agents: depots, one vehicle each
CAPACITY = 3.0  # RL4CO's min_capacity = max_capacity
REWARD_MODES = ("lateness", "minsum", "minmax")  # codes 0, 1, 2
PROBLEM_MODES = ("close", "open")  # codes 0, 1


def most_routes(n_total: int) -> int:
    """The most routes an episode on N nodes makes: one per depot, each serving at least one pair."""
    return min(NUM_DEPOTS, (n_total - NUM_DEPOTS) // 2)


class MDCPDPInstance(NamedTuple):
    locs: Tensor  # (B, N, 2) float32: 5 depots, then n/2 pickups, then their n/2 deliveries in order
    capacity: Tensor  # (B, 5) float32 whole numbers >= 1: orders each depot's vehicle carries at once
    lateness_weight: Tensor  # (B, 1) float32 in [0, 1]: w of the lateness objective
    reward_mode: Tensor  # (B, 1) float32 0 = "lateness", 1 = "minsum", 2 = "minmax"
    problem_mode: Tensor  # (B, 1) float32 0 = "close", 1 = "open" (returns free)


class MDCPDPState(NamedTuple):
    instance: MDCPDPInstance
    role: Tensor  # (B, N) float32 1 = pickup, -1 = delivery, 0 = depot (fixed)
    partner_locs: Tensor  # (B, N, 2) float32 coordinates of each node's partner (a depot: its own; fixed)
    current: Tensor  # (B,) int64 current node
    current_depot: Tensor  # (B,) int64 the depot of the vehicle on the road (or of the last one)
    current_loc: Tensor  # (B, 2) float32
    on_road: Tensor  # (B,) bool a vehicle has left its depot and is not back
    carried: Tensor  # (B,) int64 orders on board
    visited: Tensor  # (B, N) int8 mask: customers visited, depots whose vehicle has left
    num_steps: Tensor  # (B,) int64 actions taken
    route_length: Tensor  # (B,) float32 length of the current route so far (the arrival time)
    longest: Tensor  # (B,) float32 longest route so far, the one in progress included
    length: Tensor  # (B,) float32 length of all routes so far (returns free in open mode)
    lateness: Tensor  # (B,) float32 sum of the arrival times at the deliveries so far
    done: Tensor  # (B,) bool
    mask: Tensor  # (B, N) int8 mask, 1 = allowed


class MDCPDP(Problem):
    name = "mdcpdp"
    label = "MDCPDP"
    has_depot = True
    min_num_nodes = 2
    num_nodes_multiple = 2  # pickup-delivery pairs
    Instance = MDCPDPInstance
    fields = (locs_field(node_count(lambda n: n - NUM_DEPOTS >= 2 and (n - NUM_DEPOTS) % 2 == 0,
                                    f"the {NUM_DEPOTS} depots and an even number (>= 2) of pickup and delivery nodes")),
              Field("capacity", (NUM_DEPOTS,), rules=((
                  lambda c, n: whole(c, 1, n),
                  lambda c, n: f"must hold whole numbers in [1, N = {n}], got {c.tolist()}"),)),
              Field("lateness_weight", (1,), 0.0, 1.0),
              Field("reward_mode", (1,), options=REWARD_MODES, default=REWARD_MODES[0]),
              Field("problem_mode", (1,), options=PROBLEM_MODES, default=PROBLEM_MODES[0]))
    variants = {"reward_mode": Variant(default="lateness", choices=REWARD_MODES,
                                       doc='``"lateness"`` (default: ``(1 - w)`` length + ``w`` arrival times at the '
                                           'deliveries), ``"minsum"`` or ``"minmax"``: RL4CO\'s ``reward_mode``'),
                "problem_mode": Variant(default="close", choices=PROBLEM_MODES,
                                        doc='``"close"`` (default) or ``"open"`` (the returns to the depots are '
                                            "free): RL4CO's ``problem_mode``")}
    observation = (Obs("locs", ("N", 2), "coordinates in [0, 1]: 5 depots, n/2 pickups, their n/2 deliveries"),
                   Obs("role", ("N",), "1 for a pickup, -1 for a delivery, 0 for a depot", low=-1.0),
                   Obs("partner_locs", ("N", 2), "coordinates of the node's partner (a pickup's delivery, a "
                       "delivery's pickup; a depot's own), in [0, 1]"),
                   Obs("capacity", (NUM_DEPOTS,), "orders each depot's vehicle carries at once, whole, in [1, N]",
                       low=1.0, high=float),
                   Obs("lateness_weight", (1,), "w of the lateness objective, in [0, 1]"),
                   Obs("reward_mode", (1,), "the objective: 0 lateness, 1 minsum, 2 minmax", high=2.0),
                   Obs("problem_mode", (1,), "0: closed routes, 1: open (the returns are free)"),
                   Obs("remaining_capacity", (1,), "orders the vehicle on the road may still pick up (0 between "
                       "routes), in [0, N]", high=float),
                   Obs("current_length", (1,), "length of the current route so far, in [0, sqrt(2) N]",
                       high=route_bound),
                   node_index("current_node", "where the vehicle is"),
                   node_index("current_depot", "the depot of the vehicle on the road (or of the last one)"),
                   steps_taken(lambda n: float(n - NUM_DEPOTS + 2 * most_routes(n) - 1), "n + 2 min(5, n/2) - 1"))
    policy = PolicyInputs(node_features=("role", "partner_locs"), context_nodes=("current_node", "current_depot"),
                          context_scalars=("remaining_capacity", "current_length"))
    drawing = Drawing(legend=(LegendEntry("depot", "depot 0"),
                              LegendEntry("size", "pickup > delivery > depot"),
                              LegendEntry("routes", "routes"),
                              LegendEntry("unavailable", "before its pickup, or full")),
                      paths="tour", size_by="role",
                      depot_refusal="depot 0 is not allowed: its vehicle has left, or a vehicle is on the road",
                      node_refusal="node {i} is not allowed: visited, a delivery before its pickup, a pickup "
                                   "beyond the capacity, or a depot while a vehicle is on the road")
    doc = EnvDoc(
        cost="lateness (default: total arrival time at the deliveries), or the length of all routes, or the "
             "longest route",
        summary="Multi-depot capacitated pickup and delivery: five depots with a vehicle each; every pickup and "
                "delivery node visited once, each delivery after its pickup by the same vehicle.",
        description="Five depots (nodes 0..4) and n customers uniform in the unit square, n even: customers "
                    "5..4 + n/2 are pickups, customer i + n/2 the delivery of pickup i; each vehicle carries at "
                    "most 3 orders (RL4CO's MDCPDP). The cost is RL4CO's ``reward_mode``: ``\"lateness\"`` "
                    "(default, with ``lateness_weight`` w = 1: the sum over deliveries of their vehicle's route "
                    "length on arrival; in general (1 - w) length + w lateness), ``\"minsum\"`` or ``\"minmax\"``; "
                    "``problem_mode=\"open\"`` makes the returns free.",
        action="a depot: the vehicle there leaves (between routes), or the vehicle returns home (on the road); "
               "otherwise the next customer.",
        mask="between routes the unused depots; on the road the unvisited pickups while the vehicle has room, "
             "the unvisited deliveries whose pickup is visited, and its own depot when it is at a customer, "
             "carries nothing and an unused depot is left.",
        rewards="Minus the increase of the cost; the last step adds the return to the depot (closed mode). The "
                "rewards sum to minus the cost.",
        starting_state='Between routes, no vehicle on the road: a random instance, or ``options["instance"] = '
                       '{"locs": (N, 2), "capacity": (5,), "lateness_weight": w, "reward_mode": ..., '
                       '"problem_mode": ...}`` (5 depots, the pickups, then their deliveries; N - 5 even).',
        episode_end="Terminates when the last customer is visited",
        example='>>> obs["locs"].shape, obs["action_mask"][:5].tolist(), int(obs["action_mask"][5:].sum())\n'
                '((25, 2), [1, 1, 1, 1, 1], 0)')

    @classmethod
    def num_nodes_total(cls, num_nodes: int) -> int:
        return num_nodes + NUM_DEPOTS

    @classmethod
    def num_customers(cls, n_total: int) -> int:
        return n_total - NUM_DEPOTS

    @classmethod
    def start_nodes(cls, n_total: int, device: Any = None) -> Tensor:
        """The first actions of multi-start decoding: the depots."""
        return torch.arange(NUM_DEPOTS, device=device)

    @staticmethod
    def step_cost_bound(state) -> float:
        """A step's cost is below ``3 + sqrt(2) N``: an edge and a return (< 3) plus an arrival time (a route
        of at most N - 1 edges)."""
        return 3.0 + math.sqrt(2.0) * state.mask.shape[-1]

    @staticmethod
    def gauge(state) -> tuple[float, str, bool]:
        """The renderer's footer for a batch-1 state: (customers visited, text, False)."""
        k, n = int(flags(state.visited[0, NUM_DEPOTS:]).sum()), state.visited.shape[1] - NUM_DEPOTS
        used = int(flags(state.visited[0, :NUM_DEPOTS]).sum())
        return k / n, f"vehicles out {used} / {NUM_DEPOTS}    visited {k} / {n}", False

    @staticmethod
    def generate(batch_size: int, num_nodes: int, *, generator: torch.Generator | None = None, device: Any = None,
                 reward_mode: str = "lateness", problem_mode: str = "close") -> MDCPDPInstance:
        """B instances of ``num_nodes`` (even) customers plus 5 depots (nodes 0..4); RL4CO's draw order:
        customers, then depots."""
        n = MDCPDP.check_num_nodes(num_nodes)
        MDCPDP.check_variant({"reward_mode": reward_mode, "problem_mode": problem_mode})
        dev = generation_device(generator, device)
        customers = torch.rand(batch_size, n, 2, generator=generator, device=dev)
        depots = torch.rand(batch_size, NUM_DEPOTS, 2, generator=generator, device=dev)
        one = torch.ones(batch_size, 1, device=dev)
        return MDCPDPInstance(locs=torch.cat([depots, customers], 1), capacity=torch.full(
            (batch_size, NUM_DEPOTS), CAPACITY, device=dev), lateness_weight=one,
            reward_mode=one * REWARD_MODES.index(reward_mode), problem_mode=one * PROBLEM_MODES.index(problem_mode))

    @classmethod
    def field_at_bound(cls, data: dict, field: str, node: int, value: float) -> dict | None:
        """As :meth:`Problem.field_at_bound`; the fields other than ``locs`` are per instance or per depot (the
        last depot's ``capacity`` is set; ``node`` is ignored)."""
        if field == "locs":
            return super().field_at_bound(data, field, node, value)
        out = {k: np.array(v, copy=True) for k, v in data.items()}
        out[field].reshape(-1)[-1] = value
        return out

    @staticmethod
    def reset(instance: MDCPDPInstance) -> MDCPDPState:
        locs = instance.locs
        b, n, _ = locs.shape
        dev = locs.device
        role, partner_locs = pairs(locs, NUM_DEPOTS)
        zeros = torch.zeros(b, dtype=torch.long, device=dev)
        nothing = torch.zeros(b, device=dev)
        off = torch.zeros(b, dtype=torch.bool, device=dev)
        visited = empty_mask(b, n, dev)
        return MDCPDPState(instance=instance, role=role, partner_locs=partner_locs, current=zeros,
                           current_depot=zeros, current_loc=locs[:, 0], on_road=off, carried=zeros, visited=visited,
                           num_steps=zeros, route_length=nothing, longest=nothing, length=nothing, lateness=nothing,
                           done=off, mask=MDCPDP._mask(instance, visited, zeros, zeros, off, zeros))

    @staticmethod
    def _mask(instance: MDCPDPInstance, visited: Tensor, current: Tensor, depot: Tensor, on_road: Tensor,
              carried: Tensor) -> Tensor:
        seen = flags(visited)
        n = seen.shape[1]
        half = (n - NUM_DEPOTS) // 2
        # the customers by PDP's rule, read on the slice whose first column stands for PDP's depot
        customers = flags(PDP._mask(visited[:, NUM_DEPOTS - 1:]))[:, 1:]
        room = carried < gather_nodes(instance.capacity, depot)
        pickups = customers[:, :half] & (on_road & room)[:, None]
        deliveries = customers[:, half:] & on_road[:, None]
        unused = ~seen[:, :NUM_DEPOTS]
        home = torch.arange(NUM_DEPOTS, device=seen.device)[None, :] == depot[:, None]
        may_return = on_road & (current >= NUM_DEPOTS) & (carried == 0) & any_marked(unused)
        depots = torch.where(on_road[:, None], home & may_return[:, None], unused)
        return mask_of(torch.cat([depots, pickups, deliveries], 1))

    @staticmethod
    def transition(state: MDCPDPState, action: Tensor, active: Tensor) -> tuple[MDCPDPState, Tensor]:
        """Inactive sub-envs arrive with ``action == current`` (see ``base.step``): no edge, nothing changes."""
        inst = state.instance
        locs = inst.locs
        loc = gather_nodes(locs, action)
        is_depot = action < NUM_DEPOTS
        start = active & is_depot & ~state.on_road
        back = active & is_depot & state.on_road
        opened = inst.problem_mode[:, 0] == 1
        visited = mark(state.visited, action)
        finished = active & all_marked(visited[:, NUM_DEPOTS:])
        depot = torch.where(start, action, state.current_depot)
        depot_loc = gather_nodes(locs, depot)
        edge = distance(loc, state.current_loc) * ~start * ~(back & opened)  # depot to depot free; open: no return
        arrival = state.route_length + edge
        role = gather_nodes(state.role, action)  # 1 pickup, -1 delivery, 0 depot
        delivered = active & (role < 0)
        travel = edge + distance(depot_loc, loc) * (finished & ~opened)
        route = state.route_length + travel
        longest = torch.maximum(state.longest, route)
        w = inst.lateness_weight[:, 0]
        mode = inst.reward_mode[:, 0]
        lateness_cost = (1 - w) * travel + w * arrival * delivered
        cost = torch.where(mode == 0, lateness_cost, torch.where(mode == 1, travel, longest - state.longest))
        on_road = (state.on_road | start) & ~back & ~finished
        carried = state.carried + (active & (role > 0)).long() - delivered.long()
        home = finished & ~opened
        current = torch.where(home, depot, action)
        new = state._replace(current=current, current_depot=depot,
                             current_loc=torch.where(home[:, None], depot_loc, loc), on_road=on_road, carried=carried,
                             visited=visited, num_steps=state.num_steps + active,
                             route_length=torch.where(back | finished, 0.0, route), longest=longest,
                             length=state.length + travel, lateness=state.lateness + arrival * delivered,
                             done=state.done | finished,
                             mask=MDCPDP._mask(inst, visited, current, depot, on_road, carried))
        return new, cost

    @staticmethod
    def observe(state: MDCPDPState) -> dict[str, Tensor]:
        inst = state.instance
        room = (gather_nodes(inst.capacity, state.current_depot) - state.carried) * state.on_road
        return {"locs": inst.locs, "role": state.role, "partner_locs": state.partner_locs, "capacity": inst.capacity,
                "lateness_weight": inst.lateness_weight, "reward_mode": inst.reward_mode,
                "problem_mode": inst.problem_mode, "remaining_capacity": room[:, None],
                "current_length": state.route_length[:, None], "current_node": state.current,
                "current_depot": state.current_depot, "num_steps": state.num_steps[:, None].float()}
