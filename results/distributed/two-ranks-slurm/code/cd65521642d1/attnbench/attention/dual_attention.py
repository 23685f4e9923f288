"""Dual attention (DANet): a position attention and a channel attention summed on the input.

Fu et al., "Dual Attention Network for Scene Segmentation", CVPR 2019,
https://arxiv.org/abs/1809.02983 (Sec. 3.2 Eq. 1-2, position attention module; Sec. 3.3 Eq. 3-4,
channel attention module); reference code consulted: mmseg ``mmseg/models/decode_heads/da_head.py``
(``PAM`` and ``CAM``, which the two branches match on copied weights) and the official
https://github.com/junfu1115/DANet.

For ``x`` with ``N = HW`` positions, ``X`` its ``C x N`` matrix, and 1x1 convs (with bias)
``B, C_k: C -> C' = max(C // reduction, 1)`` and ``D: C -> C``:

    position (PAM):  s_ji = softmax_i( B(x)_i . C_k(x)_j )                    (Eq. 1), N x N
                     E_p  = gamma_p * sum_i s_ji D(x)_i + x                   (Eq. 2)
    channel (CAM):   x_ji = softmax_i( max_k (X X^T)_jk - (X X^T)_ji )         (Eq. 3), C x C
                     E_c  = gamma_c * sum_i x_ji X_i + x                      (Eq. 4)
    block:           y = E_p + E_c - x = x + gamma_p * PAM(x) + gamma_c * CAM(x)

The CAM's "max minus energy" (as in the official code and mmseg; the paper's Eq. 3 has the plain
energy) is ``softmax(-X X^T)``, since a softmax ignores a per-row constant: a channel attends most
to the channels it is least similar to. The PAM logits are not scaled (no ``1 / sqrt(C')``).

Fusion: DANet's head wraps each module in 3x3 conv-BN-ReLU layers and sums the two branches after
those convs; as a plugin the block keeps only the two attention modules and sums them on ``x``, so
it adds ``C' * 2C + C^2`` weights and two scalars. ``gamma_p`` and ``gamma_c`` both start at
``gamma_init``, 0 by default (as in the paper): the block then starts as identity and only the two
gammas get a gradient until they move.

Cost: the position affinity is ``HW x HW``; it runs in ``scaled_dot_product_attention``, whose
fused kernels do not store it (on CUDA the memory-efficient kernel, which takes ``C' != C``, when
``C'`` and ``C`` are multiples of 4 in float32, of 8 in half precision), so a 100x170 map does not
need a 17000 x 17000 matrix per sample; other widths fall back to the plain ``HW x HW`` product.
The channel affinity is ``C x C`` and is computed directly (one matmul with inner dimension
``HW``, cheaper than a fused kernel with head size ``HW``).
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from .checks import check_at_least, check_feature_map


def position_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """``sum_j softmax_j(q_i . k_j) v_j`` without logit scale, for ``(N, L, C')`` queries and
    keys and ``(N, L, C_v)`` values; returns ``(N, L, C_v)``."""
    return F.scaled_dot_product_attention(query[:, None], key[:, None], value[:, None], scale=1.0)[:, 0]


def channel_attention(x: torch.Tensor, negate: bool) -> torch.Tensor:
    """``softmax_j(+-X X^T)_ij`` applied to the rows of ``X``: for ``x`` of shape ``(N, C, L)``
    returns ``(N, C, L)``, channel ``i`` replaced by a convex combination of all channels, weighted
    by the Gram matrix (``negate=True``: by its negation, DANet's ``max - energy``)."""
    energy = torch.bmm(x, x.transpose(1, 2))  # (N, C, C)
    return torch.bmm((-energy if negate else energy).softmax(-1), x)


class DualAttention(nn.Module):
    """DANet position + channel attention for ``(N, C, H, W)`` feature maps.

    Args:
        in_channels: channels ``C`` of the input.
        reduction: ratio of the position query/key width, ``C' = max(C // reduction, 1)``.
        gamma_init: initial value of both residual gates (0: the block starts as identity).
    """

    _abbr_ = "dual_attention_block"

    def __init__(self, in_channels: int, reduction: int = 8, gamma_init: float = 0.0):
        super().__init__()
        check_at_least(1, in_channels=in_channels, reduction=reduction)
        self.in_channels = in_channels
        self.reduction = reduction
        self.key_channels = max(in_channels // reduction, 1)
        self.gamma_init = float(gamma_init)
        self.query = nn.Conv2d(in_channels, self.key_channels, 1)
        self.key = nn.Conv2d(in_channels, self.key_channels, 1)
        self.value = nn.Conv2d(in_channels, in_channels, 1)
        self.gamma_position = nn.Parameter(torch.zeros(()))
        self.gamma_channel = nn.Parameter(torch.zeros(()))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyTorch's default conv init (as DANet and mmseg) and gammas at ``gamma_init`` (0 by
        default: the block starts as identity)."""
        for m in (self.query, self.key, self.value):
            m.reset_parameters()
        for gamma in (self.gamma_position, self.gamma_channel):
            nn.init.constant_(gamma, self.gamma_init)

    def extra_repr(self) -> str:
        return f"{self.in_channels}, reduction={self.reduction}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_feature_map(x, self.in_channels)

        def embed(conv):  # (N, HW, C' or C)
            return conv(x).flatten(2).transpose(1, 2)

        position = position_attention(embed(self.query), embed(self.key), embed(self.value))  # (N, HW, C)
        channel = channel_attention(x.flatten(2), negate=True)  # (N, C, HW)
        context = self.gamma_position * position.transpose(1, 2) + self.gamma_channel * channel
        return x + context.reshape_as(x)

    def macs(self, x: torch.Tensor) -> int:
        """Multiply-adds of one forward pass on ``(N, C, H, W)``: the three 1x1 convs, the
        ``HW x HW`` position attention (logits over ``C'``, sum over ``C``) and the ``C x C``
        channel attention (two products over ``HW``)."""
        n, c, h, w = x.shape
        hw, ck = h * w, self.key_channels
        return n * (hw * c * (2 * ck + c) + hw * hw * (ck + c) + 2 * c * c * hw)
