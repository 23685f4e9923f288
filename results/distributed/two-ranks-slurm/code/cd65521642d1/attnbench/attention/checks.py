"""Shared argument and input checks of the mechanisms."""
from __future__ import annotations

import torch


def check_at_least(minimum: int, **values: int) -> None:
    """ValueError ``"<name> must be >= <minimum>, got <value>"`` for the first of ``values`` below ``minimum``."""
    for name, value in values.items():
        if value < minimum:
            raise ValueError(f"{name} must be >= {minimum}, got {value}")


def check_positive_int(**values) -> None:
    """ValueError ``"<name> must be a positive integer, got <value>"`` for the first of ``values`` that is not."""
    for name, value in values.items():
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")


def check_multiple(name: str, value: int, divisor_name: str, divisor: int) -> None:
    """ValueError ``"<name> (<value>) must be a positive multiple of <divisor_name> (<divisor>)"`` unless
    ``value`` is (heads, groups: the channels split evenly between them)."""
    if divisor < 1 or value < 1 or value % divisor:
        raise ValueError(f"{name} ({value}) must be a positive multiple of {divisor_name} ({divisor})")


def check_feature_map(x: torch.Tensor, channels: int, name: str = "input") -> None:
    """ValueError unless ``x`` is an ``(N, channels, H, W)`` feature map."""
    if x.dim() != 4 or x.shape[1] != channels:
        raise ValueError(f"expected {name} (N, {channels}, H, W), got {tuple(x.shape)}")
