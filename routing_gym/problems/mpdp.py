"""Multi-vehicle pickup and delivery (mPDP): ``num_agents`` vehicles leave one depot (node 0) in turn, each on a
route that starts and ends there; together they visit every pickup and delivery node once, each delivery after
its pickup and by the same vehicle. Min-max (the longest route) or min-sum objective.

After RL4CO's ``MPDPEnv`` and ``MPDPGenerator`` (ai4co/rl4co, ``rl4co/envs/routing/mpdp/env.py`` and
``generator.py``; the min-max mPDP of Son et al.'s Equity-Transformer):

- Generator: depot and n customers uniform in [0, 1]^2, n even (RL4CO's ``num_loc``), customers 1..n/2 the
  pickups and customer i + n/2 the delivery of pickup i (:mod:`.pdp`'s layout); ``num_agents`` drawn per
  instance uniformly in {2..10} (RL4CO's ``min_num_agents = 2``, ``max_num_agents = 10``), here both ends
  capped at n/2: each vehicle that leaves serves at least one pair, so more than n/2 cannot all be used.
- Rules (RL4CO's ``get_action_mask``): the customers follow :class:`.pdp.PDP`'s rule (reused, not restated:
  an unvisited pickup; an unvisited delivery whose pickup is visited). The depot is allowed when the vehicle is
  at a customer, carries nothing (every pickup visited has its delivery visited: RL4CO's
  ``no_item_to_delivery``) and another vehicle is left (RL4CO masks the last vehicle's depot while customers
  remain): choosing it closes this route and starts the next vehicle's. So a delivery is made by the vehicle that
  picked it up, the last vehicle serves every pair left, and vehicles may stay unused.
- ``objective`` as RL4CO names it: ``"minmax"`` (RL4CO's default: the longest route) or ``"minsum"`` (all
  routes). It is instance data (``objective`` (B, 1): 0 = ``"minmax"``, 1 = ``"minsum"``), as mTSP's
  ``cost_type``, since the dynamics read only the instance; the observation shows it.

Differences from RL4CO, where its code is a harness for a fixed agent count: RL4CO's env repeats the depot once
per agent (``agent_num + 1`` depot nodes, the count passed to ``_reset`` rather than read from the generated
``num_agents``) and its first action picks one of them; here the depot is one node, ``num_agents`` is read
from the instance, and the first action is a pickup. RL4CO lets a vehicle leave the depot and come straight
back (an empty route); here a vehicle leaves only to serve, and unused vehicles stay at the depot (the same
costs). RL4CO's ``done`` (``visited.all()`` over its depot copies) is replaced by: the episode ends when the
last node is visited, the return to the depot added to that step.

Rewards: minus the step's increase of the cost so far, as :mod:`.mtsp` (``"minsum"``: the edge; ``"minmax"``:
the increase of the longest route so far, the route in progress counted at its length so far). Either way the
rewards sum to minus the cost.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import torch
from torch import Tensor

from .base import Drawing, EnvDoc, Field, LegendEntry, Obs, PolicyInputs, Problem, Variant, gather_nodes, \
    generation_device, locs_field, node_index, steps_taken, whole
from .masks import empty_mask, flags, with_first
from .mtsp import LONGEST_ROUTE, route_bound, take_leg
from .pdp import PAIR_COUNT, PDP, pairs

OBJECTIVES = ("minmax", "minsum")  # codes 0 and 1 in the instance's objective
MIN_NUM_AGENTS, MAX_NUM_AGENTS = 2, 10  # RL4CO's MPDPGenerator defaults


def max_agents(n_total: int) -> int:
    """The most vehicles an instance of N nodes takes: n/2, one pair each."""
    return (n_total - 1) // 2


class MPDPInstance(NamedTuple):
    locs: Tensor  # (B, N, 2) float32, node 0 = depot, then n/2 pickups, then their n/2 deliveries in order
    num_agents: Tensor  # (B,) float32 whole number m in [1, n/2]: the vehicles
    objective: Tensor  # (B, 1) float32 0 = "minmax" (the longest route), 1 = "minsum" (all routes)


class MPDPState(NamedTuple):
    instance: MPDPInstance
    role: Tensor  # (B, N) float32 1 = pickup, -1 = delivery, 0 = depot (fixed)
    partner_locs: Tensor  # (B, N, 2) float32 coordinates of each node's partner (the depot: its own; fixed)
    current: Tensor  # (B,) int64 current node (0 = depot)
    current_loc: Tensor  # (B, 2) float32
    agent: Tensor  # (B,) int64 the vehicle on the road, 0-based (RL4CO's count_depot)
    carried: Tensor  # (B,) int64 pickups on board (visited, their delivery not yet)
    visited: Tensor  # (B, N) int8 mask (the depot column is unused)
    num_steps: Tensor  # (B,) int64 actions taken
    route_length: Tensor  # (B,) float32 length of the current vehicle's route so far
    longest: Tensor  # (B,) float32 longest route so far, the one in progress included
    length: Tensor  # (B,) float32 length of all routes so far
    done: Tensor  # (B,) bool
    mask: Tensor  # (B, N) int8 mask, 1 = allowed


class MPDP(Problem):
    name = "mpdp"
    label = "MPDP"
    has_depot = True
    min_num_nodes = 2
    num_nodes_multiple = 2  # pickup-delivery pairs
    Instance = MPDPInstance
    fields = (locs_field(PAIR_COUNT),  # the depot, the n/2 pickups, then their deliveries in the same order
              Field("num_agents", (), rules=((
                  lambda m, n: whole(m, 1, max_agents(n)),
                  lambda m, n: f"must be a whole number in [1, n/2 = {max_agents(n)}] (each vehicle that leaves "
                               f"serves a pair), got {m.tolist()}"),)),
              Field("objective", (1,), options=OBJECTIVES))
    variants = {"objective": Variant(default="minmax", choices=OBJECTIVES,
                                     doc='``"minmax"`` (default: the longest route) or ``"minsum"`` (all routes): '
                                         "the cost, RL4CO's ``objective``")}
    observation = (*PDP.observation[:3],  # locs, role, partner_locs
                   Obs("agents_left", (1,), "vehicles that may still leave after the current one, in [0, n/2 - 1] "
                       "(the bound is 1 when n = 2)", high=lambda n: max(max_agents(n) - 1.0, 1.0)),
                   Obs("current_length", (1,), "length of the current vehicle's route so far, in [0, sqrt(2) N]",
                       high=route_bound),
                   LONGEST_ROUTE,
                   Obs("objective", (1,), '0: the cost is the longest route (``objective="minmax"``), 1: all routes '
                       '(``"minsum"``)'),
                   node_index("current_node", "where the vehicle is (0 = depot)"),
                   steps_taken(lambda n: float(n - 1 + max_agents(n) - 1), "3n/2 - 1"))
    policy = PolicyInputs(node_features=("role", "partner_locs"), context_nodes=("current_node",),
                          context_scalars=("agents_left", "current_length", "max_subtour_length"))
    drawing = Drawing(legend=(LegendEntry("depot", "depot"), LegendEntry("size", "pickup (large), delivery (small)"),
                              LegendEntry("routes", "one colour per vehicle"),
                              LegendEntry("unavailable", "delivery before its pickup")),
                      paths="trips", size_by="role",
                      depot_refusal="the depot is not allowed: the vehicle is there, carries a pickup, or no other "
                                    "vehicle is left",
                      node_refusal="node {i} is visited, or a delivery whose pickup is not visited yet")
    doc = EnvDoc(
        cost="longest route (``objective=\"minmax\"``) or length of all routes (``\"minsum\"``)",
        summary="Multi-vehicle pickup and delivery: vehicles leave one depot in turn and together visit every "
                "pickup and delivery node once, each delivery after its pickup by the same vehicle.",
        description="Depot (node 0) and n customers uniform in the unit square, n even: customers 1..n/2 are "
                    "pickups, customer i + n/2 the delivery of pickup i; m vehicles, m uniform in {2..10} capped "
                    "at n/2 (RL4CO's MPDP). Choosing the depot ends a vehicle's route and starts the next one's; "
                    "the cost is the longest route (``objective=\"minmax\"``, default) or their total length "
                    "(``\"minsum\"``).",
        action="the next node, or 0: back to the depot, the next vehicle leaves.",
        mask="the unvisited pickups and the unvisited deliveries whose pickup is visited; the depot when the "
             "vehicle is at a customer, carries nothing and another vehicle is left.",
        rewards="Minus the increase of the cost: the edge length (``\"minsum\"``) or the increase of the longest "
                "route so far, the route in progress counted at its length so far (``\"minmax\"``); the last "
                "step adds the return to the depot. The rewards sum to minus the cost.",
        starting_state='At the depot with the first vehicle: a random instance, or ``options["instance"] = '
                       '{"locs": (N, 2), "num_agents": m, "objective": "minmax" or "minsum"}`` (the depot, the '
                       'pickups, then their deliveries in the same order; N - 1 even; m whole, in [1, n/2]).',
        episode_end="Terminates when the last node is visited",
        example='>>> obs["locs"].shape, int(obs["action_mask"][0]), int(obs["action_mask"][1:11].sum())\n'
                '((21, 2), 0, 10)')

    @classmethod
    def start_nodes(cls, n_total: int, device: Any = None) -> Tensor:
        """The first actions of multi-start decoding: the pickups."""
        return PDP.start_nodes(n_total, device)

    @staticmethod
    def gauge(state) -> tuple[float, str, bool]:
        """The renderer's footer for a batch-1 state: (nodes visited, text, False)."""
        k, n = int(flags(state.visited[0, 1:]).sum()), state.visited.shape[1] - 1
        agent, m = int(state.agent[0]) + 1, int(state.instance.num_agents[0])
        return k / n, f"vehicle {agent} / {m}    longest {float(state.longest[0]):.2f}    visited {k} / {n}", False

    @staticmethod
    def generate(batch_size: int, num_nodes: int, *, generator: torch.Generator | None = None,
                 device: Any = None, objective: str = "minmax") -> MPDPInstance:
        """B instances of ``num_nodes`` (even) customers plus a depot (node 0), ``num_agents`` uniform in
        {min(2, n/2) .. min(10, n/2)}."""
        n = MPDP.check_num_nodes(num_nodes)
        MPDP.check_variant({"objective": objective})
        dev = generation_device(generator, device)
        locs = torch.rand(batch_size, n + 1, 2, generator=generator, device=dev)
        low, high = min(MIN_NUM_AGENTS, n // 2), min(MAX_NUM_AGENTS, n // 2)
        agents = torch.randint(low, high + 1, (batch_size,), generator=generator, device=dev).float()
        code = torch.full((batch_size, 1), float(OBJECTIVES.index(objective)), device=dev)
        return MPDPInstance(locs=locs, num_agents=agents, objective=code)

    @classmethod
    def field_at_bound(cls, data: dict, field: str, node: int, value: float) -> dict | None:
        """As :meth:`Problem.field_at_bound`; ``objective`` is one value per instance (``node`` is ignored)."""
        if field != "objective":
            return super().field_at_bound(data, field, node, value)
        out = {k: np.array(v, copy=True) for k, v in data.items()}
        out[field][...] = value
        return out

    @classmethod
    def instance_from_observation(cls, obs) -> MPDPInstance:
        """The instances behind a first observation: ``num_agents`` is ``agents_left`` + 1 there."""
        return MPDPInstance(locs=obs["locs"], num_agents=obs["agents_left"][:, 0] + 1, objective=obs["objective"])

    @staticmethod
    def reset(instance: MPDPInstance) -> MPDPState:
        locs = instance.locs
        b, n, _ = locs.shape
        dev = locs.device
        role, partner_locs = pairs(locs)
        zeros = torch.zeros(b, dtype=torch.long, device=dev)
        nothing = torch.zeros(b, device=dev)
        visited = empty_mask(b, n, dev)
        return MPDPState(instance=instance, role=role, partner_locs=partner_locs, current=zeros,
                         current_loc=locs[:, 0], agent=zeros, carried=zeros, visited=visited, num_steps=zeros,
                         route_length=nothing, longest=nothing, length=nothing,
                         done=torch.zeros(b, dtype=torch.bool, device=dev),
                         mask=MPDP._mask(instance, visited, zeros, zeros, zeros))

    @staticmethod
    def _mask(instance: MPDPInstance, visited: Tensor, current: Tensor, agent: Tensor, carried: Tensor) -> Tensor:
        allowed = flags(PDP._mask(visited))  # the customers: PDP's rule (a fresh tensor)
        return with_first(allowed, (current != 0) & (carried == 0) & (agent < instance.num_agents - 1))

    @staticmethod
    def transition(state: MPDPState, action: Tensor, active: Tensor) -> tuple[MPDPState, Tensor]:
        """Inactive sub-envs arrive with ``action == current`` (see ``base.step``): no edge, nothing changes."""
        inst = state.instance
        leg = take_leg(state, action, active)  # mTSP's vehicles in turn
        role = gather_nodes(state.role, action)  # 1 pickup, -1 delivery, 0 depot
        carried = state.carried + (active & (role > 0)).long() - (active & (role < 0)).long()
        cost = torch.where(inst.objective[:, 0] == 0, leg.longest - state.longest, leg.travel)
        new = MPDPState(instance=inst, role=state.role, partner_locs=state.partner_locs, current=leg.current,
                        current_loc=leg.current_loc, agent=leg.agent, carried=carried, visited=leg.visited,
                        num_steps=state.num_steps + active, route_length=leg.route_length, longest=leg.longest,
                        length=state.length + leg.travel, done=state.done | leg.finished,
                        mask=MPDP._mask(inst, leg.visited, leg.current, leg.agent, carried))
        return new, cost

    @staticmethod
    def observe(state: MPDPState) -> dict[str, Tensor]:
        inst = state.instance
        return {"locs": inst.locs, "role": state.role, "partner_locs": state.partner_locs,
                "agents_left": (inst.num_agents - 1 - state.agent).clamp(min=0.0)[:, None],
                "current_length": state.route_length[:, None], "max_subtour_length": state.longest[:, None],
                "objective": inst.objective, "current_node": state.current,
                "num_steps": state.num_steps[:, None].float()}
