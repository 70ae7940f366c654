"""Asymmetric travelling salesman problem: visit every node once and return to the start, where going
from i to j costs ``cost_matrix[i, j]``, which need not equal ``cost_matrix[j, i]``. No coordinates.

As RL4CO's ATSP (ai4co/rl4co, ``rl4co/envs/routing/atsp/env.py`` and ``generator.py``, ``ATSPGenerator``
with its defaults ``min_dist=0``, ``max_dist=1``, ``tmat_class=True``), which follows MatNet (Kwon et al.,
"Matrix Encoding Networks for Neural Combinatorial Optimization", NeurIPS 2021): the (N, N) matrix is
drawn uniform in [0, 1], its diagonal set to 0, then closed under shortest paths so that it satisfies the
triangle inequality (MatNet's "TMAT" class). RL4CO repeats a min-plus product until nothing changes; this
unit computes the same closure (all-pairs shortest paths) by Floyd-Warshall, N steps over (B, N, N), which
needs no (B, N, N, N) tensor (values may differ from RL4CO's in the last bit: the sums are taken in
another order). The field keeps RL4CO's name, ``cost_matrix``.

Rules as TSP's: the first action chooses the start node; then any unvisited node; the closing edge back to
the start is added to the last step's cost. An edge i -> j costs ``cost_matrix[i, j]`` (row = from,
column = to). (RL4CO's ``_get_reward`` sums ``cost_matrix[a_t, a_{t-1}]``, the tour driven backwards;
this unit charges each edge in the direction travelled.)

User instances (``instance_from``, TSPLIB ``.atsp`` files through ``routing_gym.tsplib``) need not satisfy
the triangle inequality: the dynamics do not rely on it. They must lie in [0, 1] with a zero diagonal.

Drawing: the nodes have no positions, so the renderer places them by classical multidimensional scaling
(Torgerson) of the symmetrised matrix ``(M + M^T) / 2`` (:meth:`ATSP.layout`): deterministic, and nodes
that are cheap to travel between, either way, lie close; the drawn distances only approximate the costs.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import torch
from torch import Tensor

from .base import Drawing, EnvDoc, Field, LegendEntry, Obs, PolicyInputs, Problem, check_num_nodes, generation_device, \
    node_count, node_index, stay, steps_taken
from .masks import empty_mask, flags, full_mask, mark, mask_of


class ATSPInstance(NamedTuple):
    cost_matrix: Tensor  # (B, N, N) float32 travel cost from row node to column node, in [0, 1], diagonal 0


class ATSPState(NamedTuple):
    instance: ATSPInstance
    first: Tensor  # (B,) int64 start node (0 before the first action)
    current: Tensor  # (B,) int64 last visited node (0 before the first action)
    visited: Tensor  # (B, N) int8 mask (``masks``)
    num_steps: Tensor  # (B,) int64 actions taken
    length: Tensor  # (B,) float32 tour length so far
    cost_bound: Tensor  # (B,) float32 more than one step can cost (``step_cost_bound``), fixed at reset
    done: Tensor  # (B,) bool
    mask: Tensor  # (B, N) int8 mask, 1 = allowed


CLOSURE_CHUNK = 2**19  # matrix entries closed at a time on the CPU (2 MB of float32: the passes stay in cache)


def shortest_path_closure(matrix: Tensor) -> Tensor:
    """(B, N, N) all-pairs shortest-path lengths of the complete digraph ``matrix`` (B, N, N), zero diagonal, by
    Floyd-Warshall: after it, ``d[i, j] <= d[i, k] + d[k, j]`` for all i, j, k (up to rounding). In place on one
    copy: step k leaves row and column k as they are (``d[k, k]`` is 0), so the values are those of a new matrix
    per step, without the new matrices; on the CPU a few matrices at a time (:data:`CLOSURE_CHUNK`), whose N
    passes stay in cache. B = 4096, N = 50 on one CPU thread: 140-160 ms, against 311 in one piece and 2.2 s with
    a new matrix per step (the same values, bit for bit)."""
    d = matrix.clone()
    n = d.shape[-1]
    rows = max(1, CLOSURE_CHUNK // (n * n)) if d.device.type == "cpu" else max(1, len(d))
    for part in d.split(rows):
        via = torch.empty_like(part)
        for k in range(n):
            torch.add(part[:, :, k:k + 1], part[:, k:k + 1, :], out=via)
            torch.minimum(part, via, out=part)
    return d


def edge_costs(matrix: Tensor, src: Tensor, dst: Tensor) -> Tensor:
    """(B,) ``matrix[b, src[b], dst[b]]`` for matrix (B, N, N) and src, dst (B,) int64."""
    n = matrix.shape[-1]
    return matrix.reshape(matrix.shape[0], n * n).gather(1, (src * n + dst)[:, None]).squeeze(1)


class ATSP(Problem):
    name = "atsp"
    label = "ATSP"
    has_depot = False
    min_num_nodes = 2
    Instance = ATSPInstance
    fields = (Field("cost_matrix", ("N", "N"), 0.0, 1.0, rules=(
        node_count(lambda n: n >= 2, "at least 2 nodes"),
        (lambda m, n: torch.diagonal(m, dim1=1, dim2=2) == 0, "must have a zero diagonal"))),)  # no triangle inequality
    observation = (Obs("cost_matrix", ("N", "N"), "travel cost from row node to column node, in [0, 1], diagonal 0"),
                   node_index("first_node", "start node (0 before the first action)"),
                   node_index("current_node", "last node visited (0 before the first action)"),
                   steps_taken(float, "N"))
    policy = PolicyInputs(node_features=(), context_nodes=("first_node", "current_node"), placeholder_at_start=True,
                          coordinates=None, edge_weights="cost_matrix")
    drawing = Drawing(legend=(LegendEntry("start", "start"), LegendEntry("current", "current node"),
                              LegendEntry("", "placed by the costs (MDS), not to scale")), paths="tour")
    doc = EnvDoc(
        cost="tour length by the matrix",
        summary="Asymmetric travelling salesman: visit each of N nodes once and return to the start, where "
                "i -> j costs cost_matrix[i, j].",
        description="An (N, N) cost matrix, uniform in [0, 1] with a zero diagonal, closed under shortest paths "
                    "(triangle\ninequality; MatNet's generator, as RL4CO's ``ATSPGenerator``); no coordinates. "
                    "The first action chooses\nthe start node; every action appends a node to the tour.",
        action="the next node.",
        mask="the unvisited nodes.",
        rewards="Minus ``cost_matrix[previous, next]`` of the step (0 for the first action); the last step "
                "also adds\nthe closing edge back to the start. The episode's rewards sum to minus the tour length.",
        starting_state='A fresh random instance from ``self.np_random``, or ``options["instance"] = '
                       '{"cost_matrix": (N, N)}``.',
        episode_end="Terminates when every node is visited",
        example='>>> obs["cost_matrix"].shape, int(obs["action_mask"].sum())\n((20, 20), 20)')

    @classmethod
    def layout(cls, instance: ATSPInstance) -> Tensor:
        """(B, N, 2) drawing positions in [0, 1]^2: classical MDS of ``(M + M^T) / 2`` on its two leading
        eigenvectors (in float64; each axis's sign fixed so that its largest coordinate is positive),
        scaled into the unit square with the aspect kept and centred."""
        m = instance.cost_matrix.detach().double().cpu()
        d2 = ((m + m.transpose(1, 2)) / 2).square()
        n = m.shape[1]
        centre = torch.eye(n, dtype=torch.float64) - 1.0 / n
        gram = -0.5 * centre @ d2 @ centre  # (B, N, N)
        vals, vecs = torch.linalg.eigh(gram)  # ascending
        xy = vecs[..., [-1, -2]] * vals[:, None, [-1, -2]].clamp(min=0).sqrt()  # (B, N, 2)
        flip = xy.gather(1, xy.abs().argmax(dim=1, keepdim=True)).sign()  # (B, 1, 2)
        xy = xy * torch.where(flip == 0, 1.0, flip)
        lo, hi = xy.amin(dim=1, keepdim=True), xy.amax(dim=1, keepdim=True)
        span = (hi - lo).amax(dim=2, keepdim=True).clamp(min=1e-12)
        xy = (xy - lo) / span + (1 - (hi - lo) / span) / 2  # into [0, 1], the shorter axis centred
        return xy.float().clamp(0.0, 1.0).to(instance.cost_matrix.device)

    @staticmethod
    def generate(batch_size: int, num_nodes: int, *, generator: torch.Generator | None = None,
                 device: Any = None) -> ATSPInstance:
        """B matrices of N nodes: uniform in [0, 1], zero diagonal, closed under shortest paths (drawn on
        the generator's device)."""
        n = check_num_nodes(num_nodes)
        dev = generation_device(generator, device)
        raw = torch.rand(batch_size, n, n, generator=generator, device=dev)
        raw = raw * (1 - torch.eye(n, device=dev))
        return ATSPInstance(cost_matrix=shortest_path_closure(raw))

    @staticmethod
    def reset(instance: ATSPInstance) -> ATSPState:
        matrix = instance.cost_matrix
        b, n, _ = matrix.shape
        zeros = torch.zeros(b, dtype=torch.long, device=matrix.device)
        return ATSPState(
            instance=instance, first=zeros, current=zeros, visited=empty_mask(b, n, matrix.device), num_steps=zeros,
            length=torch.zeros(b, device=matrix.device), cost_bound=1.0 + 2.0 * matrix.amax(dim=(1, 2)),
            done=torch.zeros(b, dtype=torch.bool, device=matrix.device), mask=full_mask(b, n, matrix.device))

    @staticmethod
    def transition(state: ATSPState, action: Tensor, active: Tensor) -> tuple[ATSPState, Tensor]:
        """Inactive sub-envs arrive with ``action == current`` (see ``base.step``)."""
        matrix = state.instance.cost_matrix
        started = state.num_steps > 0
        first = torch.where(started, state.first, action)
        taken = state.num_steps + active
        finished = active & (taken == matrix.shape[-1])
        cost = edge_costs(matrix, state.current, action) * started + edge_costs(matrix, action, first) * finished
        visited = mark(state.visited, action)
        new = state._replace(first=first, current=action, visited=visited, num_steps=taken, length=state.length + cost,
                             done=state.done | finished, mask=mask_of(~flags(visited)))
        return new, cost

    @staticmethod
    def step_cost_bound(state: ATSPState) -> Tensor:
        """(B,) 1 + 2 x the largest matrix entry: a step adds at most an edge and the closing edge."""
        return state.cost_bound

    noop = staticmethod(stay)  # a finished sub-env stays at its current node


    @staticmethod
    def observe(state: ATSPState) -> dict[str, Tensor]:
        return {"cost_matrix": state.instance.cost_matrix, "first_node": state.first, "current_node": state.current,
                "num_steps": state.num_steps[:, None].float()}
