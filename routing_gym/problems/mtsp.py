"""Multiple travelling salesmen: ``num_agents`` salesmen leave one depot (node 0) in turn, each on a route that
starts and ends there; every customer is visited once. Min-max (the longest route) or min-sum objective.

After RL4CO's MTSPEnv (ai4co/rl4co ``rl4co/envs/routing/mtsp/env.py``; generator ``mtsp/generator.py``,
``MTSPGenerator``): locations uniform in [0, 1]^2 with the depot first, ``num_agents`` per instance (RL4CO's
``min_num_agents = max_num_agents = 5``: m = 5, here ``min(5, n)``, since each salesman who starts visits a
customer, so more than n cannot all be used; RL4CO's ``num_loc`` counts the depot, our n does not).
``cost_type`` as RL4CO names it: ``"minmax"`` (RL4CO's default: the longest route) or ``"sum"`` (all routes).

Rules (RL4CO's ``_step``): the routes are made in sequence in one episode. A customer is allowed when
unvisited; the depot when the salesman is at a customer and another salesman is left (``current_node != 0 and
agent_idx < num_agents - 1``): choosing it closes this salesman's route and starts the next one's. So the last
salesman visits every customer left, and salesmen may stay unused. The episode ends when the last customer is
visited, the return to the depot added to that step.

Rewards: minus the step's increase of the cost so far. ``"sum"``: the edge's length (plus the return on the
last step). ``"minmax"``: the increase of ``max_subtour_length``, the longest route so far counting the route in
progress at its length so far (RL4CO's running maximum; a route only grows, so at the end it is the longest
route). Either way the rewards sum to minus the cost.

The objective is instance data (``cost_type`` (B,): 0 = ``"minmax"``, 1 = ``"sum"``), since the dynamics read
only the instance: the ``cost_type`` variant sets it for generated instances, a user instance states it
(``"minmax"`` / ``"sum"``), and the observation shows it (``objective``).
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple

import torch
from torch import Tensor

from .base import Drawing, EnvDoc, Field, LegendEntry, Obs, PolicyInputs, Problem, Variant, generation_device, \
    locs_field, node_count, node_index, route_step, steps_taken, whole
from .masks import all_marked, empty_mask, flags, mark, with_first

COST_TYPES = ("minmax", "sum")  # codes 0 and 1 in the instance's cost_type
NUM_AGENTS = 5  # RL4CO's MTSPGenerator default (min_num_agents = max_num_agents = 5)


def route_bound(n_total: int) -> float:
    """No route through N nodes of the unit square is longer than ``sqrt(2) N``: the bound of the length
    observations."""
    return math.sqrt(2.0) * n_total


# the observation of the cost so far under "minmax" (mTSP's and MPDP's)
LONGEST_ROUTE = Obs("max_subtour_length", (1,), "longest route so far (the current one at its length so far), in "
                    "[0, sqrt(2) N]", high=route_bound)


class MTSPInstance(NamedTuple):
    locs: Tensor  # (B, N, 2) float32, node 0 = depot
    num_agents: Tensor  # (B,) float32 whole number m in [1, N - 1]: the salesmen
    cost_type: Tensor  # (B,) float32 0 = "minmax" (the longest route), 1 = "sum" (all routes)


class MTSPState(NamedTuple):
    instance: MTSPInstance
    current: Tensor  # (B,) int64 current node (0 = depot)
    current_loc: Tensor  # (B, 2) float32
    agent: Tensor  # (B,) int64 the salesman on the road, 0-based (RL4CO's agent_idx)
    visited: Tensor  # (B, N) int8 mask, customers visited (the depot column is unused)
    num_steps: Tensor  # (B,) int64 actions taken
    route_length: Tensor  # (B,) float32 length of the current salesman's route so far (RL4CO's current_length)
    longest: Tensor  # (B,) float32 longest route so far, the one in progress included (max_subtour_length)
    length: Tensor  # (B,) float32 length of all routes so far
    done: Tensor  # (B,) bool
    mask: Tensor  # (B, N) int8 mask, 1 = allowed


class Leg(NamedTuple):
    """One step of vehicles that take their routes in turn from the depot (node 0): what mTSP and MPDP share."""

    visited: Tensor  # (B, N) int8 mask with the action's node set
    finished: Tensor  # (B,) bool the step serves the last customer (the return is added)
    travel: Tensor  # (B,) float32 the step's edge (and the return, when finished)
    longest: Tensor  # (B,) float32 the longest route so far, the current one included
    agent: Tensor  # (B,) int64 the vehicle on the road (the next one after a return to the depot)
    current: Tensor  # (B,) int64 the node reached (0 once finished)
    current_loc: Tensor  # (B, 2) float32
    route_length: Tensor  # (B,) float32 the current route so far (0 after a return or the end)


def take_leg(state, action: Tensor, active: Tensor) -> Leg:
    """The leg of ``action`` (B,) from ``state`` (any state with ``instance.locs``, ``visited``, ``current_loc``,
    ``route_length``, ``longest`` and ``agent``): choosing the depot closes a route and hands over to the next
    vehicle; serving the last customer adds the return and ends the episode."""
    visited = mark(state.visited, action)
    finished = active & all_marked(visited[:, 1:])
    travel, current, current_loc = route_step(state.instance.locs, state.current_loc, action, finished)
    route = state.route_length + travel  # with the return when this step closes the route
    closed = active & (action == 0)
    return Leg(visited=visited, finished=finished, travel=travel, longest=torch.maximum(state.longest, route),
               agent=state.agent + closed, current=current, current_loc=current_loc,
               route_length=torch.where(closed | finished, 0.0, route))


class MTSP(Problem):
    name = "mtsp"
    label = "MTSP"
    has_depot = True
    Instance = MTSPInstance
    fields = (locs_field(node_count(lambda n: n >= 2, "the depot and at least one customer")),
              Field("num_agents", (), rules=((
                  lambda m, n: whole(m, 1, n - 1),
                  lambda m, n: f"must be a whole number in [1, n = {n - 1}] (each salesman who starts visits a "
                               f"customer), got {m.tolist()}"),)),
              Field("cost_type", (), options=COST_TYPES))
    variants = {"cost_type": Variant(default="minmax", choices=COST_TYPES,
                                     doc='``"minmax"`` (default: the longest route) or ``"sum"`` (all routes): the '
                                         "cost, RL4CO's ``cost_type``")}
    observation = (Obs("locs", ("N", 2), "coordinates in [0, 1], depot first"),
                   Obs("agents_left", (1,), "salesmen who may still start after the current one, in [0, N - 2] "
                       "(the bound is 1 when N = 2)", high=lambda n: max(n - 2.0, 1.0)),
                   Obs("current_length", (1,), "length of the current salesman's route so far, in [0, sqrt(2) N]",
                       high=route_bound),
                   LONGEST_ROUTE,
                   Obs("objective", (1,), '0: the cost is the longest route (``cost_type="minmax"``), 1: all routes '
                       '(``"sum"``)'),
                   node_index("current_node", "where the salesman is (0 = depot)"),
                   steps_taken(lambda n: 2.0 * (n - 1) - 1, "2n - 1"))
    policy = PolicyInputs(node_features=(), context_nodes=("current_node",),
                          context_scalars=("agents_left", "current_length", "max_subtour_length"))
    drawing = Drawing(legend=(LegendEntry("depot", "depot"), LegendEntry("routes", "one colour per salesman")),
                      paths="trips",
                      depot_refusal="the depot is not allowed: the salesman is there, or no other salesman is left")
    doc = EnvDoc(
        cost="longest route (``cost_type=\"minmax\"``) or length of all routes (``\"sum\"``)",
        summary="Multiple TSP: salesmen leave one depot in turn and together visit every customer once.",
        description="Depot (node 0) and n customers uniform in the unit square, m = min(5, n) salesmen "
                    "(RL4CO's MTSP). Choosing the depot ends a salesman's route and starts the next one's; "
                    "the cost is the longest route (``cost_type=\"minmax\"``, default) or their total length "
                    "(``\"sum\"``).",
        action="the next customer, or 0: back to the depot, the next salesman starts.",
        mask="an unvisited customer; the depot when the salesman is at a customer and another salesman is left.",
        rewards="Minus the increase of the cost: the edge length (``\"sum\"``) or the increase of the longest "
                "route so far, the route in progress counted at its length so far (``\"minmax\"``); the last "
                "step adds the return to the depot. The rewards sum to minus the cost.",
        starting_state='At the depot with the first salesman: a random instance, or ``options["instance"] = '
                       '{"locs": (N, 2), "num_agents": m, "cost_type": "minmax" or "sum"}`` (m whole, in [1, n]).',
        episode_end="Terminates when the last customer is visited",
        example='>>> float(obs["agents_left"][0]), int(obs["action_mask"][0])\n(4.0, 0)')

    @staticmethod
    def gauge(state) -> tuple[float, str, bool]:
        """The renderer's footer for a batch-1 state: (customers visited, text, False)."""
        k, n = int(state.visited[0, 1:].sum()), state.visited.shape[1] - 1
        agent, m = int(state.agent[0]) + 1, int(state.instance.num_agents[0])
        return k / n, f"salesman {agent} / {m}    longest {float(state.longest[0]):.2f}    visited {k} / {n}", False

    @staticmethod
    def generate(batch_size: int, num_nodes: int, *, generator: torch.Generator | None = None,
                 device: Any = None, cost_type: str = "minmax", num_agents: int = NUM_AGENTS) -> MTSPInstance:
        """B instances of ``num_nodes`` customers plus a depot (node 0), ``min(num_agents, num_nodes)``
        salesmen."""
        n = MTSP.check_num_nodes(num_nodes)
        MTSP.check_variant({"cost_type": cost_type})
        dev = generation_device(generator, device)
        locs = torch.rand(batch_size, n + 1, 2, generator=generator, device=dev)
        agents = torch.full((batch_size,), float(min(num_agents, n)), device=dev)
        code = torch.full((batch_size,), float(COST_TYPES.index(cost_type)), device=dev)
        return MTSPInstance(locs=locs, num_agents=agents, cost_type=code)

    @classmethod
    def instance_from_observation(cls, obs) -> MTSPInstance:
        """The instances behind a first observation: ``num_agents`` is ``agents_left`` + 1 there, ``cost_type``
        the ``objective``."""
        return MTSPInstance(locs=obs["locs"], num_agents=obs["agents_left"][:, 0] + 1, cost_type=obs["objective"][:, 0])

    @staticmethod
    def reset(instance: MTSPInstance) -> MTSPState:
        locs = instance.locs
        b, n, _ = locs.shape
        dev = locs.device
        zeros = torch.zeros(b, dtype=torch.long, device=dev)
        nothing = torch.zeros(b, device=dev)
        visited = empty_mask(b, n, dev)
        return MTSPState(instance=instance, current=zeros, current_loc=locs[:, 0], agent=zeros, visited=visited,
                         num_steps=zeros, route_length=nothing, longest=nothing, length=nothing,
                         done=torch.zeros(b, dtype=torch.bool, device=dev),
                         mask=MTSP._mask(instance, visited, zeros, zeros))

    @staticmethod
    def _mask(instance: MTSPInstance, visited: Tensor, current: Tensor, agent: Tensor) -> Tensor:
        return with_first(~flags(visited), (current != 0) & (agent < instance.num_agents - 1))

    @staticmethod
    def transition(state: MTSPState, action: Tensor, active: Tensor) -> tuple[MTSPState, Tensor]:
        """Inactive sub-envs arrive with ``action == current`` (see ``base.step``): no edge, nothing changes."""
        inst = state.instance
        leg = take_leg(state, action, active)
        cost = torch.where(inst.cost_type == 0, leg.longest - state.longest, leg.travel)
        new = MTSPState(instance=inst, current=leg.current, current_loc=leg.current_loc, agent=leg.agent,
                        visited=leg.visited, num_steps=state.num_steps + active, route_length=leg.route_length,
                        longest=leg.longest, length=state.length + leg.travel, done=state.done | leg.finished,
                        mask=MTSP._mask(inst, leg.visited, leg.current, leg.agent))
        return new, cost

    @staticmethod
    def observe(state: MTSPState) -> dict[str, Tensor]:
        inst = state.instance
        return {"locs": inst.locs, "agents_left": (inst.num_agents - 1 - state.agent).clamp(min=0.0)[:, None],
                "current_length": state.route_length[:, None], "max_subtour_length": state.longest[:, None],
                "objective": inst.cost_type[:, None], "current_node": state.current,
                "num_steps": state.num_steps[:, None].float()}
