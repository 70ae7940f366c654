"""REINFORCE with a baseline (Kool, van Hoof & Welling, ICLR 2019: a greedy-rollout baseline), on the
vector envs.

The loop reads top to bottom in :func:`train`: draw a batch of fresh random instances, let the baseline
prepare the rollouts (POMO: every start node), roll the policy out by sampling, take the baseline's
values of the sampled costs (no gradient), and step Adam on ``mean((cost - baseline) * log_likelihood)``.
An epoch ends with the baseline's end-of-epoch update (the rollout baseline's t-test), a greedy
validation on a fixed seeded set, and a checkpoint from which ``--resume`` continues exactly.
:class:`Trainer` holds what the loop reads (policy, baseline, optimiser, RNG streams, data); the loop
calls small units for the rest: :mod:`.checkpointing` (checkpoints, resume, the run's folder),
:mod:`.metrics` (``metrics.csv``, TensorBoard, printed lines), :mod:`.budget` (learning rate, deadline),
:mod:`.imitation` (supervised epochs first) and :mod:`.distributed` (data-parallel set-up).

Nothing is lost (:meth:`Trainer.fit`): a run never writes into a folder that holds another run (continue
it with :meth:`Trainer.resume`, or pass ``overwrite=True``); the checkpoint holds the metrics history,
and ``metrics.csv`` is rewritten from it (whole, atomically) after every checkpoint and on resume, so
after a kill at any instant the resumed run's files agree with its checkpoint, with no row lost or
repeated; ``best.pt`` keeps the checkpoint of the best validation; a non-finite gradient or weight stops
the run (:class:`TrainingDiverged`) before anything of the failing epoch is written.

The baselines (``TrainConfig.baseline``: ``rollout``, ``exponential``, ``pomo``, ``critic``) are the
classes of :mod:`agents.training.baselines`; the trainer knows them only through their interface, and the
checkpoint holds ``baseline.state_dict()`` as its ``baseline`` entry.
"""
from __future__ import annotations

import contextlib
import math
import os
import time
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from routing_gym.data import check_fits, load_dataset
from routing_gym.problems import get_problem

from ..inference.device import parse_device
from ..inference.rollout import evaluate, make_env, rollout
from ..policies.protocol import select_rows
from ..policies.registry import build_policy
from . import checkpointing, metrics
from .baselines import BASELINES, paired_t_test_better  # noqa: F401 - re-exported
from .budget import estimate_epoch_end, nothing_left, past, plan_step, start_notes
from .config import TrainConfig
from .distributed import data_parallel, gather_costs, world, wrap_ddp
from .imitation import epoch_order, load_labels
from .normalisation import group_scale
from .runlock import RunLock
from .supervised import teacher_forcing_nll

RANK_SEED_STRIDE = 1_000_003  # rank r draws training instances and samples from seed + r * stride
EVAL_SEED_OFFSET = 7_777_777  # the baseline's evaluation sets come from a stream shared by all ranks


class TrainingDiverged(ArithmeticError):
    """A non-finite gradient or weight: the run stopped, and nothing of the failing epoch was saved."""


class NothingLeft(ValueError):
    """:meth:`Trainer.fit` has nothing to do: its epochs or minutes are spent (nothing was written)."""


def train(trainer: Trainer, out: Path, budget: float, progress: bool = True, log: bool = True) -> list[dict]:
    """The training loop, in ``out`` (claimed by :meth:`Trainer.fit`): epochs until ``cfg.epochs``, or
    until ``budget`` seconds are spent (at least one epoch of one batch, then none whose end would not
    fit); returns the metrics rows of the epochs it trained. Rank 0 writes the checkpoints and metrics."""
    t, cfg, baseline = trainer, trainer.cfg, trainer.baseline
    lead, steps, rows = t.rank == 0, math.ceil(cfg.epoch_size / cfg.batch_size), []
    writer = metrics.tensorboard(out, purge_step=t.epoch) if log and lead else None
    deadline = time.perf_counter() + budget
    reserve = estimate_epoch_end(t) if math.isfinite(budget) else 0.0  # seconds an epoch's end takes
    if log and lead:
        _announce(t, out, budget, reserve)
    while t.epoch < cfg.epochs and not (rows and past(t, deadline - reserve)):
        start, imitating, costs = time.perf_counter(), t.imitating, []
        if imitating:  # supervised epochs first: passes over the labelled set in fresh random orders
            order = epoch_order(t.labels[1].shape[0], steps * t.local_batch, t.generator)
        bar = metrics.progress_bar(steps, f"epoch {t.epoch}", progress and lead)
        for i in range(steps):
            now = time.perf_counter()
            if plan_step(t, t.elapsed_s + now - start, past_deadline=i > 0 and now >= deadline - reserve):
                break  # the budget's deadline: the epoch ends early
            t.policy.train()
            try:
                if imitating:  # teacher forcing along the labels: their mean negative log-likelihood
                    batch = order[i * t.local_batch:(i + 1) * t.local_batch]
                    with t.autocast():
                        nll, _ = t.training_pass(t.label_env, select_rows(t.labels[0], batch),
                                                 labels=t.labels[1][batch])
                    loss, cost = nll.mean(), nll.detach().mean()
                else:
                    loss, cost = reinforce_loss(t)  # sample, roll out, baseline, loss
                cost, _ = optimise(t, loss, cost)
            except TrainingDiverged as e:
                raise _diverged(t, out, f", batch {i}: {e}") from None
            costs.append(cost)
            if bar is not None:
                rate = (i + 1) * cfg.batch_size / (time.perf_counter() - start)
                bar.set_postfix(cost=f"{cost:.4f}", inst_s=f"{rate:.0f}")
                bar.update()
        if bar is not None:
            bar.close()
        training_ended = time.perf_counter()  # the epoch's end starts (its length is set aside next time)
        if not all(bool(torch.isfinite(p).all()) for p in t.policy.parameters()):
            raise _diverged(t, out, ": the weights are not finite")
        train_time = training_ended - start
        row = {"epoch": t.epoch, "instances_seen": t.instances_seen,
               "train_nll" if imitating else "train_cost": sum(costs) / len(costs),
               "lr": t.optimizer.param_groups[0]["lr"], "batch_size": cfg.batch_size, "train_time_s": train_time,
               "instances_per_s": len(costs) * cfg.batch_size / train_time}
        row.update(baseline.epoch_end())  # the rollout baseline's t-test (and replacement)
        val = t.greedy_costs(t.policy, t.val_set, sharded=True, desc=f"validation {t.epoch}" if progress else None)
        row["val_cost"] = float(val.mean())
        if t.val_ref is not None:
            row["val_gap"] = float(((val - t.val_ref) / t.val_ref.abs()).mean())
        t.elapsed_s += time.perf_counter() - start
        row["elapsed_s"] = t.elapsed_s
        t.epoch += 1
        rows.append(row)
        t.history.append(row)
        improved, t.best_val = row["val_cost"] < t.best_val, min(t.best_val, row["val_cost"])
        checkpointing.save_run(t, out, improved)  # best.pt when improved, last.pt; then metrics.csv
        if lead:
            metrics.record(out, t.history, writer, log)
        if reserve:  # what this epoch's end took (baseline test, validation, checkpoint), for the next one
            reserve = time.perf_counter() - training_ended
    return rows


def reinforce_loss(t: Trainer) -> tuple[Tensor, Tensor]:
    """One batch's REINFORCE loss and mean sampled cost: fresh instances, a sampling rollout, the baseline's
    values (no gradient flows through them), ``(cost - baseline) * log-likelihood``. The training loop's step
    (and what the throughput benchmarks time, with :func:`optimise`)."""
    cfg, baseline = t.cfg, t.baseline
    size = t.draw_size()
    instances = t.problem.generate(t.local_batch, size, generator=t.generator, **cfg.variant)
    rollouts, first_actions = baseline.prepare(instances)  # POMO: every start node
    with t.autocast(), _probabilities_checked(t, rollouts):  # roll out by sampling
        cost, log_likelihood = t.training_pass(t.envs[size], rollouts, t.generator, first_actions,
                                               baseline.equal_rows)
    bl = baseline.values(instances, cost.detach())
    advantage = (cost - bl).detach()
    if t.reward_scale is not None:  # per-variant scale of the advantage
        advantage = advantage / t.reward_scale.scale(t.problem.reward_groups(instances), cost.detach())
    loss = (advantage * log_likelihood).mean()  # REINFORCE
    return loss, cost.detach().mean()


def train_step(t: Trainer) -> tuple[float, float]:
    """One REINFORCE gradient step on a fresh batch, as the loop takes it: (mean sampled cost, gradient norm)."""
    t.policy.train()
    return optimise(t, *reinforce_loss(t))


def optimise(trainer: Trainer, loss: Tensor, reported: Tensor) -> tuple[float, float]:
    """Back-propagate ``loss``, clip the gradient and step Adam; returns (``reported``, a 0-d tensor
    averaged over every rank's batch, and the gradient norm), read in one host sync.

    Raises:
        TrainingDiverged: the loss or the gradient is not finite (the weights are left as they were).
    """
    trainer.optimizer.zero_grad(set_to_none=True)
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(trainer.policy.parameters(), trainer.cfg.max_grad_norm)
    reported = gather_costs(reported[None]).mean()
    grad_norm, loss, reported = torch.stack([grad_norm, loss.detach().float(), reported]).tolist()  # one sync
    if not (math.isfinite(grad_norm) and math.isfinite(loss)):  # grad_norm is the same on every rank
        raise TrainingDiverged(f"the loss is {loss} and the gradient norm {grad_norm} (learning rate "
                               f"{trainer.optimizer.param_groups[0]['lr']:g})")
    trainer.optimizer.step()
    trainer.instances_seen += trainer.cfg.batch_size
    return reported, grad_norm


class TrainingPass(nn.Module):
    """The policy's forward pass of a training step as a module's ``forward``, so that DDP can wrap it: a
    sampled rollout (``(cost, log_likelihood)``), or, given ``labels``, teacher forcing along them (their
    negative log-likelihood, and None)."""

    def __init__(self, policy: nn.Module, problem: str):
        super().__init__()
        self.policy = policy
        self.problem = problem

    def forward(self, env, instances, generator: torch.Generator | None = None, first_actions: Tensor | None = None,
                repeats: int = 1, labels: Tensor | None = None):
        if labels is not None:
            # the trainer checked its labels when it loaded them: no host read per step here
            return teacher_forcing_nll(self.policy, self.problem, instances, labels, env=env, check=False), None
        out = rollout(self.policy, env, instances, strategy="sample", generator=generator, first_actions=first_actions,
                      repeats=repeats)
        return out.cost, out.log_likelihood


class Trainer:
    """Holds the policy, its baseline, the optimiser, the RNG streams and the data of one training run;
    :meth:`fit` runs :func:`train` on it, :meth:`resume` restores one from a checkpoint.

    ``baseline`` is the :mod:`agents.training.baselines` object that ``cfg.baseline`` names; a fresh
    trainer initialises it (``init_baseline``), :meth:`resume` loads its state instead.

    Under ``torch.distributed`` (launched by ``torchrun``) every rank trains on ``batch_size / world``
    instances of its own seed stream, DDP averages the gradients, and the baseline's t-test and the
    validation see the whole sets (each rank evaluates a slice, the costs are gathered), so every rank
    takes the same decisions (:mod:`.distributed`). Only rank 0 writes checkpoints, metrics and progress.
    """

    def __init__(self, config: TrainConfig, policy: nn.Module | None = None, *, init_baseline: bool = True):
        self.cfg = config
        self.device = parse_device(config.device)
        self.problem = get_problem(config.problem)
        self.prior = {"instances_seen": 0, "elapsed_s": 0.0}  # training of the weights the run started from
        if policy is None and config.init_from is not None:
            policy, self.prior = checkpointing.initial_weights(config)
        elif policy is None:
            with torch.random.fork_rng(devices=[]):  # seeded initial weights, global RNG left as it was
                torch.manual_seed(config.seed)
                policy = build_policy(config.policy, dict(config.model, problem=config.problem))
        self.rank, self.world_size = world()
        sizes = config.mixed_sizes or [config.num_nodes]  # the sizes of the training batches
        for flag, count, size in (("--batch-size", config.batch_size, max(sizes)),
                                  ("--eval-size", config.eval_size, config.num_nodes),
                                  ("--val-size", config.val_size, config.num_nodes)):  # refused before any memory
            check_fits(config.problem, count, size, flag, **config.variant)
        self.val_set, self.val_ref = _validation_set(config, self.problem, self.device)
        for name, size in (("batch_size", config.batch_size), ("eval_size", config.eval_size),
                           ("validation set", self.val_set[0].shape[0])):
            if size % self.world_size:
                raise ValueError(f"{name} {size} is not divisible by the world size {self.world_size}")
        self.local_batch = config.batch_size // self.world_size
        self.policy = data_parallel(policy, self.device)
        self.training_pass = wrap_ddp(TrainingPass(self.policy, config.problem))
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=config.lr)
        self.generator = torch.Generator(device=self.device).manual_seed(config.seed + RANK_SEED_STRIDE * self.rank)
        self.eval_generator = torch.Generator(device=self.device).manual_seed(config.seed + EVAL_SEED_OFFSET)
        self.epoch = 0
        self.instances_seen = 0
        self.elapsed_s = 0.0  # wall-clock of the epochs done (training, baseline tests, validation)
        self.history: list[dict] = []  # the metrics rows of the epochs done
        self.best_val = math.inf
        self.run_dir: Path | None = None  # the folder this trainer's run is in (set by resume and fit)
        self.baseline = BASELINES[config.baseline](self)
        self.reward_scale = group_scale(self.problem, config.reward_norm, self.device)  # None: not normalised
        rollouts = self.local_batch * self.baseline.rollouts_per_instance
        self.envs = {size: make_env(config.problem, size, rollouts, self.device, **config.variant) for size in sizes}
        self.labels = None  # (instances, actions) of config.imitate
        if config.imitate is not None:
            self.labels = load_labels(config, self.problem, self.device)
            self.label_env = make_env(config.problem, config.num_nodes, self.local_batch, self.device,
                                      **config.variant)
        if init_baseline:
            self.baseline.initialize()

    def draw_size(self) -> int:
        """The size of the next training batch: ``cfg.num_nodes``, or with ``cfg.mixed_sizes`` one of them drawn
        uniformly from the training stream (``generator``)."""
        sizes = self.cfg.mixed_sizes
        if not sizes:
            return self.cfg.num_nodes
        return sizes[int(torch.randint(len(sizes), (1,), generator=self.generator, device=self.generator.device))]

    @property
    def imitating(self) -> bool:
        """Is the current epoch a supervised one (``cfg.imitate``, within ``cfg.imitation_epochs``)?"""
        return self.labels is not None and self.epoch < self.cfg.imitation_epochs

    def greedy_costs(self, policy, instances, *, sharded: bool = False, desc: str | None = None) -> Tensor:
        """Greedy costs of ``instances``, ``cfg.eval_batch_size`` at a time; ``sharded``: the set is the same
        on every rank, each rank decodes its contiguous slice and all get every cost; ``desc``: a progress
        bar so named (rank 0)."""
        if sharded and self.world_size > 1:
            size = instances[0].shape[0] // self.world_size
            instances = select_rows(instances, slice(self.rank * size, (self.rank + 1) * size))
        policy.eval()
        total, chunk = instances[0].shape[0], self.cfg.eval_batch_size
        bar = metrics.progress_bar(math.ceil(total / chunk), desc, desc is not None and self.rank == 0)
        costs = []
        with torch.no_grad(), self.autocast():
            for first in range(0, total, chunk):
                costs.append(evaluate(policy, self.cfg.problem, select_rows(instances, slice(first, first + chunk)),
                                      batch_size=chunk, device=self.device, **self.cfg.variant))
                if bar is not None:
                    bar.update()
        if bar is not None:
            bar.close()
        costs = torch.cat(costs)
        return gather_costs(costs) if sharded else costs

    def autocast(self):
        """The forward passes' autocast context: bf16 with ``cfg.bf16`` (on any device), else none."""
        return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16, enabled=self.cfg.bf16)

    def fit(self, progress: bool = True, log: bool = True, overwrite: bool = False) -> list[dict]:
        """Train until ``cfg.epochs`` (or ``cfg.max_minutes``); after each epoch rank 0 writes ``best.pt``
        (when the validation improved), ``last.pt`` and ``metrics.csv``, in that order.

        Raises:
            FileExistsError: ``cfg.out_dir`` holds another run (one this trainer was not resumed from)
                and ``overwrite`` is False (with ``overwrite`` its run files are deleted first), or
                :class:`~agents.training.runlock.RunFolderBusy`: another live run holds the folder.
            NothingLeft: a ``ValueError``: ``epochs`` or ``max_minutes`` already reached; nothing is
                written (but a resumed run's own ``metrics.csv``, brought back to its checkpoint's rows).
            TrainingDiverged: a non-finite gradient or weight; the checkpoints keep the last good epoch.
        """
        out = Path(self.cfg.out_dir)
        budget = math.inf if self.cfg.max_minutes is None else self.cfg.max_minutes * 60 - self.elapsed_s
        refusal = nothing_left(self, budget)
        own = self.run_dir is not None and out.is_dir() and self.run_dir.resolve() == out.resolve()
        if refusal and (self.rank != 0 or not own):  # a refused run writes nothing
            raise NothingLeft(refusal)
        if self.rank != 0:
            return train(self, out, budget, progress, log)
        if out.exists() and not out.is_dir():
            raise FileExistsError(f"output folder {out} is a file")
        with RunLock(out):  # the folder is this run's until it ends (a killed run's lock dies with it)
            checkpointing.claim_folder(self, out, overwrite)
            if refusal:  # in its own folder, metrics.csv was brought back to the checkpoint's rows
                raise NothingLeft(refusal)
            return train(self, out, budget, progress, log)

    def state_dict(self) -> dict:
        """The checkpoint's contents (:func:`.checkpointing.state_dict`)."""
        return checkpointing.state_dict(self)

    def save(self, path: str | os.PathLike) -> None:
        """Write a checkpoint (collective under ``torch.distributed``: call it on every rank)."""
        checkpointing.save(self, path)

    @classmethod
    def resume(cls, path: str | os.PathLike, **overrides: Any) -> Trainer:
        """A trainer restored from a checkpoint, continuing at the next epoch. ``overrides`` change config
        fields such as ``epochs`` or ``out_dir``; the output folder is the checkpoint's own folder unless
        ``out_dir`` is given (the folder recorded in the checkpoint is never used: a checkpoint copied
        from elsewhere does not choose where this run writes).

        Raises:
            FileNotFoundError / ValueError naming the file and what is missing or malformed.
        """
        path = Path(path)
        ckpt, config, policy = checkpointing.read(path, overrides)
        trainer = cls(config, policy=policy, init_baseline=False)
        checkpointing.restore(trainer, ckpt, path)
        return trainer


def _validation_set(cfg: TrainConfig, problem, device: torch.device) -> tuple[Any, Tensor | None]:
    """The fixed validation instances and their reference costs (None when unknown)."""
    if cfg.val_dataset is None:
        generator = torch.Generator(device=device).manual_seed(cfg.val_seed)
        return problem.generate(cfg.val_size, cfg.num_nodes, device=device, generator=generator, **cfg.variant), None
    instances, extras = load_dataset(cfg.val_dataset, cfg.problem, device=device)
    if problem.size_of(instances) != cfg.num_nodes:
        raise ValueError(f"validation dataset {cfg.val_dataset} has instances of size {problem.size_of(instances)}, "
                         f"the run trains size {cfg.num_nodes}")
    ref = extras.get("ref_cost")
    return instances, None if ref is None else torch.as_tensor(ref, dtype=torch.float32, device=device)


def _announce(trainer: Trainer, out: Path, budget: float, reserve: float) -> None:
    """The run's first lines: what trains where, and the notes of :func:`.budget.start_notes`."""
    cfg = trainer.cfg
    ranks = f" x {trainer.world_size} ranks" if trainer.world_size > 1 else ""
    print(f"training {cfg.problem}-{cfg.num_nodes} on {metrics.describe(trainer.device)}{ranks} from epoch "
          f"{trainer.epoch}, writing to {out}/ (last.pt, best.pt, metrics.csv)")
    for note in start_notes(trainer, budget, reserve):
        print(f"note: {note}")


def _diverged(trainer: Trainer, out: Path, what: str) -> TrainingDiverged:
    """The error that stops a diverged run at its current epoch: ``what`` happened, what was kept."""
    saved = f"{out / 'last.pt'} keeps epoch {trainer.epoch - 1}" if trainer.history else "nothing was saved"
    return TrainingDiverged(f"training diverged at epoch {trainer.epoch}{what}; {saved}. Lower the learning rate, "
                            f"or resume from best.pt")


@contextlib.contextmanager
def _probabilities_checked(trainer: Trainer, rollouts):
    """A failed sampling rollout as :class:`TrainingDiverged` when the policy's probabilities (or weights)
    are not finite (overflowing weights); any other failure as it is."""
    try:
        yield
    except RuntimeError as e:
        if isinstance(e, torch.OutOfMemoryError) or _finite_outputs(trainer, rollouts):
            raise
        raise TrainingDiverged(f"the policy's probabilities are not finite ({e})") from e


@torch.no_grad()
def _finite_outputs(trainer: Trainer, instances) -> bool:
    """Are the weights, and the policy's first-step log-probabilities on (the first rows of) ``instances``
    where allowed, finite? (Told apart from a bug when a rollout fails.)"""
    cfg, rows = trainer.cfg, select_rows(instances, slice(0, 8))
    env = make_env(cfg.problem, cfg.num_nodes, rows[0].shape[0], trainer.device, **cfg.variant)
    obs, _ = env.unwrapped.reset(options={"instances": rows})
    logp, _ = trainer.policy.log_probs(trainer.policy.precompute(obs), obs)
    weights = all(bool(torch.isfinite(p).all()) for p in trainer.policy.parameters())
    return weights and bool(torch.isfinite(logp[obs["action_mask"].bool()]).all())
