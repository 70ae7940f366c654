"""REINFORCE with a baseline (Kool, van Hoof & Welling, ICLR 2019: a greedy-rollout baseline), on the
vector envs.

The loop reads top to bottom in :meth:`Trainer.train_batch` and :meth:`Trainer.train_epoch`: draw a batch
of fresh random instances, let the baseline prepare the rollouts (POMO: every start node), roll the
policy out by sampling, take the baseline's values of the sampled costs (no gradient), and step Adam on
``mean((cost - baseline) * log_likelihood)``. An epoch ends with the baseline's end-of-epoch update (the
rollout baseline's t-test), a greedy validation on a fixed seeded set, and a checkpoint from which
``--resume`` continues exactly.

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

import csv
import dataclasses
import math
import os
import shutil
import time
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from torch import distributed as dist
from torch.nn.parallel import DistributedDataParallel

from routing_gym.data import check_fits, load_dataset
from routing_gym.problems import get_problem

from ..inference.device import parse_device
from ..inference.rollout import evaluate, make_env, rollout
from ..policies.checkpoint import load_checkpoint, save_checkpoint
from ..policies.protocol import select_rows
from ..policies.registry import build_policy, network_of
from .baselines import BASELINES, legacy_baseline_state, paired_t_test_better  # noqa: F401 - re-exported
from .config import TrainConfig, budget_progress, learning_rate
from .distributed import gather_costs, world
from .runlock import RunLock
from .supervised import teacher_forcing_nll
RANK_SEED_STRIDE = 1_000_003  # rank r draws training instances and samples from seed + r * stride
EVAL_SEED_OFFSET = 7_777_777  # the baseline's evaluation sets come from a stream shared by all ranks
RUN_FILES = ("last.pt", "best.pt", "metrics.csv")  # a run's record in cfg.out_dir (and its "tb" events)


class TrainingDiverged(ArithmeticError):
    """A non-finite gradient or weight: the run stopped, and nothing of the failing epoch was saved."""


class NothingLeft(ValueError):
    """:meth:`Trainer.fit` has nothing to do: its epochs or minutes are spent (nothing was written)."""


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
    """Holds the policy, its baseline, the optimiser and the RNG streams of one training run.

    ``baseline`` is the :mod:`agents.training.baselines` object that ``cfg.baseline`` names; a fresh
    trainer initialises it (``init_baseline``), :meth:`resume` loads its state instead.

    Under ``torch.distributed`` (launched by ``torchrun``) every rank trains on ``batch_size / world``
    instances of its own seed stream, DDP averages the gradients, and the baseline's t-test and the
    validation see the whole sets (each rank evaluates a slice, the costs are gathered), so every rank
    takes the same decisions. Batch normalisation: ``SyncBatchNorm`` on CUDA; on the CPU (gloo) each
    rank normalises with its own batch's statistics, as its slice of the global batch would in
    gradient accumulation. Only rank 0 writes checkpoints, metrics and progress.
    """

    def __init__(self, config: TrainConfig, policy: nn.Module | None = None, *, init_baseline: bool = True):
        self.cfg = config
        self.device = parse_device(config.device)
        self.problem = get_problem(config.problem)
        self.prior = {"instances_seen": 0, "elapsed_s": 0.0}  # training of the weights the run started from
        if policy is None and config.init_from is not None:
            policy, self.prior = _initial_weights(config)
        elif policy is None:
            with torch.random.fork_rng(devices=[]):  # seeded initial weights, global RNG left as it was
                torch.manual_seed(config.seed)
                policy = build_policy(config.policy, dict(config.model, problem=config.problem))
        self.rank, self.world_size = world()
        for flag, count in (("--batch-size", config.batch_size), ("--eval-size", config.eval_size),
                            ("--val-size", config.val_size)):  # refused before any memory is taken
            check_fits(config.problem, count, config.num_nodes, flag, **config.variant)
        self.val_set, self.val_ref = self._validation_set()
        for name, size in (("batch_size", config.batch_size), ("eval_size", config.eval_size),
                           ("validation set", self.val_set[0].shape[0])):
            if size % self.world_size:
                raise ValueError(f"{name} {size} is not divisible by the world size {self.world_size}")
        self.local_batch = config.batch_size // self.world_size
        if self.world_size > 1 and self.device.type == "cuda":
            policy = nn.SyncBatchNorm.convert_sync_batchnorm(policy)
        self.policy = policy.to(self.device)
        forward = TrainingPass(self.policy, config.problem)
        self.training_pass = DistributedDataParallel(forward) if self.world_size > 1 else forward
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
        rollouts = self.local_batch * self.baseline.rollouts_per_instance
        self.env = make_env(config.problem, config.num_nodes, rollouts, self.device, **config.variant)
        self.labels = None  # (instances, actions) of config.imitate
        if config.imitate is not None:
            self.labels = self._labelled_set()
            self.label_env = make_env(config.problem, config.num_nodes, self.local_batch, self.device,
                                      **config.variant)
        if init_baseline:
            self.baseline.initialize()

    def _validation_set(self) -> tuple[Any, Tensor | None]:
        """The fixed validation instances and their reference costs (None when unknown)."""
        cfg = self.cfg
        if cfg.val_dataset is None:
            generator = torch.Generator(device=self.device).manual_seed(cfg.val_seed)
            return self.problem.generate(cfg.val_size, cfg.num_nodes, device=self.device, generator=generator,
                                         **cfg.variant), None
        instances, extras = load_dataset(cfg.val_dataset, cfg.problem, device=self.device)
        if self.problem.size_of(instances) != cfg.num_nodes:
            raise ValueError(f"validation dataset {cfg.val_dataset} has instances of size "
                             f"{self.problem.size_of(instances)}, the run trains size {cfg.num_nodes}")
        ref = extras.get("ref_cost")
        return instances, None if ref is None else torch.as_tensor(ref, dtype=torch.float32, device=self.device)

    def _labelled_set(self) -> tuple[Any, Tensor]:
        """The instances and label actions of ``cfg.imitate``, every label checked (feasible, finishing)."""
        cfg = self.cfg
        instances, extras = load_dataset(cfg.imitate, cfg.problem, device=self.device)
        if "ref_tours" not in extras:
            raise ValueError(f"imitate dataset {cfg.imitate} holds no ref_tours to imitate (routing-gym solve --save "
                             f"writes them)")
        if self.problem.size_of(instances) != cfg.num_nodes:
            raise ValueError(f"imitate dataset {cfg.imitate} has instances of size {self.problem.size_of(instances)}, "
                             f"the run trains size {cfg.num_nodes}")
        actions = torch.as_tensor(extras["ref_tours"], dtype=torch.int64, device=self.device)
        chunk = 4096
        for start in range(0, actions.shape[0], chunk):
            rows = slice(start, start + chunk)
            try:
                teacher_forcing_nll(None, cfg.problem, select_rows(instances, rows), actions[rows])
            except ValueError as e:  # "label of instance i ...": i within the chunk
                raise ValueError(f"imitate dataset {cfg.imitate}, instances {start}..: {e}") from None
        return instances, actions

    @property
    def imitating(self) -> bool:
        """Is the current epoch a supervised one (``cfg.imitate``, within ``cfg.imitation_epochs``)?"""
        return self.labels is not None and self.epoch < self.cfg.imitation_epochs

    # -- services of the baselines -----------------------------------------------------------------
    def greedy_costs(self, policy, instances, *, sharded: bool = False, desc: str | None = None) -> Tensor:
        """Greedy costs of ``instances``, ``cfg.eval_batch_size`` at a time; ``sharded``: the set is the same
        on every rank, each rank decodes its contiguous slice and all get every cost; ``desc``: a progress
        bar so named (rank 0)."""
        if sharded and self.world_size > 1:
            size = instances[0].shape[0] // self.world_size
            instances = select_rows(instances, slice(self.rank * size, (self.rank + 1) * size))
        policy.eval()
        total, chunk = instances[0].shape[0], self.cfg.eval_batch_size
        bar = _progress(math.ceil(total / chunk), desc, desc is not None and self.rank == 0)
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
        """The forward passes' autocast context: bf16 on CUDA with ``cfg.bf16``, else none."""
        enabled = self.cfg.bf16 and self.device.type == "cuda"
        return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16, enabled=enabled)

    # -- training ----------------------------------------------------------------------------------
    def train_batch(self) -> tuple[float, float]:
        """One gradient step on a fresh batch; returns (mean sampled cost, gradient norm).

        Raises:
            TrainingDiverged: the loss or the gradient is not finite (the weights are left as they were).
        """
        cfg = self.cfg
        instances = self.problem.generate(self.local_batch, cfg.num_nodes, generator=self.generator, **cfg.variant)
        rollouts, first_actions = self.baseline.prepare(instances)
        self.policy.train()
        with self.autocast():
            try:
                cost, log_likelihood = self.training_pass(self.env, rollouts, self.generator, first_actions,
                                                          self.baseline.equal_rows)
            except RuntimeError as e:  # sampling from non-finite probabilities (overflowing weights)?
                if isinstance(e, torch.OutOfMemoryError) or self._finite_outputs(rollouts):
                    raise
                raise TrainingDiverged(f"the policy's probabilities are not finite ({e})") from e
        bl = self.baseline.values(instances, cost.detach())
        loss = ((cost - bl).detach() * log_likelihood).mean()
        return self._optimise(loss, cost.detach().mean())

    def imitation_batch(self, rows: Tensor) -> tuple[float, float]:
        """One supervised step on the labelled instances ``rows`` of ``cfg.imitate``: the mean negative
        log-likelihood of their labels' actions (teacher forcing); returns (that mean, gradient norm).

        Raises:
            TrainingDiverged: the loss or the gradient is not finite (the weights are left as they were).
        """
        instances, actions = self.labels
        self.policy.train()
        with self.autocast():
            nll, _ = self.training_pass(self.label_env, select_rows(instances, rows), labels=actions[rows])
        return self._optimise(nll.mean(), nll.detach().mean())

    def _optimise(self, loss: Tensor, reported: Tensor) -> tuple[float, float]:
        """Back-propagate ``loss``, clip the gradient and step Adam; returns (``reported``, a 0-d tensor
        averaged over every rank's batch, and the gradient norm), read in one host sync.

        Raises:
            TrainingDiverged: the loss or the gradient is not finite (the weights are left as they were).
        """
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.policy.parameters(), self.cfg.max_grad_norm)
        reported = gather_costs(reported[None]).mean()
        grad_norm, loss, reported = torch.stack([grad_norm, loss.detach().float(), reported]).tolist()  # one sync
        if not (math.isfinite(grad_norm) and math.isfinite(loss)):  # grad_norm is the same on every rank
            raise TrainingDiverged(f"the loss is {loss} and the gradient norm {grad_norm} (learning rate "
                                   f"{self.optimizer.param_groups[0]['lr']:g})")
        self.optimizer.step()
        self.instances_seen += self.cfg.batch_size
        return reported, grad_norm

    def plan_step(self, elapsed_s: float, past_deadline: bool = False) -> bool:
        """Before a step, ``elapsed_s`` seconds into the run's budget: set the optimiser's learning rate
        from the schedule (:func:`~agents.training.config.learning_rate`) and say whether the budget's
        deadline has passed (the step is then not taken). Under ``torch.distributed`` with a minutes budget
        the ranks' clocks differ a little, so every rank takes rank 0's rate and decision."""
        cfg = self.cfg
        lr = learning_rate(cfg, self.epoch, budget_progress(cfg, self.instances_seen, elapsed_s))
        lr, past_deadline = self._rank0([lr, float(past_deadline)])
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        return bool(past_deadline)

    def _past(self, deadline: float) -> bool:
        """Has ``deadline`` (a ``time.perf_counter()`` value) passed, by rank 0's clock?"""
        return bool(self._rank0([float(time.perf_counter() >= deadline)])[0])

    def _rank0(self, values: list[float]) -> list[float]:
        """``values`` as rank 0 has them, on every rank (one broadcast; only under torch.distributed with
        a minutes budget, the one thing that makes ranks' decisions differ)."""
        if self.world_size == 1 or self.cfg.max_minutes is None:
            return values
        plan = torch.tensor(values, dtype=torch.float64, device=self.device)
        dist.broadcast(plan, 0)
        return plan.tolist()

    @torch.no_grad()
    def _finite_outputs(self, instances) -> bool:
        """Are the policy's first-step log-probabilities on (the first rows of) ``instances`` finite where
        allowed? (Told apart from a bug when a rollout fails.)"""
        rows = select_rows(instances, slice(0, 8))
        env = make_env(self.cfg.problem, self.cfg.num_nodes, rows[0].shape[0], self.device, **self.cfg.variant)
        obs, _ = env.unwrapped.reset(options={"instances": rows})
        logp, _ = self.policy.log_probs(self.policy.precompute(obs), obs)
        allowed = obs["action_mask"].bool()
        return self._finite_weights() and bool(torch.isfinite(logp[allowed]).all())

    def _finite_weights(self) -> bool:
        return all(bool(torch.isfinite(p).all()) for p in self.policy.parameters())

    def train_epoch(self, progress: bool = True, deadline: float = math.inf) -> dict:
        """One epoch (cut short at ``deadline``, a ``time.perf_counter()`` value, after at least one
        batch), the baseline's epoch end and the validation; returns the epoch's metrics row."""
        cfg = self.cfg
        steps = math.ceil(cfg.epoch_size / cfg.batch_size)
        start = time.perf_counter()
        imitating = self.imitating
        if imitating:  # this epoch's labelled instances: passes over the set in fresh random orders
            size = self.labels[1].shape[0]
            order = torch.cat([torch.randperm(size, generator=self.generator, device=self.device)
                               for _ in range(math.ceil(steps * self.local_batch / size))])
        costs = []
        bar = _progress(steps, f"epoch {self.epoch}", progress and self.rank == 0)
        for i in range(steps):
            now = time.perf_counter()
            if self.plan_step(self.elapsed_s + now - start, past_deadline=i > 0 and now >= deadline):
                break
            try:
                if imitating:
                    cost, _ = self.imitation_batch(order[i * self.local_batch:(i + 1) * self.local_batch])
                else:
                    cost, _ = self.train_batch()
            except TrainingDiverged as e:
                raise TrainingDiverged(f"training diverged at epoch {self.epoch}, batch {i}: {e}") from None
            costs.append(cost)
            if bar is not None:
                rate = (i + 1) * cfg.batch_size / (time.perf_counter() - start)
                bar.set_postfix(cost=f"{cost:.4f}", inst_s=f"{rate:.0f}")
                bar.update()
        if bar is not None:
            bar.close()
        self.training_ended = time.perf_counter()  # the epoch's end starts (fit reserves its length)
        train_time = self.training_ended - start
        if not self._finite_weights():
            raise TrainingDiverged(f"training diverged at epoch {self.epoch}: the weights are not finite")
        row = {"epoch": self.epoch, "instances_seen": self.instances_seen,
               "train_nll" if imitating else "train_cost": sum(costs) / len(costs),
               "lr": self.optimizer.param_groups[0]["lr"], "batch_size": cfg.batch_size, "train_time_s": train_time,
               "instances_per_s": len(costs) * cfg.batch_size / train_time}
        row.update(self.baseline.epoch_end())
        val = self.greedy_costs(self.policy, self.val_set, sharded=True,
                                desc=f"validation {self.epoch}" if progress else None)
        row["val_cost"] = float(val.mean())
        if self.val_ref is not None:
            row["val_gap"] = float(((val - self.val_ref) / self.val_ref.abs()).mean())
        self.elapsed_s += time.perf_counter() - start
        row["elapsed_s"] = self.elapsed_s
        self.epoch += 1
        return row

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
        cfg = self.cfg
        out = Path(cfg.out_dir)
        budget = math.inf if cfg.max_minutes is None else cfg.max_minutes * 60 - self.elapsed_s
        refusal = self._nothing_left(budget)
        own = self.run_dir is not None and out.is_dir() and self.run_dir.resolve() == out.resolve()
        if refusal and (self.rank != 0 or not own):  # a refused run writes nothing
            raise NothingLeft(refusal)
        if self.rank != 0:
            return self._run_epochs(out, budget, progress, log)
        if out.exists() and not out.is_dir():
            raise FileExistsError(f"output folder {out} is a file")
        with RunLock(out):  # the folder is this run's until it ends (a killed run's lock dies with it)
            self._claim(out, overwrite)
            if refusal:  # in its own folder, metrics.csv was brought back to the checkpoint's rows
                raise NothingLeft(refusal)
            return self._run_epochs(out, budget, progress, log)

    def _nothing_left(self, budget: float) -> str | None:
        """Why :meth:`fit` has nothing to do (the epochs or minutes are spent), or None."""
        if self.epoch >= self.cfg.epochs:
            return f"the run is at epoch {self.epoch} already: ask for more epochs (--epochs > {self.epoch})"
        if budget <= 0:
            return f"the run has spent its budget of {self.cfg.max_minutes:g} minutes: raise --max-minutes"
        return None

    def _run_epochs(self, out: Path, budget: float, progress: bool, log: bool) -> list[dict]:
        """:meth:`fit`'s loop, once the folder is claimed: epochs until the budget is spent."""
        cfg = self.cfg
        lead = self.rank == 0
        writer = _tensorboard(out, purge_step=self.epoch) if log and lead else None
        rows = []
        deadline = time.perf_counter() + budget
        reserve = self._estimate_epoch_end() if math.isfinite(budget) else 0.0  # seconds an epoch's end takes
        if log and lead:
            print(f"training {cfg.problem}-{cfg.num_nodes} on {_describe(self.device)}"
                  f"{f' x {self.world_size} ranks' if self.world_size > 1 else ''} from epoch {self.epoch}, "
                  f"writing to {out}/ (last.pt, best.pt, metrics.csv)")
            for note in self._start_notes(budget, reserve):
                print(f"note: {note}")
        # at least one epoch (of at least one batch); then none whose end would not fit the budget
        while self.epoch < cfg.epochs and not (rows and self._past(deadline - reserve)):
            try:
                row = self.train_epoch(progress=progress, deadline=deadline - reserve)
            except TrainingDiverged as e:
                saved = f"{out / 'last.pt'} keeps epoch {self.epoch - 1}" if self.history else "nothing was saved"
                raise TrainingDiverged(f"{e}; {saved}. Lower the learning rate, or resume from best.pt") from None
            rows.append(row)
            self.history.append(row)
            improved = row["val_cost"] < self.best_val
            self.best_val = min(self.best_val, row["val_cost"])
            state = self.state_dict()  # every rank takes part (the RNG states are gathered)
            if not lead:
                continue
            if improved:
                save_checkpoint(out / "best.pt", kind="trainer", payload=state)
            save_checkpoint(out / "last.pt", kind="trainer", payload=state)
            _write_csv(out / "metrics.csv", self.history)
            if writer is not None:
                for key, value in row.items():
                    if key != "epoch":
                        writer.add_scalar(key, value, row["epoch"])
                writer.flush()
            if log:
                print(" ".join(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()))
            if reserve:  # what this epoch's end took (baseline test, validation, checkpoint), for the next one
                reserve = time.perf_counter() - self.training_ended
        return rows

    def _estimate_epoch_end(self) -> float:
        """Seconds an epoch's end will take (the baseline's greedy test and the validation), timed on the
        first ``eval_batch_size`` validation instances: a minutes budget sets them aside before training."""
        size = self.val_set[0].shape[0]
        rows = min(size, self.cfg.eval_batch_size)
        start = time.perf_counter()
        self.greedy_costs(self.policy, select_rows(self.val_set, slice(0, rows)))
        per_row = (time.perf_counter() - start) / rows
        return per_row * (size + self.baseline.end_rows()) / self.world_size

    def _start_notes(self, budget: float, reserve: float) -> list[str]:
        """What a user should know before the run starts: a rounded epoch size, the budget and its parts."""
        cfg, notes = self.cfg, []
        if cfg.epoch_size % cfg.batch_size:
            steps = math.ceil(cfg.epoch_size / cfg.batch_size)
            notes.append(f"--epoch-size {cfg.epoch_size} is not a multiple of --batch-size {cfg.batch_size}: each "
                         f"epoch trains {steps} whole batches, {steps * cfg.batch_size} instances")
        if not math.isfinite(budget):
            return notes
        spent = f" (the checkpoint's run spent {self.elapsed_s / 60:.1f} of the {cfg.max_minutes:g})" \
            if self.elapsed_s else ""
        tested = f", up to {self.baseline.end_rows()} for the baseline" if self.baseline.end_rows() else ""
        notes.append(f"budget {budget / 60:.1f} minutes{spent}, of which about {reserve:.0f} s are kept for each "
                     f"epoch's end (validation of {self.val_set[0].shape[0]} instances{tested}, checkpoint)")
        if reserve >= budget:
            notes.append(f"an epoch's end alone takes longer than the budget: the run will overrun it by about "
                         f"{reserve - budget:.0f} s and one batch; lower --val-size or raise --max-minutes")
        return notes

    def _claim(self, out: Path, overwrite: bool) -> None:
        """Make ``out`` (locked by :meth:`fit`) this run's folder: refuse one that holds another run unless
        ``overwrite``. Nothing is written here but in the run's own folder: a resumed run brings its
        ``metrics.csv`` back to its checkpoint's rows; a run in a new folder writes its files with its first
        checkpoint, so one stopped before that leaves nothing that blocks the next try."""
        ours = self.run_dir is not None and self.run_dir.resolve() == out.resolve()
        found = [name for name in RUN_FILES if (out / name).exists()]
        if found and not ours:
            if not overwrite:
                raise FileExistsError(_occupied(out, found))
            self._check_not_input(out)
            for name in found:
                (out / name).unlink()
            shutil.rmtree(out / "tb", ignore_errors=True)
        if ours:
            self._check_not_behind(out)
        self.run_dir = out
        if ours and self.history:  # the rows of its checkpoint, none lost or repeated
            _write_csv(out / "metrics.csv", self.history)

    def _check_not_behind(self, out: Path) -> None:
        """``FileExistsError`` if ``out/last.pt`` is further along than this run (resumed from an earlier
        checkpoint, e.g. ``best.pt``, in its own folder): continuing there would replace the later epochs."""
        last = out / "last.pt"
        try:
            epoch = load_checkpoint(last).get("epoch") if last.is_file() else None
        except ValueError:  # a damaged last.pt holds no epochs to lose
            return
        if isinstance(epoch, int) and epoch > self.epoch:
            raise FileExistsError(f"{last} is at epoch {epoch}, later than the checkpoint resumed here (epoch "
                                  f"{self.epoch}); continuing in {out} would replace it: continue {last}, or give "
                                  f"this run another --out-dir")

    def _check_not_input(self, out: Path) -> None:
        """``FileExistsError`` if ``--overwrite`` would delete the file this run starts from."""
        start = self.cfg.init_from
        if start is not None and Path(start).resolve() in {(out / name).resolve() for name in RUN_FILES}:
            raise FileExistsError(f"--overwrite would delete {start}, the weights this run starts from (--init-from): "
                                  f"copy it elsewhere first, or choose another --out-dir")

    # -- checkpoints -------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {
            "config": dataclasses.asdict(self.cfg),
            "model_config": dataclasses.asdict(self.policy.config),
            "model": self.policy.state_dict(),
            "baseline": self.baseline.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "generators": self._gather_generator_states(),
            "world_size": self.world_size,
            "epoch": self.epoch,
            "instances_seen": self.instances_seen,
            "elapsed_s": self.elapsed_s,
            "best_val": self.best_val,
            "history": [dict(row) for row in self.history],
            "prior": dict(self.prior),
        }

    def _gather_generator_states(self) -> list[Tensor]:
        """Every rank's training-stream state (rank order), and the shared evaluation stream's last."""
        state = self.generator.get_state()
        if self.world_size == 1:
            states = [state]
        else:
            states = [torch.empty_like(state) for _ in range(self.world_size)]
            dist.all_gather(states, state.to(self.device) if self.device.type == "cuda" else state)
            states = [t.cpu() for t in states]
        return states + [self.eval_generator.get_state()]

    def save(self, path: str | os.PathLike) -> None:
        """Write a checkpoint (collective under ``torch.distributed``: call it on every rank)."""
        state = self.state_dict()
        if self.rank == 0:
            save_checkpoint(path, kind="trainer", payload=state)

    @classmethod
    def resume(cls, path: str | os.PathLike, **overrides: Any) -> "Trainer":
        """A trainer restored from a checkpoint, continuing at the next epoch. ``overrides`` change config
        fields such as ``epochs`` or ``out_dir``; the output folder is the checkpoint's own folder unless
        ``out_dir`` is given (the folder recorded in the checkpoint is never used: a checkpoint copied
        from elsewhere does not choose where this run writes).

        Raises:
            FileNotFoundError / ValueError naming the file and what is missing or malformed.
        """
        path = Path(path)
        ckpt = load_checkpoint(path, kind="trainer")
        missing = [k for k in ("config", "model_config", "model", "optimizer", "generators",
                               "world_size", "epoch", "instances_seen") if k not in ckpt]
        if missing:
            raise ValueError(f"checkpoint {path} lacks {', '.join(missing)}: not a complete trainer checkpoint")
        if not isinstance(ckpt["config"], dict):
            raise ValueError(f"checkpoint {path}: its config is not a dict")
        if overrides.get("problem", ckpt["config"].get("problem")) != ckpt["config"].get("problem"):
            raise ValueError(f"checkpoint {path} trains {ckpt['config'].get('problem')!r}, not {overrides['problem']!r}")
        try:
            config = dataclasses.replace(TrainConfig.from_dict(ckpt["config"]),
                                         **{"out_dir": str(path.parent), **overrides})
        except (TypeError, ValueError) as e:
            raise ValueError(f"checkpoint {path}: bad training settings: {e}") from None
        try:
            policy = build_policy(config.policy, ckpt["model_config"])
        except (TypeError, ValueError) as e:
            raise ValueError(f"checkpoint {path}: bad model settings: {e}") from None
        trainer = cls(config, policy=policy, init_baseline=False)
        try:
            trainer.policy.load_state_dict(ckpt["model"])
            trainer.optimizer.load_state_dict(ckpt["optimizer"])
            baseline_state = ckpt["baseline"] if "baseline" in ckpt else legacy_baseline_state(ckpt)
            trainer.baseline.load_state_dict(baseline_state)
        except (RuntimeError, KeyError, ValueError, TypeError) as e:
            raise ValueError(f"checkpoint {path} does not match the model it describes: {e}") from None
        if ckpt["world_size"] != trainer.world_size:
            raise ValueError(f"checkpoint {path} was written by {ckpt['world_size']} rank(s); resume it with as "
                             f"many (this run has {trainer.world_size})")
        generators = ckpt["generators"]
        try:
            if not isinstance(generators, list) or len(generators) != trainer.world_size + 1:
                raise ValueError(f"expected {trainer.world_size + 1} generator states")
            trainer.generator.set_state(generators[trainer.rank])
            trainer.eval_generator.set_state(generators[-1])
        except (RuntimeError, TypeError, ValueError) as e:
            raise ValueError(f"checkpoint {path}: bad random-generator state: {e}") from None
        trainer.epoch = int(ckpt["epoch"])
        trainer.instances_seen = int(ckpt["instances_seen"])
        trainer.elapsed_s = float(ckpt.get("elapsed_s", 0.0))
        trainer.history = ckpt["history"] if "history" in ckpt else _read_history(path.parent / "metrics.csv",
                                                                                 trainer.epoch)
        trainer.best_val = float(ckpt.get("best_val", min((r["val_cost"] for r in trainer.history), default=math.inf)))
        trainer.run_dir = path.parent
        trainer.prior = dict(ckpt.get("prior", trainer.prior))
        return trainer


def _occupied(out: Path, found: list[str]) -> str:
    """Why ``out`` cannot take a new run, and how to go on."""
    if "last.pt" not in found and "best.pt" not in found:
        return (f"{out} holds {', '.join(found)} but no checkpoint (a run stopped before its first epoch ended): "
                f"nothing to resume; replace it with --overwrite, or choose another --out-dir")
    latest = out / ("last.pt" if "last.pt" in found else "best.pt")
    return (f"{out} already holds a training run ({', '.join(found)}): continue it with --resume {latest}, "
            f"replace it with --overwrite, or choose another --out-dir")


def _initial_weights(cfg: TrainConfig) -> tuple[nn.Module, dict]:
    """The policy of ``cfg.init_from`` and how much training it had (instances, seconds) where recorded."""
    from ..policies.pretrained import load_policy_file

    policy = load_policy_file(cfg.init_from)
    if policy.config.problem != cfg.problem:
        raise ValueError(f"init_from {cfg.init_from} holds a {policy.config.problem} policy, not {cfg.problem}")
    if network_of(policy) != cfg.policy:
        raise ValueError(f"init_from {cfg.init_from} holds a {network_of(policy)} network, not the {cfg.policy} "
                         f"network the run trains: drop --policy (the weights choose the network) or match it")
    prior = {"instances_seen": 0, "elapsed_s": 0.0}
    path = Path(cfg.init_from)
    if path.is_file():
        try:
            ckpt = load_checkpoint(path)
        except ValueError:  # the reference weights: their training is not recorded in them
            ckpt = {}
        meta = ckpt.get("meta", {})
        prior["instances_seen"] = int(ckpt.get("instances_seen", meta.get("instances_seen", 0)))
        prior["elapsed_s"] = float(ckpt.get("elapsed_s", meta.get("training_time_s", 0.0)))
    return policy.train(), prior


def _progress(total: int, desc: str, enabled: bool):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="batch", leave=False)


def _tensorboard(out: Path, purge_step: int):
    """A TensorBoard writer under ``out/tb`` that drops events from ``purge_step`` on (left by a run
    killed after its last checkpoint, they are written again)."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:  # tensorboard is optional
        return None
    return SummaryWriter(str(out / "tb"), purge_step=purge_step)


def _write_csv(path: Path, rows: list[dict]) -> None:
    """Write ``rows`` as the whole CSV file, through a temporary file renamed into place (a kill leaves
    the previous file). Columns in order of first appearance; a row without one leaves it empty."""
    header = list(dict.fromkeys(key for row in rows for key in row)) or ["epoch"]
    tmp = path.with_name(path.name + ".tmp")
    try:
        with tmp.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=header, restval="")
            w.writeheader()
            w.writerows(rows)
        os.replace(tmp, path)
    except BaseException as e:  # a failed write (a full disk) leaves the previous file, no temporary one
        tmp.unlink(missing_ok=True)
        if isinstance(e, OSError) and e.errno is not None:
            raise type(e)(e.errno, e.strerror or str(e), str(path)) from None
        raise


def _read_history(path: Path, epochs: int) -> list[dict]:
    """The metrics rows of epochs ``0 .. epochs - 1`` from an older run's CSV (whose checkpoints did not
    hold them): rows a killed run wrote past its checkpoint are dropped, numbers parsed."""
    if not path.is_file():
        return []
    with path.open(newline="") as f:
        rows = [{k: _number(v) for k, v in row.items() if v != ""} for row in csv.DictReader(f)]
    last = {row["epoch"]: row for row in rows if isinstance(row.get("epoch"), int) and row["epoch"] < epochs}
    return [last[epoch] for epoch in sorted(last)]  # an epoch written twice (a rerun) counts once, as last written


def _number(text: str) -> int | float | str:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _describe(device: torch.device) -> str:
    if device.type == "cuda":
        return f"{device} ({torch.cuda.get_device_name(device)})"
    return f"cpu ({torch.get_num_threads()} threads)"
