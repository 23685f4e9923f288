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

(bilinear sampling, zero outside the map). On CUDA it runs in torchvision's kernel; on the CPU, where
that kernel is 2 to 8 times slower, as the columns gathered by :func:`bilinear_gather` and one matmul
(same value and gradients). Each of ``deform_groups`` channel groups has its own
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
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.nn.modules.utils import _pair
from torchvision.ops import deform_conv2d

from .attention_maps import flat_index
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


def bilinear_gather(x: torch.Tensor, locations: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
    """``x`` read at fractional ``locations`` by bilinear sampling, zero outside the map, as torchvision's
    ``deform_conv2d`` samples (its corners, weights and one-sided derivative at integer locations):

        out[n, c, k, p] = w[n, g, k, p] sum_r tent(r_y, q_y) tent(r_x, q_x) x[n, c, r],   q = locations[n, g, k, :, p]

    with ``tent(a, b) = max(0, 1 - |a - b|)`` and ``g`` the deform group of channel ``c``.

    Args:
        x: ``(N, C, H, W)``; its channels split into ``G`` groups of ``C / G``.
        locations: ``(N, G, K, 2, P)``, (y, x) in input pixels, per group, tap and position.
        weights: ``(N, G, K, P)`` factors on each sampled value (the v2 mask), or None.

    Returns:
        ``(N, C, K, P)``.
    """
    n, channels, height, width = x.shape
    groups, taps, positions = locations.shape[1], locations.shape[2], locations.shape[4]
    row, col = locations.unbind(3)  # (N, G, K, P) each
    row0, col0 = row.floor(), col.floor()
    row_frac, col_frac = row - row0, col - col0
    index, corner_weights = [], []
    for row_step, row_weight in ((0, 1 - row_frac), (1, row_frac)):
        for col_step, col_weight in ((0, 1 - col_frac), (1, col_frac)):
            r, c = row0 + row_step, col0 + col_step
            inside = (r >= 0) & (r < height) & (c >= 0) & (c < width)
            index.append((r.clamp(0, height - 1) * width + c.clamp(0, width - 1)).long())
            corner_weights.append(row_weight * col_weight * inside)
    corner_weights = torch.stack(corner_weights, dim=-1)  # (N, G, K, P, 4)
    if weights is not None:
        corner_weights = corner_weights * weights.unsqueeze(-1)
    index = torch.stack(index, dim=-1).view(n * groups, 1, -1)
    flat = x.reshape(n * groups, channels // groups, height * width)
    values = flat.gather(2, index.expand(-1, channels // groups, -1))  # (N G, C / G, K P 4)
    values = values.view(n, groups, channels // groups, taps, positions, 4)
    return (values * corner_weights.unsqueeze(2)).sum(-1).view(n, channels, taps, positions)


@dataclass(frozen=True)
class DeformableSampling:
    """Sampling locations and modulation of a deformable convolution at chosen output positions.

    Attributes:
        locations: ``(N, G, kh kw, 2, P)``: (y, x) in input pixels, per deform group, kernel tap
            (row-major over the kernel) and position.
        modulation: ``(N, G, kh kw, P)``: the v2 mask ``m_k`` in (0, 1), ones for v1.
        output_grid: ``(H_out, W_out)``, the grid the positions index row-major.
    """

    locations: torch.Tensor
    modulation: torch.Tensor
    output_grid: tuple[int, int]


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

    def _offset_and_mask(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The offset branch on a checked input: offsets ``(N, 2 G kh kw, H_out, W_out)``, ``(dy, dx)`` per
        group and tap, and for v2 the masks ``(N, G kh kw, H_out, W_out)`` (None for v1)."""
        self.output_size(*x.shape[2:])  # ValueError if the map is smaller than the kernel
        branch = self.conv_offset(x)  # (N, G kh kw * (2 or 3), H_out, W_out)
        num_offsets = 2 * self.deform_groups * self.kernel_size[0] * self.kernel_size[1]
        offset = branch[:, :num_offsets]  # (N, 2 G kh kw, H_out, W_out), (dy, dx) per group and tap
        mask = branch[:, num_offsets:].sigmoid() if self.modulated else None  # (N, G kh kw, H_out, W_out)
        return offset, mask

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_feature_map(x, self.in_channels)
        offset, mask = self._offset_and_mask(x)
        x, offset, weight, bias, mask = to_common_dtype(x, offset, self.weight, self.bias, mask)
        if x.device.type == "cpu":  # torchvision's CPU kernel: 2-8x slower (tools/benchmark_deformable_conv.py)
            return self._conv_over_gathered_columns(x, offset, weight, bias, mask)
        return deform_conv2d(x, offset, weight, bias, self.stride, self.padding, self.dilation, mask)

    def _conv_over_gathered_columns(self, x, offset, weight, bias, mask) -> torch.Tensor:
        """torchvision's ``deform_conv2d``, computed as ``y = b + W @ columns``: the columns
        ``x(p0 + p_k + dp_k) * m_k`` (``(N, C_in kh kw, H_out W_out)``) read by :func:`bilinear_gather`,
        then one matmul per conv group. Same value and gradients as the kernel (tested in float64;
        at integer locations, the kernel's one-sided derivative), in plain PyTorch ops."""
        n, _, h_out, w_out = offset.shape
        taps = self.kernel_size[0] * self.kernel_size[1]
        modulation = None if mask is None else mask.view(n, self.deform_groups, taps, h_out * w_out)
        columns = bilinear_gather(x, self._locations(offset), modulation)  # (N, C_in, kh kw, P)
        columns = columns.reshape(n, self.groups, -1, h_out * w_out)  # (N, groups, C_in / groups kh kw, P)
        out = weight.view(self.groups, self.out_channels // self.groups, -1) @ columns
        out = out.view(n, self.out_channels, h_out, w_out)
        return out if bias is None else out + bias.view(1, -1, 1, 1)

    def _locations(self, offset: torch.Tensor) -> torch.Tensor:
        """``p0 + p_k + dp_k``: (y, x) in input pixels of every group, tap and output position, ``(N, G, kh kw, 2, P)``."""
        n, _, h_out, w_out = offset.shape
        taps = self.kernel_size[0] * self.kernel_size[1]
        return (self._regular_grid((h_out, w_out), offset)
                + offset.view(n, self.deform_groups, taps, 2, h_out * w_out))

    def sampling_locations(self, x: torch.Tensor, positions: torch.Tensor | None = None) -> DeformableSampling:
        """Where, and with what modulation, each kernel tap samples the input at chosen output positions.

        For output position ``p`` (flat, row-major index into the ``H_out x W_out`` grid; all when
        ``positions`` is None), deform group ``g`` and tap ``t = i * kw + j``:

            location[g, t, :, p] = (p_y s_h - pad_h + dil_h i + dy, p_x s_w - pad_w + dil_w j + dx)
            modulation[g, t, p]  = m_t = sigmoid(mask logit)   (v2; ones for v1)

        in input pixels, ``(dy, dx)`` the offset branch's channels ``2 (g kh kw + t)`` and ``+ 1``
        (torchvision's ``deform_conv2d`` layout): forward reads ``x`` at ``location`` by bilinear
        sampling (zero outside the map) and weighs it by ``modulation``.

        Args:
            x: ``(N, C_in, H, W)`` input.
            positions: 1-D int64 flat indices into the output grid, or None for all.

        Returns:
            :class:`DeformableSampling`: locations ``(N, G, kh kw, 2, P)`` (y, x), modulation
            ``(N, G, kh kw, P)``, ``output_grid = (H_out, W_out)``.
        """
        check_feature_map(x, self.in_channels)
        offset, mask = self._offset_and_mask(x)
        n, _, h_out, w_out = offset.shape
        index = flat_index(positions, (h_out, w_out), x.device, "positions")
        locations = self._locations(offset)[..., index]
        modulation = (torch.ones_like(locations[:, :, :, 0]) if mask is None
                      else mask.flatten(2)[:, :, index].view(*locations.shape[:3], -1))
        return DeformableSampling(locations, modulation, (h_out, w_out))

    def _regular_grid(self, output_grid: tuple[int, int], like: torch.Tensor) -> torch.Tensor:
        """``p0 + p_k`` without offsets: (y, x) of every tap at every output position, (kh kw, 2, H_out W_out)."""
        (kh, kw), (h_out, w_out) = self.kernel_size, output_grid
        y, x = (torch.arange(kernel, device=like.device, dtype=like.dtype)[:, None] * dilation  # (kernel, size)
                + torch.arange(size, device=like.device, dtype=like.dtype)[None, :] * stride - pad
                for size, kernel, stride, pad, dilation in zip(
                    output_grid, self.kernel_size, self.stride, self.padding, self.dilation))
        y = y[:, None, :, None].expand(kh, kw, h_out, w_out)
        x = x[None, :, None, :].expand(kh, kw, h_out, w_out)
        return torch.stack((y, x), dim=2).reshape(kh * kw, 2, h_out * w_out)

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
