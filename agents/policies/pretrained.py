"""Policy files: saving a trained policy, loading any policy checkpoint, and the shipped models.

Shipped models live in ``agents/weights/{problem}{n}.pt`` (e.g. ``tsp20.pt``): routing-gym checkpoints
of kind ``policy`` with a ``meta`` record (problem, size, instances seen, trainer settings, validation
cost). :func:`load_pretrained` finds them.
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import torch

from .attention_model import AttentionModel
from .checkpoint import FORMAT, checked, load_checkpoint, read_torch_file, save_checkpoint
from .registry import build_policy

WEIGHTS_DIR = Path(__file__).parents[1] / "weights"  # agents/weights, package data


def save_policy(path: str | os.PathLike, policy: AttentionModel, meta: dict[str, Any]) -> None:
    """Save a policy's weights and config with a metadata record (a few MB for the default model)."""
    save_checkpoint(path, kind="policy", payload={"model_config": dataclasses.asdict(policy.config),
                                                  "model": policy.state_dict(), "meta": meta})


def load_policy_file(path: str | os.PathLike, device: Any = "cpu") -> AttentionModel:
    """An attention model from a routing-gym checkpoint (kind ``policy`` or ``trainer``) or from the
    reference weights of Kool et al. (a dict with only a ``model`` state dict, ``args.json`` beside it;
    or their folder, whose last ``epoch-<k>.pt`` is read)."""
    path = Path(path)
    if path.is_dir():
        from .kool_weights import load_kool_weights

        return load_kool_weights(path).to(device)
    raw = read_torch_file(path)
    if isinstance(raw, dict) and "format" not in raw and set(raw) >= {"model"}:
        from .kool_weights import load_kool_weights

        return load_kool_weights(path).to(device)
    if isinstance(raw, dict) and raw.get("format") == FORMAT:
        return policy_of(checked(raw, path), path).to(device)
    raise ValueError(f"checkpoint {path} is neither a routing-gym checkpoint nor reference weights")


def policy_of(ckpt: dict, path: str | os.PathLike) -> AttentionModel:
    """The policy (in eval mode) that a read routing-gym checkpoint ``ckpt`` (kind ``policy`` or ``trainer``) of
    file ``path`` describes; ``ValueError`` naming the file for another kind or weights that do not fit."""
    if ckpt.get("kind") not in ("policy", "trainer"):
        raise ValueError(f"checkpoint {path} holds a {ckpt.get('kind')!r}, not a policy")
    try:
        trainer = ckpt.get("meta", {}).get("trainer", {})
        name = ckpt.get("config", {}).get("policy") or (trainer.get("policy", "attention") if isinstance(
            trainer, dict) else "attention")
        policy = build_policy(name, ckpt["model_config"])
        policy.load_state_dict(ckpt["model"])
    except (KeyError, TypeError, RuntimeError, AttributeError) as e:
        raise ValueError(f"checkpoint {path} does not describe a valid attention model: {e}") from None
    return policy.eval()


def export_policy(trainer_checkpoint: str | os.PathLike, path: str | os.PathLike, average: list | None = None) -> dict:
    """Write the policy of a trainer checkpoint as a small policy file with its metadata record
    (problem, size, the recipe (trainer settings, with ``init_from`` where the run continued other
    weights), training instances seen and wall-clock seconds (those of the weights it started from
    included, where recorded), last validation cost). With ``average`` (policy files or trainer checkpoints),
    the weights written are the uniform average of the checkpoint's and theirs (:func:`averaged`); the record
    names them, and its instances seen are the most any of them saw."""
    ckpt = load_checkpoint(trainer_checkpoint, kind="trainer")
    policy_of(ckpt, trainer_checkpoint)  # its weights fit the model it describes (else ValueError naming it)
    missing = [k for k in ("config", "model_config", "model", "epoch", "instances_seen") if k not in ckpt]
    if missing:
        raise ValueError(f"checkpoint {trainer_checkpoint} lacks {', '.join(missing)}: not a complete trainer "
                         "checkpoint")
    cfg = ckpt["config"]
    history = ckpt.get("history")
    val = history[-1]["val_cost"] if history else _last_validation(Path(trainer_checkpoint).with_name("metrics.csv"))
    prior = ckpt.get("prior", {})
    meta = {"problem": cfg["problem"], "num_nodes": cfg["num_nodes"],
            "instances_seen": ckpt["instances_seen"] + prior.get("instances_seen", 0),
            "training_time_s": ckpt.get("elapsed_s", 0.0) + prior.get("elapsed_s", 0.0),
            "epochs": ckpt["epoch"], "trainer": {k: v for k, v in cfg.items() if k != "out_dir"},
            "val_cost": val, "val_size": cfg["val_size"], "val_seed": cfg["val_seed"]}
    state = ckpt["model"]
    if average:
        others = [(other, load_checkpoint(other)) for other in average]  # each file read once
        state = averaged(trainer_checkpoint, state, others)
        meta["averaged_with"] = [{"file": str(other), "instances_seen": seen_by(c)} for other, c in others]
        meta["instances_seen"] = max([meta["instances_seen"], *(m["instances_seen"] or 0 for m in meta["averaged_with"])])
    save_checkpoint(path, kind="policy", payload={"model_config": ckpt["model_config"], "model": state,
                                                  "meta": meta})
    return meta


def averaged(first: str | os.PathLike, state: dict, others: list[tuple[Any, dict]]) -> dict:
    """The uniform average of the floating-point weights of ``state`` (read from ``first``) and of the
    policies ``others`` ((file, checkpoint) pairs: policy files or trainer checkpoints of the same
    architecture): a model soup (Wortsman et al. 2022) of runs that continued one another. Integer entries
    (batch norm's step count) are kept from ``state``. ``ValueError`` names a file whose weights do not fit."""
    states = [state]
    for other, ckpt in others:
        weights = ckpt.get("model")
        if ckpt.get("kind") not in ("policy", "trainer") or not isinstance(weights, dict):
            raise ValueError(f"checkpoint {other} holds a {ckpt.get('kind')!r}, not a policy: cannot average")
        if weights.keys() != state.keys() or any(weights[k].shape != state[k].shape for k in state):
            raise ValueError(f"{other}: not the architecture of {first} (other weights or shapes): cannot average")
        states.append(weights)
    return {k: torch.stack([s[k].float() for s in states]).mean(0).to(v.dtype) if v.is_floating_point() else v
            for k, v in state.items()}


def seen_by(ckpt: dict) -> int | None:
    """The training instances a policy file's ``meta`` or a trainer checkpoint records (with its prior's)."""
    if ckpt.get("kind") == "policy":
        return ckpt.get("meta", {}).get("instances_seen")
    return ckpt.get("instances_seen", 0) + ckpt.get("prior", {}).get("instances_seen", 0)


def _last_validation(metrics_csv: Path) -> float | None:
    if not metrics_csv.is_file():
        return None
    import csv

    with metrics_csv.open() as f:
        rows = list(csv.DictReader(f))
    return float(rows[-1]["val_cost"]) if rows else None


def pretrained_path(problem: str, num_nodes: int) -> Path:
    return WEIGHTS_DIR / f"{problem.lower()}{num_nodes}.pt"


def available_pretrained() -> list[str]:
    return sorted(p.stem for p in WEIGHTS_DIR.glob("*.pt"))


def pretrained_sizes(problem: str) -> list[int]:
    """The sizes (customers; TSP: nodes) of the shipped models for ``problem``, ascending (``[20]``)."""
    stems = (p.stem for p in WEIGHTS_DIR.glob(f"{problem.lower()}*.pt"))
    return sorted(int(s[len(problem):]) for s in stems if s[len(problem):].isdigit())


def nearest_pretrained_size(problem: str, num_nodes: int) -> int:
    """The size of the shipped model for ``problem`` nearest to ``num_nodes`` (the smaller of two equally
    near): the model a real instance of another size is decoded with. ``ValueError`` when none is shipped."""
    sizes = pretrained_sizes(problem)
    if not sizes:
        raise ValueError(f"no shipped model for {problem}; available: {available_pretrained() or 'none'}")
    return min(sizes, key=lambda n: (abs(n - num_nodes), n))


def load_pretrained(problem: str, num_nodes: int, device: Any = "cpu") -> AttentionModel:
    """The shipped attention model for a problem and size, e.g. ``load_pretrained("tsp", 20)``."""
    path = pretrained_path(problem, num_nodes)
    if not path.is_file():
        raise ValueError(f"no shipped model for {problem}-{num_nodes}; available: {available_pretrained() or 'none'}")
    return load_policy_file(path, device=device)


def pretrained_meta(problem: str, num_nodes: int) -> dict:
    return load_checkpoint(pretrained_path(problem, num_nodes), kind="policy")["meta"]
