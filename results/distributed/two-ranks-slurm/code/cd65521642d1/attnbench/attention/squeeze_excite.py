"""Squeeze-and-excitation: channel gates from globally pooled features.

Hu et al., "Squeeze-and-Excitation Networks", CVPR 2018, https://arxiv.org/abs/1709.01507
(Eq. 2-4); reference code consulted: timm ``timm/layers/squeeze_excite.py``.

    z = avgpool(x)                                  (N, C, 1, 1), squeeze (Eq. 2)
    s = sigmoid(W2 relu(W1 z + b1) + b2)            excitation, W1: C -> C / r, W2: C / r -> C (Eq. 3)
    y = x * s                                       channel-wise rescaling (Eq. 4)

Not residual: the block starts as ``x * sigmoid(b2)`` with the default init, as in the paper.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from .checks import check_at_least, check_feature_map
from .init import kaiming_init_


class SqueezeExcite(nn.Module):
    """Squeeze-and-excitation block for ``(N, C, H, W)`` feature maps.

    Args:
        in_channels: channels ``C`` of the input.
        reduction: ratio ``r`` of the bottleneck; hidden width ``max(C // r, 1)``.
    """

    _abbr_ = "se_block"

    def __init__(self, in_channels: int, reduction: int = 16):
        super().__init__()
        check_at_least(1, in_channels=in_channels, reduction=reduction)
        self.in_channels = in_channels
        self.reduction = reduction
        self.hidden_channels = max(in_channels // reduction, 1)
        self.fc1 = nn.Conv2d(in_channels, self.hidden_channels, 1)
        self.fc2 = nn.Conv2d(self.hidden_channels, in_channels, 1)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Kaiming-normal (fan_in) weights and zero biases."""
        kaiming_init_(self)

    def extra_repr(self) -> str:
        return f"{self.in_channels}, reduction={self.reduction}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_feature_map(x, self.in_channels)
        z = x.mean((2, 3), keepdim=True)  # (N, C, 1, 1)
        return x * torch.sigmoid(self.fc2(F.relu(self.fc1(z))))

    def macs(self, x: torch.Tensor) -> int:
        """Multiply-adds of one forward pass on ``(N, C, H, W)``: the two 1x1 convs on the pooled vector."""
        n, c, _, _ = x.shape
        return n * 2 * c * self.hidden_channels
