"""Per-group reward normalisation for training one model on mixed batches (RouteFinder: Berto et al.,
"RouteFinder: Towards Foundation Models for Vehicle Routing Problems", code ai4co/routefinder,
``routefinder/models/reward_normalization.py``, ``ExponentialMean`` with the ``"div"`` operation).

Each instance belongs to a group (the problem's :meth:`~routing_gym.problems.base.Problem.reward_groups`,
e.g. the MTVRP's variant). The scale of group g is an exponential moving average (``alpha`` 0.1, as
RouteFinder's default) of the batches' mean cost of that group, set to the first batch's mean when the group
first appears; the REINFORCE advantage of an instance is divided by its group's |scale|, so that variants whose
costs are large (time windows) do not drown the gradient of those whose costs are small (open routes).
Under data-parallel training each rank keeps its own scales.
"""
from __future__ import annotations

import torch
from torch import Tensor

REWARD_NORMS = ("none", "variant")
ALPHA = 0.1  # RouteFinder's ExponentialMean default
SMALLEST = 1e-6  # a scale never divides by less


class GroupScale:
    """The per-group scales: ``scale(groups, cost)`` updates them with a batch and returns each row's."""

    def __init__(self, num_groups: int, device: torch.device, alpha: float = ALPHA):
        self.alpha = alpha
        self.mean = torch.zeros(num_groups, device=device)
        self.seen = torch.zeros(num_groups, dtype=torch.bool, device=device)

    def scale(self, groups: Tensor, cost: Tensor) -> Tensor:
        """(B,) the updated |scale| of each row's group, from ``groups`` (B,) int64 and ``cost`` (B,)."""
        n = self.mean.shape[0]
        counts = torch.bincount(groups, minlength=n)
        sums = torch.zeros(n, device=cost.device, dtype=torch.float32).scatter_add_(0, groups, cost.float())
        present = counts > 0
        batch_mean = sums / counts.clamp(min=1)
        moved = torch.where(self.seen, (1 - self.alpha) * self.mean + self.alpha * batch_mean, batch_mean)
        self.mean = torch.where(present, moved, self.mean)
        self.seen = self.seen | present
        return self.mean[groups].abs().clamp(min=SMALLEST)

    def state_dict(self) -> dict:
        return {"mean": self.mean.cpu(), "seen": self.seen.cpu()}

    def load_state_dict(self, state: dict) -> None:
        mean, seen = state["mean"], state["seen"]
        if mean.shape != self.mean.shape or seen.shape != self.seen.shape:
            raise ValueError(f"reward scales of {tuple(mean.shape)} groups, expected {tuple(self.mean.shape)}")
        self.mean, self.seen = mean.to(self.mean), seen.to(self.seen)


def group_scale(problem, reward_norm: str, device: torch.device) -> GroupScale | None:
    """The run's normaliser for ``reward_norm`` (None for ``"none"``); ``ValueError`` when the problem
    declares no groups."""
    if reward_norm == "none":
        return None
    if not problem.num_reward_groups:
        raise ValueError(f"reward_norm={reward_norm!r} needs a problem whose instances fall into groups "
                         f"(variants); {problem.label} declares none")
    return GroupScale(problem.num_reward_groups, device)
