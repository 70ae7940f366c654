"""The networks a checkpoint can hold, by name: ``TrainConfig.policy`` and a checkpoint's ``policy`` entry
name one of :data:`POLICIES`, and :func:`build_policy` builds it from its config fields."""
from __future__ import annotations

import dataclasses

import torch
from torch import nn

from .attention_model import AttentionModel, AttentionModelConfig
from .pointer_network import PointerNetwork, PointerNetworkConfig

POLICIES = {  # name: (model class, its config class)
    "attention": (AttentionModel, AttentionModelConfig),
    "pointer": (PointerNetwork, PointerNetworkConfig),
}
MAX_PARAMETERS = 200_000_000  # a policy larger than this (800 MB of float32, 2.4 GB more for Adam) is refused


def build_policy(name: str, model_config: dict) -> nn.Module:
    """The policy ``name`` (a key of :data:`POLICIES`) built from its config fields; ``ValueError`` (naming
    the settings and the limit) for one above :data:`MAX_PARAMETERS` parameters, counted before any memory
    is taken."""
    if name not in POLICIES:
        raise ValueError(f"policy must be one of {sorted(POLICIES)}, got {name!r}")
    model, config = POLICIES[name]
    unknown = sorted(set(model_config) - {f.name for f in dataclasses.fields(config)})
    if unknown:
        raise ValueError(f"the {name} policy has no setting {', '.join(unknown)}; its settings: "
                         f"{', '.join(f.name for f in dataclasses.fields(config) if f.name != 'problem')}")
    settings = config(**model_config)
    with torch.device("meta"):  # shapes only: a model too large to build is counted, not allocated
        count = sum(p.numel() for p in model(settings).parameters())
    if count > MAX_PARAMETERS:
        given = ", ".join(f"{k}={v}" for k, v in model_config.items() if k != "problem")
        raise ValueError(f"the {name} policy with {given} would have {count:,} parameters; the limit is "
                         f"{MAX_PARAMETERS:,} (lower --embed-dim, --ff-hidden or --n-layers)")
    return model(settings)


def network_of(policy: nn.Module) -> str:
    """The key of :data:`POLICIES` whose class ``policy`` is (``ValueError`` for another module)."""
    for name, (model, _) in POLICIES.items():
        if isinstance(policy, model):
            return name
    raise ValueError(f"{type(policy).__name__} is none of the policies {sorted(POLICIES)}")
