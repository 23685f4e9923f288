"""Deformable convolution over sequences (1D), optionally causal.

The 1D form of deformable convolution v1 (Dai et al., "Deformable Convolutional Networks", ICCV 2017,
https://arxiv.org/abs/1703.06211, Eq. 2-4): each kernel tap reads the input at a learned fractional
offset from its place, per time step, by linear interpolation. For output step ``t`` and tap ``k``:

    y_t = b + sum_k W_k x(t + a_k + dt_{t,k}),    x(s) = sum_r max(0, 1 - |r - s|) x_r

with ``x_r = 0`` outside ``0 <= r < T`` (zero padding) and tap places ``a_k = k - (K - 1) // 2``
(centred; the extra tap of an even kernel on the right, as ``padding='same'``) or, when ``causal``,
``a_k = k - (K - 1)``. Each of ``deform_groups`` channel groups has its own offsets ``dt``, predicted
by ``conv_offset``, a plain conv over the same window (left-padded when causal), zero-initialised so
that the module starts as ``nn.Conv1d`` with the same weight and bias.

Causal mode: the sampling position is clamped to ``t + a_k + dt <= t``, and the neighbour ``r = t + 1``
of a position clamped to exactly ``t`` is never read (it would have weight 0), so no output depends
on a later input, whatever the offsets.

Computation: the two neighbours of every sampling position are gathered and interpolated (an
im2col of ``K`` columns per step), then contracted with the weight as one batched matmul.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .checks import check_positive_int
from .deformable_conv import check_groups


class DeformConv1d(nn.Module):
    """Deformable 1D convolution on ``(B, T, C_in)`` sequences, ``(B, T, C_out)`` out, stride 1.

    Args:
        in_channels: input channels; divisible by ``groups`` and ``deform_groups``.
        out_channels: output channels; divisible by ``groups``.
        kernel_size: taps per output step.
        groups: blocked connections from input to output channels, as for ``nn.Conv1d``.
        deform_groups: channel groups with separate offsets.
        causal: taps at ``t - K + 1 .. t`` and sampling positions clamped to ``<= t``.
        bias: add a learned bias.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        groups: int = 1,
        deform_groups: int = 1,
        causal: bool = False,
        bias: bool = True,
    ):
        super().__init__()
        check_positive_int(kernel_size=kernel_size)
        check_groups(in_channels, out_channels, groups, deform_groups)
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = kernel_size
        self.groups = groups
        self.deform_groups = deform_groups
        self.causal = causal
        self.weight = nn.Parameter(torch.empty(out_channels, in_channels // groups, kernel_size))
        self.bias = nn.Parameter(torch.empty(out_channels)) if bias else None
        self.conv_offset = nn.Conv1d(in_channels, deform_groups * kernel_size, kernel_size)
        self.reset_parameters()

    @property
    def padding(self) -> tuple[int, int]:
        """Zeros added (left, right) so that output step ``t`` sees the window ``t + a_0 .. t + a_{K-1}``."""
        k = self.kernel_size
        return (k - 1, 0) if self.causal else ((k - 1) // 2, k // 2)

    def reset_parameters(self) -> None:
        """``nn.Conv1d``'s initialisation of weight and bias; zero offset branch (dt = 0)."""
        fan_in = self.weight.shape[1] * self.kernel_size
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            nn.init.uniform_(self.bias, -1 / math.sqrt(fan_in), 1 / math.sqrt(fan_in))
        nn.init.zeros_(self.conv_offset.weight)
        nn.init.zeros_(self.conv_offset.bias)

    def extra_repr(self) -> str:
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"groups={self.groups}, deform_groups={self.deform_groups}, causal={self.causal}, "
                f"bias={self.bias is not None}")

    def _sampling_positions(self, x: torch.Tensor) -> torch.Tensor:
        """``t + a_k + dt_{t,k}`` per deform group, (B, T, K, G); clamped to ``<= t`` when causal."""
        b, t, _ = x.shape
        offset = self.conv_offset(F.pad(x.transpose(1, 2), self.padding))  # (B, G * K, T)
        offset = offset.view(b, self.deform_groups, self.kernel_size, t).permute(0, 3, 2, 1)
        steps = torch.arange(t, device=x.device, dtype=x.dtype)[:, None, None]  # (T, 1, 1)
        taps = torch.arange(self.kernel_size, device=x.device, dtype=x.dtype)[:, None] - self.padding[0]
        position = steps + taps + offset
        return torch.minimum(position, steps) if self.causal else position

    def _interpolate(self, x: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        """Linear interpolation with zeros outside, (B, T, K, C); reads only ``r <= t`` when causal."""
        b, t, c = x.shape
        x_groups = x.reshape(b, t, self.deform_groups, c // self.deform_groups)
        batch = torch.arange(b, device=x.device)[:, None, None, None]
        group = torch.arange(self.deform_groups, device=x.device)
        steps = torch.arange(t, device=x.device)[:, None, None]
        last_readable = steps if self.causal else torch.tensor(t - 1, device=x.device)
        left = position.floor()
        right_weight = (position - left)[..., None]  # (B, T, K, G, 1)
        left = left.long()

        def neighbour(index: torch.Tensor) -> torch.Tensor:  # x at index per deform group, 0 outside
            readable = (index >= 0) & (index <= last_readable)
            values = x_groups[batch, torch.minimum(index.clamp(min=0), last_readable), group]
            return values.where(readable[..., None], 0.0)  # (B, T, K, G, C/G)

        sampled = (1 - right_weight) * neighbour(left) + right_weight * neighbour(left + 1)
        return sampled.reshape(b, t, self.kernel_size, c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 3 or x.shape[2] != self.in_channels:
            raise ValueError(f"expected input (B, T, {self.in_channels}), got {tuple(x.shape)}")
        b, t, _ = x.shape
        sampled = self._interpolate(x, self._sampling_positions(x))  # (B, T, K, C_in)
        sampled = sampled.view(b, t, self.kernel_size, self.groups, self.in_channels // self.groups)
        weight = self.weight.view(self.groups, self.out_channels // self.groups, -1, self.kernel_size)
        out = torch.einsum("btkgc,gock->btgo", sampled, weight).reshape(b, t, self.out_channels)
        return out if self.bias is None else out + self.bias

    def macs(self, x: torch.Tensor) -> int:
        """Multiply-adds of one forward pass on an input of shape ``(B, T, C)``.

        Counts the offset-branch conv and the contraction of the sampled columns with the weight;
        not the interpolation (elementwise, as in ``attnbench.flops``).
        """
        b, t, _ = x.shape
        k = self.kernel_size
        per_step = (self.out_channels * (self.in_channels // self.groups) * k
                    + self.conv_offset.out_channels * self.in_channels * k)
        return b * t * per_step
