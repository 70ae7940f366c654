"""The Attention Model policy of Kool, van Hoof & Welling, "Attention, Learn to Solve Routing Problems!",
ICLR 2019 (code: wouterkool/attention-learn-to-route, ``nets/attention_model.py``), for every problem of
``routing_gym.problems``.

- Encoder: a linear embedding of each node's features (depot problems embed node 0 with its own
  linear layer of its position), then ``n_layers`` layers of multi-head self-attention and a ReLU
  feed-forward, each sublayer with a skip connection and batch normalisation; no positional encoding.
- Decoder, once per step: the context is the projected graph embedding (the mean of the node
  embeddings) plus the projected step context; an ``n_heads`` glimpse attends over the allowed nodes,
  and a single-head pointer gives logits clipped to ``tanh_clipping * tanh(.)``, with ``-inf`` at the
  masked nodes. The glimpse keys and values and the pointer keys are projected once per instance.
- Optional (``distance_bias=True``, off by default): a distance-biased encoder in the style of
  Graphormer's spatial encoding (Ying et al., "Do Transformers Really Perform Bad for Graph
  Representation?", NeurIPS 2021): every encoder layer adds a learned per-head bias ``phi_h(d_ij)`` of
  the Euclidean distance between nodes i and j to its self-attention logits before the softmax.
- Problems whose nodes have no coordinates declare an (N, N) matrix of travel costs instead
  (``policy.edge_weights``, e.g. a ``cost_matrix``): the bias is then always on and reads ``phi_h(c_ij)``
  of the cost from i to j (so node i attends by its outgoing costs; the matrix need not be symmetric),
  and each node's initial features are four numbers of its row and column of the matrix (the least and
  the mean cost out of it, the least and the mean cost into it, diagonal excluded;
  :func:`edge_features`), which any N gives; the pointer's logits also add a learned multiple of the costs
  out of the current node (starting at a nearest-neighbour preference, :data:`EDGE_LOGIT_SCALE`). A simple
  reading, not MatNet's (Kwon et al. 2021) dual row/column encoder.

The problem-specific parts come from what the problem unit declares (its ``policy``, a
:class:`~routing_gym.problems.base.PolicyInputs`), never from its name: what a node's initial embedding
reads (after its (x, y), in Kool's order; node 0 by a depot layer of its own where there is a depot), the
step context (:class:`StepContext`: TSP the first and current node, a learned placeholder at step 0; the
others the current node and the remaining capacity, remaining length or prize still to collect), and
per-node features that change during an episode (SDVRP's remaining demand), projected at every step and
added to the cached glimpse keys, values and pointer keys (Kool's ``project_node_step``).

The policy protocol of :mod:`agents.policies.protocol`: ``precompute(obs) -> AttentionCache`` runs the
encoder on the first observation; ``log_probs(cache, obs) -> (log_probs (B, N), cache)`` gives the next
action's log-probabilities and returns the cache unchanged (the model is stateless between steps).
:meth:`AttentionModel.predict` acts in the single Gymnasium env, in the style of Stable-Baselines3.

Dimension names in shape comments: B batch, N nodes (depot included), D embedding, H heads, K = D / H.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from routing_gym.problems import PROBLEMS, get_problem
from routing_gym.problems.base import PolicyInputs

from .protocol import batch_observation

NORMALIZATIONS = ("batch", "instance")
# rows (instances x nodes) the encoder runs at once on the CPU outside batch-normalised training. Whole,
# 1,000 TSP-50 instances make (50,000, 512) feed-forward activations of 100 MB, fresh memory from the
# system (page faults) at every layer; in chunks the allocator reuses the same few MB: the encoder of a
# fresh process 1.38 -> 1.02 s (one thread, a training job on the other core; 16 to 128 instances a chunk
# measure alike). With glibc's mmap turned off (MALLOC_MMAP_THRESHOLD_) whole and chunked measure alike: the
# gain is the allocation.
CPU_ENCODER_ROWS = 2048


@dataclass(frozen=True)
class AttentionModelConfig:
    """Hyper-parameters of the Attention Model; the defaults are the paper's."""

    problem: str
    """Which routing problem: a key of ``routing_gym.problems.PROBLEMS`` (``"tsp"``, ``"cvrp"``, ...)."""
    embed_dim: int = 128
    """D, the width of node embeddings and of the decoder's context."""
    n_heads: int = 8
    """Attention heads in the encoder layers and in the decoder's glimpse; must divide ``embed_dim``."""
    n_layers: int = 3
    """Encoder layers (self-attention + feed-forward)."""
    ff_hidden: int = 512
    """Hidden units of each encoder layer's feed-forward sublayer."""
    tanh_clipping: float = 10.0
    """C in the pointer logits ``C * tanh(u)``; 0 disables the clipping."""
    normalization: str = "batch"
    """Normalisation after each encoder sublayer: ``"batch"`` (the paper's) or ``"instance"``."""
    distance_bias: bool = False
    """Add a learned per-head bias of the pairwise Euclidean distance to every encoder layer's
    self-attention logits (:class:`DistanceBias`, one per layer); off (the paper's model) by default, and
    always on (of the costs) for a problem that declares ``policy.edge_weights`` (:func:`biased`).
    The default model's parameters and their names are unchanged by this field."""

    def __post_init__(self):
        if self.problem not in PROBLEMS:
            raise ValueError(f"problem must be one of {sorted(PROBLEMS)}, got {self.problem!r}")
        if self.embed_dim % self.n_heads:
            raise ValueError(f"n_heads ({self.n_heads}) must divide embed_dim ({self.embed_dim})")
        if self.normalization not in NORMALIZATIONS:
            raise ValueError(f"normalization must be one of {NORMALIZATIONS}, got {self.normalization!r}")


class AttentionCache(NamedTuple):
    """What the decoder reuses at every step: computed once per instance by ``precompute``."""

    node_embeddings: Tensor  # (B, N, D) encoder output
    fixed_context: Tensor  # (B, D) projected graph embedding
    glimpse_key: Tensor  # (B, H, N, K)
    glimpse_val: Tensor  # (B, H, N, K)
    logit_key: Tensor  # (B, N, D) pointer keys, divided by sqrt(D) (the logits' scale)


EDGE_LOGIT_SCALE = 3.0  # the pointer's initial preference for cheap edges, per unit of cost (problems with a matrix)


def concat_embeddings(embeddings: Tensor, index: Tensor) -> Tensor:
    """``embeddings[b, index[b, ..., j]]`` concatenated over j: (B, N, D) and (B, ..., J) int64 -> (B, ..., J * D)."""
    b, n, d = embeddings.shape
    rows = index.reshape(b, -1).long() + n * torch.arange(b, device=index.device)[:, None]  # (B, M) into B * N rows
    # index_select of rows: on the CPU 15x faster than gather with an expanded index (1,000 x 2 of (50, 128):
    # 1.4 ms -> 0.09 ms a decoding step, about 2 % of a TSP-50 greedy decoding)
    return embeddings.reshape(b * n, d).index_select(0, rows.view(-1)).view(*index.shape[:-1], -1)


# -- problem adapters -----------------------------------------------------------------------------
class NodeEmbedding(nn.Module):
    """Initial embedding without a depot: one linear layer of (x, y, *features) per node; a feature is (B, N)
    or (B, N, K) (CVRPTW's time windows), ``widths`` its K (1 each by default)."""

    def __init__(self, features: tuple[str, ...], embed_dim: int, widths: tuple[int, ...] | None = None,
                 coordinates: str | None = "locs", edge_weights: str | None = None):
        super().__init__()
        self.features, self.coordinates, self.edge_weights = features, coordinates, edge_weights
        width = 2 * (coordinates is not None) + EDGE_FEATURES * (edge_weights is not None)
        self.node = nn.Linear(width + sum(widths or (1,) * len(features)), embed_dim)

    def position(self, obs: dict[str, Tensor]) -> Tensor:
        """(B, N, P) what places each node: its coordinates and or its cost-matrix statistics."""
        parts = [obs[self.coordinates]] if self.coordinates else []  # (B, N, 2)
        if self.edge_weights:
            parts.append(edge_features(obs[self.edge_weights]))  # (B, N, 4)
        return torch.cat(parts, dim=-1) if len(parts) > 1 else parts[0]

    def forward(self, obs: dict[str, Tensor], position: Tensor | None = None) -> Tensor:
        position = self.position(obs) if position is None else position
        b, n = position.shape[:2]
        x = torch.cat([position, *(obs[f].reshape(b, n, -1) for f in self.features)], dim=-1)  # (B, N, P + F)
        return self.node(x)  # (B, N, D)


EDGE_FEATURES = 4


def edge_features(matrix: Tensor) -> Tensor:
    """(B, N, 4) per node from a (B, N, N) cost matrix (row = from): the least and the mean cost out of the
    node, the least and the mean cost into it, its diagonal entry left out (all 0 for N = 1)."""
    n = matrix.shape[-1]
    eye = torch.eye(n, dtype=torch.bool, device=matrix.device)
    off = matrix.masked_fill(eye, 0.0)
    least = matrix.masked_fill(eye, math.inf)
    stats = [least.amin(dim=2), off.sum(dim=2) / max(n - 1, 1), least.amin(dim=1), off.sum(dim=1) / max(n - 1, 1)]
    return torch.stack(stats, dim=-1).nan_to_num(posinf=0.0)  # (B, N, 4)


class DepotNodeEmbedding(NodeEmbedding):
    """Initial embedding with a depot: node 0 from its position ((x, y), or its cost statistics) by its own
    linear layer, the others from (position, *features)."""

    def __init__(self, features: tuple[str, ...], embed_dim: int, widths: tuple[int, ...] | None = None,
                 coordinates: str | None = "locs", edge_weights: str | None = None):
        super().__init__(features, embed_dim, widths, coordinates, edge_weights)
        self.depot = nn.Linear(2 * (coordinates is not None) + EDGE_FEATURES * (edge_weights is not None), embed_dim)

    def forward(self, obs: dict[str, Tensor]) -> Tensor:
        position = self.position(obs)
        nodes = super().forward(obs, position)[:, 1:]  # (B, N - 1, D)
        return torch.cat([self.depot(position[:, :1]), nodes], dim=1)  # (B, N, D)


class StepContext(nn.Module):
    """The decoder's step context from what the problem declares (:class:`PolicyInputs`): the embeddings
    of its ``context_nodes`` (TSP: first and current node; the others: the current node) followed by its
    ``context_scalars`` (B, 1) each (remaining capacity, remaining length or prize still to collect);
    with ``placeholder_at_start`` a learned placeholder stands in while ``obs["num_steps"] == 0``."""

    def __init__(self, inputs: PolicyInputs, embed_dim: int):
        super().__init__()
        self.nodes, self.scalars = inputs.context_nodes, inputs.context_scalars
        self.dim = len(self.nodes) * embed_dim + len(self.scalars)
        if inputs.placeholder_at_start:  # registered only then, so the other problems' state dicts lack it
            self.placeholder = nn.Parameter(torch.empty(self.dim).uniform_(-1.0, 1.0))

    def forward(self, embeddings: Tensor, steps: dict[str, Tensor]) -> Tensor:
        """The context (B, dim) of an observation, or (B, T, dim) of T steps' values stacked on axis 1."""
        nodes = concat_embeddings(embeddings, torch.stack([steps[k] for k in self.nodes], dim=-1))  # (B, [T,] J * D)
        context = torch.cat([nodes, *(steps[k] for k in self.scalars)], dim=-1) if self.scalars else nodes
        if hasattr(self, "placeholder"):
            context = torch.where(steps["num_steps"] == 0, self.placeholder, context)
        return context  # (B, [T,] dim)


def node_embedding(problem: str, embed_dim: int) -> nn.Module:
    """The initial node embedding of ``problem`` (its declared ``policy.node_features``; a depot of its own)."""
    unit = get_problem(problem)
    shapes = {o.key: o.shape for o in unit.observation}
    widths = tuple(math.prod(shapes[f][1:]) for f in unit.policy.node_features)  # (N,) -> 1, (N, K) -> K
    return (DepotNodeEmbedding if unit.has_depot else NodeEmbedding)(
        unit.policy.node_features, embed_dim, widths, unit.policy.coordinates, unit.policy.edge_weights)


def biased(config) -> bool:
    """Whether the encoder adds a learned bias of pairwise costs to its attention logits: asked for
    (``distance_bias``), or the problem's nodes come with a cost matrix (``policy.edge_weights``)."""
    return config.distance_bias or get_problem(config.problem).policy.edge_weights is not None


# -- encoder --------------------------------------------------------------------------------------
class DistanceBias(nn.Module):
    """A learned per-head bias of pairwise distances, ``phi(d_ij)`` for each of the H heads: a small MLP
    ``1 -> hidden -> H`` (ReLU) applied to every entry of the (B, N, N) distance matrix."""

    def __init__(self, n_heads: int, hidden: int = 16):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(1, hidden), nn.ReLU(), nn.Linear(hidden, n_heads))

    def forward(self, dist: Tensor) -> Tensor:
        return self.mlp(dist[..., None]).permute(0, 3, 1, 2)  # (B, N, N) -> (B, H, N, N)


def pairwise_distances(locs: Tensor) -> Tensor:
    """Euclidean distances (B, N, N) between the nodes of ``locs`` (B, N, 2)."""
    diff = locs[:, :, None, :] - locs[:, None, :, :]  # (B, N, N, 2)
    return diff.square().sum(dim=-1).sqrt()


def attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None) -> Tensor:
    """``F.scaled_dot_product_attention(q, k, v, attn_mask=mask)``, computed in fp32 (and cast back to ``q``'s
    dtype) on the CPU where a bf16 one would be slow:

    - with gradients: PyTorch's CPU attention backward in bf16 took 16x its fp32 time (TSP-20 training,
      B = 512: 1.79 s against 0.11 s a batch), more than bf16 autocast saves in the matmuls;
    - where keys or values are fp32 (the decoder's cached glimpse keys, :meth:`AttentionModel.precompute`): a
      one-query bf16 glimpse took 3x the fp32 one (B = 1,000, n = 50: 12.3 against 4.0 ms).

    (``benchmarks/README.md``, "bf16 on the CPU".)"""
    if bf16_on_cpu(q) and (torch.is_grad_enabled() or k.dtype != q.dtype):
        with torch.autocast("cpu", enabled=False):
            mask = mask if mask is None or mask.dtype == torch.bool else mask.float()
            return F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=mask).to(q.dtype)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def bf16_on_cpu(x: Tensor) -> bool:
    """Is ``x`` a bf16 tensor on the CPU (where :func:`attention` computes in fp32)?"""
    return x.dtype == torch.bfloat16 and x.device.type == "cpu"


class SelfAttention(nn.Module):
    """Multi-head self-attention without biases: queries, keys and values from one fused projection.

    ``forward(h, bias=None, key_padding_mask=None)``: ``bias`` (B, H, N, N) float is added to the
    attention logits before the softmax (the distance bias); ``key_padding_mask`` (B, N) bool, True at
    padding nodes, removes those nodes as keys (every query must keep at least one key).
    """

    def __init__(self, embed_dim: int, n_heads: int):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim, bias=False)
        self.out = nn.Linear(embed_dim, embed_dim, bias=False)
        bound = 1.0 / math.sqrt(embed_dim // n_heads)  # the paper's init: U(-1/sqrt(K), 1/sqrt(K))
        nn.init.uniform_(self.qkv.weight, -bound, bound)

    def forward(self, h: Tensor, bias: Tensor | None = None, key_padding_mask: Tensor | None = None) -> Tensor:
        b, n, d = h.shape
        q, k, v = self.qkv(h).view(b, n, 3, self.n_heads, d // self.n_heads).permute(2, 0, 3, 1, 4)  # (B, H, N, K)
        if key_padding_mask is not None:
            pad = torch.zeros(b, 1, 1, n, dtype=h.dtype, device=h.device).masked_fill(
                key_padding_mask[:, None, None, :], -math.inf)  # (B, 1, 1, N)
            bias = pad if bias is None else bias + pad
        heads = attention(q, k, v, bias)  # (B, H, N, K)
        return self.out(heads.transpose(1, 2).reshape(b, n, d))  # (B, N, D)


class Normalization(nn.Module):
    """Batch (over all B * N node embeddings) or instance normalisation of (B, N, D), affine."""

    def __init__(self, embed_dim: int, kind: str):
        super().__init__()
        self.norm = nn.BatchNorm1d(embed_dim) if kind == "batch" else nn.InstanceNorm1d(embed_dim, affine=True)

    def forward(self, h: Tensor) -> Tensor:
        if isinstance(self.norm, nn.BatchNorm1d):
            return self.norm(h.reshape(-1, h.shape[-1])).view(h.shape)
        return self.norm(h.transpose(1, 2)).transpose(1, 2)


class EncoderLayer(nn.Module):
    """``h = norm1(h + attention(h)); h = norm2(h + feed_forward(h))``; with ``config.distance_bias``
    the attention logits get ``DistanceBias(dist)`` from the (B, N, N) distances passed to ``forward``."""

    def __init__(self, config: AttentionModelConfig):
        super().__init__()
        d = config.embed_dim
        self.attention = SelfAttention(d, config.n_heads)
        self.norm1 = Normalization(d, config.normalization)
        self.feed_forward = nn.Sequential(nn.Linear(d, config.ff_hidden), nn.ReLU(), nn.Linear(config.ff_hidden, d))
        self.norm2 = Normalization(d, config.normalization)
        if biased(config):  # registered only when on, so the default model's state dict is unchanged
            self.distance_bias = DistanceBias(config.n_heads)

    def forward(self, h: Tensor, dist: Tensor | None = None, key_padding_mask: Tensor | None = None) -> Tensor:
        bias = self.distance_bias(dist) if dist is not None and hasattr(self, "distance_bias") else None
        h = self.norm1(h + self.attention(h, bias, key_padding_mask))
        return self.norm2(h + self.feed_forward(h))


# -- the model ------------------------------------------------------------------------------------
class AttentionModel(nn.Module):
    """The Attention Model for ``config.problem``; see the module docstring.

    Observations are dicts of tensors with a leading batch axis, keyed as the envs' (docs/contract.md):
    ``locs`` (B, N, 2), the problem's node features (B, N), ``current_node`` (B,) int64, TSP's
    ``first_node`` (B,) int64 and ``step`` (B, 1), the depot problems' step scalar (B, 1), and
    ``action_mask`` (B, N) bool, True = allowed (at least one node allowed per row).
    """

    def __init__(self, config: AttentionModelConfig):
        super().__init__()
        self.config = config
        d = config.embed_dim
        unit = get_problem(config.problem)
        inputs = unit.policy
        self.init_embedding = node_embedding(config.problem, d)
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.n_layers))
        self.step_context = StepContext(inputs, d)
        self.dynamic = tuple(f for f in inputs.node_features if f in unit.dynamic_fields)
        if self.dynamic:  # Kool's project_node_step (SDVRP): registered only then, other state dicts unchanged
            self.project_node_step = nn.Linear(len(self.dynamic), 3 * d, bias=False)
        self.project_node_embeddings = nn.Linear(d, 3 * d, bias=False)  # glimpse key, glimpse value, logit key
        self.project_fixed_context = nn.Linear(d, d, bias=False)
        self.project_step_context = nn.Linear(self.step_context.dim, d, bias=False)
        self.project_out = nn.Linear(d, d, bias=False)
        self.edge_weights = inputs.edge_weights
        if self.edge_weights:  # a cost matrix: the pointer also reads the costs out of the current node (learned
            # scale, starting at a nearest-neighbour preference); registered only then, other state dicts unchanged
            self.edge_logit_scale = nn.Parameter(torch.tensor(-EDGE_LOGIT_SCALE))

    @property
    def device(self) -> torch.device:
        """Where the parameters are (observations for :meth:`predict` are moved there)."""
        return self.project_out.weight.device

    def encode(self, obs: dict[str, Tensor]) -> Tensor:
        """Node embeddings (B, N, D): initial embedding, then the encoder layers (with the distance
        bias when configured)."""
        h = self.init_embedding(obs)  # (B, N, D)
        dist = obs[self.edge_weights] if self.edge_weights else pairwise_distances(obs["locs"]) \
            if biased(self.config) else None  # (B, N, N)
        b, n, _ = h.shape
        step = max(1, CPU_ENCODER_ROWS // n)
        if h.device.type != "cpu" or b <= step or (self.training and self.config.normalization == "batch"):
            return self.encode_layers(h, dist)
        # on the CPU, a chunk of instances at a time (the same numbers; batch statistics in training are the
        # one thing that spans instances, so never then)
        return torch.cat([self.encode_layers(h[i:i + step], None if dist is None else dist[i:i + step])
                          for i in range(0, b, step)])

    def encode_layers(self, h: Tensor, dist: Tensor | None) -> Tensor:
        """The encoder layers on initial embeddings (B, N, D), with the (B, N, N) distances of the bias."""
        for layer in self.layers:
            h = layer(h, dist)
        return h

    def precompute(self, obs: dict[str, Tensor]) -> AttentionCache:
        """Encode the instances of the first observation and project what every decoding step reuses."""
        h = self.encode(obs)  # (B, N, D)
        b, n, d = h.shape
        heads = self.config.n_heads
        glimpse_key, glimpse_val, logit_key = self.project_node_embeddings(h).chunk(3, dim=-1)  # (B, N, D) each
        # bf16 on the CPU: the glimpse keys and values are kept in fp32, cast once here, so that every step's
        # glimpse runs in fp32 (:func:`attention`) without casting them again
        glimpse_dtype = torch.float32 if bf16_on_cpu(glimpse_key) else glimpse_key.dtype
        return AttentionCache(
            node_embeddings=h, fixed_context=self.project_fixed_context(h.mean(dim=1)),
            glimpse_key=glimpse_key.reshape(b, n, heads, d // heads).transpose(1, 2).contiguous().to(glimpse_dtype),
            glimpse_val=glimpse_val.reshape(b, n, heads, d // heads).transpose(1, 2).contiguous().to(glimpse_dtype),
            logit_key=logit_key / math.sqrt(d))

    @property
    def step_keys(self) -> tuple[str, ...]:
        """The observation keys a decoding step reads that change within an episode (the mask, the step
        context's inputs); the rest it reads from the cache and the episode's first observation."""
        keys = ("action_mask", "current_node", *self.step_context.nodes, *self.step_context.scalars, *self.dynamic)
        if hasattr(self.step_context, "placeholder"):
            keys += ("num_steps",)
        return tuple(dict.fromkeys(keys))

    @property
    def parallel_steps(self) -> bool:
        """Can :meth:`log_probs_steps` score a whole episode's steps in one pass? Yes unless node features
        change per step (then every step would need keys of its own: SDVRP decodes step by step)."""
        return not self.dynamic

    def log_probs(self, cache: AttentionCache, obs: dict[str, Tensor]) -> tuple[Tensor, AttentionCache]:
        """``(log_probs (B, N), cache)``: log-softmax of the clipped pointer logits of the next action,
        ``-inf`` where ``obs["action_mask"]`` is False (the glimpse attends only to allowed nodes), and
        ``cache`` itself (nothing changes between steps)."""
        return self.log_probs_steps(cache, obs, {k: obs[k][:, None] for k in self.step_keys})[:, 0], cache

    def log_probs_steps(self, cache: AttentionCache, obs: dict[str, Tensor], steps: dict[str, Tensor]) -> Tensor:
        """Log-probabilities (B, T, N) of T decoding steps at once: ``steps`` holds the :attr:`step_keys` of
        each step's observation stacked on axis 1 ((B, T, ...)), ``obs`` is any observation of the episode (its
        static inputs: a cost matrix). The decoder has no state between steps, so a recorded episode is
        scored in one pass: T queries against the same keys, which training back-propagates through once
        instead of T times."""
        mask = steps["action_mask"].bool()  # (B, T, N)
        b, d = cache.fixed_context.shape
        t = mask.shape[1]
        heads = self.config.n_heads
        context = self.project_step_context(self.step_context(cache.node_embeddings, steps))  # (B, T, D)
        query = cache.fixed_context[:, None] + context  # (B, T, D)
        if self.dynamic:  # per-step node features projected and added to the cached keys and values
            n = cache.logit_key.shape[1]
            step = torch.stack([steps[k] for k in self.dynamic], dim=-1)  # (B, T, N, F)
            key_step, val_step, logit_step = self.project_node_step(step).chunk(3, dim=-1)  # (B, T, N, D) each
            glimpse_key = cache.glimpse_key[:, None] + key_step.view(b, t, n, heads, d // heads).transpose(2, 3)
            glimpse_val = cache.glimpse_val[:, None] + val_step.view(b, t, n, heads, d // heads).transpose(2, 3)
            glimpse = attention(query.view(b, t, heads, 1, d // heads), glimpse_key, glimpse_val,
                                mask[:, :, None, None, :])  # (B, T, H, 1, K)
            glimpse = self.project_out(glimpse.reshape(b, t, d))  # (B, T, D)
            logits = torch.einsum("btd,btnd->btn", glimpse, cache.logit_key[:, None] + logit_step / math.sqrt(d))
        else:
            glimpse = attention(query.view(b, t, heads, d // heads).transpose(1, 2), cache.glimpse_key,
                                cache.glimpse_val, mask[:, None])  # (B, H, T, K)
            glimpse = self.project_out(glimpse.transpose(1, 2).reshape(b, t, d))  # (B, T, D)
            logits = torch.einsum("btd,bnd->btn", glimpse, cache.logit_key)  # (B, T, N)
        if self.edge_weights:  # + scale * cost(current, j)
            costs = obs[self.edge_weights]  # (B, N, N)
            rows = costs.gather(1, steps["current_node"].long()[:, :, None].expand(-1, -1, costs.shape[-1]))
            logits = logits + self.edge_logit_scale * rows  # (B, T, N)
        if self.config.tanh_clipping > 0:
            logits = self.config.tanh_clipping * torch.tanh(logits)
        return logits.masked_fill(~mask, -math.inf).log_softmax(dim=-1)

    @torch.no_grad()
    def predict(self, obs: dict[str, Any], state: Any = None, episode_start: Any = None,
                deterministic: bool = True, generator: torch.Generator | None = None) -> tuple[np.ndarray, None]:
        """Act in a Gymnasium env, in the style of Stable-Baselines3's ``predict``.

        Args:
            obs: a numpy observation dict of the single env (``locs`` (N, 2), ...) or a batch of them
                (``locs`` (B, N, 2), ...).
            state, episode_start: ignored (the policy is stateless: it encodes the instance each call).
            deterministic: the most probable action (greedy) if True, else one sampled from the policy.
            generator: torch generator for sampling (default: torch's global one, as SB3).

        Returns:
            ``(action, None)``: an allowed action, a numpy int64 scalar for a single observation or an
            int64 array (B,) for a batch. Evaluation mode is used (batch-norm running statistics); the
            module's training flag is restored afterwards.
        """
        batched = np.ndim(obs["action_mask"]) == 2
        x = batch_observation(obs, device=self.device, batched=batched)
        was_training = self.training
        self.eval()
        try:
            logp, _ = self.log_probs(self.precompute(x), x)  # (B, N)
        finally:
            self.train(was_training)
        action = logp.argmax(dim=-1) if deterministic else torch.multinomial(logp.exp(), 1, generator=generator)[:, 0]
        action = action.cpu().numpy()
        return (action if batched else action[0]), None
