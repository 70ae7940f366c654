"""Supervised training from labelled tours, as in the original Pointer Network paper (Vinyals, Fortunato &
Jaitly, "Pointer Networks", NeurIPS 2015), and the plain-text format of its data sets.

- Labels come from elsewhere: optimal TSP tours from :func:`agents.references.exact.label_tsp` (the
  Held-Karp DP, n <= 12 or so in seconds on a CPU), or any heuristic's tours.
- :func:`teacher_forcing_nll`: the policy steps the env with the label's actions (teacher forcing); the
  loss is the cross-entropy of the label's action under the policy's ``log_probs`` at each step, summed
  over the steps of each instance. Any policy of the protocol of :mod:`agents.policies.protocol`, any
  problem.
- :func:`train_supervised`: Adam on the mean of that loss over shuffled mini-batches, for a few epochs.
- :func:`write_ptrnet` / :func:`read_ptrnet`: the Pointer Network text format, one TSP instance per line,
  ``x0 y0 x1 y1 ... output 1 v2 ... vN 1``: the coordinates, the word ``output``, then the tour as 1-based
  node indices closed by repeating its first node. In memory tours are 0-based and open: (B, N) int64.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from routing_gym.problems import get_problem

from ..inference.rollout import episode_log_likelihood, make_env
from ..policies.protocol import select_rows


@dataclass(frozen=True)
class SupervisedConfig:
    """Settings of :func:`train_supervised`."""

    epochs: int = 10
    """Passes over the labelled set."""
    batch_size: int = 128
    """Instances per gradient step (the last batch of an epoch may be smaller)."""
    lr: float = 1e-3
    """Adam learning rate."""
    max_grad_norm: float = 1.0
    """Gradient-norm clipping threshold."""
    seed: int = 0
    """Seed of the shuffling."""


def teacher_forcing_nll(policy, problem: str, instances, actions: Tensor, env=None, check: bool = True) -> Tensor:
    """Negative log-likelihood (B,) of the labelled ``actions`` under ``policy``, with teacher forcing.

    Args:
        policy: a policy of the protocol (gradients flow through ``log_probs``), or None to check the
            labels only (the result is then zeros).
        problem: ``tsp``, ``cvrp``, ``op`` or ``pctsp``.
        instances: the problem's ``Instance`` of B instances.
        actions: (B, S) int64 feasible actions in order (finished episodes padded with their no-op node,
            whose steps count nothing); for TSP an open tour, the closing edge implied.
        env: an env of B sub-envs from :func:`agents.inference.rollout.make_env` to reuse (default: a new
            one).
        check: check every step of the labels (two host reads per step); False for labels checked
            before (the trainer checks its labelled set once, when it loads it).

    Raises:
        ValueError: with ``check``, when a label takes a masked action (naming the instance and the step)
            or does not finish its episode.
    """
    b = instances[0].shape[0]
    if env is None:
        env = make_env(problem, get_problem(problem).size_of(instances), b, instances[0].device)
    env = env.unwrapped if hasattr(env, "unwrapped") else env
    obs, _ = env.reset(options={"instances": instances})
    cache = None if policy is None else policy.precompute(obs)
    nll = torch.zeros(b, device=instances[0].device)
    parallel = policy is not None and getattr(policy, "parallel_steps", False)  # scored in one pass after
    first_obs, steps, counts = obs, [], []
    for t in range(actions.shape[1]):
        a = actions[:, t]
        counted = ~env.state.done
        if check:
            allowed = obs["action_mask"].gather(1, a[:, None]).squeeze(1).bool()
            if not bool((allowed | ~counted).all()):
                row = int((~allowed & counted).nonzero()[0])
                raise ValueError(f"label of instance {row} takes masked action {int(a[row])} at step {t}")
        if parallel:
            steps.append({k: obs[k] for k in policy.step_keys})
            counts.append(counted)
        elif policy is not None:
            logp, cache = policy.log_probs(cache, obs)
            nll = nll - torch.where(counted, logp.gather(1, a[:, None]).squeeze(1), 0.0)
        obs, *_ = env.step(a)
    if check and not bool(env.state.done.all()):
        row = int((~env.state.done).nonzero()[0])
        raise ValueError(f"label of instance {row} does not finish its episode in {actions.shape[1]} steps")
    if parallel:
        nll = -episode_log_likelihood(policy, cache, first_obs, steps, actions, torch.stack(counts, dim=1))
    return nll


def train_supervised(policy: nn.Module, problem: str, instances, actions: Tensor,
                     config: SupervisedConfig = SupervisedConfig()) -> list[float]:
    """Fit ``policy`` to labelled ``actions`` (B, S) by teacher forcing; returns each epoch's mean loss
    (the cross-entropy per instance, summed over its steps, averaged over the set)."""
    b = instances[0].shape[0]
    optimizer = torch.optim.Adam(policy.parameters(), lr=config.lr)
    generator = torch.Generator().manual_seed(config.seed)
    num_nodes = get_problem(problem).size_of(instances)
    envs = {}
    history = []
    policy.train()
    for _ in range(config.epochs):
        order = torch.randperm(b, generator=generator).to(instances[0].device)
        total = 0.0
        for start in range(0, b, config.batch_size):
            idx = order[start:start + config.batch_size]
            if len(idx) not in envs:
                envs[len(idx)] = make_env(problem, num_nodes, len(idx), instances[0].device)
            batch = select_rows(instances, idx)
            loss = teacher_forcing_nll(policy, problem, batch, actions[idx], env=envs[len(idx)])
            optimizer.zero_grad(set_to_none=True)
            loss.mean().backward()
            nn.utils.clip_grad_norm_(policy.parameters(), config.max_grad_norm)
            optimizer.step()
            total += float(loss.detach().sum())
        history.append(total / b)
    return history


# -- the Pointer Network text format ---------------------------------------------------------------
def format_ptrnet_line(locs: np.ndarray, tour: np.ndarray) -> str:
    """One line: ``locs`` (N, 2) and the open 0-based ``tour`` (N,) as ``x0 y0 ... output 1 ... 1``.
    Coordinates are written with 9 significant digits, which round-trips float32 exactly."""
    coords = " ".join(f"{v:.9g}" for v in np.asarray(locs, dtype=np.float32).reshape(-1))
    nodes = [int(v) + 1 for v in tour] + [int(tour[0]) + 1]
    return f"{coords} output {' '.join(map(str, nodes))}"


def parse_ptrnet_line(line: str, where: str = "line") -> tuple[np.ndarray, np.ndarray]:
    """``(locs (N, 2) float32, tour (N,) int64 0-based, open)`` from one line of the format;
    ``ValueError`` starting with ``where`` says what is wrong."""
    parts = line.split()
    if parts.count("output") != 1:
        raise ValueError(f"{where}: expected the word 'output' exactly once, found it {parts.count('output')} times")
    cut = parts.index("output")
    try:
        coords = np.array([float(v) for v in parts[:cut]], dtype=np.float32)
        nodes = np.array([int(v) for v in parts[cut + 1:]], dtype=np.int64)
    except ValueError as e:
        raise ValueError(f"{where}: not a number: {e}") from None
    if len(coords) < 4 or len(coords) % 2:
        raise ValueError(f"{where}: expected an even number (>= 4) of coordinates before 'output', got {len(coords)}")
    if not np.isfinite(coords).all():
        raise ValueError(f"{where}: coordinates must be finite")
    n = len(coords) // 2
    if len(nodes) != n + 1 or nodes[0] != nodes[-1]:
        raise ValueError(f"{where}: expected a closed tour of {n + 1} node indices (first repeated last), "
                         f"got {len(nodes)}: {' '.join(parts[cut + 1:])}")
    tour = nodes[:-1] - 1
    if sorted(tour.tolist()) != list(range(n)):
        raise ValueError(f"{where}: the tour must visit each of the nodes 1..{n} once")
    return coords.reshape(n, 2), tour


def write_ptrnet(path: str | os.PathLike, locs, tours) -> None:
    """Write instances ``locs`` (B, N, 2) with open 0-based ``tours`` (B, N) in the text format."""
    locs, tours = np.asarray(locs), np.asarray(tours)
    if locs.ndim != 3 or locs.shape[-1] != 2 or tours.shape != locs.shape[:2]:
        raise ValueError(f"locs must be (B, N, 2) and tours (B, N); got {locs.shape} and {tours.shape}")
    lines = [format_ptrnet_line(l, t) for l, t in zip(locs, tours)]
    Path(path).write_text("".join(line + "\n" for line in lines))


def read_ptrnet(path: str | os.PathLike) -> tuple[Tensor, Tensor]:
    """``(locs (B, N, 2) float32, tours (B, N) int64 0-based, open)`` from a file of the text format
    (blank lines skipped; every instance must have the same N). ``ValueError`` names the file and line."""
    locs, tours = [], []
    for i, line in enumerate(Path(path).read_text().splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}, line {i}"
        l, t = parse_ptrnet_line(line, where)
        if locs and len(l) != len(locs[0]):
            raise ValueError(f"{where}: {len(l)} nodes, but the file's first instance has {len(locs[0])}")
        locs.append(l)
        tours.append(t)
    if not locs:
        raise ValueError(f"{path}: no instances")
    return torch.from_numpy(np.stack(locs)), torch.from_numpy(np.stack(tours))
