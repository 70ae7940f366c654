"""Imitation before REINFORCE (``TrainConfig.imitate``, ``imitation_epochs``): the labelled set, read and
checked once, and each supervised epoch's order over it (fresh random passes)."""
from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from routing_gym.data import load_dataset

from ..policies.protocol import select_rows
from .config import TrainConfig
from .supervised import teacher_forcing_nll


def load_labels(cfg: TrainConfig, problem, device: torch.device) -> tuple[Any, Tensor]:
    """The instances and label actions of ``cfg.imitate``, every label checked (feasible, finishing), so
    that the training steps read no label on the host."""
    instances, extras = load_dataset(cfg.imitate, cfg.problem, device=device)
    if "ref_tours" not in extras:
        raise ValueError(f"imitate dataset {cfg.imitate} holds no ref_tours to imitate (routing-gym solve --save "
                         f"writes them)")
    if problem.size_of(instances) != cfg.num_nodes:
        raise ValueError(f"imitate dataset {cfg.imitate} has instances of size {problem.size_of(instances)}, "
                         f"the run trains size {cfg.num_nodes}")
    actions = torch.as_tensor(extras["ref_tours"], dtype=torch.int64, device=device)
    chunk = 4096
    for start in range(0, actions.shape[0], chunk):
        rows = slice(start, start + chunk)
        try:
            teacher_forcing_nll(None, cfg.problem, select_rows(instances, rows), actions[rows])
        except ValueError as e:  # "label of instance i ...": i within the chunk
            raise ValueError(f"imitate dataset {cfg.imitate}, instances {start}..: {e}") from None
    return instances, actions


def epoch_order(size: int, rows: int, generator: torch.Generator) -> Tensor:
    """At least ``rows`` indices into a labelled set of ``size``: passes over it in fresh random orders."""
    return torch.cat([torch.randperm(size, generator=generator, device=generator.device)
                      for _ in range(math.ceil(rows / size))])
