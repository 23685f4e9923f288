"""Deformable convolution on feature maps (2D), v1 and the modulated v2.

v1: Dai, Qi, Xiong, Li, Zhang, Hu, Wei, "Deformable Convolutional Networks", ICCV 2017,
https://arxiv.org/abs/1703.06211 (Eq. 2-4). v2: Zhu, Hu, Lin, Dai, "Deformable ConvNets v2: More
Deformable, Better Results", CVPR 2019, https://arxiv.org/abs/1811.11168 (Eq. 3). Sampling runs in
``torchvision.ops.deform_conv2d``. Reference code consulted: mmcv ``mmcv/ops/deform_conv.py`` and
``mmcv/ops/modulated_deform_conv.py``, whose constructor, parameter names and initialisation these
modules keep, so mmdet DCN / DCNv2 checkpoints load.

For output position ``p`` (input position ``p0 = p * stride - padding``) and kernel tap ``k`` at
``p_k = dilation * (i, j)``:

    v1:  y(p) = b + sum_k w_k . x(p0 + p_k + dp_k)
    v2:  y(p) = b + sum_k w_k . x(p0 + p_k + dp_k) * m_k,   m_k = sigmoid(mask logit) in (0, 1)
    x(q) = sum_r g(r_y, q_y) g(r_x, q_x) x(r),   g(a, b) = max(0, 1 - |a - b|)

(bilinear sampling, zero outside the map). Each of ``deform_groups`` channel groups has its own
offsets ``dp`` (and masks ``m``), predicted per output position by ``conv_offset``, a plain conv
with the same kernel, stride, padding and dilation. Its output channels are, for deform group ``g``
and tap ``t = i * kw + j``: ``2 (g kh kw + t)`` = dy, ``2 (g kh kw + t) + 1`` = dx, and for v2
after all offsets ``2 G kh kw + g kh kw + t`` = mask logit (the layout of mmcv and torchvision).

``conv_offset`` starts at zero, so at initialisation ``dp = 0`` and ``m = sigmoid(0) = 1/2``: v1 is
exactly ``nn.Conv2d`` with the same weight and bias, v2 is ``b + conv(x, w) / 2`` (the initial
``m = 0.5`` of the v2 paper).

Differences from mmcv 2.x: v1 accepts ``bias=True`` (mmcv asserts it off); v2 defaults to
``bias=False`` (mmcv: True; mmdet passes it explicitly); no ``im2col_step`` (a CUDA batching knob).
mmdet's ResNet pops ``fallback_on_stride`` from its ``dcn`` dict before building ``conv2``, so, as
with mmcv, only constructor arguments reach these classes.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
from torch.nn.modules.utils import _pair
from torchvision.ops import deform_conv2d

from .checks import check_feature_map, check_multiple
from .dtypes import to_common_dtype


def check_groups(in_channels: int, out_channels: int, groups: int, deform_groups: int) -> None:
    """Channels must split into ``groups`` (both sides) and ``deform_groups`` (input side)."""
    if groups < 1 or in_channels < 1 or out_channels < 1 or in_channels % groups or out_channels % groups:
        raise ValueError(f"in_channels ({in_channels}) and out_channels ({out_channels}) must be "
                         f"positive multiples of groups ({groups})")
    check_multiple("in_channels", in_channels, "deform_groups", deform_groups)


def _int_pair(name: str, value, minimum: int) -> tuple[int, int]:
    pair = _pair(value)
    if len(pair) != 2 or not all(isinstance(v, int) and v >= minimum for v in pair):
        raise ValueError(f"{name} must be an int or a pair of ints >= {minimum}, got {value!r}")
    return pair


class _DeformConv2dBase(nn.Module):
    """Weights, offset branch, checks and counts shared by v1 and v2."""

    modulated: bool  # v2: the offset branch also predicts a mask per deform group and kernel tap

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple[int, int],
        stride: int | tuple[int, int] = 1,
        padding: int | tuple[int, int] = 0,
        dilation: int | tuple[int, int] = 1,
        groups: int = 1,
        deform_groups: int = 1,
        bias: bool = False,
    ):
        super().__init__()
        self.kernel_size = _int_pair("kernel_size", kernel_size, 1)
        self.stride = _int_pair("stride", stride, 1)
        self.padding = _int_pair("padding", padding, 0)
        self.dilation = _int_pair("dilation", dilation, 1)
        check_groups(in_channels, out_channels, groups, deform_groups)
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.groups = groups
        self.deform_groups = deform_groups
        taps = self.kernel_size[0] * self.kernel_size[1]
        self.weight = nn.Parameter(torch.empty(out_channels, in_channels // groups, *self.kernel_size))
        self.bias = nn.Parameter(torch.empty(out_channels)) if bias else None
        self.conv_offset = nn.Conv2d(
            in_channels, deform_groups * (3 if self.modulated else 2) * taps, self.kernel_size,
            stride=self.stride, padding=self.padding, dilation=self.dilation, bias=True)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Zero offset branch (dp = 0, mask logits = 0) and zero bias; subclasses set ``weight``."""
        nn.init.zeros_(self.conv_offset.weight)
        nn.init.zeros_(self.conv_offset.bias)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def extra_repr(self) -> str:
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, padding={self.padding}, dilation={self.dilation}, "
                f"groups={self.groups}, deform_groups={self.deform_groups}, bias={self.bias is not None}")

    def output_size(self, height: int, width: int) -> tuple[int, int]:
        """``(H_out, W_out)`` as for ``nn.Conv2d``; ValueError if the input is smaller than the kernel."""
        geometry = zip((height, width), self.padding, self.dilation, self.kernel_size, self.stride)
        size = tuple((n + 2 * pad - dil * (k - 1) - 1) // s + 1 for n, pad, dil, k, s in geometry)
        if min(size) < 1:
            raise ValueError(f"input {height}x{width} is too small for kernel {self.kernel_size} with "
                             f"padding {self.padding} and dilation {self.dilation}")
        return size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_feature_map(x, self.in_channels)
        self.output_size(*x.shape[2:])  # ValueError if the map is smaller than the kernel
        branch = self.conv_offset(x)  # (N, G kh kw * (2 or 3), H_out, W_out)
        num_offsets = 2 * self.deform_groups * self.kernel_size[0] * self.kernel_size[1]
        offset = branch[:, :num_offsets]  # (N, 2 G kh kw, H_out, W_out), (dy, dx) per group and tap
        mask = branch[:, num_offsets:].sigmoid() if self.modulated else None  # (N, G kh kw, H_out, W_out)
        x, offset, weight, bias, mask = to_common_dtype(x, offset, self.weight, self.bias, mask)
        return deform_conv2d(x, offset, weight, bias, self.stride, self.padding, self.dilation, mask)

    def macs(self, x: torch.Tensor) -> int:
        """Multiply-adds of one forward pass on an input of shape ``(N, C, H, W)``.

        Counts the offset-branch conv and the convolution over the sampled columns; not the
        bilinear sampling, the sigmoid or the mask product (elementwise, as in ``attnbench.flops``).
        """
        n, _, height, width = x.shape
        h_out, w_out = self.output_size(height, width)
        taps = self.kernel_size[0] * self.kernel_size[1]
        per_position = (self.out_channels * (self.in_channels // self.groups) * taps
                        + self.conv_offset.out_channels * self.in_channels * taps)
        return n * h_out * w_out * per_position


class DeformConv2d(_DeformConv2dBase):
    """Deformable convolution v1 with its own offset branch (drop-in for mmcv's ``DeformConv2dPack``).

    Args:
        in_channels: input channels; divisible by ``groups`` and ``deform_groups``.
        out_channels: output channels; divisible by ``groups``.
        kernel_size, stride, padding, dilation: as for ``nn.Conv2d`` (int or pair).
        groups: blocked connections from input to output channels, as for ``nn.Conv2d``.
        deform_groups: channel groups with separate offsets.
        bias: add a learned bias.
    """

    modulated = False

    def reset_parameters(self) -> None:
        """mmcv's initialisation: Kaiming-uniform weight (ReLU gain), zero offset branch and bias."""
        nn.init.kaiming_uniform_(self.weight, nonlinearity="relu")
        super().reset_parameters()


class ModulatedDeformConv2d(_DeformConv2dBase):
    """Modulated deformable convolution v2 with its own offset and mask branch (drop-in for mmcv's
    ``ModulatedDeformConv2dPack``). Arguments as for :class:`DeformConv2d`."""

    modulated = True

    def reset_parameters(self) -> None:
        """mmcv's initialisation: weight uniform in +-1/sqrt(in_channels kh kw), zero offset branch, bias."""
        bound = 1.0 / math.sqrt(self.in_channels * self.kernel_size[0] * self.kernel_size[1])
        nn.init.uniform_(self.weight, -bound, bound)
        super().reset_parameters()
