"""Concurrent spatial and channel squeeze & excitation (scSE): a channel gate and a pixel gate, side by side.

Roy, Navab and Wachinger, "Concurrent Spatial and Channel 'Squeeze & Excitation' in Fully
Convolutional Networks", MICCAI 2018, https://arxiv.org/abs/1803.02579 (Sec. 2: cSE, sSE, scSE), and its
journal version "Recalibrating Fully Convolutional Networks with Spatial and Channel 'Squeeze &
Excitation' Blocks", IEEE TMI 2019, https://arxiv.org/abs/1808.08127 (aggregation strategies);
reference code consulted: the authors' https://github.com/ai-med/squeeze_and_excitation
(``ChannelSpatialSELayer``).

    x_cSE = x * sigmoid(W_2 relu(W_1 avgpool(x) + b_1) + b_2)      channel gate, C -> C / r -> C
    x_sSE = x * sigmoid(w . x_ij + b)                               pixel gate, 1x1 conv C -> 1
    y     = max(x_cSE, x_sSE)                                       element-wise ('max', default)
          | x_cSE + x_sSE                                           ('add')
          | x_cSE * x_sSE                                           ('mul')

``x_cSE`` is exactly squeeze-and-excitation (:class:`SqueezeExcite`), with the paper's bottleneck
``C / 2`` (``reduction=2``, also the authors' code default). The MICCAI paper adds the two
recalibrated maps; the journal version compares max-out, addition, multiplication and
concatenation and finds max-out best, which is also what the authors' code does, hence the
default ``'max'``. Concatenation (which doubles the channels) is left out: the block keeps the shape.

Not residual: the block gates its input, as in the paper.
"""
from __future__ import annotations

import torch
import torch.nn as nn

from .checks import check_feature_map
from .init import kaiming_init_
from .squeeze_excite import SqueezeExcite

AGGREGATIONS = {"max": torch.maximum, "add": torch.add, "mul": torch.mul}


class SpatialChannelSqueezeExcite(nn.Module):
    """scSE block for ``(N, C, H, W)`` feature maps.

    Args:
        in_channels: channels ``C`` of the input.
        reduction: ratio ``r`` of the channel gate's bottleneck; hidden width ``max(C // r, 1)``.
        aggregation: how the channel-gated and pixel-gated maps are combined, ``'max'``, ``'add'``
            or ``'mul'``.
    """

    _abbr_ = "scse_block"

    def __init__(self, in_channels: int, reduction: int = 2, aggregation: str = "max"):
        super().__init__()
        if aggregation not in AGGREGATIONS:
            raise ValueError(f"aggregation must be one of {tuple(AGGREGATIONS)}, got {aggregation!r}")
        self.channel_gate = SqueezeExcite(in_channels, reduction)  # validates in_channels and reduction
        self.spatial_conv = nn.Conv2d(in_channels, 1, 1)
        self.in_channels = in_channels
        self.reduction = reduction
        self.aggregation = aggregation
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Kaiming-normal (fan_in) weights and zero biases."""
        self.channel_gate.reset_parameters()
        kaiming_init_(self.spatial_conv)

    def extra_repr(self) -> str:
        return f"{self.in_channels}, reduction={self.reduction}, aggregation={self.aggregation!r}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_feature_map(x, self.in_channels)
        spatial = x * torch.sigmoid(self.spatial_conv(x))  # (N, 1, H, W) gate, broadcast over C
        return AGGREGATIONS[self.aggregation](self.channel_gate(x), spatial)

    def macs(self, x: torch.Tensor) -> int:
        """Multiply-adds of one forward pass on ``(N, C, H, W)``: the channel gate's MLP and the
        per-pixel 1x1 conv ``C -> 1``."""
        n, c, h, w = x.shape
        return self.channel_gate.macs(x) + n * h * w * c
