"""Shared parameter initialisation of the mechanisms."""
from __future__ import annotations

import torch.nn as nn


def kaiming_init_(module: nn.Module, mode: str = "fan_in") -> None:
    """Kaiming-normal (ReLU gain, fan ``mode``) weights and zero biases for every ``nn.Conv2d`` and
    ``nn.Linear`` in ``module`` (itself included), unit BatchNorms with fresh running statistics for
    every ``nn.BatchNorm2d``; other modules are left alone."""
    for m in module.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.kaiming_normal_(m.weight, mode=mode, nonlinearity="relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.BatchNorm2d):
            m.reset_parameters()
