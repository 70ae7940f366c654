"""A run's budget (``TrainConfig.epochs`` and ``max_minutes``): the learning rate and the deadline before
each step, the time an epoch's end takes (set aside within a minutes budget), what is left, and the notes
a user reads before the run starts. Under ``torch.distributed`` with a minutes budget the ranks' clocks
differ a little, so every rank takes rank 0's rate and decisions.

``trainer`` below is an :class:`agents.training.reinforce.Trainer`."""
from __future__ import annotations

import math
import time

from ..policies.protocol import select_rows
from .config import budget_progress, learning_rate
from .distributed import rank0


def plan_step(trainer, elapsed_s: float, past_deadline: bool = False) -> bool:
    """Before a step, ``elapsed_s`` seconds into the run's budget: set the optimiser's learning rate from
    the schedule (:func:`~agents.training.config.learning_rate`) and say whether the budget's deadline
    has passed (the step is then not taken)."""
    cfg = trainer.cfg
    lr = learning_rate(cfg, trainer.epoch, budget_progress(cfg, trainer.instances_seen, elapsed_s))
    lr, past_deadline = rank0([lr, float(past_deadline)], trainer.device, cfg.max_minutes is not None)
    for group in trainer.optimizer.param_groups:
        group["lr"] = lr
    return bool(past_deadline)


def past(trainer, deadline: float) -> bool:
    """Has ``deadline`` (a ``time.perf_counter()`` value) passed, by rank 0's clock?"""
    return bool(rank0([float(time.perf_counter() >= deadline)], trainer.device, trainer.cfg.max_minutes is not None)[0])


def nothing_left(trainer, budget: float) -> str | None:
    """Why the run has nothing to do (its epochs or its ``budget`` seconds are spent), or None."""
    if trainer.epoch >= trainer.cfg.epochs:
        return f"the run is at epoch {trainer.epoch} already: ask for more epochs (--epochs > {trainer.epoch})"
    if budget <= 0:
        return f"the run has spent its budget of {trainer.cfg.max_minutes:g} minutes: raise --max-minutes"
    return None


def estimate_epoch_end(trainer) -> float:
    """Seconds an epoch's end will take (the baseline's greedy test and the validation), timed on the
    first ``eval_batch_size`` validation instances: a minutes budget sets them aside before training."""
    size = trainer.val_set[0].shape[0]
    rows = min(size, trainer.cfg.eval_batch_size)
    start = time.perf_counter()
    trainer.greedy_costs(trainer.policy, select_rows(trainer.val_set, slice(0, rows)))
    per_row = (time.perf_counter() - start) / rows
    return per_row * (size + trainer.baseline.end_rows()) / trainer.world_size


def start_notes(trainer, budget: float, reserve: float) -> list[str]:
    """What a user should know before the run starts: a rounded epoch size, the budget and its parts."""
    cfg, notes = trainer.cfg, []
    if cfg.epoch_size % cfg.batch_size:
        steps = math.ceil(cfg.epoch_size / cfg.batch_size)
        notes.append(f"--epoch-size {cfg.epoch_size} is not a multiple of --batch-size {cfg.batch_size}: each "
                     f"epoch trains {steps} whole batches, {steps * cfg.batch_size} instances")
    if not math.isfinite(budget):
        return notes
    spent = f" (the checkpoint's run spent {trainer.elapsed_s / 60:.1f} of the {cfg.max_minutes:g})" \
        if trainer.elapsed_s else ""
    tested = f", up to {trainer.baseline.end_rows()} for the baseline" if trainer.baseline.end_rows() else ""
    notes.append(f"budget {budget / 60:.1f} minutes{spent}, of which about {reserve:.0f} s are kept for each "
                 f"epoch's end (validation of {trainer.val_set[0].shape[0]} instances{tested}, checkpoint)")
    if reserve >= budget:
        notes.append(f"an epoch's end alone takes longer than the budget: the run will overrun it by about "
                     f"{reserve - budget:.0f} s and one batch; lower --val-size or raise --max-minutes")
    return notes
