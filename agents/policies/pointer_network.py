"""The Pointer Network (Vinyals, Fortunato & Jaitly, "Pointer Networks", NeurIPS 2015) with the glimpse of
Bello, Pham, Le, Norouzi & Bengio, "Neural Combinatorial Optimization with Reinforcement Learning", 2017.

- Encoder: a linear embedding of each node's features (Bello et al.; the same per-problem embeddings as
  the Attention Model, :func:`agents.policies.attention_model.node_embedding`), then an LSTM over the node sequence;
  its outputs ``e_j`` are the references and its final state starts the decoder.
- Decoder: an LSTM cell fed, at step 0, a learned start input and, afterwards, the embedding of the node
  chosen last (``obs["current_node"]``); depot problems append their step scalar (remaining capacity,
  remaining length or prize still to collect, the problem's declared ``policy.context_scalars``) to that input.
- Pointer: one glimpse ``g = sum_j softmax_j(v_g^T tanh(W_g e_j + U_g d)) W_g e_j`` over the allowed
  nodes, then additive attention ``u_j = v^T tanh(W e_j + U g)`` clipped to ``C tanh(u_j)`` (C = 10,
  Bello et al.), ``-inf`` where ``obs["action_mask"]`` forbids node j.

The policy protocol of :mod:`agents.policies.protocol` with a recurrent decoder: ``precompute(obs)``
encodes the instances of an episode's *first* observation (step 0) and returns a :class:`PointerCache`
(frozen) holding the decoder state; ``log_probs(cache, obs) -> (log_probs, cache)`` returns a new cache
whose state has advanced by one step for the rows whose ``obs["num_steps"]`` is one past the last step the
cache has seen, and kept where ``obs["num_steps"]`` has not moved (finished episodes, or a repeated call on
the same observation); the cache passed in is never modified. So a cache serves one episode, and each
step must be given the cache the previous one returned, with every observation of the episode in order
(as :func:`agents.inference.rollout.rollout` and :func:`agents.training.supervised.teacher_forcing_nll`
do); a fresh ``precompute`` starts a fresh episode. Every field has the batch as its leading axis, so
beam search (:mod:`agents.inference.search`) reorders the cache with its re-ranked rows as it does any
policy's. :meth:`PointerNetwork.predict` acts in the single Gymnasium env with the decoder state
passed back and forth as ``state``, in the style of Stable-Baselines3's recurrent policies.

Dimension names in shape comments: B batch, N nodes (depot included), D embedding / hidden width.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from routing_gym.problems import PROBLEMS, get_problem

from .attention_model import concat_embeddings, node_embedding
from .protocol import batch_observation

@dataclass(frozen=True)
class PointerNetworkConfig:
    """Hyper-parameters of the Pointer Network; the defaults are Bello et al. 2017's."""

    problem: str
    """Which routing problem: a key of ``routing_gym.problems.PROBLEMS``."""
    embed_dim: int = 128
    """D, the width of the node embeddings and of the LSTM states."""
    n_glimpses: int = 1
    """Glimpses before the pointer (Bello et al. use 1; 0 points straight from the decoder state)."""
    tanh_clipping: float = 10.0
    """C in the pointer logits ``C * tanh(u)``; 0 disables the clipping."""

    def __post_init__(self):
        if self.problem not in PROBLEMS:
            raise ValueError(f"problem must be one of {sorted(PROBLEMS)}, got {self.problem!r}")
        if self.n_glimpses < 0:
            raise ValueError(f"n_glimpses must be >= 0, got {self.n_glimpses}")


@dataclass(frozen=True)
class PointerCache:
    """What the decoder reuses at every step, and its recurrent state (``state`` and ``seen``, which each
    step returns anew in a new cache)."""

    embeddings: Tensor  # (B, N, D) node embeddings (the decoder's inputs)
    glimpse_ref: Tensor  # (B, N, D) W_g e_j
    pointer_ref: Tensor  # (B, N, D) W e_j
    start_state: tuple[Tensor, Tensor]  # (B, D) each: the encoder's final (h, c)
    state: tuple[Tensor, Tensor]  # (B, D) each: the decoder's (h, c) after step ``seen``
    seen: Tensor  # (B,) int64: the last step whose input the decoder consumed (-1: none yet)


class AdditiveAttention(nn.Module):
    """Scores ``v^T tanh(ref_j + W_q q)`` (B, N) of precomputed references (B, N, D) against a query (B, D)."""

    def __init__(self, dim: int):
        super().__init__()
        self.project_query = nn.Linear(dim, dim)
        self.v = nn.Parameter(torch.empty(dim).uniform_(-1 / math.sqrt(dim), 1 / math.sqrt(dim)))

    def forward(self, ref: Tensor, query: Tensor) -> Tensor:
        return torch.tanh(ref + self.project_query(query)[:, None, :]) @ self.v  # (B, N)


class PointerNetwork(nn.Module):
    """The Pointer Network for ``config.problem``; see the module docstring.

    Observations are dicts of tensors with a leading batch axis, keyed as the envs' (docs/contract.md):
    ``locs`` (B, N, 2), the problem's node features (B, N), ``current_node`` (B,) int64, ``step``
    (B, 1), the depot problems' step scalar (B, 1) and ``action_mask`` (B, N) bool, True = allowed.
    """

    def __init__(self, config: PointerNetworkConfig):
        super().__init__()
        self.config = config
        d = config.embed_dim
        self.scalars = get_problem(config.problem).policy.context_scalars
        self.init_embedding = node_embedding(config.problem, d)
        self.encoder = nn.LSTM(d, d, batch_first=True)
        self.decoder = nn.LSTMCell(d + len(self.scalars), d)
        self.start_input = nn.Parameter(torch.empty(d).uniform_(-1 / math.sqrt(d), 1 / math.sqrt(d)))
        self.project_glimpse_ref = nn.Linear(d, d)
        self.project_pointer_ref = nn.Linear(d, d)
        self.glimpse = AdditiveAttention(d)
        self.pointer = AdditiveAttention(d)

    @property
    def device(self) -> torch.device:
        """Where the parameters are (observations for :meth:`predict` are moved there)."""
        return self.start_input.device

    def precompute(self, obs: dict[str, Tensor]) -> PointerCache:
        """Encode the instances of an episode's first observation (``obs["num_steps"]`` 0 in every row)."""
        if bool((obs["num_steps"] != 0).any()):  # once per episode: a host sync is fine here
            raise ValueError("the Pointer Network is recurrent: precompute needs an episode's first observation "
                             "(step 0); in a single env use predict(obs, state) and pass back the state it returns")
        emb = self.init_embedding(obs)  # (B, N, D)
        enc, (h, c) = self.encoder(emb)  # (B, N, D), (1, B, D) each
        b = emb.shape[0]
        start = (h[0], c[0])
        return PointerCache(embeddings=emb, glimpse_ref=self.project_glimpse_ref(enc),
                            pointer_ref=self.project_pointer_ref(enc), start_state=start, state=start,
                            seen=torch.full((b,), -1, dtype=torch.long, device=emb.device))

    def log_probs(self, cache: PointerCache, obs: dict[str, Tensor]) -> tuple[Tensor, PointerCache]:
        """``(log_probs (B, N), next cache)``: the next action's log-probabilities, ``-inf`` where
        ``obs["action_mask"]`` is False, and a new cache whose decoder state has taken this step (see the
        module docstring); ``cache`` is left as it was."""
        mask = obs["action_mask"].bool()  # (B, N)
        step = obs["num_steps"][:, 0].long()  # (B,)
        first = step == 0
        node = concat_embeddings(cache.embeddings, obs["current_node"][:, None])  # (B, D)
        x = torch.where(first[:, None], self.start_input, node)
        if self.scalars:
            x = torch.cat([x, *(obs[k] for k in self.scalars)], dim=-1)  # (B, D + 1)
        h0 = torch.where(first[:, None], cache.start_state[0], cache.state[0])
        c0 = torch.where(first[:, None], cache.start_state[1], cache.state[1])
        h1, c1 = self.decoder(x, (h0, c0))
        advance = (step > cache.seen)[:, None]  # rows whose step has not moved keep their state
        h = torch.where(advance, h1, cache.state[0])
        c = torch.where(advance, c1, cache.state[1])
        query = h
        for _ in range(self.config.n_glimpses):
            scores = self.glimpse(cache.glimpse_ref, query).masked_fill(~mask, -math.inf)  # (B, N)
            query = torch.einsum("bn,bnd->bd", scores.softmax(dim=-1), cache.glimpse_ref)  # (B, D)
        logits = self.pointer(cache.pointer_ref, query)  # (B, N)
        if self.config.tanh_clipping > 0:
            logits = self.config.tanh_clipping * torch.tanh(logits)
        logp = logits.masked_fill(~mask, -math.inf).log_softmax(dim=-1)
        return logp, dataclasses.replace(cache, state=(h, c), seen=torch.maximum(step, cache.seen))

    @torch.no_grad()
    def predict(self, obs: dict[str, Any], state: PointerCache | None = None, episode_start: Any = None,
                deterministic: bool = True, generator: torch.Generator | None = None
                ) -> tuple[np.ndarray, PointerCache]:
        """Act in a Gymnasium env, in the style of Stable-Baselines3's recurrent ``predict``.

        Args:
            obs: a numpy observation dict of the single env (``locs`` (N, 2), ...) or a batch of them
                (``locs`` (B, N, 2), ...), from the same episode(s) as ``state``.
            state: the decoder state returned by the previous call of this episode; ``None`` (or an
                observation at step 0) starts a new episode, which must then be at step 0.
            episode_start: True (or all-True) forces a new episode, as ``state=None`` does.
            deterministic: the most probable action (greedy) if True, else one sampled from the policy.
            generator: torch generator for sampling (default: torch's global one, as SB3).

        Returns:
            ``(action, state)``: an allowed action (a numpy int64 scalar for a single observation, an int64
            array (B,) for a batch) and the state to pass to the next call. ``state`` is not modified.
        """
        batched = np.ndim(obs["action_mask"]) == 2
        x = batch_observation(obs, device=self.device, batched=batched)
        new_episode = state is None or (episode_start is not None and bool(np.all(episode_start)))
        if new_episode or bool((x["num_steps"] == 0).all()):
            state = self.precompute(x)
        logp, state = self.log_probs(state, x)
        action = logp.argmax(dim=-1) if deterministic else torch.multinomial(logp.exp(), 1, generator=generator)[:, 0]
        action = action.cpu().numpy()
        return (action if batched else action[0]), state
