"""Node masks, the one representation of every problem unit's per-node flags (``visited``, the allowed
``mask``): (B, N) ``int8`` tensors holding 0 or 1 (1 = visited / allowed).

Bytes, not bool, because ``torch.compile``'s CPU code loads and stores bool tensors one element at a time
(through mask conversions) and vectorises byte ones. int8 because it is the dtype of the observation's
``action_mask`` (``MultiBinary``), so the vector env gives the state's mask as it is, without a copy (the
state's masks are never written in place: a step makes new ones). The rules stay written with bools:
:func:`flags` reads a mask as a bool tensor and :func:`mask_of` stores a bool condition as a mask, both
zero-copy views (a 0/1 byte is a valid bool), so an eager step makes no extra pass over (B, N)::

    allowed = ~flags(visited) & (demand + used[:, None] <= 1.0)   # bool rules, as read
    return mask_of(allowed)                                      # stored as int8

Only these helpers write masks, so every byte stays 0 or 1 (``~`` on an int8 mask would give -1/-2:
negate its :func:`flags`). A depot's rule, which differs from the customers', replaces column 0 of the customers'
condition through :func:`with_first`.

Compiled on the CPU, the step runs as C++ loops that gcc vectorises (``base.scalar_loops_for_gcc``) where a loop is
plain arithmetic and comparisons: hence :func:`with_first` (no loop choosing by column) and, where a (B,) flag
meets a (B, N) mask, byte arithmetic rather than a negated bool (``base.finish``).
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

import torch
from torch import Tensor

MASK_DTYPE = torch.int8


def empty_mask(batch_size: int, num_nodes: int, device: Any) -> Tensor:
    """(B, N) mask with no node set."""
    return torch.zeros(batch_size, num_nodes, dtype=MASK_DTYPE, device=device)


def full_mask(batch_size: int, num_nodes: int, device: Any) -> Tensor:
    """(B, N) mask with every node set."""
    return torch.ones(batch_size, num_nodes, dtype=MASK_DTYPE, device=device)


_traced_for_compiler = False


@contextlib.contextmanager
def traced_for_compiler() -> Iterator[None]:
    """Within: :func:`flags` and :func:`mask_of` convert, as under ``torch.compile``, for a graph traced by
    ``make_fx`` that inductor compiles (``base.fixed_layout_step``): inductor could not lower the bool view
    for CUDA (torch 2.11 on an H200: "torch.bool is not supported by torch.iinfo")."""
    global _traced_for_compiler
    before, _traced_for_compiler = _traced_for_compiler, True
    try:
        yield
    finally:
        _traced_for_compiler = before


def for_compiler() -> bool:
    """Is this code being traced for a compiler (then masks convert rather than view)?"""
    return _traced_for_compiler or torch.compiler.is_compiling()


def flags(mask: Tensor) -> Tensor:
    """The mask as a bool tensor of the same shape: a view in eager code (no copy); a comparison in compiled
    code (``torch.compile``, :func:`traced_for_compiler`), which fuses it into its kernels (inductor's
    vectorised C++ has no bool <-> byte bit cast)."""
    return mask != 0 if for_compiler() else mask.view(torch.bool)


def mask_of(condition: Tensor) -> Tensor:
    """A bool condition (B, N) stored as a mask: a view in eager code, a conversion in compiled code (as
    :func:`flags`)."""
    return condition.to(MASK_DTYPE) if for_compiler() else condition.view(MASK_DTYPE)


def with_first(allowed: Tensor, first: Tensor | bool) -> Tensor:
    """The mask of the condition ``allowed`` (B, N) bool with its column 0 replaced by ``first`` (B,) bool or one
    bool for all rows (a depot's rule). ``allowed`` is used up: eager code writes ``first`` into it (no extra pass
    over (B, N)); compiled code joins ``first`` and ``allowed[:, 1:]``, each part its own loop, which gcc
    vectorises (a loop choosing by column, ``x == 0 ? a : b``, it leaves scalar). (Joined as bools: inductor
    compiles a join of int8 tensors as a call to ATen's.)"""
    if for_compiler():
        column = allowed.new_full((len(allowed), 1), first) if isinstance(first, bool) else first[:, None]
        return mask_of(torch.cat([column, allowed[:, 1:]], 1))
    allowed[:, 0] = first
    return mask_of(allowed)


def mark(mask: Tensor, index: Tensor) -> Tensor:
    """A new mask: ``mask`` with node ``index[b]`` (B,) int64 set in row b."""
    return mask.scatter(1, index[:, None], 1)


def is_marked(mask: Tensor, index: Tensor) -> Tensor:
    """(B,) bool: is node ``index[b]`` set in row b?"""
    return flags(mask.gather(1, index[:, None]).squeeze(1))


def all_marked(mask: Tensor) -> Tensor:
    """(B,) bool: is every node of row b of a (B, N) mask set? (As :func:`any_marked`: compiled, a minimum.)"""
    if for_compiler() and mask.shape[1]:
        return mask.amin(dim=1) != 0
    return torch.count_nonzero(mask, dim=1) == mask.shape[1]


def any_marked(condition: Tensor) -> Tensor:
    """(B,) bool: does row b of a (B, N) mask or bool condition hold a set node? (Counted: on the CPU,
    ``Tensor.any(dim=1)`` on bools is slower.)"""
    if for_compiler() and condition.shape[1]:
        return condition.to(MASK_DTYPE).amax(dim=1) != 0
    return torch.count_nonzero(condition, dim=1) > 0
