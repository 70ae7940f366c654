"""A Stable-Baselines3 features extractor built from the Attention Model's encoder, for ``MultiInputPolicy``.

SB3's default ``CombinedExtractor`` flattens the coordinates into one vector, so its MLP must learn
every node ordering separately. :class:`AttentionExtractor` instead embeds each node with the
Attention Model's initial embedding and encoder layers (:mod:`agents.policies.attention_model`, reused, not
copied), which treat the nodes as a set, and hands SB3's policy and value heads a fixed-size vector::

    features = [graph embedding (D) | step context (C) | pointer scores (N)]

- graph embedding: the mean of the node embeddings (permutation-invariant);
- step context: the Attention Model's per-problem step context (TSP: first and current node
  embeddings, a learned placeholder before the first action, C = 2D; CVRP, OP, PCTSP: the current
  node's embedding and the remaining capacity / length / prize to collect, C = D + 1);
- pointer scores: one compatibility per node between a query from the two above and that node's
  embedding, ``C_clip * tanh(q . k_j / sqrt(D))`` (the Attention Model's single-head pointer), and
  ``-C_clip`` at masked nodes. These carry node identity in index order, which the graph and context
  alone do not: without them the action head could not tell which index is which node.

SB3's action head is a linear layer from the features to the N logits, which would first have to
learn to pass the pointer scores through. :class:`AttentionPolicy` (sb3-contrib's
``MultiInputPolicy`` with this extractor) starts with exactly that head, so that the initial policy is
the Attention Model's pointer and PPO refines it::

    from sb3_contrib import MaskablePPO
    from agents.policies.sb3_extractor import AttentionPolicy

    model = MaskablePPO(AttentionPolicy, venv, gamma=1.0,
                        policy_kwargs=dict(features_extractor_kwargs=dict(embed_dim=64, n_layers=2)))

The extractor alone also plugs into any SB3 policy (``policy_kwargs=dict(features_extractor_class=
AttentionExtractor)``); note that SB3's default ``ortho_init=True`` re-initialises every linear layer
of the extractor, including weights loaded with ``encoder_from``.

SB3 preprocesses the observation before the extractor sees it: ``Box`` entries become float,
``Discrete`` node indices (``first_node``, ``current_node``) become one-hot vectors (N,) (or (1, N)
as stored in the rollout buffer) and the ``MultiBinary`` ``action_mask`` becomes float 0/1. The
extractor turns them back into (B,) int64 indices and a (B, N) bool mask, the format of
:class:`agents.policies.attention_model.AttentionModel`.

Normalisation defaults to ``"instance"``: batch normalisation behaves differently in SB3's rollout
(evaluation mode, running statistics) and training (batch statistics) passes, which skews PPO's
probability ratios; instance normalisation does not depend on the mode.

Dimension names: B batch, N nodes (depot included), D embedding, C step context.
"""
from __future__ import annotations

import math

from typing import Any

import torch
from gymnasium import spaces
from sb3_contrib.common.maskable.policies import MaskableMultiInputActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from stable_baselines3.common.type_aliases import Schedule
from torch import Tensor, nn

from routing_gym.problems import PROBLEMS

from .attention_model import AttentionModel, AttentionModelConfig

def infer_problem(observation_space: spaces.Dict) -> str:
    """The problem whose observation space this is: the registered problem whose observation keys are
    exactly the space's. Problems with the same keys (CVRP and SDVRP, PCTSP and SPCTSP) that the encoder
    reads alike (same node features and step context) give the same network, and the first registered is
    named; otherwise ``problem=`` must be passed."""
    n_total = observation_space["action_mask"].shape[0]
    keys = set(observation_space.spaces)
    found = [p for p in PROBLEMS.values()
             if keys == set(p.bounds(n_total)) | set(p.node_indices) | {"action_mask"}]
    if not found:
        raise ValueError(f"cannot tell the routing problem from observation keys {sorted(keys)}; "
                         f"pass problem= one of {sorted(PROBLEMS)}")
    reads = {(p.has_depot, p.policy.node_features, p.policy.context_nodes, p.policy.context_scalars) for p in found}
    if len(reads) > 1:
        raise ValueError(f"observation keys {sorted(keys)} fit {[p.name for p in found]}; pass problem=")
    return found[0].name


class AttentionExtractor(BaseFeaturesExtractor):
    """Features ``[graph embedding | step context | pointer scores]`` from the Attention Model's
    encoder; see the module docstring.

    Args:
        observation_space: a routing env's ``Dict`` observation space (SB3 passes it).
        problem: a key of ``routing_gym.problems.PROBLEMS``; inferred from the keys when None
            (:func:`infer_problem`).
        embed_dim, n_heads, n_layers, ff_hidden, normalization: the encoder's
            :class:`agents.policies.attention_model.AttentionModelConfig` fields (defaults: the paper's width
            and depth, instance normalisation).
        tanh_clipping: bound of the pointer scores.
        encoder_from: an :class:`AttentionModel` (e.g. ``agents.load_pretrained("tsp", 20)``)
            whose initial embedding and encoder weights to start from; its config then sets the encoder.
        freeze_encoder: keep the initial embedding and encoder layers fixed, in evaluation mode (only with
            ``encoder_from``).
    """

    def __init__(self, observation_space: spaces.Dict, problem: str | None = None, embed_dim: int = 128,
                 n_heads: int = 8, n_layers: int = 3, ff_hidden: int = 512, normalization: str = "instance",
                 tanh_clipping: float = 10.0, encoder_from: AttentionModel | None = None,
                 freeze_encoder: bool = False):
        problem = problem or infer_problem(observation_space)
        if encoder_from is not None:
            config = encoder_from.config
            if config.problem != problem:
                raise ValueError(f"encoder_from is a {config.problem!r} model but the observations are {problem!r}")
        else:
            config = AttentionModelConfig(problem=problem, embed_dim=embed_dim, n_heads=n_heads, n_layers=n_layers,
                                          ff_hidden=ff_hidden, normalization=normalization)
        if freeze_encoder and encoder_from is None:
            raise ValueError("freeze_encoder=True needs encoder_from= a trained AttentionModel")
        num_nodes = observation_space["action_mask"].shape[0]
        model = AttentionModel(config)
        if encoder_from is not None:
            model.load_state_dict(encoder_from.state_dict())
        d = config.embed_dim
        super().__init__(observation_space, features_dim=d + model.step_context.dim + num_nodes)
        self.node_index_keys = tuple(k for k, s in observation_space.spaces.items() if isinstance(s, spaces.Discrete))
        self.tanh_clipping = tanh_clipping
        # the Attention Model's own modules (its decoder is not used)
        self.encoder = model  # its encode() (initial embedding + layers, distance bias) and step context
        self.init_embedding, self.layers, self.step_context = model.init_embedding, model.layers, model.step_context
        self.freeze_encoder = freeze_encoder
        for module in (self.init_embedding, self.layers):
            module.requires_grad_(not freeze_encoder)
        self.project_query = nn.Linear(d + model.step_context.dim, d, bias=False)
        self.project_key = nn.Linear(d, d, bias=False)

    def train(self, mode: bool = True) -> "AttentionExtractor":
        """As ``nn.Module.train``, except that a frozen encoder stays in evaluation mode (its batch
        normalisation keeps the trained running statistics)."""
        super().train(mode)
        if self.freeze_encoder:
            self.init_embedding.eval()
            self.layers.eval()
        return self

    def unpreprocess(self, obs: dict[str, Tensor]) -> dict[str, Tensor]:
        """SB3's preprocessed observation back to the Attention Model's: one-hot node indices to (B,)
        int64, the float mask to (B, N) bool."""
        out = dict(obs)
        b = obs["action_mask"].shape[0]
        for key in self.node_index_keys:
            out[key] = obs[key].reshape(b, -1).argmax(dim=-1)  # (B,)
        out["action_mask"] = obs["action_mask"].reshape(b, -1) > 0.5  # (B, N)
        return out

    def forward(self, observations: dict[str, Tensor]) -> Tensor:
        obs = self.unpreprocess(observations)
        h = self.encoder.encode(obs)  # (B, N, D)
        graph = h.mean(dim=1)  # (B, D)
        context = self.step_context(h, obs)  # (B, C)
        query = self.project_query(torch.cat([graph, context], dim=-1))  # (B, D)
        scores = torch.einsum("bd,bnd->bn", query, self.project_key(h)) / math.sqrt(h.shape[-1])  # (B, N)
        scores = self.tanh_clipping * torch.tanh(scores)
        scores = scores.masked_fill(~obs["action_mask"], -self.tanh_clipping)
        return torch.cat([graph, context, scores], dim=-1)  # (B, D + C + N)


class AttentionPolicy(MaskableMultiInputActorCriticPolicy):
    """sb3-contrib's maskable ``MultiInputPolicy`` with :class:`AttentionExtractor` and a pointer action
    head: the action head is linear from the features, initialised to pass the pointer scores through as
    the logits (the other weights zero), so training starts from the Attention Model's pointer.

    Args:
        observation_space, action_space, lr_schedule: given by the algorithm.
        net_arch: ``dict(pi=[], vf=[...])``: the action head has no hidden layers (it is the pointer);
            ``vf`` the value head's hidden layers (default ``[128]``).
        activation_fn: the value head's activation.
        ortho_init: SB3's orthogonal initialisation of all linear layers, the extractor's included;
            off by default (the encoder keeps the Attention Model's initialisation or ``encoder_from``).
        features_extractor_kwargs: :class:`AttentionExtractor`'s arguments.
        share_features_extractor, normalize_images, optimizer_class, optimizer_kwargs: as SB3's.
    """

    def __init__(self, observation_space: spaces.Dict, action_space: spaces.Discrete, lr_schedule: Schedule,
                 net_arch: dict[str, list[int]] | None = None, activation_fn: type[nn.Module] = nn.Tanh,
                 ortho_init: bool = False, features_extractor_kwargs: dict[str, Any] | None = None,
                 share_features_extractor: bool = True, normalize_images: bool = True,
                 optimizer_class: type[torch.optim.Optimizer] = torch.optim.Adam,
                 optimizer_kwargs: dict[str, Any] | None = None):
        net_arch = {"pi": [], "vf": [128]} if net_arch is None else net_arch
        if not isinstance(net_arch, dict) or net_arch.get("pi"):
            raise ValueError(f"AttentionPolicy's action head is the pointer: net_arch must be "
                             f"dict(pi=[], vf=[...]), got {net_arch!r}")
        super().__init__(observation_space, action_space, lr_schedule, net_arch=net_arch, activation_fn=activation_fn,
                         ortho_init=ortho_init, features_extractor_class=AttentionExtractor,
                         features_extractor_kwargs=features_extractor_kwargs,
                         share_features_extractor=share_features_extractor, normalize_images=normalize_images,
                         optimizer_class=optimizer_class, optimizer_kwargs=optimizer_kwargs)

    def _build(self, lr_schedule: Schedule) -> None:
        super()._build(lr_schedule)
        n = self.action_net.out_features  # the pointer scores are the features' last N entries
        with torch.no_grad():
            self.action_net.weight.zero_()
            self.action_net.bias.zero_()
            self.action_net.weight[:, -n:] = torch.eye(n)
