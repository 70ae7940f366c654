"""The networks a checkpoint can hold, by name: ``TrainConfig.policy`` and a checkpoint's ``policy`` entry
name one of :data:`POLICIES`, and :func:`build_policy` builds it from its config fields."""
from __future__ import annotations

import dataclasses

from torch import nn

from .attention_model import AttentionModel, AttentionModelConfig
from .pointer_network import PointerNetwork, PointerNetworkConfig

POLICIES = {  # name: (model class, its config class)
    "attention": (AttentionModel, AttentionModelConfig),
    "pointer": (PointerNetwork, PointerNetworkConfig),
}


def build_policy(name: str, model_config: dict) -> nn.Module:
    """The policy ``name`` (a key of :data:`POLICIES`) built from its config fields."""
    if name not in POLICIES:
        raise ValueError(f"policy must be one of {sorted(POLICIES)}, got {name!r}")
    model, config = POLICIES[name]
    unknown = sorted(set(model_config) - {f.name for f in dataclasses.fields(config)})
    if unknown:
        raise ValueError(f"the {name} policy has no setting {', '.join(unknown)}; its settings: "
                         f"{', '.join(f.name for f in dataclasses.fields(config) if f.name != 'problem')}")
    return model(config(**model_config))


def network_of(policy: nn.Module) -> str:
    """The key of :data:`POLICIES` whose class ``policy`` is (``ValueError`` for another module)."""
    for name, (model, _) in POLICIES.items():
        if isinstance(policy, model):
            return name
    raise ValueError(f"{type(policy).__name__} is none of the policies {sorted(POLICIES)}")
