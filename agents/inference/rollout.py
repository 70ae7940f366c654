"""Rolling a policy out on the native vector env (DISABLED autoreset, torch mode): greedy and sampling.

A policy here is one of the protocol of :mod:`agents.policies.protocol` (``precompute(obs) -> cache``,
``log_probs(cache, obs) -> (log_probs, cache)``). :func:`replay` checks tours against the problem's
dynamics without raising, for the searches and references that keep the feasible ones.
"""
from __future__ import annotations

import contextlib
from typing import Any, NamedTuple

import gymnasium as gym
from gymnasium.vector import AutoresetMode
import torch
from torch import Tensor

from routing_gym.problems import get_problem
from routing_gym.problems.base import replay as core_replay

from ..policies.protocol import Policy, batch_observation, select_rows

STRATEGIES = ("greedy", "sample")
SYNC_EVERY = 8  # decoding steps between checks whether every episode has ended


class EndWatch:
    """Tells a decoding loop, at its checks (every :data:`SYNC_EVERY` steps), whether every episode has ended.

    Reading ``terminated.all()`` makes the host wait for the device. On the CPU that costs nothing and the
    flag is read at once. On CUDA (or with ``deferred=True``) the flag is instead copied to pinned host
    memory without blocking, and read at the *next* check once that copy has landed (a CUDA event): the
    host never waits inside the loop, and the loop runs at most two checks' worth of no-op steps past
    the end (finished episodes only take their no-op action, which adds nothing).
    """

    def __init__(self, device: torch.device, deferred: bool | None = None):
        self.cuda = device.type == "cuda"
        self.deferred = self.cuda if deferred is None else deferred
        self.flag = torch.zeros((), dtype=torch.bool, pin_memory=self.cuda and self.deferred)
        self.landed = None  # () -> bool: has the last copy arrived? None before the first check

    def all_ended(self, terminated: Tensor) -> bool:
        if not self.deferred:
            return bool(terminated.all())
        ended = self.landed is not None and self.landed() and bool(self.flag)
        self.flag.copy_(terminated.all(), non_blocking=self.cuda)
        if self.cuda:
            event = torch.cuda.Event()
            event.record()
            self.landed = event.query
        else:
            self.landed = lambda: True
        return ended


class Rollout(NamedTuple):
    cost: Tensor  # (B,) float32 cost of each finished episode (the quantity minimised)
    log_likelihood: Tensor  # (B,) float32 sum over steps of the chosen actions' log-probabilities
    actions: Tensor  # (B, S) int64 actions in order, finished episodes padded with their no-op node


def make_env(problem: str, num_nodes: int, batch_size: int, device: Any = "cpu", **variant: Any):
    """The vector env a rollout steps: ``batch_size`` sub-envs, torch arrays, no autoreset."""
    env_id = f"routing/{problem.upper()}-v0"
    return gym.make_vec(env_id, num_envs=batch_size, vectorization_mode="vector_entry_point", num_nodes=num_nodes,
                        device=device, array_type="torch", autoreset_mode=AutoresetMode.DISABLED, **variant)


def rollout(policy: Policy, env, instances, *, strategy: str = "greedy", generator: torch.Generator | None = None,
            first_actions: Tensor | None = None, deferred_end: bool | None = None, repeats: int = 1,
            temperature: float = 1.0) -> Rollout:
    """Decode one episode for each of the env's B instances.

    Args:
        policy: a policy of the protocol (:class:`agents.policies.protocol.Policy`).
        env: a :class:`routing_gym.vector.RoutingVectorEnv` made by :func:`make_env` (B sub-envs).
        instances: the problem's ``Instance`` of B instances (tensors), or a dict of arrays.
        strategy: ``"greedy"`` (argmax) or ``"sample"`` (from the policy's distribution).
        generator: torch generator for sampling, on the env's device.
        first_actions: (B,) int64 forced first actions (multi-start decoding and POMO's shared
            baseline), on the env's device, taken where the first mask allows them (else the policy
            chooses); forced actions' log-probabilities are not counted in ``log_likelihood``.
        deferred_end: how the loop learns that every episode has ended (:class:`EndWatch`): ``None``
            (default) reads it without waiting for the device on CUDA and at once on the CPU.
        temperature: with ``"sample"``, actions are drawn from the softmax of the log-probabilities
            divided by it (below 1 sharper, above 1 flatter); ``log_likelihood`` stays the policy's own.
        repeats: the instances come in runs of ``repeats`` equal rows (POMO's starts of one instance):
            the policy encodes each instance once and shares the encoding within its run.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
    if not 0 < temperature < float("inf"):
        raise ValueError(f"temperature must be a finite number > 0, got {temperature!r}")
    env = env.unwrapped if hasattr(env, "unwrapped") else env
    obs, _ = env.reset(options={"instances": instances})
    b = env.num_envs
    if repeats > 1:
        if b % repeats:
            raise ValueError(f"{b} sub-envs are not runs of {repeats} equal instances")
        unique = torch.arange(0, b, repeats, device=env.device)
        shared = torch.arange(b // repeats, device=env.device).repeat_interleave(repeats)
        cache = select_rows(policy.precompute(select_rows(obs, unique)), shared)
    else:
        cache = policy.precompute(obs)
    cost = torch.zeros(b, device=env.device)
    log_likelihood = torch.zeros(b, device=env.device)
    actions = []
    max_steps = int(env.single_observation_space["num_steps"].high[0])
    n_total = env.n_total
    watch = EndWatch(env.device, deferred_end)
    # with gradients, a policy that scores recorded steps in one pass decodes without them and is scored after
    parallel = torch.is_grad_enabled() and getattr(policy, "parallel_steps", False)
    first_obs, steps, counts = obs, [], []
    with torch.no_grad() if parallel else contextlib.nullcontext():
        for t in range(max_steps):
            logp, cache = policy.log_probs(cache, obs)
            if strategy == "greedy":
                a = logp.argmax(dim=-1)
            else:
                p = logp.exp() if temperature == 1.0 else torch.softmax(logp / temperature, dim=-1)
                a = torch.multinomial(p, 1, generator=generator).squeeze(1)
            counted = ~env.state.done
            if t == 0 and first_actions is not None:  # forced where allowed (an OP node may be out of reach)
                forced = obs["action_mask"].gather(1, first_actions[:, None]).squeeze(1).bool()
                a = torch.where(forced, first_actions, a)
                counted = counted & ~forced
            if parallel:
                steps.append({k: obs[k] for k in policy.step_keys})
                counts.append(counted)
            else:
                log_likelihood = log_likelihood + torch.where(counted, logp.gather(1, a[:, None]).squeeze(1), 0.0)
            obs, reward, terminated, _, _ = env.step(a)
            cost = cost - reward
            actions.append(a)
            # checked every SYNC_EVERY steps (and at N, when every TSP tour ends); steps past an episode's
            # end are no-ops that add nothing
            if ((t + 1) % SYNC_EVERY == 0 or t + 1 == n_total) and watch.all_ended(terminated):
                break
    if not bool(env.state.done.all()):
        raise RuntimeError(f"rollout did not finish within {max_steps} steps")
    actions = torch.stack(actions, dim=1)
    if parallel:
        log_likelihood = episode_log_likelihood(policy, cache, first_obs, steps, actions, torch.stack(counts, dim=1))
    return Rollout(cost=cost, log_likelihood=log_likelihood, actions=actions)


def episode_log_likelihood(policy, cache, obs: dict[str, Tensor], steps: list[dict[str, Tensor]], actions: Tensor,
                           counted: Tensor) -> Tensor:
    """Sum over the counted steps of the chosen actions' log-probabilities (B,), scored in one pass
    (``policy.log_probs_steps``) from each step's observation values ``steps`` (the policy's ``step_keys``),
    the actions (B, T) and which steps count (B, T) bool. Steps after the last counted one are left out, so
    that trailing no-op steps change nothing (one host read)."""
    used = torch.arange(1, counted.shape[1] + 1, device=counted.device)[counted.any(dim=0)]
    t = max(1, int(used.max()) if used.numel() else 0)
    stacked = {k: torch.stack([s[k] for s in steps[:t]], dim=1) for k in policy.step_keys}  # (B, t, ...)
    logp = policy.log_probs_steps(cache, obs, stacked)  # (B, t, N)
    return torch.where(counted[:, :t], logp.gather(2, actions[:, :t, None]).squeeze(2), 0.0).sum(dim=1)


def env_policy(policy, name: str, *, deterministic: bool = True, generator: torch.Generator | None = None):
    """``policy(env, obs) -> int`` acting in a single Gymnasium env, from a policy of the protocol (a
    heuristic or a network; networks are put in evaluation mode)."""
    if hasattr(policy, "eval"):
        policy.eval()

    memory = {"state": None}

    @torch.no_grad()
    def act(env, obs) -> int:
        if hasattr(policy, "predict"):  # the networks; recurrent ones carry their state between calls
            action, memory["state"] = policy.predict(obs, memory["state"], deterministic=deterministic,
                                                     generator=generator)
            return int(action)
        x = batch_observation(obs, device=getattr(policy, "device", None))
        logp = policy.log_probs(policy.precompute(x), x)[0][0]  # (N,): the log-probabilities of the one row
        if deterministic:
            return int(logp.argmax())
        return int(torch.multinomial(logp.exp(), 1, generator=generator))

    act.name = name
    return act


@torch.no_grad()
def evaluate(policy: Policy, problem: str, instances, *, batch_size: int = 1000, strategy: str = "greedy",
             device: Any = "cpu", generator: torch.Generator | None = None, **variant: Any) -> Tensor:
    """Costs (B,) of a policy on a batch of instances (an ``Instance`` of tensors), in chunks. A network
    is evaluated in evaluation mode (batch-norm running statistics) and its mode restored after."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    total = instances[0].shape[0]
    num_nodes = get_problem(problem).size_of(instances)
    was_training = getattr(policy, "training", False)
    if hasattr(policy, "eval"):
        policy.eval()
    costs, env = [], None
    try:
        for start in range(0, total, batch_size):
            chunk = select_rows(instances, slice(start, start + batch_size))
            chunk = type(chunk)(*(f.to(device) for f in chunk))
            if env is None or env.num_envs != chunk[0].shape[0]:
                env = make_env(problem, num_nodes, chunk[0].shape[0], device, **variant)
            costs.append(rollout(policy, env, chunk, strategy=strategy, generator=generator).cost)
    finally:
        if was_training:
            policy.train()
    return torch.cat(costs)


@torch.no_grad()
def replay(problem, instances, tours: Tensor) -> tuple[Tensor, Tensor]:
    """``(cost (B,), feasible (B,) bool)`` of tours without raising: the core's
    :func:`routing_gym.problems.base.replay` (the loop :func:`~routing_gym.problems.tour_cost` validates
    with), without the step of the first masked action."""
    cost, feasible, _ = core_replay(problem, instances, tours)
    return cost, feasible

