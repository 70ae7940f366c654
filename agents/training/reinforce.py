"""REINFORCE with a baseline (Kool, van Hoof & Welling, ICLR 2019: a greedy-rollout baseline), on the
vector envs.

The loop reads top to bottom in :meth:`Trainer.train_batch` and :meth:`Trainer.train_epoch`: draw a batch
of fresh random instances, let the baseline prepare the rollouts (POMO: every start node), roll the
policy out by sampling, take the baseline's values of the sampled costs (no gradient), and step Adam on
``mean((cost - baseline) * log_likelihood)``. An epoch ends with the baseline's end-of-epoch update (the
rollout baseline's t-test), a greedy validation on a fixed seeded set, and a checkpoint from which
``--resume`` continues exactly.

The baselines (``TrainConfig.baseline``: ``rollout``, ``exponential``, ``pomo``, ``critic``) are the
classes of :mod:`agents.training.baselines`; the trainer knows them only through their interface, and the
checkpoint holds ``baseline.state_dict()`` as its ``baseline`` entry.
"""
from __future__ import annotations

import csv
import dataclasses
import math
import os
import time
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from torch import distributed as dist
from torch.nn.parallel import DistributedDataParallel

from routing_gym.problems import get_problem

from ..inference.rollout import evaluate, make_env, rollout
from ..policies.checkpoint import load_checkpoint, save_checkpoint
from ..policies.protocol import select_rows
from ..policies.registry import build_policy
from .baselines import BASELINES, legacy_baseline_state, paired_t_test_better  # noqa: F401 - re-exported
from .config import TrainConfig
from .distributed import gather_costs, world
RANK_SEED_STRIDE = 1_000_003  # rank r draws training instances and samples from seed + r * stride
EVAL_SEED_OFFSET = 7_777_777  # the baseline's evaluation sets come from a stream shared by all ranks


def training_device(name: str) -> torch.device:
    """The device of ``TrainConfig.device``: ``"auto"`` is CUDA when available, else the CPU; any other
    name is taken as is, and CUDA asked for where there is none is a ``ValueError``."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(name)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {name!r} asked for, but CUDA is not available")
    return dev


class SampledRollout(nn.Module):
    """The policy's sampling rollout as a module's ``forward``, so that DDP can wrap it."""

    def __init__(self, policy: nn.Module):
        super().__init__()
        self.policy = policy

    def forward(self, env, instances, generator: torch.Generator, first_actions: Tensor | None = None):
        out = rollout(self.policy, env, instances, strategy="sample", generator=generator, first_actions=first_actions)
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
        self.device = training_device(config.device)
        self.problem = get_problem(config.problem)
        if policy is None:
            with torch.random.fork_rng(devices=[]):  # seeded initial weights, global RNG left as it was
                torch.manual_seed(config.seed)
                policy = build_policy(config.policy, dict(config.model, problem=config.problem))
        self.rank, self.world_size = world()
        for name, size in (("batch_size", config.batch_size), ("eval_size", config.eval_size),
                           ("val_size", config.val_size)):
            if size % self.world_size:
                raise ValueError(f"{name} {size} is not divisible by the world size {self.world_size}")
        self.local_batch = config.batch_size // self.world_size
        if self.world_size > 1 and self.device.type == "cuda":
            policy = nn.SyncBatchNorm.convert_sync_batchnorm(policy)
        self.policy = policy.to(self.device)
        sampler = SampledRollout(self.policy)
        self.sampler = DistributedDataParallel(sampler) if self.world_size > 1 else sampler
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=config.lr)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda e: config.lr_decay ** e)
        self.generator = torch.Generator(device=self.device).manual_seed(config.seed + RANK_SEED_STRIDE * self.rank)
        self.eval_generator = torch.Generator(device=self.device).manual_seed(config.seed + EVAL_SEED_OFFSET)
        self.epoch = 0
        self.instances_seen = 0
        self.val_set = self.problem.generate(config.val_size, config.num_nodes, device=self.device,
                                             generator=torch.Generator(device=self.device).manual_seed(config.val_seed),
                                             **config.variant)
        self.baseline = BASELINES[config.baseline](self)
        rollouts = self.local_batch * self.baseline.rollouts_per_instance
        self.env = make_env(config.problem, config.num_nodes, rollouts, self.device, **config.variant)
        if init_baseline:
            self.baseline.initialize()

    # -- services of the baselines -----------------------------------------------------------------
    def greedy_costs(self, policy, instances, *, sharded: bool = False) -> Tensor:
        """Greedy costs of ``instances``; ``sharded``: the set is the same on every rank, each rank
        decodes its contiguous slice and all get every cost."""
        if sharded and self.world_size > 1:
            size = instances.locs.shape[0] // self.world_size
            instances = select_rows(instances, slice(self.rank * size, (self.rank + 1) * size))
        policy.eval()
        with torch.no_grad(), self.autocast():
            costs = evaluate(policy, self.cfg.problem, instances, batch_size=self.cfg.eval_batch_size,
                             device=self.device, **self.cfg.variant)
        return gather_costs(costs) if sharded else costs

    def autocast(self):
        """The forward passes' autocast context: bf16 on CUDA with ``cfg.bf16``, else none."""
        enabled = self.cfg.bf16 and self.device.type == "cuda"
        return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16, enabled=enabled)

    # -- training ----------------------------------------------------------------------------------
    def train_batch(self) -> tuple[float, float]:
        """One gradient step on a fresh batch; returns (mean sampled cost, gradient norm)."""
        cfg = self.cfg
        instances = self.problem.generate(self.local_batch, cfg.num_nodes, generator=self.generator, **cfg.variant)
        rollouts, first_actions = self.baseline.prepare(instances)
        self.policy.train()
        with self.autocast():
            cost, log_likelihood = self.sampler(self.env, rollouts, self.generator, first_actions)
        bl = self.baseline.values(instances, cost.detach())
        loss = ((cost - bl).detach() * log_likelihood).mean()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.policy.parameters(), cfg.max_grad_norm)
        self.optimizer.step()
        self.instances_seen += cfg.batch_size
        return float(gather_costs(cost.mean()[None]).mean()), float(grad_norm)

    def train_epoch(self, progress: bool = True) -> dict:
        cfg = self.cfg
        steps = math.ceil(cfg.epoch_size / cfg.batch_size)
        start = time.perf_counter()
        costs = []
        bar = _progress(steps, f"epoch {self.epoch}", progress and self.rank == 0)
        for i in range(steps):
            cost, _ = self.train_batch()
            costs.append(cost)
            if bar is not None:
                rate = (i + 1) * cfg.batch_size / (time.perf_counter() - start)
                bar.set_postfix(cost=f"{cost:.4f}", inst_s=f"{rate:.0f}")
                bar.update()
        if bar is not None:
            bar.close()
        train_time = time.perf_counter() - start
        row = {"epoch": self.epoch, "instances_seen": self.instances_seen, "train_cost": sum(costs) / len(costs),
               "lr": self.optimizer.param_groups[0]["lr"], "batch_size": cfg.batch_size, "train_time_s": train_time,
               "instances_per_s": steps * cfg.batch_size / train_time}
        row.update(self.baseline.epoch_end())
        row["val_cost"] = float(self.greedy_costs(self.policy, self.val_set, sharded=True).mean())
        self.scheduler.step()
        self.epoch += 1
        return row

    def fit(self, progress: bool = True, log: bool = True) -> list[dict]:
        """Train until ``cfg.epochs``; after each epoch rank 0 writes a checkpoint and the metrics."""
        out = Path(self.cfg.out_dir)
        lead = self.rank == 0
        if lead:
            out.mkdir(parents=True, exist_ok=True)
        writer = _tensorboard(out) if log and lead else None
        rows = []
        if log and lead:
            print(f"training {self.cfg.problem}-{self.cfg.num_nodes} on {_describe(self.device)}"
                  f"{f' x {self.world_size} ranks' if self.world_size > 1 else ''} from epoch {self.epoch}")
        while self.epoch < self.cfg.epochs:
            row = self.train_epoch(progress=progress)
            rows.append(row)
            state = self.state_dict()  # every rank takes part (the RNG states are gathered)
            if not lead:
                continue
            save_checkpoint(out / "last.pt", kind="trainer", payload=state)
            _append_csv(out / "metrics.csv", row)
            if writer is not None:
                for key, value in row.items():
                    if key != "epoch":
                        writer.add_scalar(key, value, row["epoch"])
                writer.flush()
            if log:
                print(" ".join(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()))
        return rows

    # -- checkpoints -------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {
            "config": dataclasses.asdict(self.cfg),
            "model_config": dataclasses.asdict(self.policy.config),
            "model": self.policy.state_dict(),
            "baseline": self.baseline.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "generators": self._gather_generator_states(),
            "world_size": self.world_size,
            "epoch": self.epoch,
            "instances_seen": self.instances_seen,
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
        """A trainer restored from a checkpoint, continuing at the next epoch (``overrides`` change
        config fields such as ``epochs`` or ``out_dir``)."""
        ckpt = load_checkpoint(path, kind="trainer")
        if overrides.get("problem", ckpt["config"]["problem"]) != ckpt["config"]["problem"]:
            raise ValueError(f"checkpoint {path} trains {ckpt['config']['problem']!r}, not {overrides['problem']!r}")
        config = dataclasses.replace(TrainConfig.from_dict(ckpt["config"]), **overrides)
        policy = build_policy(config.policy, ckpt["model_config"])
        trainer = cls(config, policy=policy, init_baseline=False)
        try:
            trainer.policy.load_state_dict(ckpt["model"])
            trainer.optimizer.load_state_dict(ckpt["optimizer"])
            trainer.scheduler.load_state_dict(ckpt["scheduler"])
            baseline_state = ckpt["baseline"] if "baseline" in ckpt else legacy_baseline_state(ckpt)
            trainer.baseline.load_state_dict(baseline_state)
        except (RuntimeError, KeyError, ValueError) as e:
            raise ValueError(f"checkpoint {path} does not match the model it describes: {e}") from None
        if ckpt["world_size"] != trainer.world_size:
            raise ValueError(f"checkpoint {path} was written by {ckpt['world_size']} rank(s); resume it with as "
                             f"many (this run has {trainer.world_size})")
        trainer.generator.set_state(ckpt["generators"][trainer.rank])
        trainer.eval_generator.set_state(ckpt["generators"][-1])
        trainer.epoch = ckpt["epoch"]
        trainer.instances_seen = ckpt["instances_seen"]
        return trainer


def _progress(total: int, desc: str, enabled: bool):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="batch", leave=False)


def _tensorboard(out: Path):
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:  # tensorboard is optional
        return None
    return SummaryWriter(str(out / "tb"))


def _append_csv(path: Path, row: dict) -> None:
    """Append ``row`` to the CSV file; a column the file lacks (a run resumed by a newer version) widens
    its header, and the rows before leave it empty."""
    header = []
    if path.exists():
        with path.open(newline="") as f:
            header = next(csv.reader(f), [])
    missing = [k for k in row if k not in header]
    if header and missing:
        with path.open(newline="") as f:
            rows = list(csv.DictReader(f))
        header += missing
        with path.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=header, restval="")
            w.writeheader()
            w.writerows(rows)
    with path.open("a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=header or list(row), restval="")
        if not header:
            w.writeheader()
        w.writerow(row)


def _describe(device: torch.device) -> str:
    if device.type == "cuda":
        return f"{device} ({torch.cuda.get_device_name(device)})"
    return f"cpu ({torch.get_num_threads()} threads)"
