"""Classic constructive heuristics, written as policies of the decoding protocol (``precompute`` /
``log_probs``) so that they run batched on the same vector env as the learned policies."""
from __future__ import annotations

import torch
from torch import Tensor


class NearestNeighbour:
    """Go to the nearest allowed node. TSP starts at node 0. CVRP and OP go back to the depot only when
    no customer is allowed; PCTSP goes back as soon as the depot is allowed and nearest (it ignores
    penalties)."""

    def precompute(self, obs: dict) -> Tensor:
        return obs["locs"]

    def log_probs(self, locs: Tensor, obs: dict) -> Tensor:
        current = locs[torch.arange(locs.shape[0], device=locs.device), obs["current_node"]]
        dist = torch.linalg.vector_norm(locs - current[:, None], dim=-1)
        mask = obs["action_mask"]
        nodes = torch.arange(mask.shape[1], device=mask.device)
        if "first_node" in obs:  # TSP: the first action is node 0
            dist = dist.masked_fill((obs["step"][:, 0] == 0)[:, None] & (nodes != 0), float("inf"))
        elif "prize_to_collect" not in obs:  # CVRP, OP: the depot last
            dist = dist + 1e3 * (nodes == 0)
        return torch.log_softmax((-dist * 1e3).masked_fill(~mask, float("-inf")), dim=-1)


class UniformRandom:
    """Uniform over the allowed nodes."""

    def precompute(self, obs: dict) -> None:
        return None

    def log_probs(self, cache: None, obs: dict) -> Tensor:
        mask = obs["action_mask"]
        return torch.log(mask.float() / mask.sum(dim=-1, keepdim=True))


HEURISTICS = {"nearest": NearestNeighbour, "random": UniformRandom}
