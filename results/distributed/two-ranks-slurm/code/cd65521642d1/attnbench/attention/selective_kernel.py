"""Selective kernel convolution: parallel paths of growing receptive field, mixed by channel-wise softmax.

Li, Wang, Hu, Yang, "Selective Kernel Networks", CVPR 2019, https://arxiv.org/abs/1903.06586
(Sec. 3.1, Eq. 1-6); reference code consulted: timm ``timm/layers/selective_kernel.py``.

A replacement of a ResNet Bottleneck's 3x3 ``conv2``. With ``M = num_paths`` and the layer's
dilation ``d``:

    U_i = ReLU(BN(conv3x3_{dilation (i+1) d}(x)))     i = 0..M-1, split (Sec. 3.1)
    U   = sum_i U_i                                    fuse (Eq. 1)
    s   = avgpool(U)                                   (N, C, 1, 1) (Eq. 2)
    z   = ReLU(BN(W_z s))                              W_z: C -> hidden (Eq. 3)
    a_i = softmax_i(W_i z)                             W_i: hidden -> C, softmax over the paths (Eq. 5)
    y   = sum_i a_i * U_i                              select (Eq. 6)

with ``hidden = max(C // reduction, min(min_hidden, C))`` (the paper's ``d = max(C / r, L)``,
``L = 32``, capped at ``C`` so narrow layers are not expanded). As in the paper's experiments,
the 5x5 path is a 3x3 conv with dilation 2 (and so on for more paths). Every path pads by its
own dilation, so all paths and the plain ``conv3x3(stride, padding=dilation, dilation)`` this
replaces give the same output size. The ``W_i`` are stored as one layer ``hidden -> M C``
(output channel ``i C + c`` is path ``i``, channel ``c``). No conv has a bias: each path and
``W_z`` are followed by BatchNorm. That BatchNorm acts on pooled ``(N, hidden, 1, 1)`` vectors,
so training needs a batch of at least two (eval mode, e.g. mmdet's ``norm_eval=True``, does not).
The Bottleneck's own ``norm2`` and ReLU still follow this layer.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from .checks import check_feature_map, check_positive_int
from .init import kaiming_init_


class SelectiveKernelConv2d(nn.Module):
    """Selective kernel (SK) convolution with the signature of a 3x3 conv layer (for mmcv's
    ``build_conv_layer``).

    Args:
        in_channels: input channels; divisible by ``groups``.
        out_channels: output channels ``C``; divisible by ``groups``.
        kernel_size: must be 3 (every path is a 3x3 conv).
        stride: stride of every path.
        padding: must equal ``dilation`` (the plain conv's size-preserving padding); path ``i``
            pads by its own dilation ``(i + 1) * dilation``.
        dilation: dilation ``d`` of the first path; path ``i`` has ``(i + 1) * d``.
        groups: grouped convolutions in every path (the paper's ResNeXt-style cardinality).
        bias: must be ``False`` (each path's BatchNorm carries the shift).
        num_paths: number of paths ``M`` >= 2.
        reduction: ratio ``r`` of the attention bottleneck.
        min_hidden: lower bound ``L`` of the bottleneck width (capped at ``out_channels``).
    """

    _abbr_ = "sk_block"

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int = 3, stride: int = 1,
                 padding: int = 1, dilation: int = 1, groups: int = 1, bias: bool = False,
                 num_paths: int = 2, reduction: int = 16, min_hidden: int = 32):
        super().__init__()
        check_positive_int(in_channels=in_channels, out_channels=out_channels, stride=stride, dilation=dilation,
                           groups=groups, reduction=reduction, min_hidden=min_hidden)
        if not isinstance(num_paths, int) or num_paths < 2:
            raise ValueError(f"num_paths must be an int >= 2, got {num_paths!r}")
        if kernel_size != 3:
            raise ValueError(f"kernel_size must be 3 (every path is a 3x3 conv), got {kernel_size!r}")
        if padding != dilation:
            raise ValueError(f"padding must equal dilation (each path pads by its own dilation), "
                             f"got padding={padding!r}, dilation={dilation}")
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"in_channels ({in_channels}) and out_channels ({out_channels}) must be "
                             f"multiples of groups ({groups})")
        if bias:
            raise ValueError("bias=True is not supported: every path ends in BatchNorm")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.stride = stride
        self.dilation = dilation
        self.groups = groups
        self.num_paths = num_paths
        self.reduction = reduction
        self.min_hidden = min_hidden
        self.hidden_channels = max(out_channels // reduction, min(min_hidden, out_channels))
        self.paths = nn.ModuleList(
            nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=d, dilation=d, groups=groups,
                          bias=False),
                nn.BatchNorm2d(out_channels),
                nn.ReLU(inplace=True))
            for d in self.path_dilations)
        self.fc_reduce = nn.Conv2d(out_channels, self.hidden_channels, 1, bias=False)
        self.bn = nn.BatchNorm2d(self.hidden_channels)
        self.fc_select = nn.Conv2d(self.hidden_channels, num_paths * out_channels, 1, bias=False)
        self.reset_parameters()

    @property
    def path_dilations(self) -> list[int]:
        return [(i + 1) * self.dilation for i in range(self.num_paths)]

    def reset_parameters(self) -> None:
        """Kaiming-normal path convs (fan_out, as ResNet convs) and fcs (fan_in); unit BatchNorms."""
        for path in self.paths:
            kaiming_init_(path[0], mode="fan_out")
        for m in (self.fc_reduce, self.fc_select):
            kaiming_init_(m)
        for m in self.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.reset_parameters()
                m.reset_running_stats()

    def extra_repr(self) -> str:
        return (f"{self.in_channels}, {self.out_channels}, kernel_size=3, stride={self.stride}, "
                f"dilations={self.path_dilations}, groups={self.groups}, hidden={self.hidden_channels}")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_feature_map(x, self.in_channels)
        paths = torch.stack([path(x) for path in self.paths], 1)  # (N, M, C, H', W')
        n, m, c = paths.shape[:3]
        s = paths.sum(1).mean((2, 3), keepdim=True)  # (N, C, 1, 1)
        z = F.relu(self.bn(self.fc_reduce(s)))  # (N, hidden, 1, 1)
        weights = self.fc_select(z).view(n, m, c, 1, 1).softmax(1)  # (N, M, C, 1, 1), sums to 1 over M
        return (weights * paths).sum(1)

    def output_size(self, height: int, width: int) -> tuple[int, int]:
        """``(H', W')``: ``floor((size - 1) / stride) + 1``, as for the plain padded 3x3 conv."""
        return (height - 1) // self.stride + 1, (width - 1) // self.stride + 1

    def macs(self, x: torch.Tensor) -> int:
        """Multiply-adds of one forward pass on ``(N, C_in, H, W)``: the ``M`` path convs and the two
        fcs (BatchNorm, pooling, softmax and the weighted sum are not counted)."""
        n, _, height, width = x.shape
        h_out, w_out = self.output_size(height, width)
        convs = self.num_paths * h_out * w_out * self.out_channels * (self.in_channels // self.groups) * 9
        fcs = self.hidden_channels * self.out_channels * (1 + self.num_paths)
        return n * (convs + fcs)
