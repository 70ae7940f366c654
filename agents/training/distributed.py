"""Data-parallel helpers of the trainer: joining the ``torchrun`` process group, the rank and world size,
wrapping the training pass for DDP, gathering every rank's costs and RNG states, and taking rank 0's
decisions on every rank."""
from __future__ import annotations

import os

import torch
from torch import Tensor, nn
from torch import distributed as dist
from torch.nn.parallel import DistributedDataParallel


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


def data_parallel(policy: nn.Module, device: torch.device) -> nn.Module:
    """``policy`` as every rank trains it: with ``SyncBatchNorm`` on CUDA under ``torch.distributed``
    (on the CPU each rank normalises with its own batch's statistics, as its slice of the global batch
    would in gradient accumulation), on ``device``."""
    if world()[1] > 1 and device.type == "cuda":
        policy = nn.SyncBatchNorm.convert_sync_batchnorm(policy)
    return policy.to(device)


def wrap_ddp(module: nn.Module) -> nn.Module:
    """``module`` in DDP under ``torch.distributed`` (its gradients averaged over the ranks), else itself."""
    return DistributedDataParallel(module) if world()[1] > 1 else module


def gather_generator_states(generator: torch.Generator, device: torch.device) -> list[Tensor]:
    """Every rank's state of ``generator`` (its own training stream), in rank order, on every rank."""
    state = generator.get_state()
    size = world()[1]
    if size == 1:
        return [state]
    states = [torch.empty_like(state) for _ in range(size)]
    dist.all_gather(states, state.to(device) if device.type == "cuda" else state)
    return [t.cpu() for t in states]


def rank0(values: list[float], device: torch.device, needed: bool) -> list[float]:
    """``values`` as rank 0 has them, on every rank: one broadcast, when ``needed`` (a minutes budget, the
    one thing that makes the ranks' decisions differ) under ``torch.distributed``."""
    if world()[1] == 1 or not needed:
        return values
    plan = torch.tensor(values, dtype=torch.float64, device=device)
    dist.broadcast(plan, 0)
    return plan.tolist()
