"""REINFORCE with a greedy-rollout baseline (Kool, van Hoof & Welling, ICLR 2019), on the vector envs.

The loop reads top to bottom in :meth:`Trainer.train_epoch`: draw a batch of fresh random instances,
roll the baseline policy out greedily (no gradient), roll the policy out by sampling, and step Adam on
``mean((cost - baseline) * log_likelihood)``. At the end of an epoch the rollout baseline is replaced
when the policy is better on its evaluation set by a one-sided paired t-test; during the warm-up epochs
an exponential moving average of the cost is the baseline instead. Every epoch ends with a greedy
validation on a fixed seeded set and a checkpoint from which ``--resume`` continues exactly.

Other baselines (``TrainConfig.baseline``): ``exponential`` (the moving average alone), ``pomo`` (Kwon
et al. 2020: the mean cost of the instance's rollouts from every start node) and ``critic`` (Bello et al.
2017: a learned value network, :mod:`agents.policies.critic`, fitted to the sampled costs).
"""
from __future__ import annotations

import copy
import csv
import dataclasses
import math
import os
import time
from pathlib import Path
from typing import Any

import torch
from scipy import stats
from torch import Tensor, nn
from torch import distributed as dist
from torch.nn.parallel import DistributedDataParallel

from routing_gym.problems import get_problem

from ..inference.rollout import evaluate, make_env, rollout, start_nodes
from ..policies.checkpoint import load_checkpoint, save_checkpoint
from ..policies.critic import Critic, CriticConfig
from ..policies.protocol import select_rows
from ..policies.registry import build_policy
from .config import TrainConfig
from .distributed import gather_costs, world

BASELINES = ("rollout", "exponential", "pomo", "critic")
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


def paired_t_test_better(candidate: Tensor, baseline: Tensor, alpha: float) -> tuple[bool, float]:
    """Is ``candidate`` (costs, lower is better) better than ``baseline`` on the same instances?

    One-sided paired t-test: returns (mean candidate < mean baseline and p < alpha, p).
    """
    c, b = candidate.double().cpu().numpy(), baseline.double().cpu().numpy()
    if c.mean() >= b.mean():
        return False, 1.0
    t, p_two_sided = stats.ttest_rel(c, b)
    p = float(p_two_sided) / 2
    return bool(p < alpha), p


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
        if config.baseline not in BASELINES:
            raise ValueError(f"baseline must be one of {BASELINES}, got {config.baseline!r}")
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
        self.critic: Critic | None = None
        if config.baseline == "critic":
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(config.seed + 1)
                self.critic = Critic(CriticConfig(problem=config.problem)).to(self.device)
            self.critic_module = DistributedDataParallel(self.critic) if self.world_size > 1 else self.critic
            self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), lr=config.critic_lr)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda e: config.lr_decay ** e)
        self.generator = torch.Generator(device=self.device).manual_seed(config.seed + RANK_SEED_STRIDE * self.rank)
        self.eval_generator = torch.Generator(device=self.device).manual_seed(config.seed + EVAL_SEED_OFFSET)
        self.epoch = 0
        self.instances_seen = 0
        self.exp_value: float | None = None
        self.baseline_policy: nn.Module | None = None
        self.eval_set = None
        self.eval_costs: Tensor | None = None
        self.val_set = self.problem.generate(config.val_size, config.num_nodes, device=self.device,
                                             generator=torch.Generator(device=self.device).manual_seed(config.val_seed),
                                             **config.variant())
        self.starts = start_nodes(config.problem, self.problem.num_nodes_total(config.num_nodes), self.device)
        rollouts = self.local_batch * (len(self.starts) if config.baseline == "pomo" else 1)
        self.env = make_env(config.problem, config.num_nodes, rollouts, self.device, **config.variant())
        if config.baseline == "rollout" and init_baseline:
            self._replace_baseline()

    # -- baseline --------------------------------------------------------------------------------
    def _greedy_costs(self, policy, instances, *, sharded: bool = False) -> Tensor:
        """Greedy costs of ``instances``; ``sharded``: the set is the same on every rank, each rank
        decodes its contiguous slice and all get every cost."""
        if sharded and self.world_size > 1:
            size = instances.locs.shape[0] // self.world_size
            instances = select_rows(instances, slice(self.rank * size, (self.rank + 1) * size))
        policy.eval()
        with torch.no_grad(), self._autocast():
            costs = evaluate(policy, self.cfg.problem, instances, batch_size=self.cfg.eval_batch_size,
                             device=self.device, **self.cfg.variant())
        return gather_costs(costs) if sharded else costs

    def _replace_baseline(self) -> None:
        """Freeze a copy of the policy as the rollout baseline, with a fresh evaluation set."""
        self.baseline_policy = copy.deepcopy(self.policy).eval().requires_grad_(False)
        if self.world_size > 1:  # batch-norm running statistics may differ by rank: take rank 0's
            for tensor in self.baseline_policy.state_dict().values():
                dist.broadcast(tensor, src=0)
        self.eval_set = self.problem.generate(self.cfg.eval_size, self.cfg.num_nodes, generator=self.eval_generator,
                                              **self.cfg.variant())
        self.eval_costs = self._greedy_costs(self.baseline_policy, self.eval_set, sharded=True)

    def _use_rollout(self) -> bool:
        return self.cfg.baseline == "rollout" and self.epoch >= self.cfg.warmup_epochs

    def _baseline_values(self, instances, costs: Tensor) -> Tensor:
        """The baseline of each sampled cost (no gradient flows to the policy through it); the critic
        takes its training step here, on these costs."""
        if self.cfg.baseline == "critic":
            with self._autocast():
                predicted = self.critic_module(self.problem.observe(self.problem.reset(instances))).float()
            self._step_critic(predicted, costs)
            return predicted.detach()
        if self._use_rollout():
            return self._greedy_costs(self.baseline_policy, instances)
        mean = float(gather_costs(costs.mean()[None]).mean())
        self.exp_value = mean if self.exp_value is None else self.cfg.exp_beta * self.exp_value + (1 - self.cfg.exp_beta) * mean
        return torch.full_like(costs, self.exp_value)

    def _epoch_end_baseline(self) -> dict:
        """Kool's rollout-baseline callback: replace it when the policy is significantly better."""
        if self.cfg.baseline != "rollout":
            return {"baseline_p": float("nan"), "baseline_replaced": 0}  # nothing to replace
        candidate = self._greedy_costs(self.policy, self.eval_set, sharded=True)
        better, p = paired_t_test_better(candidate, self.eval_costs, self.cfg.bl_alpha)
        if better:
            self._replace_baseline()
        return {"baseline_p": p, "baseline_replaced": int(better)}

    def _autocast(self):
        enabled = self.cfg.bf16 and self.device.type == "cuda"
        return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16, enabled=enabled)

    # -- training ----------------------------------------------------------------------------------
    def train_batch(self) -> tuple[float, float]:
        """One gradient step on a fresh batch; returns (mean sampled cost, gradient norm)."""
        cfg = self.cfg
        b = self.local_batch
        instances = self.problem.generate(b, cfg.num_nodes, generator=self.generator, **cfg.variant())
        self.policy.train()
        if cfg.baseline == "pomo":
            k = len(self.starts)
            repeated = select_rows(instances, torch.arange(b, device=instances.locs.device).repeat_interleave(k))
            with self._autocast():
                cost, log_likelihood = self.sampler(self.env, repeated, self.generator, self.starts.repeat(b))
            bl = cost.view(b, k).mean(dim=1).repeat_interleave(k)
        else:
            with self._autocast():
                cost, log_likelihood = self.sampler(self.env, instances, self.generator)
            bl = self._baseline_values(instances, cost.detach())
        loss = ((cost - bl).detach() * log_likelihood).mean()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.policy.parameters(), cfg.max_grad_norm)
        self.optimizer.step()
        self.instances_seen += cfg.batch_size
        return float(gather_costs(cost.mean()[None]).mean()), float(grad_norm)

    def _step_critic(self, predicted: Tensor, cost: Tensor) -> None:
        """One Adam step of the critic on the mean squared error of its predictions."""
        loss = torch.nn.functional.mse_loss(predicted, cost)
        self.critic_optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.critic.parameters(), self.cfg.max_grad_norm)
        self.critic_optimizer.step()

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
        row.update(self._epoch_end_baseline())
        row["val_cost"] = float(self._greedy_costs(self.policy, self.val_set, sharded=True).mean())
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
            "baseline_model": None if self.baseline_policy is None else self.baseline_policy.state_dict(),
            "eval_set": None if self.eval_set is None else self.eval_set._asdict(),
            "eval_costs": self.eval_costs,
            "exp_value": self.exp_value,
            "critic": None if self.critic is None else self.critic.state_dict(),
            "critic_optimizer": None if self.critic is None else self.critic_optimizer.state_dict(),
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
        config = dict(ckpt["config"], **overrides)
        if overrides.get("problem", ckpt["config"]["problem"]) != ckpt["config"]["problem"]:
            raise ValueError(f"checkpoint {path} trains {ckpt['config']['problem']!r}, not {overrides['problem']!r}")
        policy = build_policy(config.get("policy", "attention"), ckpt["model_config"])
        trainer = cls(TrainConfig(**config), policy=policy, init_baseline=False)
        try:
            trainer.policy.load_state_dict(ckpt["model"])
            if ckpt["baseline_model"] is not None:
                trainer.baseline_policy = copy.deepcopy(trainer.policy).eval().requires_grad_(False)
                trainer.baseline_policy.load_state_dict(ckpt["baseline_model"])
            trainer.optimizer.load_state_dict(ckpt["optimizer"])
            trainer.scheduler.load_state_dict(ckpt["scheduler"])
            if trainer.critic is not None:
                if ckpt.get("critic") is None:
                    raise ValueError("it holds no critic")
                trainer.critic.load_state_dict(ckpt["critic"])
                trainer.critic_optimizer.load_state_dict(ckpt["critic_optimizer"])
        except (RuntimeError, KeyError, ValueError) as e:
            raise ValueError(f"checkpoint {path} does not match the model it describes: {e}") from None
        if ckpt["eval_set"] is not None:
            trainer.eval_set = trainer.problem.Instance(**{k: v.to(trainer.device) for k, v in ckpt["eval_set"].items()})
            trainer.eval_costs = ckpt["eval_costs"].to(trainer.device)
        if ckpt["world_size"] != trainer.world_size:
            raise ValueError(f"checkpoint {path} was written by {ckpt['world_size']} rank(s); resume it with as "
                             f"many (this run has {trainer.world_size})")
        trainer.exp_value = ckpt["exp_value"]
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
