"""Prize-collecting TSP (deterministic): collect a total prize of at least 1 on a tour from the depot
(node 0), minimising tour length plus the penalties of the nodes left out.

Generator as Kool, van Hoof & Welling, ICLR 2019 (code: wouterkool/attention-learn-to-route,
``problems/pctsp/problem_pctsp.py``, after Balas 1989): depot and n nodes uniform in [0, 1]^2;
penalties uniform in [0, 3K/n] with K = 2/3/4 for n = 20/50/100 (:data:`PENALTY_SCALE`, interpolated
for other n, constant beyond); prizes uniform in [0, 4/n] (the deterministic prizes; the stochastic
variant is not modelled here).

Rules (Kool's ``StatePCTSP``): any unvisited node is allowed; the depot is allowed once the prize
collected is at least 1, or every node has been visited; choosing it ends the episode. Each step's
reward is minus its edge; the final (depot) step also charges the penalties of the unvisited nodes.
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple

import torch
from torch import Tensor

from .base import ZERO_AT_DEPOT, Drawing, EnvDoc, Field, LegendEntry, Obs, PolicyInputs, Problem, check_num_nodes, \
    distance, gather_nodes, generation_device, interpolate_table, locs_field, node_count, node_index, steps_taken
from .masks import any_marked, empty_mask, flags, mark, with_first

PENALTY_SCALE = {20: 2.0, 50: 3.0, 100: 4.0}  # K in Kool's U(0, 3K/n) penalties
PRIZE_TO_COLLECT = 1.0


def penalty_scale(num_nodes: int) -> float:
    """The generator's largest penalty for n nodes, ``3K/n`` (Kool's penalties are U(0, 3K/n))."""
    return 3 * interpolate_table(PENALTY_SCALE, num_nodes) / num_nodes


def penalty_bound(n_total: int) -> float:
    """Observation bound of ``penalty``: ``sqrt(2) * N`` (no tour is longer, so a larger penalty would
    change no decision), or the generator's largest penalty 3K/n where that is larger (n = 1: 6)."""
    return max(math.sqrt(2.0) * n_total, penalty_scale(n_total - 1))


def prize_bound(n_total: int) -> float:
    """Observation bound of ``prize``: 1, or the generator's largest prize 4/n when n < 4 nodes."""
    return max(1.0, 4.0 / (n_total - 1))


class PCTSPInstance(NamedTuple):
    locs: Tensor  # (B, N, 2) float32, node 0 = depot
    prize: Tensor  # (B, N) float32 in [0, 1], depot 0
    penalty: Tensor  # (B, N) float32 >= 0, depot 0


class PCTSPState(NamedTuple):
    instance: PCTSPInstance
    current: Tensor  # (B,) int64 (0 = depot)
    current_loc: Tensor  # (B, 2) float32
    visited: Tensor  # (B, N) int8 mask (the depot column is unused)
    num_steps: Tensor  # (B,) int64
    length: Tensor  # (B,) float32 tour length so far
    collected: Tensor  # (B,) float32 prize so far
    left_out: Tensor  # (B,) float32 the penalties of the nodes not visited yet (their sum less those visited)
    done: Tensor  # (B,) bool
    mask: Tensor  # (B, N) int8 mask, 1 = allowed


class PCTSP(Problem):
    name = "pctsp"
    label = "PCTSP"
    has_depot = True
    Instance = PCTSPInstance
    fields = (locs_field(node_count(lambda n: n >= 2, "the depot and at least one node")),
              Field("prize", ("N",), 0.0, prize_bound, rules=(ZERO_AT_DEPOT,)),
              Field("penalty", ("N",), 0.0, penalty_bound, rules=(ZERO_AT_DEPOT,)))
    observation = (Obs("locs", ("N", 2), "coordinates in [0, 1], depot first"),
                   Obs("prize", ("N",), "prize in [0, max(1, 4/n)], depot 0", high=prize_bound),
                   Obs("penalty", ("N",), "penalty in [0, max(sqrt(2) N, 6/n)] if left unvisited, depot 0",
                       high=penalty_bound),
                   Obs("prize_to_collect", (1,), "``max(0, 1 - prize collected)``"),
                   node_index("current_node", "where the tour is (0 = depot)"),
                   steps_taken(float, "N"))
    policy = PolicyInputs(node_features=("prize", "penalty"), context_nodes=("current_node",),
                          context_scalars=("prize_to_collect",))
    optional_visits = "prize_collecting"
    drawing = Drawing(legend=(LegendEntry("depot", "depot"), LegendEntry("size", "prize"),
                              LegendEntry("ring", "penalty if skipped")), paths="from_depot",
                      size_by="prize", ring_by="penalty",
                      depot_refusal="collect a prize of 1 before returning to the depot")
    doc = EnvDoc(
        cost="length + penalties of unvisited nodes",
        summary="Prize-collecting TSP: collect a prize of at least 1, minimising length plus the penalties of the "
                "nodes left out.",
        description="Depot (node 0) and n nodes uniform in the unit square; penalties U(0, 3K/n) with K = 2/3/4 "
                    "for n = 20/50/100 (interpolated for other n), prizes U(0, 4/n), as Kool et al. 2019 "
                    "(deterministic prizes).",
        action="the next node; 0 returns to the depot and ends the tour.",
        mask="every unvisited node; the depot once the prize collected reaches 1, or when every node has been "
             "visited.",
        rewards="Minus the edge length of the step; the final (depot) step also subtracts the penalties of the "
                "unvisited nodes. The rewards sum to minus the cost.",
        starting_state='At the depot: a random instance, or ``options["instance"] = {"locs": (N, 2), "prize": '
                       '(N,), "penalty": (N,)}``.',
        episode_end="Terminates when the depot is chosen",
        example='>>> float(obs["prize_to_collect"][0]), int(obs["action_mask"][0])\n(1.0, 0)')

    @staticmethod
    def gauge(state) -> tuple[float, str, bool]:
        """The renderer's footer for a batch-1 state: (fill fraction, text, threshold reached)."""
        got = float(state.collected[0])
        left_out = float((state.instance.penalty[0] * ~flags(state.visited[0])).sum())
        return min(got, PRIZE_TO_COLLECT), f"prize {got:.2f} / 1.00    penalties unvisited {left_out:.2f}", \
            got >= PRIZE_TO_COLLECT

    @staticmethod
    def generate(batch_size: int, num_nodes: int, *, generator: torch.Generator | None = None,
                 device: Any = None) -> PCTSPInstance:
        """B instances of ``num_nodes`` nodes plus a depot (node 0)."""
        n = check_num_nodes(num_nodes, minimum=1)
        dev = generation_device(generator, device)
        locs = torch.rand(batch_size, n + 1, 2, generator=generator, device=dev)
        penalty = torch.rand(batch_size, n, generator=generator, device=dev) * penalty_scale(n)
        prize = torch.rand(batch_size, n, generator=generator, device=dev) * (4.0 / n)
        zero = torch.zeros(batch_size, 1, device=dev)
        return PCTSPInstance(locs=locs, prize=torch.cat([zero, prize], 1), penalty=torch.cat([zero, penalty], 1))

    @staticmethod
    def reset(instance: PCTSPInstance) -> PCTSPState:
        locs = instance.locs
        b, n, _ = locs.shape
        dev = locs.device
        zeros = torch.zeros(b, dtype=torch.long, device=dev)
        visited = empty_mask(b, n, dev)
        collected = torch.zeros(b, device=dev)
        return PCTSPState(instance=instance, current=zeros, current_loc=locs[:, 0], visited=visited, num_steps=zeros,
                          length=torch.zeros(b, device=dev), collected=collected, left_out=instance.penalty.sum(dim=1),
                          done=torch.zeros(b, dtype=torch.bool, device=dev), mask=PCTSP._mask(visited, collected))

    @staticmethod
    def _mask(visited: Tensor, collected: Tensor) -> Tensor:
        allowed = ~flags(visited)
        return with_first(allowed, (collected >= PRIZE_TO_COLLECT) | ~any_marked(allowed[:, 1:]))

    @staticmethod
    def transition(state: PCTSPState, action: Tensor, active: Tensor) -> tuple[PCTSPState, Tensor]:
        """Inactive sub-envs arrive with ``action == current`` (see ``base.step``)."""
        inst = state.instance
        loc = gather_nodes(inst.locs, action)
        edge = distance(loc, state.current_loc)
        collected = state.collected + gather_nodes(inst.prize, action) * active
        left_out = state.left_out - gather_nodes(inst.penalty, action) * active  # the depot's penalty is 0
        visited = mark(state.visited, action)
        finished = active & (action == 0)
        new = PCTSPState(instance=inst, current=action, current_loc=loc, visited=visited, num_steps=state.num_steps + active,
                         length=state.length + edge, collected=collected, left_out=left_out, done=state.done | finished,
                         mask=PCTSP._mask(visited, collected))
        return new, edge + PCTSP.left_out_cost(new) * finished

    @staticmethod
    def left_out_cost(state: PCTSPState) -> Tensor:
        """(B,) the penalties of the nodes still unvisited: what choosing the depot charges besides its edge. Kept
        in the state as Kool et al.'s cost computes it (``problems/pctsp/problem_pctsp.py``: the total penalty less
        the penalties of the nodes visited): a sum over the unvisited nodes at every step (for the masked-action
        penalty too) cost a compiled B = 1024 step 59 of its 135 µs (a float sum is a serial chain, which the
        compiler does not vectorise)."""
        return state.left_out

    @staticmethod
    def observe(state: PCTSPState) -> dict[str, Tensor]:
        remaining = (PRIZE_TO_COLLECT - state.collected).clamp(min=0.0)
        return {"locs": state.instance.locs, "prize": state.instance.prize, "penalty": state.instance.penalty,
                "prize_to_collect": remaining[:, None], "current_node": state.current, "num_steps": state.num_steps[:, None].float()}
