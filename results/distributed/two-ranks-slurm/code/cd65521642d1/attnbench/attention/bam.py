"""Bottleneck attention module: a channel map and a spatial map, added, gate a residual branch.

Park, Woo, Lee and Kweon, "BAM: Bottleneck Attention Module", BMVC 2018,
https://arxiv.org/abs/1807.06514 (Eq. 1-4); reference code consulted: the authors'
https://github.com/Jongchan/attention-module ``MODELS/bam.py``.

With a hidden width ``C' = max(C // r, 1)`` and ``BN`` batch normalisation:

    M_c = BN(W_1 relu(W_0 avgpool(x) + b_0))                             (N, C, 1, 1), Eq. 3
    M_s = BN(f_3 relu(BN(f_2 relu(BN(f_1 relu(BN(f_0 x)))))))            (N, 1, H, W), Eq. 4
    y   = x + x * sigmoid(M_c + M_s)                                     (Eq. 1-2)

``f_0``: 1x1 conv ``C -> C'``; ``f_1``, ``f_2``: 3x3 convs ``C' -> C'`` with dilation ``d``
(padding ``d``, so the size is kept); ``f_3``: 1x1 conv ``C' -> 1``. The two maps broadcast to
``(N, C, H, W)`` before the sum.

Choices where the paper and the authors' code differ (the paper is followed):
  - the maps are combined by a sum (Eq. 2; the paper's ablation finds it best); the authors' code
    multiplies them;
  - each branch ends with a BatchNorm "to adjust the scale" (Eq. 3-4); the code has none there
    and instead a BatchNorm in the channel MLP's hidden layer;
  - the BN+ReLU after ``f_0``, ``f_1``, ``f_2``, which Eq. 4 leaves implicit, are taken from the code.
Convs followed by a BatchNorm have no bias (the BN's shift replaces it, e.g. Eq. 3's ``b_1``).

Not residual-initialised: the paper does not, so the block starts as ``x * (1 + sigmoid(.))``.
In training mode the channel branch's BatchNorm normalises over the batch of pooled vectors,
which needs a batch of >= 2 (as in the authors' ``BatchNorm1d``); eval mode takes any batch.
"""
from __future__ import annotations

import torch
import torch.nn as nn

from .checks import check_at_least, check_feature_map
from .init import kaiming_init_

#: 3x3 dilated convs in the spatial branch (the paper's f_1 and f_2).
NUM_DILATED_CONVS = 2


def _conv_bn_relu(in_channels: int, out_channels: int, kernel_size: int = 1, dilation: int = 1) -> list:
    return [nn.Conv2d(in_channels, out_channels, kernel_size, padding=dilation * (kernel_size // 2),
                      dilation=dilation, bias=False),
            nn.BatchNorm2d(out_channels), nn.ReLU(inplace=True)]


class BAM(nn.Module):
    """Bottleneck attention module for ``(N, C, H, W)`` feature maps.

    Args:
        in_channels: channels ``C`` of the input.
        reduction: ratio ``r`` of both branches' bottleneck; hidden width ``max(C // r, 1)``.
        dilation: dilation ``d`` of the spatial branch's two 3x3 convs.
    """

    _abbr_ = "bam_block"

    def __init__(self, in_channels: int, reduction: int = 16, dilation: int = 4):
        super().__init__()
        check_at_least(1, in_channels=in_channels, reduction=reduction, dilation=dilation)
        self.in_channels = in_channels
        self.reduction = reduction
        self.dilation = dilation
        self.hidden_channels = hidden = max(in_channels // reduction, 1)
        self.channel_gate = nn.Sequential(
            nn.Conv2d(in_channels, hidden, 1), nn.ReLU(inplace=True),
            nn.Conv2d(hidden, in_channels, 1, bias=False), nn.BatchNorm2d(in_channels))
        dilated = [layer for _ in range(NUM_DILATED_CONVS) for layer in _conv_bn_relu(hidden, hidden, 3, dilation)]
        self.spatial_gate = nn.Sequential(
            *_conv_bn_relu(in_channels, hidden), *dilated,
            nn.Conv2d(hidden, 1, 1, bias=False), nn.BatchNorm2d(1))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Kaiming-normal (fan_in) conv weights, zero biases, unit BatchNorms with fresh statistics."""
        kaiming_init_(self)

    def extra_repr(self) -> str:
        return f"{self.in_channels}, reduction={self.reduction}, dilation={self.dilation}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_feature_map(x, self.in_channels)
        channel = self.channel_gate(x.mean((2, 3), keepdim=True))  # (N, C, 1, 1)
        spatial = self.spatial_gate(x)  # (N, 1, H, W)
        return x + x * torch.sigmoid(channel + spatial)

    def macs(self, x: torch.Tensor) -> int:
        """Multiply-adds of one forward pass on ``(N, C, H, W)``: the channel MLP on the pooled vector,
        and per pixel the 1x1 reduction, the dilated 3x3 convs and the 1x1 conv to one map."""
        n, c, h, w = x.shape
        hidden = self.hidden_channels
        per_pixel = c * hidden + NUM_DILATED_CONVS * 9 * hidden * hidden + hidden
        return n * (2 * c * hidden + h * w * per_pixel)
