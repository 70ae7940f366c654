"""Native vectorised environments: B instances stepped together by the problem core on any torch device.

``gym.make_vec("routing/TSP-50", num_envs=B, vectorization_mode="vector_entry_point", device="cuda")``
returns one of these. Sub-env i behaves exactly as a single env (same seeds, same actions, same
observations, rewards and terminations), but all B step in one batched call of the same code.
"""
from __future__ import annotations

import functools
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space
from torch import Tensor

from .common import (INVALID_ACTION_MODES, check_choice, check_compile, check_render_size, check_seed, observation_space,
                     resolve_num_nodes, seeded_generator, sized_classes)
from .problems import PROBLEMS, step
from .problems.base import (compiled, compiled_for_layout, finish, is_allowed, native_array, rebuild, row_major_state,
                            tensors_of)
from .problems.masks import flags, for_compiler
from .render import frame_size

ARRAY_TYPES = ("numpy", "torch")


def resolve_device(device: Any) -> torch.device:
    """``"cpu"``, ``"cuda"``, ``"cuda:1"`` or a ``torch.device``; a name torch does not know, or a device
    (or an index) that this machine does not have (CUDA, MPS, ...), is a ``ValueError``."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"unknown device {device!r}: not a torch device (use 'cpu', 'cuda' or 'cuda:<index>')") \
            from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {device!r} asked for, but CUDA is not available on this machine")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(f"device {device!r} asked for, but only {torch.cuda.device_count()} CUDA device(s) exist")
    try:
        torch.empty(0, device=dev)
    except (RuntimeError, AssertionError) as e:
        raise ValueError(f"device {device!r} asked for, but this torch cannot use it on this machine "
                         f"({type(e).__name__} creating a tensor there)") from None
    return dev


def seeds_of(seed: Any, num_envs: int) -> list[int]:
    """The B sub-env seeds of ``reset(seed=...)``: ``s`` gives ``s + i`` (Gymnasium's vector convention),
    a list or tuple gives one per sub-env; each is checked as the single env checks its seed (Gymnasium's
    ``np_random``: ``gymnasium.error.Error`` for a float, a string, a bool or a negative number)."""
    if not isinstance(seed, (list, tuple)):
        check_seed(seed)
        return [seed + i for i in range(num_envs)]
    if len(seed) != num_envs:
        raise ValueError(f"seed must be an int or a list of {num_envs} ints, got {len(seed)}")
    for s in seed:
        check_seed(s)
    return [int(s) for s in seed]


def slice_rows(state, start: int, stop: int):
    """Rows ``start:stop`` of a (nested NamedTuple) state, as views."""
    return type(state)(*(slice_rows(f, start, stop) if isinstance(f, tuple) else f[start:stop] for f in state))


def where_rows(mask: Tensor, new, old):
    """The (nested NamedTuple) state whose row i is ``new``'s where ``mask[i]`` (B,) bool, else ``old``'s
    (no host synchronisation, unlike indexing by ``mask.nonzero()``)."""
    fields = []
    for n, o in zip(new, old):
        if isinstance(o, tuple):
            fields.append(where_rows(mask, n, o))
        else:
            fields.append(torch.where(mask.view(-1, *(1,) * (o.dim() - 1)), n, o))
    return type(old)(*fields)


def replace_rows(old, index: Tensor, new):
    """A copy of the (nested NamedTuple) state ``old`` whose rows ``index`` (k,) are ``new``'s k rows."""
    fields = []
    for o, n in zip(old, new):
        if isinstance(o, tuple):
            fields.append(replace_rows(o, index, n))
        else:
            fields.append(o.index_copy(0, index, n))
    return type(old)(*fields)


def advance(problem, prev, actions: Tensor, resetting: Tensor, returns: Tensor, elapsed: Tensor, tours: Tensor,
            ended_invalid: Tensor, *, mode: str, max_episode_steps: int | None):
    """One step of B sub-envs, without automatic resets: the core :func:`~routing_gym.problems.step` and
    the vector env's records, tensors only (no host synchronisation), so that it compiles as one function.

    Args:
        prev: the state; actions: (B,) int64; resetting: (B,) bool, the sub-envs that ``NEXT_STEP`` resets
            after this step (they earn nothing in it).
        returns (B,) float64, elapsed (B,) int64, tours (B, S + 1) int64 and ended_invalid (B,) bool: the
            episodes' records, updated in place: return so far, steps taken (kept with truncation only),
            actions taken (each valid action at its step, padded with -1; the last column takes the
            writes of sub-envs that record nothing) and whether the episode ended on a masked action.
        mode: the autoreset mode's value; max_episode_steps: truncation, or None.

    Returns:
        ``(state, reward, terminated, truncated, final, infos, obs)``: final (B,) bool marks the episodes that
        ended in this step; infos as :meth:`RoutingVectorEnv.step` lays them out, as tensors; obs the new
        state's :func:`observation` where compiled (it fuses into the step's kernel), else None (the caller
        computes it once, after any renewal).
    """
    prev_done = prev.done
    state, reward, invalid = step(problem, prev, actions)
    if mode == AutoresetMode.NEXT_STEP.value:  # the step that resets a sub-env earns it nothing
        reward = torch.where(resetting, 0.0, reward)
    ended = state.done & ~prev_done
    disabled = mode == AutoresetMode.DISABLED.value
    if max_episode_steps is None:  # no truncation: fewer operations per step
        truncated = torch.zeros_like(ended)
        terminated = state.done if disabled else ended
        final = ended
    else:  # the step counter matters only for truncation
        elapsed += ~prev_done
        truncated = ~state.done & (elapsed >= max_episode_steps)
        state = finish(problem, state, truncated)
        terminated = state.done & ~truncated if disabled else ended & ~truncated
        final = ended | truncated
    returns += reward
    column = torch.where(~prev_done & ~invalid, prev.num_steps, tours.shape[1] - 1)
    if for_compiler():  # inductor writes index_put_ in place; an in-place scatter into an input it writes as
        # a copy of the whole (B, S) buffer and a copy back
        tours.index_put_((torch.arange(len(column), device=column.device), column), actions)
    else:  # eager, scatter_ is the faster
        tours.scatter_(1, column[:, None], actions[:, None])
    ended_invalid.logical_or_(invalid)  # (an ATen op, which make_fx can functionalise; |= is not one)
    infos = {"cost": torch.where(final, -returns, 0.0), "_cost": final,
             "invalid_action": invalid & final, "_invalid_action": final,
             "tour": torch.where(final[:, None], tours[:, :-1], -1), "_tour": final}
    return state, reward, terminated, truncated, final, infos, compiled_observation(problem, state)


def reset_states(problem, instance):
    """The problem's reset states of a batch of instances (a function of the problem, as
    :func:`~routing_gym.problems.base.compiled_for_layout` compiles)."""
    return problem.reset(instance)


def gather_rows(state, index: Tensor):
    """The (nested NamedTuple) state's rows ``index`` (k,) int64, as a new state."""
    return type(state)(*(gather_rows(f, index) if isinstance(f, tuple) else f.index_select(0, index) for f in state))


def observation(problem, state) -> dict[str, Tensor]:
    """The observation of a state as the spaces declare it, batched tensors: ``action_mask`` is the state's
    int8 mask itself (no copy; a step makes a new one)."""
    return {**problem.observe(state), "action_mask": state.mask}


def compiled_observation(problem, state) -> dict[str, Tensor] | None:
    """The state's :func:`observation` inside a compiled step (its few small ops fuse into the step's kernel
    rather than run eagerly after it), else None."""
    return observation(problem, state) if for_compiler() else None


def clear_records(rows: Tensor, returns: Tensor, elapsed: Tensor, tours: Tensor, ended_invalid: Tensor) -> None:
    """Start the episode records afresh (return, step count, tour, masked-action flag) for some sub-envs, in
    place: ``rows`` (B,) bool flags them (a fill over every row, without a host synchronisation) or (k,) int64
    lists them (a fill of those k rows only: the CPU's renewal by index)."""
    if rows.dtype == torch.bool:
        returns.masked_fill_(rows, 0.0)
        elapsed.masked_fill_(rows, 0)
        tours.masked_fill_(rows[:, None], -1)
        ended_invalid.masked_fill_(rows, False)
    else:
        for record, fresh in ((returns, 0.0), (elapsed, 0), (tours, -1), (ended_invalid, False)):
            record.index_fill_(0, rows, fresh)


def renew(state, rows: Tensor, pool, pool_next: Tensor):
    """Automatic resets: the sub-envs flagged in ``rows`` (B,) bool take the next fresh states of ``pool``
    in order, from its row ``pool_next`` (a 0-d int64 tensor, advanced in place): tensors only."""
    take = (pool_next + torch.cumsum(rows, 0) - 1).clamp(0, pool.done.shape[0] - 1)
    pool_next += torch.count_nonzero(rows)
    return where_rows(rows, gather_rows(pool, take), state)


def renew_on_host(state, index: Tensor, pool, pool_next: Tensor):
    """:func:`renew`'s new state, made by index where the host may be read (the CPU): the reset rows ``index``
    (k,) int64 (``rows.nonzero()``), then each state tensor copied with those k rows replaced by the pool's next
    k, in place of a ``where`` over every row of every tensor (which, compiled on the CPU, costs more than the copy:
    OP-50 at B = 1024 with 85 resets, 157 µs compiled, its loops vectorised by gcc, against 100 µs this way)."""
    start = int(pool_next)
    pool_next += len(index)
    return replace_rows(state, index, slice_rows(pool, start, start + len(index)))


def listed_rows(rows: Tensor, size: int) -> tuple[int, Tensor | None]:
    """Read on the host (the CPU's renewals): how many rows ``rows`` (B,) bool flags, and where 1 to ``size`` do,
    their indices in order padded to ``size`` by repeating the last, (size,) int64 (else None). numpy's, 3 µs with
    16 of 1,024 rows (1 µs with none), where ``torch.nonzero_static`` in the compiled renewal cost 7 µs."""
    listed = rows.numpy().nonzero()[0]
    count = len(listed)
    if not 0 < count <= size:
        return count, None
    index = np.empty(size, dtype=np.int64)
    index[:count] = listed
    index[count:] = listed[-1]
    return count, torch.from_numpy(index)


def renew_rows(problem, state, rows: Tensor, index: Tensor, pool, pool_next: Tensor, returns: Tensor,
               elapsed: Tensor, tours: Tensor, ended_invalid: Tensor, *, shared: tuple[bool, ...]):
    """The automatic resets of the sub-envs flagged in ``rows`` (B,) bool, listed in ``index`` (K,) int64 padded by
    repeating the last (:func:`listed_rows`; a row written twice with the same values), in a form compiled once for
    the CPU (shapes fixed: :meth:`RoutingVectorEnv._renew_in_place`): their rows of the state take the ``pool``'s
    next rows from ``pool_next`` (advanced in place) and their records start afresh (:func:`clear_records`, in
    place). The state's tensors flagged in ``shared`` (one bool per tensor, in field order: those that something
    given out holds, :func:`shared_tensors`) come as new tensors; the others are written in place. Returns
    ``(state, observation)``."""
    count = rows.sum()
    take = pool_next + torch.arange(len(index), device=rows.device).clamp(max=count - 1)
    pool_next += count
    fields = []
    for s, p, copy in zip(tensors_of(state), tensors_of(pool), shared):
        new = p.index_select(0, take)
        fields.append(s.index_put((index,), new) if copy else s.index_put_((index,), new))
    clear_records(rows, returns, elapsed, tours, ended_invalid)  # (flagged: compiled, a pass over every row that
    # leaves the others unread costs less than a fill of K listed rows, whose bounds checks keep it scalar)
    state = rebuild(state, fields)
    return state, observation(problem, state)


def advance_and_renew_rows(problem, prev, actions: Tensor, resetting: Tensor, index: Tensor, returns: Tensor,
                           elapsed: Tensor, tours: Tensor, ended_invalid: Tensor, pool, pool_next: Tensor, *, mode: str,
                           max_episode_steps: int | None, shared: tuple[bool, ...]):
    """:func:`advance_and_renew` in ``NEXT_STEP`` mode where 1 to K sub-envs reset (``resetting``, known before the
    step; ``index`` lists them, :func:`listed_rows`), as one function for the CPU's compiler
    (:meth:`RoutingVectorEnv._advance_on_cpu`):
    :func:`advance`, then :func:`renew_rows` of those rows. The rows are written into the tensors the step made,
    and into those it passes through unchanged, except those flagged in ``shared`` (one bool per tensor of ``prev``,
    :func:`shared_tensors`: held by the observation given out), which come as copies. Returns
    :func:`advance_and_renew`'s values."""
    state, reward, terminated, truncated, final, infos, _ = advance(
        problem, prev, actions, resetting, returns, elapsed, tours, ended_invalid, mode=mode,
        max_episode_steps=max_episode_steps)
    copy = tuple(held and new is old for held, new, old in zip(shared, tensors_of(state), tensors_of(prev)))
    state, obs = renew_rows(problem, state, resetting, index, pool, pool_next, returns, elapsed, tours, ended_invalid,
                            shared=copy)
    return state, reward, terminated, truncated, final, infos, None, obs


def shared_tensors(state, *given: dict[str, Tensor] | None, among: tuple[int, ...] | None = None) -> tuple[bool, ...]:
    """For each tensor of ``state`` in field order: does it share memory with a tensor of ``given`` (observations
    given out, or None) or with an earlier tensor of the state? Those a renewal copies rather than writes in place
    (:func:`renew_rows`), so that what was given out does not change (an observation holds the state's tensors,
    not copies). ``among``: only the tensors of these indices (in order) are looked at (the others are said not
    to be)."""
    seen = {t.untyped_storage().data_ptr() for obs in given if obs is not None for t in obs.values()}
    tensors = tensors_of(state)
    flags = [False] * len(tensors)
    for i in range(len(tensors)) if among is None else among:
        ptr = tensors[i].untyped_storage().data_ptr()
        flags[i] = ptr in seen
        seen.add(ptr)
    return tuple(flags)


def renewal(problem, state, rows: Tensor, returns: Tensor, elapsed: Tensor, tours: Tensor, ended_invalid: Tensor,
            pool, pool_next: Tensor, *, mode: str, on_host: bool = False):
    """The automatic resets of the sub-envs flagged in ``rows`` (B,) bool: their last observation
    (``SAME_STEP``, else None), their new states (:func:`renew`, or :func:`renew_on_host` with ``on_host``) and
    :func:`clear_records` of their records. Returns ``(state, last, obs)``, obs as :func:`advance` gives it."""
    last = observation(problem, state) if mode == AutoresetMode.SAME_STEP.value else None
    if on_host:  # the reset rows by index: the copies and fills touch those rows only
        rows = rows.nonzero().squeeze(1)
        state = renew_on_host(state, rows, pool, pool_next)
    else:
        state = renew(state, rows, pool, pool_next)
    clear_records(rows, returns, elapsed, tours, ended_invalid)
    return state, last, compiled_observation(problem, state)


def advance_and_renew(problem, prev, actions: Tensor, resetting: Tensor, returns: Tensor, elapsed: Tensor,
                      tours: Tensor, ended_invalid: Tensor, pool, pool_next: Tensor, *, mode: str,
                      max_episode_steps: int | None, on_host: bool, parts=None):
    """One vector-env step with its automatic resets: :func:`advance`, then :func:`renewal` of the sub-envs
    the autoreset mode resets now (``NEXT_STEP``: those in ``resetting``, which ended in the previous step;
    ``SAME_STEP``: those that ended in this one, after their last observation is taken).

    ``on_host``: the host may be read (free on the CPU): the renewal runs only in steps where a sub-env
    resets, and by index (:func:`renew_on_host`). Without it (a GPU) every step renews, with no-op rows, so that
    nothing synchronises. ``parts``: ``(advance, renewal)`` to call instead of the two functions (the compiled
    ``advance``, see :meth:`RoutingVectorEnv._stepper`).

    Returns ``(state, reward, terminated, truncated, final, infos, last, obs)``: :func:`advance`'s values, the
    last observation (``SAME_STEP``, else None) and the new observation where compiled (else None)."""
    advance_fn, renewal_fn = parts or (advance, renewal)
    state, reward, terminated, truncated, final, infos, obs = advance_fn(
        problem, prev, actions, resetting, returns, elapsed, tours, ended_invalid, mode=mode,
        max_episode_steps=max_episode_steps)
    rows = resetting if mode == AutoresetMode.NEXT_STEP.value else final if mode == AutoresetMode.SAME_STEP.value \
        else None
    last = None
    if rows is not None and not (on_host and not bool(rows.any())):
        state, last, obs = renewal_fn(problem, state, rows, returns, elapsed, tours, ended_invalid, pool,
                                      pool_next, mode=mode, on_host=on_host)
    return state, reward, terminated, truncated, final, infos, last, obs


def check_count(value: Any, name: str, optional: bool = False) -> int | None:
    """``value`` as an int if it is a positive integer (or None where ``optional``), else ``ValueError``
    naming the argument."""
    if optional and value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer{' or None' * optional}, got {value!r}")
    return int(value)


def check_autoreset_mode(value: Any) -> AutoresetMode:
    """``value`` as an :class:`AutoresetMode` (the member or its value), else ``ValueError`` naming them."""
    try:
        return AutoresetMode(value)
    except ValueError:
        raise ValueError(f"autoreset_mode must be one of {[m.value for m in AutoresetMode]}, got {value!r}") from None


class RoutingVectorEnv(VectorEnv):
    """B sub-envs of one routing problem, stepped together by its batched core on a torch device (base of
    the vector envs: one subclass per problem unit, :func:`vector_env_class`, and a subclass of that per
    registered size, :func:`~routing_gym.common.sized_classes`).

    Sub-env i behaves as the single env made with the same arguments: its spaces batched, the instance of
    ``reset(seed=s)`` the single env's of ``reset(seed=s + i)``, the same actions checked alike, the same
    rewards, terminations and infos (batched, each with its ``_key`` mask). :meth:`step` says how actions
    are checked, how finished sub-envs reset and what the infos hold; :meth:`reset` how seeds and user
    instances are taken; docs/contract.md ("The vector env") gives the whole contract.

    Args:
        num_envs: B, the number of sub-envs (a positive integer).
        num_nodes: customers (nodes, where the problem has no depot) per instance, default 20; a registered
            size (``routing/TSP-20``) fixes it and refuses another with ``ValueError``, as the single env.
        device: torch device of the state (``"cpu"``, ``"cuda"``, ``"cuda:1"``, a ``torch.device``); one this
            machine lacks is a ``ValueError``.
        autoreset_mode: :class:`gymnasium.vector.AutoresetMode` or its value: ``NEXT_STEP`` (default),
            ``SAME_STEP`` or ``DISABLED`` (:meth:`step`).
        array_type: ``"numpy"`` (Gymnasium's contract, spaces from ``batch_space``) or ``"torch"`` (tensors on
            ``device``, no host round trip; actions may be tensors); both emit what the spaces declare.
        invalid_action: ``"terminate"`` (a masked action ends that sub-env's episode with the single env's
            penalty and ``info["invalid_action"]``) or ``"raise"`` (every action checked: a host synchronisation).
        max_episode_steps: truncation after this many steps of an episode (a positive integer), or None.
        render_mode: None or ``"rgb_array"``: ``render()`` draws one frame per sub-env.
        render_size: ``(width, height)`` of the frames, integers from 64 to 8192 pixels, default ``(600, 600)``.
        compile: ``True`` steps compiled (:meth:`_stepper`): on the CPU :func:`advance` compiled by inductor for
            the layout of the state and records at each reset, and in steps that reset the renewal of those rows
            (where they are at most B / 8, compiled too, with the step in ``NEXT_STEP`` mode:
            :meth:`_advance_on_cpu`);
            elsewhere :func:`advance_and_renew` compiled by ``torch.compile``, whose first step of a shape
            compiles. Results equal the eager step's up to float rounding; needs torch 2.13 or newer, else
            ``RuntimeError``. Default ``False``.
        **variant: the problem's options (its ``variants``); an unknown one raises ``TypeError``.

    A bad argument is a ``ValueError`` naming it. In torch mode on a device other than the CPU, a step in
    ``"terminate"`` mode never reads a tensor on the host (no synchronisation with the device).
    """

    problem: Any = None
    fixed_num_nodes: int | None = None  # the size of a registered sized id; None: any num_nodes

    def __init__(self, num_envs: int = 1, num_nodes: int | None = None, *, device: Any = "cpu",
                 autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP, array_type: str = "numpy",
                 invalid_action: str = "terminate", max_episode_steps: int | None = None,
                 render_mode: str | None = None, render_size: tuple[int, int] = (600, 600), compile: bool = False,
                 **variant: Any):
        self.num_envs = check_count(num_envs, "num_envs")
        if self.problem is None:
            raise TypeError("RoutingVectorEnv is the base class; make one with gym.make_vec('routing/TSP-20', ...)")
        self.num_nodes = resolve_num_nodes(type(self), num_nodes)
        self.n_total = self.problem.num_nodes_total(self.num_nodes)
        self.array_type = check_choice(array_type, "array_type", ARRAY_TYPES)
        self.invalid_action = check_choice(invalid_action, "invalid_action", INVALID_ACTION_MODES)
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        self.render_mode = render_mode
        self.max_episode_steps = check_count(max_episode_steps, "max_episode_steps", optional=True)
        if self.max_episode_steps is not None:  # beyond what an int64 step count reaches: the same as never
            self.max_episode_steps = min(self.max_episode_steps, torch.iinfo(torch.int64).max)
        self.autoreset_mode = check_autoreset_mode(autoreset_mode)  # read by wrappers and TorchRL, as SyncVectorEnv's
        self.device = resolve_device(device)
        self.compile = check_compile(compile)
        # a step may read a tensor on the host (free on the CPU; numpy mode reads anyway); elsewhere the pool
        # of automatic resets is regenerated on a host-side schedule
        self._reads_host = self.device.type == "cpu" or self.array_type == "numpy"
        self.render_size = check_render_size(frame_size(render_size))
        self.metadata = {"autoreset_mode": self.autoreset_mode, "render_modes": ["rgb_array"], "render_fps": 4}
        self._variant = self.problem.check_variant(variant)
        self.single_observation_space = observation_space(self.problem, self.n_total)
        self.single_action_space = gym.spaces.Discrete(self.n_total)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._allocate()
        self._advance = self._stepper()

    def _stepper(self):
        """:func:`advance_and_renew`, and with ``compile`` its compiled form. Off the CPU (no host reads) the
        whole step compiled as one function, which renews every step (no-op rows included) and never
        synchronises. Where a step may read the host (:attr:`_reads_host`), :func:`advance` compiled, then, in
        the steps where a sub-env resets, the renewal of those rows only, which on the CPU costs less than the
        compiled ``where`` over every row (``benchmarks/README.md``, "One thread for every contender"): by index
        (:func:`renew_on_host`: a copy of each state tensor with the reset rows replaced), and on the CPU, for at
        most B / 8 resets, compiled (:meth:`_advance_on_cpu`). On the CPU the functions are compiled for the
        layout of the state and the records (:func:`~routing_gym.problems.base.compiled_for_layout`, called
        without dynamo), so :func:`advance` is made at each reset (None before the first; compiled once per
        layout), the renewals at the first step that needs them."""
        if not self.compile:
            return advance_and_renew
        if not self._reads_host:
            return compiled(advance_and_renew, self.device.type, self.problem)
        if self.device.type != "cpu":
            fn = compiled(advance, self.device.type, self.problem)
        elif self.state is None:
            return None
        else:
            actions = torch.zeros(self.num_envs, dtype=torch.long, device=self.device)
            fn = compiled_for_layout(advance, self.problem, self.state, actions, self._needs_reset, self._return,
                                     self._elapsed, self._tours, self._invalid, mode=self.autoreset_mode.value,
                                     max_episode_steps=self.max_episode_steps)
            self._advance_fn, self._fused, self._write = fn, {}, {}  # the last two made at the first renewal
            self._passed_through = tuple(i for i in range(len(tensors_of(self.state))) if fn.passthrough[i] == i)
            return self._advance_on_cpu
        return functools.partial(advance_and_renew, parts=(fn, renewal))

    def _advance_on_cpu(self, problem, prev, actions: Tensor, resetting: Tensor, returns: Tensor, elapsed: Tensor,
                        tours: Tensor, ended_invalid: Tensor, pool, pool_next: Tensor, *, mode: str,
                        max_episode_steps: int | None, on_host: bool):
        """:func:`advance_and_renew` as the CPU's compiled step makes it. In ``NEXT_STEP`` mode, where 1 to K = B / 8
        (rounded up) sub-envs reset, one function compiled for the layout, :func:`advance_and_renew_rows` (inductor
        told to store every value read more than once rather than recompute it where read: fused, it recomputed the
        step's ``done`` for every node of the mask, ``benchmarks/README.md``). Otherwise :func:`advance` compiled, then
        where sub-envs reset :meth:`_renew_in_place` (``SAME_STEP``'s resets are known only after the step)."""
        resets, index = (listed_rows(resetting, self._renewal_rows) if mode == AutoresetMode.NEXT_STEP.value
                         else (None, None))
        if resets == 0:  # nothing to renew (read once here, not again by advance_and_renew)
            state, reward, terminated, truncated, final, infos, obs = self._advance_fn(
                problem, prev, actions, resetting, returns, elapsed, tours, ended_invalid, mode=mode,
                max_episode_steps=max_episode_steps)
            return state, reward, terminated, truncated, final, infos, None, obs
        if index is None:  # SAME_STEP's resets, counted after the step; or more than K, by index
            renew = self._renew_in_place if resets is None else renewal
            return advance_and_renew(problem, prev, actions, resetting, returns, elapsed, tours, ended_invalid, pool,
                                     pool_next, mode=mode, max_episode_steps=max_episode_steps, on_host=on_host,
                                     parts=(self._advance_fn, renew))
        # (only the tensors that advance passes through unchanged may be written in place while given out: the others
        # the step makes anew)
        shared = shared_tensors(prev, self._given, among=self._passed_through)
        fused = self._fused.get(shared)
        if fused is None:
            from torch._inductor import config as inductor_config  # (loaded already: advance was compiled)
            with inductor_config.patch(realize_reads_threshold=1):
                fused = self._fused[shared] = compiled_for_layout(
                    advance_and_renew_rows, problem, prev, actions, resetting, index, returns, elapsed, tours,
                    ended_invalid, pool, pool_next, mode=mode, max_episode_steps=max_episode_steps, shared=shared)
        return fused(problem, prev, actions, resetting, index, returns, elapsed, tours, ended_invalid, pool, pool_next,
                     mode=mode, max_episode_steps=max_episode_steps, shared=shared)

    def _renew_in_place(self, problem, state, rows: Tensor, returns: Tensor, elapsed: Tensor, tours: Tensor,
                        ended_invalid: Tensor, pool, pool_next: Tensor, *, mode: str, on_host: bool):
        """:func:`renewal` as the CPU's compiled step makes it, where at most K = B / 8 (rounded up) sub-envs reset:
        :func:`renew_rows` compiled once for the layout, which writes in place into the step's state, except the
        tensors that the observation last given out or this step's last observation (``SAME_STEP``) hold
        (:func:`shared_tensors`), which it copies. More resets take :func:`renewal`."""
        index = listed_rows(rows, self._renewal_rows)[1]
        if index is None:
            return renewal(problem, state, rows, returns, elapsed, tours, ended_invalid, pool, pool_next, mode=mode,
                           on_host=on_host)
        last = observation(problem, state) if mode == AutoresetMode.SAME_STEP.value else None
        shared = shared_tensors(state, self._given, last)
        write = self._write.get(shared)
        if write is None:
            write = self._write[shared] = compiled_for_layout(renew_rows, problem, state, rows, index, pool,
                                                              pool_next, returns, elapsed, tours, ended_invalid,
                                                              shared=shared)
        state, obs = write(problem, state, rows, index, pool, pool_next, returns, elapsed, tours, ended_invalid,
                           shared=shared)
        return state, last, obs

    def _allocate(self) -> None:
        """The records the env keeps per sub-env on the device, the generator of automatic resets and
        their pool (:meth:`_refill`); no state until :meth:`reset`."""
        b, dev = self.num_envs, self.device
        self.state = None
        self._generator = torch.Generator(device=dev)
        self._generator.seed()
        self._return = torch.zeros(b, dtype=torch.float64, device=dev)
        self._elapsed = torch.zeros(b, dtype=torch.long, device=dev)
        self._needs_reset = torch.zeros(b, dtype=torch.bool, device=dev)
        self._invalid = torch.zeros(b, dtype=torch.bool, device=dev)  # ended on a masked action
        # the actions of each episode (info["tour"]), padded with -1; the last column takes the writes of
        # sub-envs that record nothing in a step
        self._tours = torch.full((b, self.problem.max_steps(self.n_total) + 1), -1, dtype=torch.long, device=dev)
        self._viewer = None
        # the CPU's compiled step (:meth:`_stepper`): advance, and steps with renewals by shared tensors
        self._advance_fn, self._fused, self._write = None, {}, {}
        self._renewal_rows = -(-b // 8)  # K: the most resets in a step that the CPU's compiled renewal takes
        self._given = None  # the observation last given out (:meth:`_observation`)
        self._pool = None  # fresh states for automatic resets (:meth:`_refill`), taken in order from _pool_next
        self._pool_next = torch.zeros((), dtype=torch.long, device=dev)
        self._autoreset_steps = 0

    # -- instances ---------------------------------------------------------------------------------
    def _fresh(self, count: int, seeds: list[int] | None, instances, *, pool: bool = False):
        """Reset states for ``count`` sub-envs: from user instances, per-env seeds (a single env's
        stream, generated on the CPU) or the batched generator on the device. ``pool``: the states of
        :meth:`_refill`'s pool, whose layout never changes: with ``compile`` on the CPU their reset is compiled
        (once, :func:`~routing_gym.problems.base.compiled_for_layout`; OP-50's 4,096: 1.2-2 ms eager); the
        instances are generated eagerly either way (torch's generator, as without ``compile``)."""
        if instances is None and seeds is not None:
            parts = [self.problem.generate(1, self.num_nodes, generator=seeded_generator(seeding.np_random(s)[0]),
                                           **self._variant) for s in seeds]
            instances = type(parts[0])(*(torch.cat(f).to(self.device) for f in zip(*parts)))
        elif instances is None:
            instances = self.problem.generate(count, self.num_nodes, generator=self._generator, **self._variant)
        if pool and self.compile and self.device.type == "cpu":
            return row_major_state(compiled_for_layout(reset_states, self.problem, instances)(self.problem, instances))
        return self.problem.reset(instances)

    def _user_instances(self, data):
        inst = self.problem.instance_from(data, batched=True, device=self.device)  # a dict or an Instance, alike
        first = inst[0]  # the batch first, N second (``locs``, or a unit's first field)
        if first.shape[0] != self.num_envs or self.problem.n_total_of(inst) != self.n_total:
            want = (self.num_envs, self.n_total, *first.shape[2:])
            raise ValueError(f"instances field '{inst._fields[0]}' must have shape {want}, got {tuple(first.shape)}")
        return inst

    # -- Gymnasium API -----------------------------------------------------------------------------
    def reset(self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None):
        """Reset all sub-envs, or those in ``options["reset_mask"]`` (B,) bool.

        Args:
            seed: an int (sub-env i seeded with ``seed + i``, as Gymnasium's vector envs do: its instance is
                a single env's of ``reset(seed=seed + i)``, generated on the CPU, then moved) or a list of B
                ints; checked as the single env's seed (``gymnasium.error.Error`` for a float, a string, a
                bool or a negative number). Later automatic resets draw from one batched generator on
                ``device`` seeded from the first seed, so they differ from a single env's.
            options: ``reset_mask`` (B,) bool, numpy or tensor; ``instances``: a batch of B user instances
                (a dict of arrays keyed as the observation with a leading B axis, or the problem's
                ``Instance`` of tensors, both validated alike), of which the reset rows are used.
        """
        options = dict(options or {})
        reset_mask = options.pop("reset_mask", None)
        data = options.pop("instances", None)
        if options:
            raise ValueError(f"unknown reset option(s) {sorted(options)}; known: 'reset_mask', 'instances'")
        seeds = None
        if seed is not None:
            seeds = seeds_of(seed, self.num_envs)
            self._generator.manual_seed(seeds[0] % 2**64)  # torch takes seeds below 2**64
            self._pool, self._autoreset_steps = None, 0  # automatic resets restart from the new seed
        if reset_mask is None:
            chosen = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
        else:
            m = reset_mask.detach() if isinstance(reset_mask, Tensor) else torch.as_tensor(native_array(reset_mask))
            if m.shape != (self.num_envs,) or m.dtype != torch.bool:
                raise ValueError(f"reset_mask must be a bool array of shape ({self.num_envs},), "
                                 f"got {m.dtype} {tuple(m.shape)}")
            chosen = m.to(self.device)
        rows = chosen.nonzero().flatten()
        if self.state is None and len(rows) != self.num_envs:
            raise ValueError("the first reset must reset every sub-env (no reset_mask, or an all-True one)")
        if len(rows) == 0:  # nothing to reset (the seed, if any, still restarts the automatic resets)
            return self._observation(), {}
        instances = None
        if data is not None:
            full = self._user_instances(data)
            instances = type(full)(*(f[rows] for f in full))
        picked = None if seeds is None else [seeds[i] for i in rows.tolist()]
        fresh = self._fresh(len(rows), picked, instances)
        self.state = fresh if len(rows) == self.num_envs else replace_rows(self.state, rows, fresh)
        if self.compile and self.device.type == "cpu":  # the layout the compiled step is made for
            self.state = row_major_state(self.state)
            self._advance = self._stepper()
        self._needs_reset.masked_fill_(chosen, False)
        clear_records(rows, self._return, self._elapsed, self._tours, self._invalid)
        return self._observation(), {}

    def step(self, actions):
        """Step every sub-env with ``actions`` (B,) node indices: a numpy array (or what ``np.asarray`` takes)
        or a tensor. Returns ``(obs, reward, terminated, truncated, info)``, batched.

        Actions: an integer dtype of shape (B,), else ``ValueError`` (bools, floats, even whole-valued,
        and complex numbers are refused). numpy actions are range-checked on the host as the single env's
        (``ValueError`` outside ``Discrete(N)``); a tensor's range is checked on the device by the core's
        :func:`~routing_gym.problems.step`, where an index outside 0..N-1 is a masked action. A finished
        sub-env ignores its action, whatever its value.

        Autoreset: ``NEXT_STEP`` resets a finished sub-env in the next step (its action ignored);
        ``SAME_STEP`` within this step; ``DISABLED`` leaves it finished (its mask allows only the no-op
        node, it reports done and reward 0) until ``reset(options={"reset_mask": m})``. Off the CPU in
        torch mode the fresh states come from a standby pool (:meth:`_refill`), so no step reads the host.

        Infos: in a step where episodes end, the single env's keys batched, each with its ``_key`` mask
        (true where an episode ended: done, masked action or truncation): ``cost`` (B,) float64,
        ``invalid_action`` (B,) bool, ``tour`` (B, S) int64 padded with -1. numpy mode gives them only in
        steps where an episode ended (as ``SyncVectorEnv``); torch mode as tensors in every step. With
        ``SAME_STEP`` they lie under ``info["final_info"]`` beside ``info["final_obs"]``: in numpy mode
        Gymnasium's (B,) object array of last observations (None in other rows), in torch mode one dict
        of batched tensors whose rows marked by ``_final_obs`` hold them (docs/contract.md).
        """
        if self.state is None:
            raise RuntimeError("call reset() before step()")
        a = self._as_actions(actions)
        mode = self.autoreset_mode
        if self.invalid_action == "raise":
            self._check_allowed(a)
        resetting = self._needs_reset
        self._refill()
        state, reward, terminated, truncated, final, infos, last, obs = self._advance(
            self.problem, self.state, a, resetting, self._return, self._elapsed, self._tours, self._invalid,
            self._pool, self._pool_next, mode=mode.value, max_episode_steps=self.max_episode_steps,
            on_host=self._reads_host)
        self.state = state
        if mode == AutoresetMode.NEXT_STEP:
            self._needs_reset = final
        if self.array_type == "numpy":
            infos = {key: value.cpu().numpy() for key, value in infos.items()} if bool(final.any()) else {}
        if last is not None and (not self._reads_host or bool(final.any())):
            if self.array_type == "numpy":
                finals = np.full(self.num_envs, None, dtype=object)
                for i in final.nonzero().flatten().tolist():
                    finals[i] = {k: v[i].cpu().numpy().copy() for k, v in last.items()}
                infos = {"final_obs": finals, "_final_obs": final.cpu().numpy(),
                         "final_info": infos, "_final_info": final.cpu().numpy()}
            else:
                infos = {"final_obs": last, "_final_obs": final, "final_info": infos, "_final_info": final}
        return self._observation(obs), *self._out(reward, terminated, truncated), infos

    def _refill(self) -> None:
        """Keep fresh states ready for this step's automatic resets (at most B). Reading the host (the CPU,
        or numpy mode), a pool of 4 B states is generated anew when fewer are left than this step may take
        (``NEXT_STEP``: the sub-envs that reset in it, so that few of the pool's states go unused; ``SAME_STEP``:
        B); without reading it, a pool of B states is generated anew every second step (``NEXT_STEP``: a sub-env
        resets at most once in two steps) or every step (``SAME_STEP``), so that no state is used twice."""
        if self.autoreset_mode == AutoresetMode.DISABLED:
            return
        if self._reads_host:
            size = 4 * self.num_envs
            left = size - int(self._pool_next)
            if self._pool is not None and (left >= self.num_envs or self.autoreset_mode == AutoresetMode.NEXT_STEP
                                           and left >= int(torch.count_nonzero(self._needs_reset))):
                return
        else:
            size = self.num_envs
            period = 2 if self.autoreset_mode == AutoresetMode.NEXT_STEP else 1
            self._autoreset_steps += 1
            if self._pool is not None and (self._autoreset_steps - 1) % period:
                return
        self._pool = self._fresh(size, None, None, pool=True)
        self._pool_next.zero_()

    def _as_actions(self, actions) -> Tensor:
        """The (B,) int64 actions on the device, checked as :meth:`step` says: dtype and shape
        always, the range of numpy actions on the host (no host synchronisation either way)."""
        if isinstance(actions, Tensor):
            if (actions.dtype == torch.int64 and actions.device == self.device and actions.shape == (self.num_envs,)
                    and actions.is_contiguous()):  # already as the step takes them (a policy's argmax, a sample)
                return actions.detach() if actions.requires_grad else actions
            actions = actions.detach()
            integer = not (actions.dtype == torch.bool or actions.is_floating_point() or actions.is_complex())
        else:
            actions = native_array(actions)
            integer = np.issubdtype(actions.dtype, np.integer)
        if not integer:
            raise ValueError(f"actions must be node indices (integers), got dtype {actions.dtype}")
        if tuple(actions.shape) != (self.num_envs,):
            raise ValueError(f"actions must have shape ({self.num_envs},), got {tuple(actions.shape)}")
        if isinstance(actions, np.ndarray):
            outside = (actions < 0) | (actions >= self.n_total)
            if outside.any():
                self._refuse(int(np.flatnonzero(outside)[0]), actions)
        return torch.as_tensor(actions, device=self.device).long().contiguous()  # the compiled step's layout

    def _check_allowed(self, a: Tensor) -> None:
        """``invalid_action="raise"``: ``ValueError`` naming the first unfinished sub-env whose action is
        outside the nodes or masked (one host synchronisation)."""
        refused = ~(is_allowed(self.state, a) | self.state.done | self._needs_reset)
        if bool(refused.any()):
            self._refuse(int(refused.nonzero()[0]), a)

    def _refuse(self, i: int, actions) -> None:
        """Raise the single env's ``ValueError`` for sub-env i's action (outside the nodes, or masked)."""
        a, n = int(actions[i]), self.n_total
        if not 0 <= a < n:
            raise ValueError(f"sub-env {i}: action {a} is outside Discrete({n}) (node indices 0..{n - 1})")
        raise ValueError(f"sub-env {i}: action {a} is masked; allowed actions: "
                         f"{self.state.mask[i].nonzero().flatten().tolist()}")

    def _out(self, reward: Tensor, terminated: Tensor, truncated: Tensor):
        if self.array_type == "torch":
            return reward, terminated, truncated
        return reward.double().cpu().numpy(), terminated.cpu().numpy(), truncated.cpu().numpy()

    def _observation(self, obs: dict | None = None) -> dict:
        """The observation as the spaces declare it (``action_mask`` int8), tensors or numpy copies: ``obs``
        where the compiled step computed it, else the state's."""
        obs = observation(self.problem, self.state) if obs is None else obs
        self._given = obs  # the tensors the CPU's compiled renewal must not write (:meth:`_renew_in_place`)
        if self.array_type == "torch":
            return obs
        return {key: value.cpu().numpy().copy() for key, value in obs.items()}

    def action_masks(self):
        """The current masks (B, N) as bools (numpy, or a tensor in torch mode)."""
        if self.state is None:
            raise RuntimeError("call reset() before action_masks()")
        return flags(self.state.mask) if self.array_type == "torch" else self.state.mask.cpu().numpy().astype(bool)

    def render(self) -> tuple[np.ndarray, ...] | None:
        """One (H, W, 3) uint8 frame per sub-env, as a tuple (what ``SyncVectorEnv`` gives and Gymnasium's
        vector ``RecordVideo`` and ``HumanRendering`` tile), for ``render_mode="rgb_array"``."""
        if self.render_mode is None:
            gym.logger.warn("render() called without render_mode; make the vector env with render_mode='rgb_array'")
            return None
        if self.state is None:
            raise gym.error.ResetNeeded("call reset() before render()")
        from .render import Viewer

        if self._viewer is None:
            self._viewer = Viewer(self.problem, render_mode="rgb_array", fps=self.metadata["render_fps"],
                                  size=self.render_size)
        tours = self._tours[:, :-1].cpu().numpy()
        costs, invalid = (-self._return).tolist(), self._invalid.tolist()
        return tuple(self._viewer.draw(slice_rows(self.state, i, i + 1), tours[i][tours[i] >= 0].tolist(), costs[i],
                                       invalid=invalid[i]) for i in range(self.num_envs))

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple:
        """Gymnasium's ``VectorEnv.call``: one result per sub-env. ``name`` is an attribute or method of this
        env (``call("action_masks")`` gives B masks of shape (N,)); a batched result (leading axis B) is
        split into its rows, any other result is repeated for each sub-env."""
        value = getattr(self, name)
        if callable(value):
            value = value(*args, **kwargs)
        if isinstance(value, (np.ndarray, Tensor)) and value.ndim and value.shape[0] == self.num_envs:
            return tuple(value[i] for i in range(self.num_envs))
        return tuple(value for _ in range(self.num_envs))

    def get_attr(self, name: str) -> tuple:
        """Gymnasium's ``VectorEnv.get_attr``: the attribute ``name`` per sub-env (as :meth:`call`)."""
        return self.call(name)

    def close_extras(self, **kwargs):
        if self._viewer is not None:
            self._viewer.close()
            self._viewer = None

    def __getstate__(self):
        """Pickled without the compiled step and the frame renderer (made anew when unpickled); the
        generator of automatic resets as its state."""
        return {**self.__dict__, "_advance": None, "_advance_fn": None, "_fused": {}, "_write": {}, "_given": None,
                "_viewer": None, "_generator": self._generator.get_state()}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._generator = torch.Generator(device=self.device)
        self._generator.set_state(state["_generator"])
        self._advance = self._stepper()


def vector_env_class(problem) -> type[RoutingVectorEnv]:
    """The vector-env class of a problem unit (``TSPVectorEnv``, ...): :class:`RoutingVectorEnv` with
    ``problem`` set."""
    doc = (f"Vectorised :class:`routing_gym.env.{problem.label}Env`: B sub-envs of {problem.label} over the batched "
           f"core; arguments as :class:`RoutingVectorEnv`" + (f", plus {', '.join(f'``{k}``' for k in problem.variants)}"
                                                               if problem.variants else "") + ".")
    return type(f"{problem.label}VectorEnv", (RoutingVectorEnv,), {"problem": problem, "__doc__": doc,
                                                                    "__module__": __name__})


VECTOR_ENV_CLASSES: dict[str, type[RoutingVectorEnv]] = {name: vector_env_class(p) for name, p in PROBLEMS.items()}
SIZED_VECTOR_ENV_CLASSES: dict[str, type[RoutingVectorEnv]] = sized_classes(VECTOR_ENV_CLASSES)
# importable by name (entry points)
globals().update({cls.__name__: cls for cls in (*VECTOR_ENV_CLASSES.values(), *SIZED_VECTOR_ENV_CLASSES.values())})
