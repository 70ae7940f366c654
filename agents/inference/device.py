"""Device names as the command line and the trainer take them: one parser, :func:`parse_device`, over the
vector env's own check (:func:`routing_gym.vector.resolve_device`)."""
from __future__ import annotations

import torch

from routing_gym.vector import resolve_device

DEVICE_HELP = "cpu, cuda, cuda:<index>, mps, or auto (CUDA when available, else the CPU)"


def parse_device(name: str | torch.device) -> torch.device:
    """The :class:`torch.device` of ``name`` (see :data:`DEVICE_HELP`), checked to exist on this machine.

    Raises:
        ValueError: an unknown device name, a device type routing-gym does not run on, or a device this
            machine lacks (CUDA or MPS not available, a CUDA index beyond the devices present).
    """
    if isinstance(name, str) and name.strip() == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = resolve_device(name.strip() if isinstance(name, str) else name)
    if dev.type == "mps":
        if not torch.backends.mps.is_available():
            raise ValueError(f"device {name!r} asked for, but MPS is not available")
    elif dev.type not in ("cpu", "cuda"):
        raise ValueError(f"device {name!r} is not one routing-gym runs on: use {DEVICE_HELP}")
    return dev
