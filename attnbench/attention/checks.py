"""Shared argument and input checks of the mechanisms."""
from __future__ import annotations

import torch


def check_at_least(minimum: int, **values: int) -> None:
    """ValueError ``"<name> must be >= <minimum>, got <value>"`` for the first of ``values`` below ``minimum``."""
    for name, value in values.items():
        if value < minimum:
            raise ValueError(f"{name} must be >= {minimum}, got {value}")


def check_feature_map(x: torch.Tensor, channels: int, name: str = "input") -> None:
    """ValueError unless ``x`` is an ``(N, channels, H, W)`` feature map."""
    if x.dim() != 4 or x.shape[1] != channels:
        raise ValueError(f"expected {name} (N, {channels}, H, W), got {tuple(x.shape)}")
