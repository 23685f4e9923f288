"""Non-local block: every pixel attends to every pixel, added back through a 1x1 conv.

Wang et al., "Non-local Neural Networks", CVPR 2018, https://arxiv.org/abs/1711.07971 (Eq. 1-4, 6);
reference code consulted: mmcv ``mmcv/cnn/bricks/non_local.py`` (``NonLocal2d``, which this module
matches on copied weights) and https://github.com/AlexHex7/Non-local_pytorch.

With ``theta``, ``phi``, ``g`` 1x1 convs ``C -> C' = max(C // reduction, 1)`` (with bias):

    embedded_gaussian:  f_ij = softmax_j( theta(x_i) . phi(x_j) / sqrt(C') )     (Eq. 3)
    dot_product:        f_ij = theta(x_i) . phi(x_j) / HW                         (Eq. 4, N = HW)
    y_i = x_i + W_z sum_j f_ij g(x_j) + b_z                                      (Eq. 1, 6)

Difference from the paper, kept to match mmcv (``use_scale=True``, its default): the embedded
Gaussian logits are divided by ``sqrt(C')``, as in scaled dot-product attention; the paper has no
scale. ``b_z`` is zero at init and ``W_z`` is ``out_gain`` times a Kaiming-normal draw; at the
default ``out_gain = 0`` (mmcv's ``zeros_init``; the paper zero-initialises the BN after ``W_z``,
there is no BN here) the block starts as identity and only ``W_z`` and ``b_z`` get a gradient until
they move.
"""
from __future__ import annotations

import torch
import torch.nn as nn

from .checks import check_at_least, check_feature_map
from .init import branch_gate_init_

MODES = ("embedded_gaussian", "dot_product")


def non_local_attention(theta: torch.Tensor, phi: torch.Tensor, g: torch.Tensor, mode: str) -> torch.Tensor:
    """``sum_j f(theta_i, phi_j) g_j`` for ``(N, L, C')`` inputs; returns ``(N, L, C')``."""
    logits = torch.bmm(theta, phi.transpose(1, 2))  # (N, L, L)
    if mode == "embedded_gaussian":
        weights = (logits / theta.shape[-1] ** 0.5).softmax(-1)
    else:
        weights = logits / phi.shape[1]
    return torch.bmm(weights, g)


class NonLocal2d(nn.Module):
    """Non-local block for ``(N, C, H, W)`` feature maps.

    Args:
        in_channels: channels ``C`` of the input.
        reduction: ratio of the embedding width, ``C' = max(C // reduction, 1)``.
        mode: pairwise function, ``'embedded_gaussian'`` or ``'dot_product'``.
        out_gain: scale of the output conv's initial weights (0: zero, the block starts as identity).
    """

    _abbr_ = "nonlocal_block"

    def __init__(self, in_channels: int, reduction: int = 2, mode: str = "embedded_gaussian",
                 out_gain: float = 0.0):
        super().__init__()
        check_at_least(1, in_channels=in_channels, reduction=reduction)
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.in_channels = in_channels
        self.reduction = reduction
        self.mode = mode
        self.inter_channels = max(in_channels // reduction, 1)
        self.out_gain = float(out_gain)
        self.theta = nn.Conv2d(in_channels, self.inter_channels, 1)
        self.phi = nn.Conv2d(in_channels, self.inter_channels, 1)
        self.g = nn.Conv2d(in_channels, self.inter_channels, 1)
        self.out_conv = nn.Conv2d(self.inter_channels, in_channels, 1)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Normal(std=0.01) embeddings with zero bias (as mmcv) and the output conv at ``out_gain``
        (zero by default: the block starts as identity)."""
        for m in (self.theta, self.phi, self.g):
            nn.init.normal_(m.weight, std=0.01)
            nn.init.zeros_(m.bias)
        branch_gate_init_(self.out_conv, self.out_gain)

    def extra_repr(self) -> str:
        return f"{self.in_channels}, reduction={self.reduction}, mode={self.mode!r}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_feature_map(x, self.in_channels)
        n, _, h, w = x.shape

        def embed(conv):  # (N, HW, C')
            return conv(x).flatten(2).transpose(1, 2)

        y = non_local_attention(embed(self.theta), embed(self.phi), embed(self.g), self.mode)
        return x + self.out_conv(y.transpose(1, 2).reshape(n, self.inter_channels, h, w))

    def macs(self, x: torch.Tensor) -> int:
        """Multiply-adds of one forward pass on ``(N, C, H, W)``: four 1x1 convs and two
        ``HW x HW x C'`` products."""
        n, c, h, w = x.shape
        hw, ci = h * w, self.inter_channels
        return n * (4 * hw * c * ci + 2 * hw * hw * ci)
