"""Spatial pyramid attention: channel gates from a pyramid of adaptively pooled grids.

Guo, Ma, Sansom, McGuire, Kalaani, Chen, Tang, Yang, Fu, "SPANet: Spatial Pyramid Attention Network
for Enhanced Image Recognition", ICME 2020 (extended as Ma et al., "Spatial Pyramid Attention for
Deep Convolutional Neural Networks", IEEE TMM 2021); reference code consulted: the authors'
https://github.com/13952522076/SPANet (``SPPSELayer`` in ``models/spp_se_resnet.py``), whose layer
layout this module keeps (fcs without bias; pooled values concatenated pool size by pool size,
each ``(C, s, s)`` grid flattened channel-major).

    p   = [flatten(avgpool_{s x s}(x)) for s in pool_sizes]    (N, C * sum s^2), 21 C for (1, 2, 4)
    g   = sigmoid(W2 relu(W1 p))                               W1: 21 C -> C / r, W2: C / r -> C
    y   = x * g                                                channel-wise rescaling

``avgpool_{s x s}`` is adaptive average pooling (``torch.nn.functional.adaptive_avg_pool2d``), so
maps smaller than ``s x s`` repeat their pixels. Not residual: the block gates its input.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from .checks import check_at_least, check_feature_map
from .init import kaiming_init_


class SpatialPyramidAttention(nn.Module):
    """Spatial pyramid attention (SPA) block for ``(N, C, H, W)`` feature maps.

    Args:
        in_channels: channels ``C`` of the input.
        pool_sizes: sides ``s`` of the adaptive average-pooling grids.
        reduction: ratio ``r`` of the bottleneck; hidden width ``max(C // r, 1)``.
    """

    _abbr_ = "spa_block"

    def __init__(self, in_channels: int, pool_sizes: tuple[int, ...] = (1, 2, 4), reduction: int = 16):
        super().__init__()
        check_at_least(1, in_channels=in_channels)
        pool_sizes = tuple(pool_sizes)
        if not pool_sizes or not all(isinstance(s, int) and s >= 1 for s in pool_sizes):
            raise ValueError(f"pool_sizes must be a non-empty sequence of ints >= 1, got {pool_sizes!r}")
        check_at_least(1, reduction=reduction)
        self.in_channels = in_channels
        self.pool_sizes = pool_sizes
        self.reduction = reduction
        self.pooled_features = in_channels * sum(s * s for s in pool_sizes)
        self.hidden_channels = max(in_channels // reduction, 1)
        self.fc1 = nn.Linear(self.pooled_features, self.hidden_channels, bias=False)
        self.fc2 = nn.Linear(self.hidden_channels, in_channels, bias=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Kaiming-normal (fan_in) weights."""
        kaiming_init_(self)

    def extra_repr(self) -> str:
        return f"{self.in_channels}, pool_sizes={self.pool_sizes}, reduction={self.reduction}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_feature_map(x, self.in_channels)
        pyramid = torch.cat([F.adaptive_avg_pool2d(x, s).flatten(1) for s in self.pool_sizes], 1)  # (N, 21 C)
        gate = torch.sigmoid(self.fc2(F.relu(self.fc1(pyramid))))  # (N, C)
        return x * gate[:, :, None, None]

    def macs(self, x: torch.Tensor) -> int:
        """Multiply-adds of one forward pass on ``(N, C, H, W)``: the two fcs (pooling not counted)."""
        n, c, _, _ = x.shape
        return n * self.hidden_channels * (self.pooled_features + c)
