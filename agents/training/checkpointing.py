"""A training run's checkpoints and folder: what a checkpoint holds (:func:`state_dict`), writing
``best.pt`` / ``last.pt`` (:func:`save_run`), reading one back for an exact resume (:func:`read`,
:func:`restore`), the weights a run starts from (:func:`initial_weights`), and claiming the output folder
(:func:`claim_folder`: a run never writes into a folder that holds another run).

``trainer`` below is an :class:`agents.training.reinforce.Trainer` (its fields are read and, on
restore, set)."""
from __future__ import annotations

import dataclasses
import math
import os
import shutil
from pathlib import Path
from typing import Any

from torch import nn

from ..policies.checkpoint import load_checkpoint, save_checkpoint
from ..policies.registry import build_policy, network_of
from .baselines import legacy_baseline_state
from .config import TrainConfig
from .distributed import gather_generator_states
from .metrics import read_history, write_csv

RUN_FILES = ("last.pt", "best.pt", "metrics.csv")  # a run's record in cfg.out_dir (and its "tb" events)
REQUIRED = ("config", "model_config", "model", "optimizer", "generators", "world_size", "epoch", "instances_seen")


def state_dict(trainer) -> dict:
    """Everything an exact resume needs (collective under ``torch.distributed``: the ranks' RNG states
    are gathered)."""
    return {
        "config": dataclasses.asdict(trainer.cfg),
        "model_config": dataclasses.asdict(trainer.policy.config),
        "model": trainer.policy.state_dict(),
        "baseline": trainer.baseline.state_dict(),
        "optimizer": trainer.optimizer.state_dict(),
        "generators": gather_generator_states(trainer.generator, trainer.device) + [trainer.eval_generator.get_state()],
        "world_size": trainer.world_size,
        "epoch": trainer.epoch,
        "instances_seen": trainer.instances_seen,
        "elapsed_s": trainer.elapsed_s,
        "best_val": trainer.best_val,
        "history": [dict(row) for row in trainer.history],
        "prior": dict(trainer.prior),
        **({"reward_scale": trainer.reward_scale.state_dict()} if trainer.reward_scale is not None else {}),
    }


def save_run(trainer, out: Path, improved: bool) -> None:
    """An epoch's checkpoints: ``best.pt`` when the validation ``improved``, then ``last.pt`` (every rank
    calls this; rank 0 writes)."""
    state = state_dict(trainer)
    if trainer.rank != 0:
        return
    if improved:
        save_checkpoint(out / "best.pt", kind="trainer", payload=state)
    save_checkpoint(out / "last.pt", kind="trainer", payload=state)


def save(trainer, path: str | os.PathLike) -> None:
    """Write the trainer's checkpoint to ``path`` (collective under ``torch.distributed``: call it on every
    rank; rank 0 writes)."""
    state = state_dict(trainer)
    if trainer.rank == 0:
        save_checkpoint(path, kind="trainer", payload=state)


def read(path: Path, overrides: dict[str, Any]) -> tuple[dict, TrainConfig, nn.Module]:
    """The checkpoint at ``path``, its config with ``overrides`` (the output folder is the checkpoint's
    own unless ``out_dir`` is given) and its policy, built but not loaded.

    Raises:
        FileNotFoundError / ValueError naming the file and what is missing or malformed.
    """
    ckpt = load_checkpoint(path, kind="trainer")
    missing = [k for k in REQUIRED if k not in ckpt]
    if missing:
        raise ValueError(f"checkpoint {path} lacks {', '.join(missing)}: not a complete trainer checkpoint")
    if not isinstance(ckpt["config"], dict):
        raise ValueError(f"checkpoint {path}: its config is not a dict")
    if overrides.get("problem", ckpt["config"].get("problem")) != ckpt["config"].get("problem"):
        raise ValueError(f"checkpoint {path} trains {ckpt['config'].get('problem')!r}, not {overrides['problem']!r}")
    try:
        overrides = {"out_dir": str(path.parent), **overrides}
        config = dataclasses.replace(TrainConfig.from_dict(ckpt["config"]), **overrides)
    except (TypeError, ValueError) as e:
        raise ValueError(f"checkpoint {path}: bad training settings: {e}") from None
    try:
        policy = build_policy(config.policy, ckpt["model_config"])
    except (TypeError, ValueError) as e:
        raise ValueError(f"checkpoint {path}: bad model settings: {e}") from None
    return ckpt, config, policy


def restore(trainer, ckpt: dict, path: Path) -> None:
    """Load ``ckpt`` (read from ``path``) into a trainer built from its config, which continues at the
    checkpoint's next epoch in the checkpoint's folder."""
    try:
        trainer.policy.load_state_dict(ckpt["model"])
        trainer.optimizer.load_state_dict(ckpt["optimizer"])
        trainer.baseline.load_state_dict(ckpt["baseline"] if "baseline" in ckpt else legacy_baseline_state(ckpt))
        if trainer.reward_scale is not None:
            trainer.reward_scale.load_state_dict(ckpt["reward_scale"])
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
    trainer.history = ckpt["history"] if "history" in ckpt else read_history(path.parent / "metrics.csv", trainer.epoch)
    trainer.best_val = float(ckpt.get("best_val", min((r["val_cost"] for r in trainer.history), default=math.inf)))
    trainer.run_dir = path.parent
    trainer.prior = dict(ckpt.get("prior", trainer.prior))


def initial_weights(cfg: TrainConfig) -> tuple[nn.Module, dict]:
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


def claim_folder(trainer, out: Path, overwrite: bool) -> None:
    """Make ``out`` (locked by the caller) the trainer's run folder: refuse one that holds another run
    unless ``overwrite``. Nothing is written here but in the run's own folder: a resumed run brings its
    ``metrics.csv`` back to its checkpoint's rows; a run in a new folder writes its files with its first
    checkpoint, so one stopped before that leaves nothing that blocks the next try."""
    ours = trainer.run_dir is not None and trainer.run_dir.resolve() == out.resolve()
    found = [name for name in RUN_FILES if (out / name).exists()]
    if found and not ours:
        if not overwrite:
            raise FileExistsError(_occupied(out, found))
        _check_not_input(trainer.cfg.init_from, out)
        for name in found:
            (out / name).unlink()
        shutil.rmtree(out / "tb", ignore_errors=True)
    if ours:
        _check_not_behind(out, trainer.epoch)
    trainer.run_dir = out
    if ours and trainer.history:  # the rows of its checkpoint, none lost or repeated
        write_csv(out / "metrics.csv", trainer.history)


def _check_not_behind(out: Path, epoch: int) -> None:
    """``FileExistsError`` if ``out/last.pt`` is further along than ``epoch`` (a run resumed from an
    earlier checkpoint, e.g. ``best.pt``, in its own folder): continuing there would replace the later epochs."""
    last = out / "last.pt"
    try:
        saved = load_checkpoint(last).get("epoch") if last.is_file() else None
    except ValueError:  # a damaged last.pt holds no epochs to lose
        return
    if isinstance(saved, int) and saved > epoch:
        raise FileExistsError(f"{last} is at epoch {saved}, later than the checkpoint resumed here (epoch "
                              f"{epoch}); continuing in {out} would replace it: continue {last}, or give "
                              f"this run another --out-dir")


def _check_not_input(start: str | os.PathLike | None, out: Path) -> None:
    """``FileExistsError`` if ``--overwrite`` would delete ``start``, the file this run starts from."""
    if start is not None and Path(start).resolve() in {(out / name).resolve() for name in RUN_FILES}:
        raise FileExistsError(f"--overwrite would delete {start}, the weights this run starts from (--init-from): "
                              f"copy it elsewhere first, or choose another --out-dir")


def _occupied(out: Path, found: list[str]) -> str:
    """Why ``out`` cannot take a new run, and how to go on."""
    if "last.pt" not in found and "best.pt" not in found:
        return (f"{out} holds {', '.join(found)} but no checkpoint (a run stopped before its first epoch ended): "
                f"nothing to resume; replace it with --overwrite, or choose another --out-dir")
    latest = out / ("last.pt" if "last.pt" in found else "best.pt")
    return (f"{out} already holds a training run ({', '.join(found)}): continue it with --resume {latest}, "
            f"replace it with --overwrite, or choose another --out-dir")
