"""Asymmetric pyramid non-local block (APNB): full-resolution queries, pyramid-pooled keys/values.

Zhu et al., "Asymmetric Non-local Neural Networks for Semantic Segmentation", ICCV 2019,
https://arxiv.org/abs/1908.07678 (Sec. 3, the APNB); reference code consulted:
mmseg ``mmseg/models/decode_heads/ann_head.py`` (``APNB``, ``PPMConcat``, ``SelfAttentionBlock``;
its attention branch is matched on copied weights) and the official https://github.com/MendelXu/ANN.

With ``C' = max(C // reduction, 1)``, the query/key embedding ``phi = ReLU(BN(W_phi x))`` (a 1x1
conv shared by queries and keys, as in the official APNB and mmseg; without bias as in mmseg, where
the official conv has one that the BN cancels), the value embedding ``W_v`` (a 1x1 conv with bias),
and ``P`` the pyramid sampling (adaptive average pooling to ``s x s`` for each ``s`` in
``pool_sizes``, concatenated: ``S = sum s^2`` positions, 110 for ``(1, 3, 6, 8)``):

    q = phi(x)                   (N, C', HW)   queries at full resolution
    k = P(phi(x))                (N, C', S)    sampled keys
    v = P(W_v x) = W_v P(x)      (N, C', S)    sampled values (pooling commutes with the affine 1x1)
    a_i = sum_j softmax_j( q_i . k_j / sqrt(C') ) v_j                         non-local product
    y = x + W_o a + b_o                                                      residual fusion

The attention costs ``HW x S`` instead of ``HW x HW``. The values are projected on whichever of the
``HW`` pixels or the ``S`` samples are fewer (equal results).

Fusion: the paper's APNB (and mmseg's) concatenates ``W_o a`` with ``x`` and applies a 1x1
conv-BN-ReLU from ``2C`` to ``C``; this plugin adds ``W_o a`` to ``x`` instead (the residual of
the non-local block), with ``b_o`` zero at init and ``W_o`` ``out_gain`` times a Kaiming-normal
draw: at the default ``out_gain = 0`` (mmseg zero-initialises ``W_o`` too) the block starts as
identity and only ``W_o`` and ``b_o`` get a gradient until they move. ``W_o a`` equals mmseg's
``SelfAttentionBlock`` output inside ``APNB`` (``query_scales=(1,)``), with the same BN.
"""
from __future__ import annotations

from typing import Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

from .checks import check_at_least, check_feature_map
from .init import branch_gate_init_


def pyramid_pool(x: torch.Tensor, pool_sizes: Sequence[int]) -> torch.Tensor:
    """Adaptive average pools of ``(N, C, H, W)`` to each ``s x s``, flattened and concatenated:
    ``(N, C, sum s^2)``."""
    return torch.cat([F.adaptive_avg_pool2d(x, s).flatten(2) for s in pool_sizes], 2)


class AsymmetricNonLocal2d(nn.Module):
    """Asymmetric pyramid non-local block (residual plugin form) for ``(N, C, H, W)`` feature maps.

    Args:
        in_channels: channels ``C`` of the input.
        reduction: ratio of the key/value width, ``C' = max(C // reduction, 1)``.
        pool_sizes: output sizes ``s`` of the pyramid's adaptive average pools (``s x s`` each).
        out_gain: scale of the output conv's initial weights (0: zero, the block starts as identity).
    """

    _abbr_ = "apnb_block"

    def __init__(self, in_channels: int, reduction: int = 2, pool_sizes: Sequence[int] = (1, 3, 6, 8),
                 out_gain: float = 0.0):
        super().__init__()
        check_at_least(1, in_channels=in_channels, reduction=reduction)
        pool_sizes = tuple(pool_sizes)
        if not pool_sizes or any(not isinstance(s, int) or s < 1 for s in pool_sizes):
            raise ValueError(f"pool_sizes must be a non-empty sequence of positive integers, "
                             f"got {pool_sizes}")
        self.in_channels = in_channels
        self.reduction = reduction
        self.pool_sizes = pool_sizes
        self.num_samples = sum(s * s for s in pool_sizes)
        self.key_channels = max(in_channels // reduction, 1)
        self.out_gain = float(out_gain)
        self.query_key = nn.Sequential(
            nn.Conv2d(in_channels, self.key_channels, 1, bias=False),
            nn.BatchNorm2d(self.key_channels),
            nn.ReLU(inplace=True))
        self.value = nn.Conv2d(in_channels, self.key_channels, 1)
        self.out_conv = nn.Conv2d(self.key_channels, in_channels, 1)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """As mmseg: Kaiming-normal (fan_out) query/key conv, unit BN with fresh running
        statistics, PyTorch's default value conv, and the output conv at ``out_gain`` (zero by
        default: the block starts as identity)."""
        nn.init.kaiming_normal_(self.query_key[0].weight, mode="fan_out", nonlinearity="relu")
        self.query_key[1].reset_parameters()
        self.value.reset_parameters()
        branch_gate_init_(self.out_conv, self.out_gain)

    def extra_repr(self) -> str:
        return f"{self.in_channels}, reduction={self.reduction}, pool_sizes={self.pool_sizes}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_feature_map(x, self.in_channels)
        n, _, h, w = x.shape
        query = self.query_key(x)  # (N, C', H, W)
        key = pyramid_pool(query, self.pool_sizes)  # (N, C', S)
        if h * w > self.num_samples:
            value = self.value(pyramid_pool(x, self.pool_sizes)[..., None])[..., 0]  # (N, C', S)
        else:
            value = pyramid_pool(self.value(x), self.pool_sizes)
        q, k, v = (t.flatten(2).transpose(1, 2)[:, None] for t in (query, key, value))  # (N, 1, L, C')
        out = F.scaled_dot_product_attention(q, k, v)[:, 0]  # (N, HW, C'), logits scaled by 1 / sqrt(C')
        return x + self.out_conv(out.transpose(1, 2).reshape(n, self.key_channels, h, w))

    def macs(self, x: torch.Tensor) -> int:
        """Multiply-adds of one forward pass on ``(N, C, H, W)``: the query/key conv and the
        output conv on ``HW`` pixels, the value conv on ``min(HW, S)`` positions, and the
        ``HW x S`` attention (logits and sum over ``C'``)."""
        n, c, h, w = x.shape
        hw, ck, s = h * w, self.key_channels, self.num_samples
        return n * (2 * hw * c * ck + min(hw, s) * c * ck + 2 * hw * s * ck)
