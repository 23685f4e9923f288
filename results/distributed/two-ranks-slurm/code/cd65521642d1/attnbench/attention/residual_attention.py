"""Residual attention: a bottom-up top-down soft mask M(x) in (0, 1) that rescales its input by (1 + M).

Wang, Jiang, Qian, Yang, Li, Zhang, Wang and Tang, "Residual Attention Network for Image
Classification", CVPR 2017, https://arxiv.org/abs/1704.06904 (Sec. 3: Eq. 3 and the mixed-attention
sigmoid); reference code consulted: the authors' Caffe model
https://github.com/fwang91/residual-attention-network ``imagenet_model/Attention-56-deploy.prototxt``.

The paper's Attention Module is ``H(x) = (1 + M(x)) * T(x)`` (Eq. 3) with a trunk ``T`` of residual
units. As a plugin after a Bottleneck's conv2 the host block is the trunk, so here ``T`` is the
identity and the block is only the soft-mask branch:

    y = (1 + M(x)) * x                                           M: (N, C, H, W), per channel and pixel

With ``C' = max(C // reduction, 1)``, ``pool`` a 3x3 stride-2 max pool (padding 1, so a side ``s``
becomes ``ceil(s / 2)`` and never drops below 1), ``R`` a pre-activation residual unit
``z + conv3x3(relu(BN(z)))`` at width ``C'`` and ``up(z, s)`` bilinear resizing to exactly the
size of ``s``:

    d_1 = R(W_r pool(x))                  W_r: 1x1 conv C -> C', bottom-up ...
    d_k = R(pool(d_{k-1}))                k = 2 .. depth
    u_depth = d_depth
    u_k = R(up(u_{k+1}, d_k) + d_k)       k = depth-1 .. 1, ... top-down with skip connections
    M = sigmoid(W_2 relu(BN(W_1 relu(BN(up(u_1, x))))))         W_1: C' -> C', W_2: C' -> C (1x1)

How it differs from the paper's module (Attention-56: input width, three pooling levels, r = 1
residual unit per level and two at the bottom, bottleneck residual units, a residual unit on each
skip connection, Caffe max pools without padding):
  - no trunk and no pre-/post-processing units (the host Bottleneck plays that part);
  - ``depth`` pooling levels (default 2, for the small maps of ResNet stages conv4-conv5), one
    light unit (a single BN-ReLU-conv3x3) per level, bottom included, and identity skip connections;
  - the mask runs at a reduced width ``C'`` (``W_r`` after the first pool), widened back to ``C``
    by the last 1x1 conv, so its cost stays a small fraction of the host block's;
  - bilinear resizing with ``align_corners=False``.
The two 1x1 convs, the sigmoid over every channel and pixel (mixed attention) and ``1 + M`` are as
in the paper. Not residual-initialised (the paper does not): the block starts near ``1.5 x``.
Convs followed by a BatchNorm have no bias. In training mode each BatchNorm needs more than one
value per channel (batch of >= 2 where the deepest map is 1x1).
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from .checks import check_at_least, check_feature_map
from .init import kaiming_init_


def _pooled_size(size: int) -> int:
    """Side after the 3x3 stride-2 max pool with padding 1."""
    return (size + 1) // 2


def _pool(z: torch.Tensor) -> torch.Tensor:
    """3x3 stride-2 max pool with padding 1: each side ``s`` becomes ``ceil(s / 2)``."""
    return F.max_pool2d(z, 3, 2, padding=1)


def _resize(z: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Bilinear resize of ``z`` to the spatial size of ``like``."""
    return F.interpolate(z, size=like.shape[-2:], mode="bilinear", align_corners=False)


class PreActResidualUnit(nn.Module):
    """``z + conv3x3(relu(BN(z)))`` at a fixed width."""

    def __init__(self, channels: int):
        super().__init__()
        self.norm = nn.BatchNorm2d(channels)
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return z + self.conv(F.relu(self.norm(z)))


class ResidualAttention(nn.Module):
    """Soft-mask branch of a residual attention module for ``(N, C, H, W)`` feature maps.

    Args:
        in_channels: channels ``C`` of the input.
        reduction: width of the mask branch, ``C' = max(C // reduction, 1)``.
        depth: number of max-pool levels of the bottom-up top-down mask.
    """

    _abbr_ = "residual_attention_block"

    def __init__(self, in_channels: int, reduction: int = 4, depth: int = 2):
        super().__init__()
        check_at_least(1, in_channels=in_channels, reduction=reduction, depth=depth)
        self.in_channels = in_channels
        self.reduction = reduction
        self.depth = depth
        self.mask_channels = width = max(in_channels // reduction, 1)
        self.reduce = nn.Conv2d(in_channels, width, 1)
        self.down_units = nn.ModuleList(PreActResidualUnit(width) for _ in range(depth))  # levels 1 .. depth
        self.up_units = nn.ModuleList(PreActResidualUnit(width) for _ in range(depth - 1))  # levels 1 .. depth-1
        self.head = nn.Sequential(
            nn.BatchNorm2d(width), nn.ReLU(inplace=True), nn.Conv2d(width, width, 1, bias=False),
            nn.BatchNorm2d(width), nn.ReLU(inplace=True), nn.Conv2d(width, in_channels, 1))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Kaiming-normal (fan_in) conv weights, zero biases, unit BatchNorms with fresh statistics."""
        kaiming_init_(self)

    def extra_repr(self) -> str:
        return f"{self.in_channels}, reduction={self.reduction}, depth={self.depth}"

    def mask(self, x: torch.Tensor) -> torch.Tensor:
        """The soft mask ``M(x)``, ``(N, C, H, W)`` in (0, 1)."""
        z = self.down_units[0](self.reduce(_pool(x)))
        down = [z]  # d_1 .. d_depth
        for unit in self.down_units[1:]:
            z = unit(_pool(z))
            down.append(z)
        for skip, unit in zip(reversed(down[:-1]), reversed(self.up_units)):  # levels depth-1 .. 1
            z = unit(_resize(z, skip) + skip)
        return torch.sigmoid(self.head(_resize(z, x)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_feature_map(x, self.in_channels)
        return x * (1 + self.mask(x))

    def macs(self, x: torch.Tensor) -> int:
        """Multiply-adds of one forward pass on ``(N, C, H, W)``: the 1x1 reduction after the first
        pool, the 3x3 convs of the units (one per level on the way down, one per level but the
        bottom on the way up) and the two full-resolution 1x1 convs of the head."""
        n, c, h, w = x.shape
        width = self.mask_channels
        pixels = []  # pixels of levels 1 .. depth
        level_h, level_w = h, w
        for _ in range(self.depth):
            level_h, level_w = _pooled_size(level_h), _pooled_size(level_w)
            pixels.append(level_h * level_w)
        unit_pixels = sum(pixels) + sum(pixels[:-1])
        return n * (pixels[0] * c * width + unit_pixels * 9 * width * width + h * w * (width * width + width * c))

