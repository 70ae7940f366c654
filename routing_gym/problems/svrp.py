"""Skill vehicle routing: technicians of given skill levels leave the depot (node 0) in turn; each customer needs
a skill level and is served once, by a technician at least that skilled; a technician's travel costs its rate
per unit of distance.

As RL4CO's ``SVRPEnv`` and ``SVRPGenerator`` (ai4co/rl4co, ``rl4co/envs/routing/svrp/env.py`` and
``generator.py``), with its field names and defaults: the depot and n customers uniform in [0, 1]^2; ``techs``
(3,): the technicians' skill levels, uniform in [``min_skill`` = 1, ``max_skill`` = 10] and sorted ascending;
``skills``: each customer's required level, the highest technician's level times U(0, 1); ``tech_costs`` =
(1, 2, 3), technician k's cost per unit of distance (:data:`TECH_COSTS`, fixed as RL4CO's default: the
observation's shapes need a fixed count of technicians).

Rules (RL4CO's ``get_action_mask`` and ``_step``): technician 0 starts at the depot. A customer is allowed when
unserved and its ``skills`` is at most the current technician's level. The depot is allowed unless a customer
is allowed and either the technician is at the depot (so a technician who can serve someone serves at least one
customer) or it is the last technician. Choosing the depot ends the current technician's route and sends out
the next one. The cost is the sum over the routes of the technician's rate times the route's length (RL4CO's
``_get_reward``: each edge, the return to the depot included, weighted by the rate of the technician who
travels it).

Differences from RL4CO: the episode ends when the last customer is served, the technician's return to the depot
added to that step (RL4CO ends then too once the depot was visited before, and otherwise waits for one more
action, the depot; the cost is the same). ``skills`` is (N,) with 0 at the depot, and ``techs`` (3,) (RL4CO's
have a trailing axis of 1 and ``skills`` no depot entry). A user instance needs every ``skills`` at most the
last technician's level (RL4CO's generator ensures it): that technician serves whatever is left.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import torch
from torch import Tensor

from .base import ZERO_AT_DEPOT, Drawing, EnvDoc, Field, LegendEntry, Obs, PolicyInputs, Problem, check_num_nodes, \
    gather_nodes, generation_device, locs_field, node_count, node_index, route_step, steps_taken
from .masks import all_marked, any_marked, empty_mask, flags, mark, with_first

TECH_COSTS = (1.0, 2.0, 3.0)  # RL4CO's default ``tech_costs``: technician k's cost per unit of distance, k + 1
NUM_TECHS = len(TECH_COSTS)
MIN_SKILL, MAX_SKILL = 1.0, 10.0  # RL4CO's generator defaults (validation accepts levels in [0, MAX_SKILL])


class SVRPInstance(NamedTuple):
    locs: Tensor  # (B, N, 2) float32, node 0 = depot
    techs: Tensor  # (B, 3) float32 technicians' skill levels in [0, 10] (generated sorted ascending)
    skills: Tensor  # (B, N) float32 required skill level in [0, 10], depot 0; at most techs[:, -1]


class SVRPState(NamedTuple):
    instance: SVRPInstance
    current: Tensor  # (B,) int64 current node (0 = depot)
    current_loc: Tensor  # (B, 2) float32
    tech: Tensor  # (B,) int64 the technician on the road, 0-based (RL4CO's current_tech)
    visited: Tensor  # (B, N) int8 mask, customers served (the depot column is unused)
    num_steps: Tensor  # (B,) int64 actions taken
    length: Tensor  # (B,) float32 cost so far (rate-weighted length)
    done: Tensor  # (B,) bool
    mask: Tensor  # (B, N) int8 mask, 1 = allowed


def tech_cost(tech: Tensor) -> Tensor:
    """(B,) float32 cost per unit of distance of technicians ``tech`` (B,) int64: :data:`TECH_COSTS`, k + 1
    (computed, not indexed from a host table: no transfer per step)."""
    return (tech + 1).float()


def _header(state) -> str:
    k = int(state.tech[0])
    return f"  (tech {k + 1}: skill {float(state.instance.techs[0, k]):.1f}, x{TECH_COSTS[k]:g})"


class SVRP(Problem):
    name = "svrp"
    label = "SVRP"
    has_depot = True
    Instance = SVRPInstance
    fields = (locs_field(node_count(lambda n: n >= 2, "the depot and at least one customer")),
              Field("techs", (NUM_TECHS,), 0.0, MAX_SKILL),
              Field("skills", ("N",), 0.0, MAX_SKILL, rules=(ZERO_AT_DEPOT,)))
    observation = (Obs("locs", ("N", 2), "coordinates in [0, 1], depot first"),
                   Obs("skills", ("N",), "required skill level, in [0, 10], depot 0", high=MAX_SKILL),
                   Obs("techs", (NUM_TECHS,), "the technicians' skill levels, in [0, 10]", high=MAX_SKILL),
                   Obs("current_tech", (1,), f"the technician on the road, 0-based, in [0, {NUM_TECHS - 1}]",
                       high=NUM_TECHS - 1.0),
                   Obs("current_skill", (1,), "its skill level, in [0, 10]", high=MAX_SKILL),
                   Obs("current_cost", (1,), f"its cost per unit of distance, in [{min(TECH_COSTS):g}, "
                       f"{max(TECH_COSTS):g}]", low=min(TECH_COSTS), high=max(TECH_COSTS)),
                   node_index("current_node", "where the technician is (0 = depot)"),
                   steps_taken(lambda n: n + NUM_TECHS - 2.0, "n + 2"))
    policy = PolicyInputs(node_features=("skills",), context_nodes=("current_node",),
                          context_scalars=("current_skill", "current_cost"))
    drawing = Drawing(legend=(LegendEntry("depot", "depot"), LegendEntry("routes", "technicians"),
                              LegendEntry("size", "skill needed"), LegendEntry("unavailable", "needs more skill")),
                      paths="trips", size_by="skills", header=_header,
                      depot_refusal="this technician can still serve a customer (and the last one serves all)",
                      node_refusal="node {i} is served, or needs a more skilled technician")
    doc = EnvDoc(
        cost="rate-weighted length of the technicians' routes",
        summary="Skill vehicle routing: 3 technicians in turn serve customers that need a skill level.",
        description="Depot (node 0) and n customers uniform in the unit square; technicians' levels U(1, 10) "
                    "sorted, customers' needs up to the highest level,\ncosts 1/2/3 per unit of distance "
                    "(RL4CO's SVRP). Choosing the depot sends out the next technician.",
        action="the next node (0 = back to the depot: the next technician starts).",
        mask="an unserved customer whose skill need is at most the technician's level; the depot unless a customer "
             "is allowed and the technician is at the depot or is the last.",
        rewards="Minus the technician's rate times the edge length of the step; the step serving the last "
                "customer also adds the return to the depot. The rewards sum to minus the cost.",
        starting_state='Technician 0 at the depot: a random instance, or ``options["instance"] = {"locs": (N, 2), '
                       '"techs": (3,), "skills": (N,)}`` (every skill at most the last technician\'s level).',
        episode_end="Terminates when the last customer is served",
        example='>>> obs["techs"].shape, float(obs["current_cost"][0]), int(obs["action_mask"][0])\n'
                '((3,), 1.0, 0)')

    @staticmethod
    def step_cost_bound(state) -> float:
        """More than one step can cost: the highest rate times an edge plus the return, 3 * 2 sqrt(2) < 9."""
        return 9.0

    @classmethod
    def field_at_bound(cls, data: dict, field: str, node: int, value: float) -> dict | None:
        """``field`` set to ``value`` at ``node`` (``techs``: the last technician's level), the last
        technician's level raised to a customer's need where that is within the bounds."""
        out = {k: np.array(v, copy=True) for k, v in data.items()}
        if field == "techs":
            out["techs"][-1] = value
            out["skills"] = np.minimum(out["skills"], value)
            return out
        out[field].reshape(out[field].shape[0], -1)[node, 0] = value
        if field == "skills":
            out["techs"][-1] = max(out["techs"][-1], min(value, MAX_SKILL))
        return out

    @staticmethod
    def generate(batch_size: int, num_nodes: int, *, generator: torch.Generator | None = None,
                 device: Any = None) -> SVRPInstance:
        """B instances of ``num_nodes`` customers plus a depot (node 0)."""
        n = check_num_nodes(num_nodes, minimum=1)
        dev = generation_device(generator, device)
        locs = torch.rand(batch_size, n + 1, 2, generator=generator, device=dev)
        techs = torch.rand(batch_size, NUM_TECHS, generator=generator, device=dev) * (MAX_SKILL - MIN_SKILL) + MIN_SKILL
        techs = techs.sort(dim=1).values
        need = techs[:, -1:] * torch.rand(batch_size, n, generator=generator, device=dev)
        skills = torch.cat([torch.zeros(batch_size, 1, device=dev), need], dim=1)
        return SVRPInstance(locs=locs, techs=techs, skills=skills)

    @staticmethod
    def check_instance(instance: SVRPInstance) -> None:
        """Every ``skills`` at most the last technician's level, who serves whatever is left."""
        if (instance.skills > instance.techs[:, -1:]).any():
            raise ValueError("instance field 'skills' exceeds the last technician's level (techs[-1]) at a customer: "
                             "nobody would be left to serve it")

    @staticmethod
    def reset(instance: SVRPInstance) -> SVRPState:
        locs = instance.locs
        b, n, _ = locs.shape
        dev = locs.device
        zeros = torch.zeros(b, dtype=torch.long, device=dev)
        visited = empty_mask(b, n, dev)
        return SVRPState(instance=instance, current=zeros, current_loc=locs[:, 0], tech=zeros, visited=visited,
                         num_steps=zeros, length=torch.zeros(b, device=dev),
                         done=torch.zeros(b, dtype=torch.bool, device=dev),
                         mask=SVRP._mask(instance, visited, zeros, zeros))

    @staticmethod
    def _mask(instance: SVRPInstance, visited: Tensor, current: Tensor, tech: Tensor) -> Tensor:
        level = gather_nodes(instance.techs, tech.clamp(max=NUM_TECHS - 1))
        allowed = ~flags(visited) & (instance.skills <= level[:, None])
        return with_first(allowed, ~(((current == 0) | (tech == NUM_TECHS - 1)) & any_marked(allowed[:, 1:])))

    @staticmethod
    def transition(state: SVRPState, action: Tensor, active: Tensor) -> tuple[SVRPState, Tensor]:
        """Inactive sub-envs arrive with ``action == current`` (see ``base.step``)."""
        inst = state.instance
        visited = mark(state.visited, action)
        finished = active & all_marked(visited[:, 1:])
        length, current, current_loc = route_step(inst.locs, state.current_loc, action, finished)
        cost = tech_cost(state.tech) * length
        tech = state.tech + (active & (action == 0) & ~finished)
        new = SVRPState(instance=inst, current=current, current_loc=current_loc, tech=tech, visited=visited,
                        num_steps=state.num_steps + active, length=state.length + cost, done=state.done | finished,
                        mask=SVRP._mask(inst, visited, current, tech))
        return new, cost

    @staticmethod
    def observe(state: SVRPState) -> dict[str, Tensor]:
        techs = state.instance.techs
        return {"locs": state.instance.locs, "skills": state.instance.skills, "techs": techs,
                "current_tech": state.tech[:, None].float(),
                "current_skill": gather_nodes(techs, state.tech)[:, None],
                "current_cost": tech_cost(state.tech)[:, None],
                "num_steps": state.num_steps[:, None].float(), "current_node": state.current}
