"""Data-parallel helpers of the trainer: joining the ``torchrun`` process group, the rank and world size,
and gathering every rank's costs."""
from __future__ import annotations

import os

import torch
from torch import Tensor
from torch import distributed as dist


def init_distributed(device: str | None) -> str:
    """Join the process group that ``torchrun`` describes (env://): NCCL on CUDA, gloo on the CPU.
    Returns the device this rank trains on (``cuda:LOCAL_RANK`` when CUDA is used)."""
    if "RANK" not in os.environ:
        raise ValueError("--distributed needs torchrun (e.g. torchrun --nproc_per_node 2 -m agents.train ...)")
    cuda = torch.cuda.is_available() and (device in (None, "auto") or str(device).startswith("cuda"))
    dist.init_process_group("nccl" if cuda else "gloo")
    if cuda:
        local = int(os.environ.get("LOCAL_RANK", 0))
        torch.cuda.set_device(local)
        return f"cuda:{local}"
    return "cpu"


def world() -> tuple[int, int]:
    """(rank, world size) of the ``torch.distributed`` process group, (0, 1) without one."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def gather_costs(costs: Tensor) -> Tensor:
    """Every rank's costs (equal lengths), concatenated in rank order, on every rank."""
    if world()[1] == 1:
        return costs
    parts = [torch.empty_like(costs) for _ in range(world()[1])]
    dist.all_gather(parts, costs.contiguous())
    return torch.cat(parts)
