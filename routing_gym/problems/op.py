"""Orienteering problem: collect the most prize on a tour from the depot (node 0) whose length is
bounded by ``max_length``.

Generator as Kool, van Hoof & Welling, ICLR 2019 (code: wouterkool/attention-learn-to-route,
``problems/op/problem_op.py``, after Fischetti et al. 1998): depot and n nodes uniform in [0, 1]^2;
max length 2/3/4 for n = 20/50/100 (:data:`MAX_LENGTH`, interpolated for other n, constant beyond);
prizes by ``prize_type``:

- ``"const"``: 1 for every node;
- ``"unif"``: ``(1 + U{0, ..., 99}) / 100``, i.e. uniform on {0.01, ..., 1.00} (the published code;
  the paper's text says U{1..100}/100 too);
- ``"dist"`` (default): ``(1 + floor(99 * d(0, i) / max_j d(0, j))) / 100``, larger far from the depot.

Rules (Kool's ``StateOP``): a node is allowed when unvisited and the depot can still be reached
through it within the max length, with a 1e-6 margin (``length + d(cur, i) + d(i, 0) <= max_length -
1e-6``); the depot is always allowed and choosing it ends the episode. Cost = minus the prize collected;
each step's reward is the prize of the node it visits.
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple

import torch
from torch import Tensor

from .base import ZERO_AT_DEPOT, Drawing, EnvDoc, Field, LegendEntry, Obs, PolicyInputs, Problem, Variant, \
    check_num_nodes, distance, gather_nodes, generation_device, interpolate_table, locs_field, node_count, node_index, \
    steps_taken
from .masks import empty_mask, flags, mark, with_first

MAX_LENGTH = {20: 2.0, 50: 3.0, 100: 4.0}
PRIZE_TYPES = ("const", "unif", "dist")
LENGTH_MARGIN = 1e-6  # Kool's margin on the max length


def max_length(num_nodes: int) -> float:
    """The max tour length for n nodes besides the depot (Kool's table, interpolated)."""
    return interpolate_table(MAX_LENGTH, num_nodes)


def max_length_bound(n_total: int) -> float:
    """No tour through N nodes of the unit square is longer than ``sqrt(2) * N``: the largest useful
    ``max_length``, and the observation bound of ``remaining_length``."""
    return math.sqrt(2.0) * n_total


class OPInstance(NamedTuple):
    locs: Tensor  # (B, N, 2) float32, node 0 = depot
    prize: Tensor  # (B, N) float32 in [0, 1], depot 0
    max_length: Tensor  # (B,) float32


class OPState(NamedTuple):
    instance: OPInstance
    budget: Tensor  # (B, N) float32 longest length at which node i can be reached: max_length - d(i, 0) - 1e-6
    current: Tensor  # (B,) int64 (0 = depot)
    current_loc: Tensor  # (B, 2) float32
    visited: Tensor  # (B, N) int8 mask (``masks``)
    num_steps: Tensor  # (B,) int64
    length: Tensor  # (B,) float32 tour length so far (without the return)
    collected: Tensor  # (B,) float32 prize so far
    done: Tensor  # (B,) bool
    mask: Tensor  # (B, N) int8 mask, 1 = allowed


class OP(Problem):
    name = "op"
    label = "OP"
    has_depot = True
    Instance = OPInstance
    fields = (locs_field(node_count(lambda n: n >= 2, "the depot and at least one node")),
              Field("prize", ("N",), 0.0, 1.0, rules=(ZERO_AT_DEPOT,)),
              Field("max_length", (), rules=((lambda v, n: (v > 0) & (v <= max_length_bound(n)),
                                               lambda v, n: f"must lie in (0, {max_length_bound(n):.4g}], "
                                                            f"got {v.tolist()[:4]}"),)))
    variants = {"prize_type": Variant(default="dist", choices=PRIZE_TYPES,
                                      doc="``\"const\"``, ``\"unif\"`` or ``\"dist\"`` (default): the prize distribution")}
    observation = (Obs("locs", ("N", 2), "coordinates in [0, 1], depot first"),
                   Obs("prize", ("N",), "prize in [0, 1], depot 0"),
                   Obs("remaining_length", (1,), "max length minus the length so far, in [0, sqrt(2) N]",
                       high=max_length_bound),
                   node_index("current_node", "where the tour is (0 = depot)"),
                   steps_taken(float, "N"))
    policy = PolicyInputs(node_features=("prize",), context_nodes=("current_node",),
                          context_scalars=("remaining_length",))
    optional_visits = "orienteering"
    drawing = Drawing(legend=(LegendEntry("depot", "depot"), LegendEntry("size", "prize"), LegendEntry("unavailable", "out of reach")), paths="from_depot",
                      size_by="prize", header=lambda state: f"  (prize {float(state.collected[0]):.2f})",
                      node_refusal="node {i} is out of reach: the tour could not get back to the depot in time")
    doc = EnvDoc(
        cost="minus the prize collected",
        summary="Orienteering: collect the most prize on a tour from the depot no longer than ``max_length``.",
        description="Depot (node 0) and n nodes uniform in the unit square; max length 2/3/4 for n = 20/50/100, "
                    "interpolated for other n; prizes ``const`` (1), ``unif`` ({1..100}/100) or ``dist`` (default, "
                    "``(1 + floor(99 d0i / max_j d0j)) / 100``), as Kool et al. 2019.",
        action="the next node; 0 returns to the depot and ends the tour.",
        mask="a node when unvisited and the depot can still be reached through it: ``length + d(current, i) + "
             "d(i, 0) <= max_length - 1e-6``; the depot always.",
        rewards="The prize of the node visited (0 for the depot). The rewards sum to the prize collected, i.e. "
                "minus the cost.",
        starting_state='At the depot: a random instance, or ``options["instance"] = {"locs": (N, 2), "prize": '
                       '(N,), "max_length": float}`` (max length in (0, sqrt(2) N]).',
        episode_end="Terminates when the depot is chosen",
        example='>>> float(obs["remaining_length"][0]), float(obs["prize"].max())\n(2.0, 1.0)')

    @staticmethod
    def gauge(state) -> tuple[float, str, bool]:
        """The renderer's footer for a batch-1 state: (fill fraction, text, threshold reached)."""
        total = float(state.instance.max_length[0])
        left = max(total - float(state.length[0]), 0.0)
        return left / total, f"length left {left:.2f} / {total:.2f}", False

    @staticmethod
    def generate(batch_size: int, num_nodes: int, *, generator: torch.Generator | None = None,
                 device: Any = None, prize_type: str = "dist") -> OPInstance:
        """B instances of ``num_nodes`` nodes plus a depot (node 0)."""
        n = check_num_nodes(num_nodes, minimum=1)
        OP.check_variant({"prize_type": prize_type})
        dev = generation_device(generator, device)
        locs = torch.rand(batch_size, n + 1, 2, generator=generator, device=dev)
        if prize_type == "const":
            prize = torch.ones(batch_size, n, device=dev)
        elif prize_type == "unif":
            prize = (1 + torch.randint(0, 100, (batch_size, n), generator=generator, device=dev)) / 100.0
        else:
            d = distance(locs[:, 1:], locs[:, :1])
            prize = (1 + (d / d.amax(dim=1, keepdim=True) * 99).int()) / 100.0
        prize = torch.cat([torch.zeros(batch_size, 1, device=dev), prize.float()], dim=1)
        length = torch.full((batch_size,), max_length(n), device=dev)
        return OPInstance(locs=locs, prize=prize, max_length=length)

    @classmethod
    def instance_from_observation(cls, obs) -> OPInstance:
        """The instances behind a first observation: ``max_length`` is the ``remaining_length`` at step 0."""
        return OPInstance(locs=obs["locs"], prize=obs["prize"], max_length=obs["remaining_length"][:, 0])

    @staticmethod
    def reset(instance: OPInstance) -> OPState:
        locs = instance.locs
        b, n, _ = locs.shape
        dev = locs.device
        zeros = torch.zeros(b, dtype=torch.long, device=dev)
        to_depot = distance(locs, locs[:, :1])
        budget = instance.max_length[:, None] - to_depot - LENGTH_MARGIN
        visited = empty_mask(b, n, dev)
        length = torch.zeros(b, device=dev)
        return OPState(instance=instance, budget=budget, current=zeros, current_loc=locs[:, 0], visited=visited,
                       num_steps=zeros, length=length, collected=torch.zeros(b, device=dev),
                       done=torch.zeros(b, dtype=torch.bool, device=dev),
                       mask=OP._mask(locs, budget, visited, locs[:, 0], length))

    @staticmethod
    def _mask(locs: Tensor, budget: Tensor, visited: Tensor, current_loc: Tensor, length: Tensor) -> Tensor:
        arrive = length[:, None] + distance(locs, current_loc[:, None])
        allowed = ~flags(visited) & (arrive <= budget)
        return with_first(allowed, True)  # the depot: always

    @staticmethod
    def transition(state: OPState, action: Tensor, active: Tensor) -> tuple[OPState, Tensor]:
        """Inactive sub-envs arrive with ``action == current`` (see ``base.step``)."""
        inst = state.instance
        loc = gather_nodes(inst.locs, action)
        length = state.length + distance(loc, state.current_loc)
        gain = gather_nodes(inst.prize, action) * active
        visited = mark(state.visited, action)
        finished = active & (action == 0)
        new = OPState(instance=inst, budget=state.budget, current=action, current_loc=loc, visited=visited,
                      num_steps=state.num_steps + active, length=length, collected=state.collected + gain,
                      done=state.done | finished,
                      mask=OP._mask(inst.locs, state.budget, visited, loc, length))
        return new, -gain

    @staticmethod
    def observe(state: OPState) -> dict[str, Tensor]:
        remaining = (state.instance.max_length - state.length).clamp(min=0.0)
        return {"locs": state.instance.locs, "prize": state.instance.prize, "remaining_length": remaining[:, None],
                "current_node": state.current, "num_steps": state.num_steps[:, None].float()}
