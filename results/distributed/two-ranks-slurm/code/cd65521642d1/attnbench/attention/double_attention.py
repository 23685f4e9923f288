"""Double attention (A^2): gather global descriptors with one attention, distribute them with another.

Chen, Kalantidis, Li, Yan and Feng, "A^2-Nets: Double Attention Networks", NeurIPS 2018,
https://arxiv.org/abs/1810.11579 (Sec. 3, Eq. 1-5); reference code consulted: the
third-party https://github.com/gjylt/DoubleAttentionNet (``DoubleAttentionLayer``).

With 1x1 convs phi: ``C -> c_m``, theta, rho: ``C -> c_n`` (with bias) and ``L = HW`` positions:

    A = phi(x),  B = softmax_L(theta(x)),  V = softmax_{c_n}(rho(x))       (N, c_m | c_n, L)
    G = A B^T                         (N, c_m, c_n), second-order attention pooling: gather
    Z = G V                           (N, c_m, L),  each position mixes the c_n descriptors: distribute
    y = x + W_out Z + b_out           1x1 conv c_m -> C back to the input width, residual

Each of the ``c_n`` attention maps in ``B`` sums to 1 over the positions; each position's
attention vector in ``V`` sums to 1 over the ``c_n`` descriptors. Here ``c_m = c_n = max(C //
reduction, 1)``. ``b_out`` is zero at init and ``W_out`` is ``out_gain`` times a Kaiming-normal
draw; at the default ``out_gain = 0`` the block starts as identity (a choice for use as a plugin in
a pretrained backbone, not something the paper specifies) and only ``W_out`` and ``b_out`` get a
gradient until they move.
"""
from __future__ import annotations

import torch
import torch.nn as nn

from .checks import check_at_least, check_feature_map
from .init import branch_gate_init_, kaiming_init_


def double_attention(features: torch.Tensor, gather_logits: torch.Tensor,
                     distribute_logits: torch.Tensor) -> torch.Tensor:
    """Gather then distribute: ``(A softmax_L(B)^T) softmax_{c_n}(V)``.

    Args:
        features: ``A``, ``(N, c_m, L)``.
        gather_logits: ``B`` before the softmax over the ``L`` positions, ``(N, c_n, L)``.
        distribute_logits: ``V`` before the softmax over the ``c_n`` descriptors, ``(N, c_n, L)``.

    Returns:
        ``Z``, ``(N, c_m, L)``.
    """
    descriptors = torch.bmm(features, gather_logits.softmax(-1).transpose(1, 2))  # (N, c_m, c_n)
    return torch.bmm(descriptors, distribute_logits.softmax(1))  # (N, c_m, L)


class DoubleAttention(nn.Module):
    """A^2 double-attention block for ``(N, C, H, W)`` feature maps.

    Args:
        in_channels: channels ``C`` of the input.
        reduction: ``c_m = c_n = max(C // reduction, 1)`` feature and attention channels.
        out_gain: scale of the output conv's initial weights (0: zero, the block starts as identity).
    """

    _abbr_ = "double_attention_block"

    def __init__(self, in_channels: int, reduction: int = 4, out_gain: float = 0.0):
        super().__init__()
        check_at_least(1, in_channels=in_channels, reduction=reduction)
        self.in_channels = in_channels
        self.reduction = reduction
        self.attention_channels = max(in_channels // reduction, 1)
        self.out_gain = float(out_gain)
        # phi, theta and rho as one conv: output channels [A | B | V]
        self.embed = nn.Conv2d(in_channels, 3 * self.attention_channels, 1)
        self.out_conv = nn.Conv2d(self.attention_channels, in_channels, 1)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Kaiming-normal (fan_in) embedding with zero bias and the output conv at ``out_gain``
        (zero by default: the block starts as identity)."""
        kaiming_init_(self.embed)
        branch_gate_init_(self.out_conv, self.out_gain)

    def extra_repr(self) -> str:
        return f"{self.in_channels}, reduction={self.reduction}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_feature_map(x, self.in_channels)
        n, _, h, w = x.shape
        a, b, v = self.embed(x).flatten(2).chunk(3, 1)  # 3 x (N, c, HW)
        z = double_attention(a, b, v).view(n, self.attention_channels, h, w)
        return x + self.out_conv(z)

    def macs(self, x: torch.Tensor) -> int:
        """Multiply-adds of one forward pass on ``(N, C, H, W)``: the ``C -> 3c`` embedding, the
        gather and distribute products (``c x c x HW`` each) and the ``c -> C`` output conv."""
        n, c, h, w = x.shape
        inner = self.attention_channels
        return n * h * w * (3 * c * inner + 2 * inner * inner + inner * c)
