"""Dynamic convolution on feature maps (2D), a residual block for ResNet stages.

The dynamic convolution of Wu et al., "Pay Less Attention with Lightweight and Dynamic
Convolutions", ICLR 2019, https://arxiv.org/abs/1901.10430 (Eq. 4), carried from sequences to
``k x k`` pixel neighbourhoods; reference code consulted: fairseq
``fairseq/modules/dynamic_convolution.py``. The block wrapping (1x1 value and output projections,
``x + gamma * out`` with ``gamma = gamma_init``, 0 by default, at init) follows the generalized
attention block: at 0 the block starts as the identity and only ``gamma`` gets a gradient until it moves.

For pixel ``p``, head ``m`` (channels split into ``H`` heads of ``R = C / H``) and tap ``j`` at the
offset ``o_j = dilation * (a - k // 2, b - k // 2)``, ``a, b in [0, k)``:

    A[p, m, :] = softmax_j( (W_K x_p)_{m, :} )                  (k*k taps per head, from pixel p)
    y_p = x_p + gamma * W_out [ sum_j A[p, m, j] (W_V x)_{p + o_j} ]_{heads}   (zero outside the map)

In the terms of the study (Zhu et al. 2019, https://arxiv.org/abs/1904.05873) this is "query
content + relative position", like E2: each tap is a relative offset and its weight comes from the
query pixel's content alone, with no key content (the value at ``p + o_j`` never enters its own
weight) and no content-independent bias (``W_K`` has none, so there is no E4 part). Keys are
restricted to the ``k x k`` window, so cost is linear in the number of pixels.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from .checks import check_at_least, check_feature_map, check_multiple


class DynamicConv2d(nn.Module):
    """Dynamic ``k x k`` convolution block for ``(N, C, H, W)`` feature maps.

    Args:
        in_channels: channels ``C`` of the input; divisible by ``num_heads``.
        kernel_size: taps ``k`` per side (even sizes reach one pixel further up and left).
        num_heads: heads ``H``; the channels of a head share its predicted kernel.
        dilation: spacing of the taps, in pixels.
        gamma_init: initial value of the residual gate ``gamma`` (0: the block starts as identity).
    """

    _abbr_ = "dynamic_conv_block"

    def __init__(self, in_channels: int, kernel_size: int = 3, num_heads: int = 8, dilation: int = 1,
                 gamma_init: float = 0.0):
        super().__init__()
        check_at_least(1, kernel_size=kernel_size, dilation=dilation)
        check_multiple("in_channels", in_channels, "num_heads", num_heads)
        self.in_channels = in_channels
        self.kernel_size = kernel_size
        self.num_heads = num_heads
        self.dilation = dilation
        self.gamma_init = float(gamma_init)
        self.kernel_conv = nn.Conv2d(in_channels, num_heads * kernel_size ** 2, 1, bias=False)
        self.value_conv = nn.Conv2d(in_channels, in_channels, 1, bias=False)
        self.proj_conv = nn.Conv2d(in_channels, in_channels, 1, bias=True)
        self.gamma = nn.Parameter(torch.zeros(1))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Kaiming-normal (fan_in) projections, zero bias and gamma = ``gamma_init`` (0 by default:
        the block starts as identity)."""
        for m in (self.kernel_conv, self.value_conv, self.proj_conv):
            nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="leaky_relu")
        nn.init.zeros_(self.proj_conv.bias)
        nn.init.constant_(self.gamma, self.gamma_init)

    def extra_repr(self) -> str:
        return (f"{self.in_channels}, kernel_size={self.kernel_size}, num_heads={self.num_heads}, "
                f"dilation={self.dilation}")

    def kernel_weights(self, x: torch.Tensor) -> torch.Tensor:
        """The normalised kernels forward applies, ``A[p, m, j] = softmax_j((W_K x_p)_{m, :})``:
        ``(N, heads, k*k, H*W)`` for an ``(N, C, H, W)`` input, pixels ``p`` row-major, tap ``j = a k + b``
        at the offset ``o_j = dilation * (a - k // 2, b - k // 2)``."""
        check_feature_map(x, self.in_channels)
        n, _, h, w = x.shape
        return self.kernel_conv(x).view(n, self.num_heads, self.kernel_size ** 2, h * w).softmax(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = self.kernel_weights(x)  # (N, heads, k*k, HW); checks x
        n, c, h, w = x.shape
        k, heads = self.kernel_size, self.num_heads
        before = self.dilation * (k // 2)
        after = self.dilation * (k - 1 - k // 2)
        value = F.pad(self.value_conv(x), (before, after, before, after))
        windows = F.unfold(value, k, dilation=self.dilation)  # (N, C * k*k, HW), channel-major
        windows = windows.view(n, heads, c // heads, k * k, h * w)
        out = torch.einsum("nmrjp,nmjp->nmrp", windows, weight).reshape(n, c, h, w)
        return x + self.gamma * self.proj_conv(out)

    def macs(self, x: torch.Tensor) -> int:
        """Multiply-adds of one forward pass on ``(N, C, H, W)``: the three 1x1 convs and the taps."""
        n, c, h, w = x.shape
        taps = self.kernel_size ** 2
        per_pixel = c * self.num_heads * taps + 2 * c * c + c * taps
        return n * h * w * per_pixel
