"""Device names as the command line and the trainer take them: one parser, :func:`parse_device`."""
from __future__ import annotations

import torch

DEVICE_HELP = "cpu, cuda, cuda:<index>, mps, or auto (CUDA when available, else the CPU)"


def parse_device(name: str | torch.device) -> torch.device:
    """The :class:`torch.device` of ``name`` (see :data:`DEVICE_HELP`), checked to exist on this machine.

    Raises:
        ValueError: an unknown device name, a device type routing-gym does not run on, or a device this
            machine lacks (CUDA or MPS not available, a CUDA index beyond the devices present).
    """
    if isinstance(name, torch.device):
        dev = name
    else:
        text = str(name).strip()
        if text == "auto":
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
        try:
            dev = torch.device(text)
        except RuntimeError:
            raise ValueError(f"unknown device {name!r}: use {DEVICE_HELP}") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {name!r} asked for, but CUDA is not available")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(f"device {name!r} asked for, but this machine has {torch.cuda.device_count()} CUDA "
                             f"device(s) (cuda:0 to cuda:{torch.cuda.device_count() - 1})")
    elif dev.type == "mps":
        if not torch.backends.mps.is_available():
            raise ValueError(f"device {name!r} asked for, but MPS is not available")
    elif dev.type != "cpu":
        raise ValueError(f"device {name!r} is not one routing-gym runs on: use {DEVICE_HELP}")
    return dev
