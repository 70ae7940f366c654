"""The critic baseline of Bello, Pham, Le, Norouzi & Bengio, "Neural Combinatorial Optimization with
Reinforcement Learning", 2017 (section 4, "Critic's architecture").

The critic predicts the expected cost of the policy on an instance, from the instance alone:

- Encoder: the per-problem linear node embedding (:func:`agents.policies.attention_model.node_embedding`), then an LSTM
  over the node sequence (as the Pointer Network's encoder); its outputs ``e_j`` are the memory.
- Process block: ``n_process`` steps that start from the encoder's final hidden state ``q`` and replace it
  by a glimpse over the memory, ``q <- sum_j softmax_j(v^T tanh(W e_j + U q)) e_j``.
- Decoder: two fully connected layers, ``D -> D`` (ReLU) ``-> 1``, giving the predicted cost.

The trainer (``baseline="critic"`` in :class:`agents.training.config.TrainConfig`) subtracts the prediction from
the sampled cost in the REINFORCE loss and fits the critic to the sampled costs by mean squared error,
with its own Adam optimiser.

Dimension names in shape comments: B batch, N nodes (depot included), D embedding / hidden width.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from routing_gym.problems import PROBLEMS

from .attention_model import node_embedding


@dataclass(frozen=True)
class CriticConfig:
    """Hyper-parameters of the critic; the defaults are Bello et al.'s."""

    problem: str
    """Which routing problem: a key of ``routing_gym.problems.PROBLEMS``."""
    embed_dim: int = 128
    """D, the width of the node embeddings, the LSTM state and the hidden layer."""
    n_process: int = 3
    """Process-block steps (glimpses) between the encoder and the decoder."""

    def __post_init__(self):
        if self.problem not in PROBLEMS:
            raise ValueError(f"problem must be one of {sorted(PROBLEMS)}, got {self.problem!r}")
        if self.n_process < 0:
            raise ValueError(f"n_process must be >= 0, got {self.n_process}")


class Critic(nn.Module):
    """``critic(obs) -> (B,)`` predicted cost of the policy from an episode's first observation."""

    def __init__(self, config: CriticConfig):
        super().__init__()
        self.config = config
        d = config.embed_dim
        self.init_embedding = node_embedding(config.problem, d)
        self.encoder = nn.LSTM(d, d, batch_first=True)
        self.project_ref = nn.Linear(d, d)
        self.project_query = nn.Linear(d, d)
        self.v = nn.Parameter(torch.empty(d).uniform_(-1 / math.sqrt(d), 1 / math.sqrt(d)))
        self.decoder = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, 1))

    def forward(self, obs: dict[str, Tensor]) -> Tensor:
        memory, (h, _) = self.encoder(self.init_embedding(obs))  # (B, N, D), (1, B, D)
        ref = self.project_ref(memory)  # (B, N, D)
        query = h[0]  # (B, D)
        for _ in range(self.config.n_process):
            scores = torch.tanh(ref + self.project_query(query)[:, None, :]) @ self.v  # (B, N)
            query = (scores.softmax(dim=-1)[:, :, None] * memory).sum(dim=1)  # (B, D)
        return self.decoder(query).squeeze(-1)  # (B,)
