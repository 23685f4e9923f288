"""Criss-cross attention: every pixel attends to the pixels of its row and its column, twice.

Huang et al., "CCNet: Criss-Cross Attention for Semantic Segmentation", ICCV 2019,
https://arxiv.org/abs/1811.11721 (Sec. 3.2, Eq. 1-2, and the recurrent module of Sec. 3.3);
reference code consulted: mmcv ``mmcv/ops/cc_attention.py`` (one pass, which this module matches
on copied weights with ``recurrence=1``).

    q = W_q x + b_q,  k = W_k x + b_k                 (N, C / r, H, W)
    v = W_v x + b_v                                   (N, C, H, W)
    O(i, j) = column j and row i, (i, j) once         H + W - 1 keys per pixel
    a(i, j) = softmax_{p in O(i, j)} q(i, j) . k(p)
    y(i, j) = x(i, j) + gamma sum_{p in O(i, j)} a(i, j)(p) v(p)

applied ``recurrence`` times with shared weights (the paper's R = 2: two passes carry every
pixel's information to every other). Of the study's terms it is E1 alone (query content against
key content) on H + W - 1 keys instead of HW. ``gamma`` starts at ``gamma_init``, 0 by default
(as mmcv): the block then starts as identity and only ``gamma`` gets a gradient until it moves.
"""
from __future__ import annotations

import torch
import torch.nn as nn

from .checks import check_at_least, check_feature_map
from .init import kaiming_init_


class CrissCrossAttention(nn.Module):
    """Recurrent criss-cross attention (RCCA) for ``(N, C, H, W)`` feature maps.

    Args:
        in_channels: channels ``C`` of the input.
        reduction: query and key width ``max(C // reduction, 1)``; the paper's and mmcv's 8.
        recurrence: passes ``R`` with shared weights; the paper's 2.
        gamma_init: initial value of the residual gate ``gamma`` (0: the block starts as identity).
    """

    _abbr_ = "cc_attention"

    def __init__(self, in_channels: int, reduction: int = 8, recurrence: int = 2, gamma_init: float = 0.0):
        super().__init__()
        check_at_least(1, in_channels=in_channels, reduction=reduction, recurrence=recurrence)
        self.in_channels = in_channels
        self.reduction = reduction
        self.recurrence = recurrence
        self.gamma_init = float(gamma_init)
        self.key_channels = max(in_channels // reduction, 1)
        self.query_conv = nn.Conv2d(in_channels, self.key_channels, 1)
        self.key_conv = nn.Conv2d(in_channels, self.key_channels, 1)
        self.value_conv = nn.Conv2d(in_channels, in_channels, 1)
        self.gamma = nn.Parameter(torch.zeros(1))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Kaiming-normal (fan_in) weights, zero biases and ``gamma = gamma_init`` (0 by default:
        identity at init)."""
        kaiming_init_(self)
        nn.init.constant_(self.gamma, self.gamma_init)

    def extra_repr(self) -> str:
        return f"{self.in_channels}, reduction={self.reduction}, recurrence={self.recurrence}"

    def _attend(self, x: torch.Tensor) -> torch.Tensor:
        """One pass: ``sum_p a(i, j)(p) v(p)`` over the row and column of every pixel, (N, C, H, W)."""
        h = x.shape[2]
        q, k, v = self.query_conv(x), self.key_conv(x), self.value_conv(x)
        column = torch.einsum("nchw,ncuw->nhwu", q, k)  # (N, H, W, H): keys of the pixel's column
        self_in_column = torch.eye(h, dtype=torch.bool, device=x.device)[:, None, :]  # counted in the row
        column = column.masked_fill(self_in_column, float("-inf"))
        row = torch.einsum("nchw,nchu->nhwu", q, k)  # (N, H, W, W): keys of the pixel's row
        weights = torch.cat([column, row], -1).softmax(-1)
        return (torch.einsum("nhwu,ncuw->nchw", weights[..., :h], v)
                + torch.einsum("nhwu,nchu->nchw", weights[..., h:], v))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_feature_map(x, self.in_channels)
        for _ in range(self.recurrence):
            x = x + self.gamma * self._attend(x)
        return x

    def macs(self, x: torch.Tensor) -> int:
        """Multiply-adds of one forward pass on ``x`` (only its shape is read): per pass the three
        projections and, for each pixel, H + W logits and weighted values."""
        n, c, h, w = x.shape
        projections = n * h * w * c * (2 * self.key_channels + c)
        attention = n * h * w * (h + w) * (self.key_channels + c)
        return self.recurrence * (projections + attention)
