"""Convolutional block attention module: a channel gate, then a spatial gate.

Woo et al., "CBAM: Convolutional Block Attention Module", ECCV 2018,
https://arxiv.org/abs/1807.06521 (Eq. 1-3); reference code consulted: timm ``timm/layers/cbam.py``.

    M_c = sigmoid(MLP(avgpool(x)) + MLP(maxpool(x)))        (N, C, 1, 1), shared MLP C -> C / r -> C (Eq. 2)
    x'  = M_c * x
    M_s = sigmoid(conv_k([mean_c(x'), max_c(x')]))          (N, 1, H, W), k x k conv, 2 -> 1 channels (Eq. 3)
    y   = M_s * x'                                          (Eq. 1)

Not residual: the block gates its input, as in the paper.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from .checks import check_at_least, check_feature_map
from .init import kaiming_init_


class CBAM(nn.Module):
    """CBAM block for ``(N, C, H, W)`` feature maps.

    Args:
        in_channels: channels ``C`` of the input.
        reduction: ratio ``r`` of the channel MLP; hidden width ``max(C // r, 1)``.
        spatial_kernel: odd side ``k`` of the spatial-attention conv (padding ``k // 2``).
    """

    _abbr_ = "cbam_block"

    def __init__(self, in_channels: int, reduction: int = 16, spatial_kernel: int = 7):
        super().__init__()
        check_at_least(1, in_channels=in_channels, reduction=reduction)
        if spatial_kernel < 1 or spatial_kernel % 2 == 0:
            raise ValueError(f"spatial_kernel must be a positive odd integer, got {spatial_kernel}")
        self.in_channels = in_channels
        self.reduction = reduction
        self.spatial_kernel = spatial_kernel
        self.hidden_channels = max(in_channels // reduction, 1)
        self.fc1 = nn.Conv2d(in_channels, self.hidden_channels, 1)
        self.fc2 = nn.Conv2d(self.hidden_channels, in_channels, 1)
        self.spatial_conv = nn.Conv2d(2, 1, spatial_kernel, padding=spatial_kernel // 2)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Kaiming-normal (fan_in) weights and zero biases."""
        kaiming_init_(self)

    def extra_repr(self) -> str:
        return f"{self.in_channels}, reduction={self.reduction}, spatial_kernel={self.spatial_kernel}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_feature_map(x, self.in_channels)
        n = x.shape[0]
        pooled = torch.cat([x.mean((2, 3), keepdim=True), x.amax((2, 3), keepdim=True)])  # (2N, C, 1, 1)
        logits = self.fc2(F.relu(self.fc1(pooled)))  # (2N, C, 1, 1), shared MLP on both poolings
        x = x * torch.sigmoid(logits[:n] + logits[n:])
        maps = torch.cat([x.mean(1, keepdim=True), x.amax(1, keepdim=True)], 1)  # (N, 2, H, W)
        return x * torch.sigmoid(self.spatial_conv(maps))

    def macs(self, x: torch.Tensor) -> int:
        """Multiply-adds of one forward pass on ``(N, C, H, W)``: the MLP on two pooled vectors and
        the ``k x k`` spatial conv."""
        n, c, h, w = x.shape
        return n * (2 * 2 * c * self.hidden_channels + h * w * 2 * self.spatial_kernel ** 2)
