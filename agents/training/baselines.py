"""The REINFORCE trainer's baselines, one class each, registered by name in :data:`BASELINES` (which
``TrainConfig.baseline`` and the CLI's ``--baseline`` choices read).

A baseline ``b`` is subtracted from each sampled cost in the loss ``mean((cost - b) * log_likelihood)``:
it lowers the variance of the gradient without biasing it, as long as no gradient of the policy flows
through it.

- :class:`RolloutBaseline` (``rollout``, Kool, van Hoof & Welling 2019, the default): the greedy cost of
  a frozen copy of the policy, replaced at an epoch's end when the policy is better on the baseline's
  evaluation set by a one-sided paired t-test; during the first ``warmup_epochs`` epochs an
  :class:`ExponentialBaseline` stands in for it (Kool et al.'s warm-up).
- :class:`ExponentialBaseline` (``exponential``): a moving average of the batch's mean cost, ``exp_beta``.
- :class:`POMOBaseline` (``pomo``, Kwon et al. 2020): every instance is sampled once from every start
  node, and the mean cost of an instance's rollouts is their shared baseline.
- :class:`CriticBaseline` (``critic``, Bello et al. 2017): :class:`agents.policies.critic.Critic`
  predicts the cost from the instance and is fitted to the sampled costs by mean squared error, with its
  own Adam (``critic_lr``).

The interface (:class:`Baseline`), in the order the training loop (:mod:`agents.training.reinforce`)
calls it:

- ``Baseline(trainer)``: built from the trainer, whose resources it reads (:class:`TrainerView`, which
  :class:`~agents.training.reinforce.Trainer` satisfies). Nothing is drawn or evaluated yet.
- ``initialize()``: the state of a fresh run (the rollout baseline freezes the initial policy and
  evaluates it on a fresh evaluation set). A resumed run calls ``load_state_dict`` instead.
- ``rollouts_per_instance`` and ``prepare(instances) -> (rollouts, first_actions)``: what the policy
  samples for a batch of B instances: ``B * rollouts_per_instance`` instances (the trainer's vector env
  has that many sub-envs) and their forced first actions, or ``None``; ``equal_rows``: they come in runs
  of that many equal instances, which the policy encodes once. By default the batch as it is; POMO
  repeats each instance (or each of its symmetric copies) once per start node.
- ``values(instances, cost) -> Tensor``: the baseline of each sampled cost (``cost``'s shape, no
  gradient), for the batch of B ``instances`` that ``prepare`` expanded. A baseline that learns from the
  batch learns here (the moving average takes in the batch's mean before it is used; the critic takes
  one Adam step).
- ``epoch_end() -> dict``: after an epoch's last step, before the validation: the metrics row's
  ``baseline_p`` and ``baseline_replaced`` (NaN and 0 where nothing is tested).
- ``end_rows() -> int``: the most instances ``epoch_end`` decodes greedily (0 by default), whose time the
  trainer sets aside within a ``max_minutes`` budget.
- ``state_dict() -> dict`` / ``load_state_dict(state)``: everything an exact resume needs, as tensors,
  numbers, strings, lists and dicts (a checkpoint loads with ``weights_only=True``); stored as the
  trainer checkpoint's ``baseline`` entry. :func:`legacy_baseline_state` reads the layout of checkpoints
  written before the baselines were classes.

Under ``torch.distributed`` every rank holds its own baseline: the moving average is of the global
batch's mean cost, the rollout baseline's evaluation set is shared and its t-test sees every rank's
costs, and the critic is wrapped in DDP, so that all ranks take the same decisions.
"""
from __future__ import annotations

import copy
from typing import Any, ContextManager, Protocol

import torch
from torch import Tensor, nn
from torch import distributed as dist
from torch.nn.parallel import DistributedDataParallel

from ..inference.search import augment
from ..policies.critic import Critic, CriticConfig
from ..policies.protocol import select_rows
from .distributed import gather_costs


class TrainerView(Protocol):
    """What a baseline reads of the trainer that builds it."""

    cfg: Any  # the run's TrainConfig
    problem: Any  # the problem unit (routing_gym.problems)
    device: torch.device
    policy: nn.Module
    world_size: int
    epoch: int  # the epoch being trained (0-based)
    eval_generator: torch.Generator  # the random stream shared by all ranks

    def greedy_costs(self, policy, instances, *, sharded: bool = False) -> Tensor:
        """(B,) greedy costs of ``instances``; ``sharded``: decoded in slices across ranks, gathered."""

    def autocast(self) -> ContextManager:
        """The forward passes' autocast context."""


def paired_t_test_better(candidate: Tensor, baseline: Tensor, alpha: float) -> tuple[bool, float]:
    """Is ``candidate`` (costs, lower is better) better than ``baseline`` on the same instances?

    One-sided paired t-test: returns (mean candidate < mean baseline and p < alpha, p).
    """
    from scipy import stats  # here: the registry is read by the CLI's parser, which needs no scipy

    c, b = candidate.double().cpu().numpy(), baseline.double().cpu().numpy()
    if c.mean() >= b.mean():
        return False, 1.0
    t, p_two_sided = stats.ttest_rel(c, b)
    p = float(p_two_sided) / 2
    return bool(p < alpha), p


class Baseline:
    """The interface of the trainer's baselines (see the module docstring); the defaults are those of a
    baseline that changes nothing in the rollouts, tests nothing at an epoch's end and holds no state."""

    rollouts_per_instance: int = 1
    equal_rows: int = 1  # prepare's rows come in runs of this many equal instances (encoded once)

    def __init__(self, trainer: TrainerView):
        self.trainer = trainer

    def initialize(self) -> None:
        """Set up the state of a fresh run (a resumed run loads its state instead)."""

    def prepare(self, instances) -> tuple[Any, Tensor | None]:
        """(the instances the policy samples, their forced first actions or None) for a batch."""
        return instances, None

    def values(self, instances, cost: Tensor) -> Tensor:
        """The baseline of each sampled cost of the batch ``instances`` (no gradient)."""
        raise NotImplementedError

    def epoch_end(self) -> dict:
        """Metrics of the end-of-epoch update: ``baseline_p`` and ``baseline_replaced``."""
        return {"baseline_p": float("nan"), "baseline_replaced": 0}

    def end_rows(self) -> int:
        """The most instances :meth:`epoch_end` decodes greedily."""
        return 0

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        if state:
            raise ValueError(f"the {type(self).__name__} holds no state, but got {sorted(state)}")


class ExponentialBaseline(Baseline):
    """A moving average of the batch's mean cost: ``v <- beta * v + (1 - beta) * mean(cost)``, started at
    the first batch's mean; the new value is the baseline of that batch."""

    def __init__(self, trainer: TrainerView | None = None, *, beta: float | None = None):
        """``beta``: the decay, by default the trainer's ``exp_beta`` (one of the two must be given)."""
        super().__init__(trainer)
        self.beta = trainer.cfg.exp_beta if beta is None else beta
        self.value: float | None = None

    def values(self, instances, cost: Tensor) -> Tensor:
        mean = float(gather_costs(cost.mean()[None]).mean())
        self.value = mean if self.value is None else self.beta * self.value + (1 - self.beta) * mean
        return torch.full_like(cost, self.value)

    def state_dict(self) -> dict:
        return {"value": self.value}

    def load_state_dict(self, state: dict) -> None:
        self.value = state["value"]


class RolloutBaseline(Baseline):
    """The greedy cost of a frozen copy of the policy (``model``), replaced at an epoch's end when the
    policy's greedy costs on the evaluation set (``eval_set``, drawn afresh at each replacement) are
    lower than the frozen copy's (``eval_costs``) by a one-sided paired t-test at ``bl_alpha``. During the
    first ``warmup_epochs`` epochs the baseline is an :class:`ExponentialBaseline` (``warmup``) instead."""

    def __init__(self, trainer: TrainerView):
        super().__init__(trainer)
        self.warmup = ExponentialBaseline(trainer)
        self.model: nn.Module | None = None
        self.eval_set = None
        self.eval_costs: Tensor | None = None

    def initialize(self) -> None:
        self.replace()

    def replace(self) -> None:
        """Freeze a copy of the policy as the baseline, with a fresh evaluation set and its costs."""
        t = self.trainer
        self.model = self._frozen_copy()
        if t.world_size > 1:  # batch-norm running statistics may differ by rank: take rank 0's
            for tensor in self.model.state_dict().values():
                dist.broadcast(tensor, src=0)
        self.eval_set = t.problem.generate(t.cfg.eval_size, t.cfg.num_nodes, generator=t.eval_generator,
                                           **t.cfg.variant)
        self.eval_costs = t.greedy_costs(self.model, self.eval_set, sharded=True)

    def _frozen_copy(self) -> nn.Module:
        return copy.deepcopy(self.trainer.policy).eval().requires_grad_(False)

    def values(self, instances, cost: Tensor) -> Tensor:
        if self.trainer.epoch < self.trainer.cfg.warmup_epochs:
            return self.warmup.values(instances, cost)
        return self.trainer.greedy_costs(self.model, instances)

    def epoch_end(self) -> dict:
        t = self.trainer
        candidate = t.greedy_costs(t.policy, self.eval_set, sharded=True)
        better, p = paired_t_test_better(candidate, self.eval_costs, t.cfg.bl_alpha)
        if better:
            self.replace()
        return {"baseline_p": p, "baseline_replaced": int(better)}

    def end_rows(self) -> int:
        return 2 * self.trainer.cfg.eval_size  # the t-test, and a replacement's fresh set

    def state_dict(self) -> dict:
        return {
            "model": None if self.model is None else self.model.state_dict(),
            "eval_set": None if self.eval_set is None else self.eval_set._asdict(),
            "eval_costs": self.eval_costs,
            "warmup": self.warmup.state_dict(),
        }

    def load_state_dict(self, state: dict) -> None:
        t = self.trainer
        self.model = None
        if state["model"] is not None:
            self.model = self._frozen_copy()
            self.model.load_state_dict(state["model"])
        self.eval_set = None if state["eval_set"] is None else \
            t.problem.Instance(**{k: v.to(t.device) for k, v in state["eval_set"].items()})
        self.eval_costs = None if state["eval_costs"] is None else state["eval_costs"].to(t.device)
        self.warmup.load_state_dict(state["warmup"])


class POMOBaseline(Baseline):
    """Kwon et al.'s shared baseline: each instance is sampled once from every start node the problem
    declares (``problem.start_nodes``), on each of its ``cfg.augment`` symmetric copies
    (:func:`agents.inference.search.augment`), and the mean cost of its rollouts is the baseline of each."""

    def __init__(self, trainer: TrainerView):
        super().__init__(trainer)
        n_total = trainer.problem.num_nodes_total(trainer.cfg.num_nodes)
        self.starts = trainer.problem.start_nodes(n_total, trainer.device)
        self.copies = trainer.cfg.augment
        self.equal_rows = len(self.starts)
        self.rollouts_per_instance = self.copies * len(self.starts)

    def prepare(self, instances) -> tuple[Any, Tensor]:
        copies = augment(instances, self.copies) if self.copies > 1 else instances
        rows = copies[0].shape[0]
        repeated = select_rows(copies, torch.arange(rows, device=copies[0].device).repeat_interleave(self.equal_rows))
        return repeated, self.starts.repeat(rows)

    def values(self, instances, cost: Tensor) -> Tensor:
        k = self.rollouts_per_instance
        return cost.view(-1, k).mean(dim=1).repeat_interleave(k)


class CriticBaseline(Baseline):
    """Bello et al.'s critic: the prediction of :class:`~agents.policies.critic.Critic` from the
    instance's first observation, fitted to the sampled costs by mean squared error with its own Adam
    (``critic_lr``, gradients clipped at ``max_grad_norm``); its initial weights are seeded by
    ``seed + 1``."""

    def __init__(self, trainer: TrainerView):
        super().__init__(trainer)
        cfg = trainer.cfg
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(cfg.seed + 1)
            self.critic = Critic(CriticConfig(problem=cfg.problem)).to(trainer.device)
        self.module = DistributedDataParallel(self.critic) if trainer.world_size > 1 else self.critic
        self.optimizer = torch.optim.Adam(self.critic.parameters(), lr=cfg.critic_lr)

    def values(self, instances, cost: Tensor) -> Tensor:
        predicted, _ = self.fit(instances, cost)
        return predicted

    def fit(self, instances, cost: Tensor) -> tuple[Tensor, Tensor]:
        """One Adam step of the critic on the mean squared error of its predictions for ``instances``
        against ``cost``; returns (the predictions before the step, the loss), both detached."""
        t = self.trainer
        with t.autocast():
            predicted = self.module(t.problem.observe(t.problem.reset(instances))).float()
        loss = torch.nn.functional.mse_loss(predicted, cost)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.critic.parameters(), t.cfg.max_grad_norm)
        self.optimizer.step()
        return predicted.detach(), loss.detach()

    def state_dict(self) -> dict:
        return {"critic": self.critic.state_dict(), "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.critic.load_state_dict(state["critic"])
        self.optimizer.load_state_dict(state["optimizer"])


BASELINES: dict[str, type[Baseline]] = {
    "rollout": RolloutBaseline,
    "exponential": ExponentialBaseline,
    "pomo": POMOBaseline,
    "critic": CriticBaseline,
}
"""``TrainConfig.baseline`` -> the baseline's class, built as ``BASELINES[name](trainer)``."""


LEGACY_KEYS = ("baseline_model", "eval_set", "eval_costs", "exp_value", "critic", "critic_optimizer")
"""The top-level entries in which trainer checkpoints stored the baseline's state before the baselines
were classes (the four shipped resume checkpoints under ``training/`` are of that layout)."""


def legacy_baseline_state(ckpt: dict) -> dict:
    """The ``baseline`` entry (this module's ``state_dict`` layout) of a trainer checkpoint written before
    the baselines were classes, from its top-level :data:`LEGACY_KEYS` and its config's ``baseline``.
    Only the four baselines of that time can appear in such a checkpoint."""
    convert = {
        "rollout": lambda c: {"model": c["baseline_model"], "eval_set": c["eval_set"], "eval_costs": c["eval_costs"],
                              "warmup": {"value": c["exp_value"]}},
        "exponential": lambda c: {"value": c["exp_value"]},
        "pomo": lambda c: {},
        "critic": lambda c: {"critic": c["critic"], "optimizer": c["critic_optimizer"]},
    }
    name = ckpt["config"]["baseline"]
    if name not in convert:
        raise ValueError(f"it holds no baseline state, and {name!r} is not a baseline of the older layout")
    return convert[name](ckpt)
