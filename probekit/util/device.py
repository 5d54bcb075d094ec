"""Resolve a user's device option (``"auto"``, ``"cpu"``, ``"cuda:1"``) to a ``torch.device``."""

from __future__ import annotations

import torch

from ..errors import ConfigError, DeviceError

__all__ = ["resolve_device"]


def resolve_device(device: str | torch.device | None) -> torch.device | None:
    """``"auto"`` -> CUDA when available else CPU; other names as ``torch.device``; None stays.

    Raises:
        ConfigError: ``device`` is not a device name torch knows.
        DeviceError: a CUDA device is asked for but torch sees none.
    """
    if device is None or isinstance(device, torch.device):
        return device
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except RuntimeError:
        raise ConfigError(
            f"unknown device {device!r}; use 'auto', 'cpu', 'cuda' or 'cuda:N'"
        ) from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise DeviceError(
            f"device {device!r} was asked for but torch sees no CUDA device; use 'auto' or 'cpu'"
        )
    return dev
