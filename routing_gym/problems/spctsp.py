"""Stochastic prize-collecting TSP: PCTSP where each node's real prize is revealed only when visited.

Generator as Kool, van Hoof & Welling, ICLR 2019 (code: wouterkool/attention-learn-to-route,
``problems/pctsp/problem_pctsp.py``, ``PCTSPStoch`` and ``generate_instance``): exactly
:meth:`PCTSP.generate` (locs, penalties, expected prizes, the same draws in the same order, so a seed gives
the PCTSP instance), then the real prizes ``stochastic_prize = torch.rand(size) * deterministic_prize * 2``,
uniform in [0, 2 * prize] with the expected prize as mean.

Rules (Kool's ``problems/pctsp/state_pctsp.py``, ``StatePCTSP.initialize(..., stochastic=True)``): the
policy sees only the expected prize (``expected_prize = input['deterministic_prize']``, our observation
``prize``); the prize collected is the real one (``real_prize = input['stochastic_prize' if stochastic
...]``, ``cur_total_prize = self.cur_total_prize + self.real_prize[self.ids, selected]``), and so are
``prize_to_collect`` (``get_remaining_prize_to_collect``: ``clamp(1 - cur_total_prize, min=0)``) and the
depot rule: any unvisited node is allowed; the depot is masked while ``(self.cur_total_prize < 1.) &
(visited < n)``, i.e. allowed once the real prize collected is at least 1 or every node is visited;
choosing it ends the episode. Cost as PCTSP (``_get_costs(..., stochastic=True)``: length plus the
penalties of the unvisited nodes); the final (depot) step charges the penalties. So the dynamics are
:class:`PCTSP`'s run on the real prizes (its state, ``collected`` = real prize so far) and the observation
is PCTSP's, with the expected prizes.
"""
from __future__ import annotations

import dataclasses

import math
from typing import Any, NamedTuple

import torch
from torch import Tensor

from .base import ZERO_AT_DEPOT, Field, LegendEntry, Problem
from .pctsp import PCTSP, PCTSPInstance, PCTSPState


class SPCTSPInstance(NamedTuple):
    locs: Tensor  # (B, N, 2) float32, node 0 = depot
    prize: Tensor  # (B, N) float32 expected prize (observed), depot 0
    penalty: Tensor  # (B, N) float32 >= 0, depot 0
    real_prize: Tensor  # (B, N) float32 >= 0 prize collected on a visit (not observed), depot 0


class SPCTSP(Problem):
    name = "spctsp"
    label = "SPCTSP"
    has_depot = True
    Instance = SPCTSPInstance
    fields = PCTSP.fields + (Field("real_prize", ("N",), 0.0, math.inf, rules=(ZERO_AT_DEPOT,)),)  # never observed
    sizes = (20, 50, 100)
    observation = (*PCTSP.observation[:1],
                   dataclasses.replace(PCTSP.observation[1], meaning="expected prize in [0, max(1, 4/n)], depot 0"),
                   PCTSP.observation[2],
                   dataclasses.replace(PCTSP.observation[3], meaning="``max(0, 1 - real prize collected)``"),
                   *PCTSP.observation[4:])
    policy = PCTSP.policy  # the expected prize is what a network sees (Kool's ``deterministic_prize``)
    optional_visits = PCTSP.optional_visits
    # node area: the expected prize (what the policy sees); PCTSP's refusals (the prize of 1 is the real one)
    drawing = dataclasses.replace(PCTSP.drawing, legend=tuple(
        LegendEntry("size", "expected prize") if e.glyph == "size" else e for e in PCTSP.drawing.legend))

    @staticmethod
    def gauge(state) -> tuple[float, str, bool]:
        """PCTSP's footer, which counts the real prize collected, saying so (nodes show the expected one)."""
        fraction, text, reached = PCTSP.gauge(state)
        return fraction, f"real {text}", reached

    left_out_cost = staticmethod(PCTSP.left_out_cost)  # the penalties of the unvisited nodes
    doc = dataclasses.replace(  # PCTSP's action, rewards, episode end and cost
        PCTSP.doc,
        summary="Stochastic prize-collecting TSP: as PCTSP, but a node's real prize is revealed only when it is "
                "visited.",
        description="PCTSP's instances (Kool et al. 2019): depot (node 0) and n nodes uniform in the unit square, "
                    "penalties U(0, 3K/n), expected prizes U(0, 4/n); each node's real prize is uniform in "
                    "[0, 2 * expected prize] and stays hidden until the node is visited. The tour must collect a "
                    "real prize of at least 1.",
        mask="every unvisited node; the depot once the real prize collected reaches 1, or when every node has "
             "been visited.",
        starting_state='At the depot: a random instance, or ``options["instance"] = {"locs": (N, 2), "prize": '
                       '(N,), "penalty": (N,), "real_prize": (N,)}`` (``real_prize`` is never observed).',
        example='>>> sorted(obs)\n[\'action_mask\', \'current_node\', \'locs\', \'num_steps\', \'penalty\', '
                '\'prize\', \'prize_to_collect\']')

    @staticmethod
    def generate(batch_size: int, num_nodes: int, *, generator: torch.Generator | None = None,
                 device: Any = None) -> SPCTSPInstance:
        """B instances of ``num_nodes`` nodes plus a depot (node 0): PCTSP's, then the real prizes."""
        inst = PCTSP.generate(batch_size, num_nodes, generator=generator, device=device)
        expected = inst.prize[:, 1:]
        real = torch.rand(expected.shape, generator=generator, device=expected.device) * expected * 2
        return SPCTSPInstance(locs=inst.locs, prize=inst.prize, penalty=inst.penalty,
                              real_prize=torch.cat([inst.prize[:, :1], real], dim=1))

    @classmethod
    def instance_from_observation(cls, obs) -> SPCTSPInstance:
        """Refused: the real prizes are revealed only on visits, so no observation holds the instance."""
        raise ValueError("SPCTSP's instance cannot be read from an observation: its real prizes (real_prize) are "
                         "revealed only when a node is visited")

    @staticmethod
    def _collecting(instance: SPCTSPInstance) -> PCTSPInstance:
        """The PCTSP instance whose dynamics SPCTSP follows: the prize collected is the real one."""
        return PCTSPInstance(locs=instance.locs, prize=instance.real_prize, penalty=instance.penalty)

    @staticmethod
    def reset(instance: SPCTSPInstance) -> PCTSPState:
        """PCTSP's state (``collected``: the real prize so far), holding the SPCTSP instance."""
        return PCTSP.reset(SPCTSP._collecting(instance))._replace(instance=instance)

    @staticmethod
    def transition(state: PCTSPState, action: Tensor, active: Tensor) -> tuple[PCTSPState, Tensor]:
        """PCTSP's rules and cost on the real prizes. Inactive sub-envs arrive with ``action == current``."""
        new, cost = PCTSP.transition(state._replace(instance=SPCTSP._collecting(state.instance)), action, active)
        return new._replace(instance=state.instance), cost

    @staticmethod
    def observe(state: PCTSPState) -> dict[str, Tensor]:
        """PCTSP's observation: the expected ``prize``; ``prize_to_collect`` from the real prize collected."""
        return PCTSP.observe(state)
