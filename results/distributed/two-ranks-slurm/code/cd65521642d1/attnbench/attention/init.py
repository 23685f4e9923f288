"""Shared parameter initialisation of the mechanisms."""
from __future__ import annotations

import torch
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


def branch_gate_init_(layer: nn.Conv2d | nn.BatchNorm2d, gate: float) -> None:
    """Initialise the last layer of a residual branch (``y = x + layer(...)``) to open it by ``gate``:
    zero weights at ``gate = 0`` (the branch starts at zero, the block as the identity), else
    ``gate`` times Kaiming-normal (fan_in) weights for a conv and ``gate`` for a BatchNorm's weight;
    zero bias. ``gate = 0`` draws no random numbers. Such a gate is no scalar: the store's
    ``gate_max`` and tools/gates.py read parameters named ``gamma`` or ``gamma_*`` and do not see it."""
    if isinstance(layer, nn.BatchNorm2d) or gate == 0:
        nn.init.constant_(layer.weight, gate)
    else:
        nn.init.kaiming_normal_(layer.weight, mode="fan_in", nonlinearity="relu")
        with torch.no_grad():
            layer.weight.mul_(gate)
    if layer.bias is not None:
        nn.init.zeros_(layer.bias)
