"""What every problem shares: the step wrapper, instance validation and the size tables.

A problem module (tsp.py, cvrp.py, op.py, pctsp.py) defines one class with

- ``generate(batch_size, num_nodes, *, generator, device) -> Instance``: random instances, Kool et al.
  2019's distributions;
- ``reset(instance) -> State``;
- ``transition(state, action, active) -> (State, cost)``: the problem's rules for the sub-envs in
  ``active``, the new state's ``mask`` by those rules and the cost of the step (zero where inactive).
  Inactive sub-envs (finished, or taking a masked action) arrive with ``action == state.current``, so
  staying put changes nothing but what accumulates per visit, which ``active`` gates;
- ``observe(state) -> dict`` of batched tensors under the observation keys of DESIGN.md;
- ``bounds(num_nodes, **variant) -> dict`` of ``key -> (shape, low, high)`` for the observation space.

:func:`step` wraps ``transition`` with what is the same for all: finished sub-envs ignore their action
(no-op), a masked action ends the episode with :func:`invalid_penalty`, and a finished sub-env's mask
allows only its no-op node. :func:`tour_cost` replays a tour through the same dynamics, so cost and
feasibility have one source of truth.

Dimension names in shape comments: B batch, N nodes (depot included), S steps.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch import Tensor


def interpolate_table(table: Mapping[int, float], n: int) -> float:
    """Piecewise-linear interpolation of a per-size table in ``n``, constant beyond its ends.

    Kool et al. 2019 give CVRP capacities, OP max lengths and PCTSP penalty factors only for
    n = 10/20/50/100; other sizes get this interpolation (e.g. CVRP-30 has capacity 33.33, CVRP-200
    capacity 50).
    """
    sizes = sorted(table)
    if n <= sizes[0]:
        return float(table[sizes[0]])
    if n >= sizes[-1]:
        return float(table[sizes[-1]])
    hi = next(s for s in sizes if s >= n)
    lo = max(s for s in sizes if s <= n)
    if hi == lo:
        return float(table[lo])
    w = (n - lo) / (hi - lo)
    return float(table[lo] * (1 - w) + table[hi] * w)


def invalid_penalty(num_nodes: int) -> float:
    """Cost charged for a masked action: ``2 * sqrt(2) * N``, above any feasible episode's cost.

    (Jumanji's convention: no tour in the unit square is longer than ``sqrt(2) * N``.)
    """
    return 2.0 * math.sqrt(2.0) * num_nodes


def check_num_nodes(num_nodes: Any, minimum: int = 2) -> int:
    if isinstance(num_nodes, bool) or not isinstance(num_nodes, (int, np.integer)) or num_nodes < minimum:
        raise ValueError(f"num_nodes must be an integer >= {minimum}, got {num_nodes!r}")
    return int(num_nodes)


def resolve_device(generator: torch.Generator | None, device: Any) -> torch.device:
    """The device to draw on: the generator's when one is given (a mismatch is an error)."""
    if generator is None:
        return torch.device(device if device is not None else "cpu")
    if device is not None and torch.device(device).type != generator.device.type:
        raise ValueError(f"generator is on {generator.device} but device={device!r} was asked for")
    return generator.device


def gather_nodes(values: Tensor, index: Tensor) -> Tensor:
    """``values[b, index[b]]`` for values (B, N) or (B, N, K) and index (B,)."""
    if values.dim() == 2:
        return values.gather(1, index[:, None]).squeeze(1)
    return values.gather(1, index[:, None, None].expand(-1, 1, values.shape[2])).squeeze(1)


def visit(visited: Tensor, action: Tensor) -> Tensor:
    """``visited`` (B, N) bool with ``visited[b, action[b]]`` set (a new tensor)."""
    return visited.scatter(1, action[:, None], True)


def any_along_nodes(mask: Tensor) -> Tensor:
    """(B,) bool: does row b of the (B, N) bool ``mask`` hold a True? (``Tensor.any(dim=1)`` on bools is
    several times slower on CPU than counting.)"""
    return torch.count_nonzero(mask, dim=1) > 0


def distance(a: Tensor, b: Tensor) -> Tensor:
    """Euclidean distance over the last axis (size 2), broadcasting. (``torch.linalg.vector_norm`` over a
    last axis of size 2 is ~6x slower on CPU for (B, N, 2); results differ from it by at most 1 ulp.)"""
    return ((a[..., 0] - b[..., 0]).square() + (a[..., 1] - b[..., 1]).square()).sqrt()  # per coordinate: no (B, N, 2) broadcast


def step(problem, state, action: Tensor):
    """Advance every sub-env by one action: the dynamics shared by the single env, the vector env
    and the trainer.

    Args:
        problem: the problem class (``TSP``, ``CVRP``, ``OP`` or ``PCTSP``).
        state: its state, batch B.
        action: (B,) int64 node indices.

    Returns:
        ``(state, reward, invalid)``: the new state, reward (B,) float (minus the step's cost; minus
        :func:`invalid_penalty` for a masked action) and invalid (B,) bool, true where this step's
        action was masked (that sub-env is then done). A sub-env that was already done ignores its
        action, gets reward 0 and keeps a mask that allows only its no-op node.
    """
    allowed = state.mask.gather(1, action[:, None]).squeeze(1)
    active = allowed & ~state.done
    invalid = ~(allowed | state.done)
    action = torch.where(active, action, state.current)  # inactive sub-envs stay where they are
    state, cost = problem.transition(state, action, active)
    reward = torch.where(invalid, -invalid_penalty(state.mask.shape[-1]), -cost)
    return finish(problem, state, invalid), reward, invalid


def finish(problem, state, stop: Tensor):
    """The state with sub-envs ``stop`` (B,) bool marked done, and every done sub-env's mask reduced
    to its no-op node."""
    done = state.done | stop
    noop = problem.noop(state)[:, None]
    # rows of done sub-envs cleared (a uint8 product: bool ops broadcasting (B, 1) against (B, N) are ~4x
    # slower on CPU), then the no-op node set where done
    keep = (state.mask.view(torch.uint8) * (~done).view(torch.uint8)[:, None]).view(torch.bool)
    mask = keep.scatter_(1, noop, state.mask.gather(1, noop) | done[:, None])
    return state._replace(done=done, mask=mask)


@torch.no_grad()
def tour_cost(problem, instance, tours: Tensor) -> Tensor:
    """Cost of finished tours, validated by replaying them through the dynamics.

    Args:
        problem: the problem class.
        instance: a batch of B instances.
        tours: (B, S) int64 actions in order; tours that end early are padded with the no-op
            (the depot for depot problems).

    Returns:
        (B,) float cost (the quantity minimised).

    Raises:
        ValueError: naming the first instance whose tour takes a masked action or does not finish.
    """
    tours = torch.as_tensor(tours, device=instance.locs.device).long()
    if tours.dim() != 2 or tours.shape[0] != instance.locs.shape[0]:
        raise ValueError(f"tours must have shape (B={instance.locs.shape[0]}, S), got {tuple(tours.shape)}")
    state = problem.reset(instance)
    cost = torch.zeros(tours.shape[0], dtype=torch.float64, device=tours.device)
    for t in range(tours.shape[1]):
        state, reward, invalid = step(problem, state, tours[:, t])
        if invalid.any():
            b = int(invalid.nonzero()[0])
            raise ValueError(f"infeasible tour: instance {b} takes masked action {int(tours[b, t])} at step {t}")
        cost -= reward.double()
    if not state.done.all():
        b = int((~state.done).nonzero()[0])
        raise ValueError(f"infeasible tour: instance {b}'s tour of {tours.shape[1]} steps does not finish")
    return cost


def as_float_tensor(value: Any, name: str, shape: tuple, device: torch.device) -> Tensor:
    """Convert one instance field, checking shape and finiteness (``ValueError`` names the field)."""
    try:
        arr = torch.as_tensor(np.asarray(value, dtype=np.float32), device=device)
    except (TypeError, ValueError) as e:
        raise ValueError(f"instance field '{name}' is not numeric: {e}") from None
    if tuple(arr.shape) != tuple(shape):
        raise ValueError(f"instance field '{name}' must have shape {tuple(shape)}, got {tuple(arr.shape)}")
    if not torch.isfinite(arr).all():
        raise ValueError(f"instance field '{name}' contains NaN or inf")
    return arr


def check_range(arr: Tensor, name: str, low: float, high: float) -> None:
    if arr.numel() and (arr.min() < low or arr.max() > high):
        raise ValueError(f"instance field '{name}' must lie in [{low}, {high}], "
                         f"got values in [{float(arr.min()):.6g}, {float(arr.max()):.6g}]")


def instance_fields(data: Mapping[str, Any], required: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict:
    """The instance dict's fields, refusing missing and unknown keys by name."""
    if not isinstance(data, Mapping):
        raise ValueError(f"an instance must be a mapping of arrays with keys {required}, got {type(data).__name__}")
    missing = [k for k in required if k not in data]
    if missing:
        raise ValueError(f"instance lacks field(s) {missing}; expected {list(required + optional)}")
    unknown = [k for k in data if k not in required + optional]
    if unknown:
        raise ValueError(f"instance has unknown field(s) {unknown}; expected {list(required + optional)}")
    return dict(data)


def batch_size_of(data: Mapping[str, Any], batched: bool) -> tuple[int, int]:
    """(B, N) from the ``locs`` field: (N, 2) for one instance, (B, N, 2) for a batch."""
    try:
        locs = np.asarray(data["locs"], dtype=np.float32)
    except (TypeError, ValueError) as e:
        raise ValueError(f"instance field 'locs' is not a numeric array: {e}") from None
    want = 3 if batched else 2
    if locs.ndim != want or locs.shape[-1] != 2:
        shape = "(B, N, 2)" if batched else "(N, 2)"
        raise ValueError(f"instance field 'locs' must have shape {shape}, got {locs.shape}")
    return (locs.shape[0] if batched else 1), locs.shape[-2]
