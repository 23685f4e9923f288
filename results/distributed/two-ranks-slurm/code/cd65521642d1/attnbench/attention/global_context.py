"""Global context block: attention-pooled context, transformed and added to every pixel.

Cao et al., "GCNet: Non-local Networks Meet Squeeze-Excitation Networks and Beyond", ICCVW 2019,
https://arxiv.org/abs/1904.11492 (Eq. 4, "channel_add" fusion with attention pooling); reference
code consulted: mmcv ``mmcv/cnn/bricks/context_block.py`` (``ContextBlock(pooling_type='att',
fusion_types=('channel_add',))``, which this module matches on copied weights) and timm
``timm/layers/global_context.py``.

    a = softmax_{HW}(W_k x + b_k)                           (N, 1, HW), attention pooling weights
    c = sum_j a_j x_j                                       (N, C, 1, 1), global context
    y = x + W_2 relu(LN(W_1 c + b_1)) + b_2                 bottleneck C -> C * ratio -> C

with the LayerNorm over the ``(C * ratio, 1, 1)`` bottleneck.

``b_2`` is zero at init and ``W_2`` is ``out_gain`` times a Kaiming-normal draw; at the default
``out_gain = 0`` (mmcv's ``last_zero_init``) the block starts as the identity, and only ``W_2`` and
``b_2`` get a gradient until they move.
"""
from __future__ import annotations

import torch
import torch.nn as nn

from .checks import check_at_least, check_feature_map
from .init import branch_gate_init_, kaiming_init_


class GlobalContext(nn.Module):
    """Global context (GC) block for ``(N, C, H, W)`` feature maps.

    Args:
        in_channels: channels ``C`` of the input.
        ratio: bottleneck width as a fraction of ``C``; hidden width ``int(C * ratio)`` must be >= 1.
        out_gain: scale of the last conv's initial weights (0: zero, the block starts as identity).
    """

    _abbr_ = "gc_block"

    def __init__(self, in_channels: int, ratio: float = 1 / 4, out_gain: float = 0.0):
        super().__init__()
        check_at_least(1, in_channels=in_channels)
        if not 0 < ratio or int(in_channels * ratio) < 1:
            raise ValueError(f"ratio must give a bottleneck of >= 1 channel (int(in_channels * ratio)), "
                             f"got ratio={ratio} with in_channels={in_channels}")
        self.in_channels = in_channels
        self.ratio = ratio
        self.hidden_channels = int(in_channels * ratio)
        self.out_gain = float(out_gain)
        self.context_conv = nn.Conv2d(in_channels, 1, 1)
        self.transform = nn.Sequential(
            nn.Conv2d(in_channels, self.hidden_channels, 1),
            nn.LayerNorm([self.hidden_channels, 1, 1]),
            nn.ReLU(inplace=True),
            nn.Conv2d(self.hidden_channels, in_channels, 1))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Kaiming-normal (fan_in) weights, zero biases, unit LayerNorm, and the last conv at
        ``out_gain`` (zero by default: the block starts as identity)."""
        for m in (self.context_conv, self.transform[0]):
            kaiming_init_(m)
        self.transform[1].reset_parameters()
        branch_gate_init_(self.transform[3], self.out_gain)

    def extra_repr(self) -> str:
        return f"{self.in_channels}, ratio={self.ratio}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_feature_map(x, self.in_channels)
        n, c, h, w = x.shape
        weights = self.context_conv(x).view(n, h * w, 1).softmax(1)  # (N, HW, 1)
        context = torch.bmm(x.view(n, c, h * w), weights).view(n, c, 1, 1)  # (N, C, 1, 1)
        return x + self.transform(context)

    def macs(self, x: torch.Tensor) -> int:
        """Multiply-adds of one forward pass on ``(N, C, H, W)``: the pooling-weight conv, the
        weighted sum and the two bottleneck convs."""
        n, c, h, w = x.shape
        return n * (2 * h * w * c + 2 * c * self.hidden_channels)
