"""The settings of a training run: :class:`TrainConfig`, saved in every trainer checkpoint (its fields are
the checkpoint's ``config`` entry, so renaming one breaks resuming; :meth:`TrainConfig.from_dict` reads
older layouts)."""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from routing_gym.problems import get_problem

from .baselines import BASELINES
from .normalisation import REWARD_NORMS

LR_SCHEDULES = ("constant", "cosine", "linear")


@dataclass
class TrainConfig:
    """Everything a training run depends on; the paper's values are the defaults."""

    problem: str = "tsp"
    """A key of ``routing_gym.problems.PROBLEMS`` (``tsp``, ``cvrp``, ``op``, ``pctsp``, ...)."""
    num_nodes: int = 20
    """Customers (TSP: nodes) per instance."""
    mixed_sizes: list = field(default_factory=list)
    """Sizes (customers; TSP: nodes) that the training batches are drawn at, one size per batch, drawn uniformly
    from the training stream: a model trained on mixed sizes. Empty (default): every batch has ``num_nodes``.
    The validation set and the rollout baseline's evaluation set keep ``num_nodes``, so the baseline is
    replaced by its greedy costs at that size."""
    variant: dict = field(default_factory=dict)
    """The problem's generator options (``Problem.variants``, e.g. ``{"prize_type": "unif"}`` for OP),
    validated by ``check_variant``, which fills in the defaults: an unknown option is a ``TypeError``, a
    bad value a ``ValueError``."""
    epochs: int = 100
    """Number of epochs."""
    epoch_size: int = 1_280_000
    """Fresh random training instances per epoch."""
    batch_size: int = 512
    """Instances per gradient step."""
    lr: float = 1e-4
    """Adam learning rate."""
    lr_decay: float = 1.0
    """Learning rate multiplied by this after every epoch."""
    lr_schedule: str = "constant"
    """The learning rate's shape over the run's budget (:func:`learning_rate`): ``constant`` (the paper's:
    ``lr``, times ``lr_decay`` per epoch), ``cosine`` (from ``lr`` down to 0 along a half cosine) or
    ``linear`` (down to 0 along a straight line; Li et al., "Budgeted training", ICLR 2020)."""
    lr_warmup: float = 0.0
    """Fraction of the budget over which the learning rate first rises linearly from 0 (any schedule)."""
    max_grad_norm: float = 1.0
    """Gradient-norm clipping threshold."""
    baseline: str = "rollout"
    """A key of :data:`agents.training.baselines.BASELINES`: ``rollout`` (greedy rollout of a frozen copy,
    replaced by the t-test), ``exponential``, ``pomo`` (Kwon et al. 2020: each instance sampled from every
    start node, their mean cost the shared baseline; ``batch_size`` then counts instances, each rolled out
    once per start node), or ``critic`` (Bello et al. 2017: :class:`agents.policies.critic.Critic` predicts
    the cost and is fitted to it by mean squared error)."""
    augment: int = 1
    """``baseline="pomo"``: each instance is rolled out from every start node on each of its first
    ``augment`` (1 to 8) symmetric copies (the unit square's flips and the x/y swap, which keep every
    distance; copy 0 is the instance itself), and all ``augment x starts`` rollouts of an instance share
    their mean cost as baseline: POMO's instance augmentation (Kwon et al. 2020) used in training, as
    Sym-NCO's problem-symmetricity loss does (Kim et al. 2022). ``batch_size`` still counts instances."""
    reward_norm: str = "none"
    """``"variant"``: divide each instance's advantage by a moving average of its group's mean cost
    (:mod:`agents.training.normalisation`, RouteFinder's per-variant reward normalisation), for problems whose
    instances fall into groups (the MTVRP's variants); ``"none"`` (default) leaves the advantage as it is."""
    critic_lr: float = 1e-4
    """Adam learning rate of the critic (``baseline="critic"``)."""
    warmup_epochs: int = 1
    """Epochs during which the exponential baseline stands in for the rollout baseline."""
    exp_beta: float = 0.8
    """Decay of the exponential moving-average baseline."""
    bl_alpha: float = 0.05
    """Significance level of the one-sided paired t-test that replaces the rollout baseline."""
    eval_size: int = 10_000
    """Instances in the rollout baseline's evaluation set (regenerated when the baseline changes)."""
    val_size: int = 10_000
    """Instances in the fixed validation set."""
    val_seed: int = 1234
    """Seed of the validation set (kept apart from the training stream)."""
    seed: int = 0
    """Seed of the training stream (instances, sampling, initial weights)."""
    device: str = "auto"
    """``auto`` (CUDA when available), ``cpu``, ``cuda`` or ``cuda:K``."""
    bf16: bool = False
    """bf16 autocast for the forward passes (the rollouts and the baseline's), on CUDA or the CPU. On a CPU it
    pays only with bf16 matrix units (Intel AMX): ``benchmarks/README.md``, "bf16 on the CPU"."""
    eval_batch_size: int = 1024
    """Batch size of the greedy evaluations (baseline and validation)."""
    out_dir: str = "runs/train"
    """Where checkpoints, ``metrics.csv`` and TensorBoard logs go."""
    policy: str = "attention"
    """The network trained, a key of :data:`agents.policies.registry.POLICIES`: ``attention`` (the
    Attention Model) or ``pointer`` (the Pointer Network)."""
    model: dict = field(default_factory=dict)
    """Overrides of the policy's config fields
    (:class:`~agents.policies.attention_model.AttentionModelConfig`, e.g. ``{"n_layers": 2}``, or
    :class:`~agents.policies.pointer_network.PointerNetworkConfig`)."""
    max_minutes: float | None = None
    """Wall-clock budget of the run in minutes (training, baseline tests and validation, summed over
    resumes), or None for none. The epoch in which it runs out stops early, is validated and saved, and
    the run ends: equal budgets compare recipes fairly."""
    init_from: str | None = None
    """A policy file or trainer checkpoint (or the reference weights of Kool et al.) whose weights start the
    run, with their model settings (``model`` must then be empty): fine-tuning, a longer run with another
    recipe, or transfer to another size. The optimiser and the baseline start afresh."""
    imitate: str | None = None
    """A labelled dataset file (``routing_gym.data`` format with ``ref_tours``, as ``routing-gym solve --save``
    writes) whose tours the policy imitates first: the run's first ``imitation_epochs`` epochs minimise the
    cross-entropy of the labels' actions by teacher forcing (supervised, as Vinyals et al. 2015 trained the
    Pointer Network), each drawing ``epoch_size`` labelled instances; the epochs after them are REINFORCE.
    A warm start from solver labels, which are cheap where a fast solver exists (LKH for TSP)."""
    imitation_epochs: int = 1
    """The supervised epochs at the start of the run (with ``imitate``)."""
    val_dataset: str | None = None
    """A dataset file (``routing_gym.data`` format) to validate on instead of ``val_size`` generated
    instances; when it holds reference costs (``ref_cost``) the metrics also record ``val_gap``, the mean
    of (cost - reference) / |reference|."""

    def __post_init__(self):
        problem = get_problem(self.problem)  # ValueError for an unknown problem
        if self.baseline not in BASELINES:
            raise ValueError(f"baseline must be one of {tuple(BASELINES)}, got {self.baseline!r}")
        self.variant = problem.check_variant(self.variant)
        problem.check_num_nodes(self.num_nodes)
        if not isinstance(self.mixed_sizes, (list, tuple)):
            raise ValueError(f"mixed_sizes must be a list of sizes, got {self.mixed_sizes!r}")
        self.mixed_sizes = list(self.mixed_sizes)
        for size in self.mixed_sizes:
            _require("each of mixed_sizes", size, int, "a positive integer", lambda v: v >= 1)
            problem.check_num_nodes(size)
        if len(set(self.mixed_sizes)) != len(self.mixed_sizes):
            raise ValueError(f"mixed_sizes lists a size twice: {self.mixed_sizes}")
        if self.mixed_sizes and self.baseline == "pomo":
            raise ValueError("mixed_sizes needs a baseline whose rollouts do not depend on the size (rollout, "
                             "exponential or critic), not 'pomo' (its starts are every node of one size)")
        if self.mixed_sizes and self.imitate is not None:
            raise ValueError("mixed_sizes cannot be combined with imitate (the labels have one size)")
        for name in ("epochs", "epoch_size", "batch_size", "eval_size", "val_size", "eval_batch_size"):
            _require(name, getattr(self, name), int, "a positive integer", lambda v: v >= 1)
        for name in ("seed", "val_seed", "warmup_epochs", "imitation_epochs"):
            _require(name, getattr(self, name), int, "an integer >= 0", lambda v: v >= 0)
        for name in ("lr", "critic_lr", "max_grad_norm", "lr_decay"):
            _require(name, getattr(self, name), float, "a finite number > 0", lambda v: 0 < v < math.inf)
        if self.lr_schedule not in LR_SCHEDULES:
            raise ValueError(f"lr_schedule must be one of {LR_SCHEDULES}, got {self.lr_schedule!r}")
        _require("augment", self.augment, int, "an integer from 1 to 8", lambda v: 1 <= v <= 8)
        if self.augment > 1 and self.baseline != "pomo":
            raise ValueError(f"augment={self.augment} needs baseline='pomo' (the copies share POMO's baseline), "
                             f"not {self.baseline!r}")
        if self.reward_norm not in REWARD_NORMS:
            raise ValueError(f"reward_norm must be one of {REWARD_NORMS}, got {self.reward_norm!r}")
        if self.reward_norm != "none" and self.baseline == "pomo":
            raise ValueError("reward_norm needs one rollout per instance: not baseline='pomo'")
        _require("lr_warmup", self.lr_warmup, float, "a number in [0, 1)", lambda v: 0 <= v < 1)
        _require("exp_beta", self.exp_beta, float, "a number in [0, 1)", lambda v: 0 <= v < 1)
        _require("bl_alpha", self.bl_alpha, float, "a number in (0, 1)", lambda v: 0 < v < 1)
        if self.max_minutes is not None:
            _require("max_minutes", self.max_minutes, float, "a finite number > 0 (or None)", lambda v: 0 < v < math.inf)
        if self.init_from is not None and self.model:
            raise ValueError("init_from takes its model settings from the weights it loads: leave model empty")
        if not isinstance(self.bf16, bool):
            raise ValueError(f"bf16 must be True or False, got {self.bf16!r}")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "TrainConfig":
        """The config a checkpoint's ``config`` entry describes, converting the older layout: a top-level
        ``prize_type`` (a field until the problem options became ``variant``) moves into ``variant`` when
        the problem takes that option and is dropped otherwise (other problems ignored it)."""
        data = dict(data)
        if "prize_type" in data:
            prize_type = data.pop("prize_type")
            if "prize_type" in get_problem(data.get("problem", cls.problem)).variants:
                data["variant"] = {"prize_type": prize_type, **data.get("variant", {})}
        unknown = sorted(set(data) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"unknown training setting(s) {unknown} (written by a newer version?)")
        return cls(**data)


def budget_progress(cfg: TrainConfig, instances_seen: int, elapsed_s: float) -> float:
    """How much of the run's budget is spent, in [0, 1]: the larger of the fractions of its instances
    (``epochs * epoch_size``) and of its minutes (``max_minutes``, when set) used, since the run ends with
    whichever runs out first."""
    spent = instances_seen / (cfg.epochs * cfg.epoch_size)
    if cfg.max_minutes is not None:
        spent = max(spent, elapsed_s / (cfg.max_minutes * 60))
    return min(spent, 1.0)


def learning_rate(cfg: TrainConfig, epoch: int, progress: float) -> float:
    """The learning rate of a step taken in ``epoch`` with ``progress`` of the budget spent
    (:func:`budget_progress`): ``cfg.lr`` times ``cfg.lr_decay ** epoch``, times the schedule's factor
    (``constant`` 1, ``cosine`` (1 + cos(pi p)) / 2, ``linear`` 1 - p, with p the progress past the
    warm-up, rescaled to [0, 1]), times the warm-up's ramp ``progress / cfg.lr_warmup`` while it lasts.

    >>> cfg = TrainConfig(lr=1e-3, lr_schedule="cosine", lr_warmup=0.1)
    >>> [round(learning_rate(cfg, 0, p), 6) for p in (0.05, 0.1, 0.55, 1.0)]
    [0.0005, 0.001, 0.0005, 0.0]
    """
    lr = cfg.lr * cfg.lr_decay ** epoch
    if progress < cfg.lr_warmup:
        return lr * progress / cfg.lr_warmup
    p = (progress - cfg.lr_warmup) / (1 - cfg.lr_warmup)
    if cfg.lr_schedule == "cosine":
        return lr * 0.5 * (1 + math.cos(math.pi * p))
    if cfg.lr_schedule == "linear":
        return lr * (1 - p)
    return lr


def _require(name: str, value: Any, kind: type, what: str, ok) -> None:
    """``ValueError`` unless ``value`` is of ``kind`` (an int for ``float`` too; never a bool) and ``ok``."""
    kinds = (int, float) if kind is float else (kind,)
    if isinstance(value, bool) or not isinstance(value, kinds) or not ok(value):
        raise ValueError(f"{name} must be {what}, got {value!r}")
