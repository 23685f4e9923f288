"""Gather-excite: gates from context gathered over a spatial extent, redistributed to every pixel.

Hu, Shen, Albanie, Sun, Vedaldi, "Gather-Excite: Exploiting Feature Context in Convolutional
Neural Networks", NeurIPS 2018, https://arxiv.org/abs/1810.12348 (Sec. 3, the gather and excite
operators); reference code consulted: timm ``timm/layers/gather_excite.py``.

    g = xi_G(x)                                 gather over extent e: (N, C, ceil(H/e), ceil(W/e))
    y = x * sigmoid(interp(g))                  excite: nearest-neighbour upsampling to (H, W)

Two of the paper's gather operators:

    GE-theta^- (parameter-free):  xi_G = average pooling, window 2e-1, stride e, padding e-1
                                  (padded positions left out of the mean); global extent: mean over the map
    GE-theta   (parametric):      xi_G = log2(e) depthwise 3x3 stride-2 convs, each followed by
                                  BN, ReLU between them (window 2e-1, stride e, as above);
                                  global extent: one depthwise conv covering the map

The global depthwise conv of the paper has the size of a fixed (ImageNet) map. So that it works at
any ``H, W``, the map is first average-pooled adaptively to ``global_grid x global_grid`` and the
depthwise conv has that size: a depthwise weighted global pooling whose weights are constant over
each of the ``global_grid^2`` adaptive bins. It equals the paper's operator when
``H = W = global_grid``. The paper's GE-theta^+ (an SE-style MLP after the gather) is not
provided here.

As with any BatchNorm, training GE-theta needs more than one value per channel in each BN: a batch
of one whose gather output is 1x1 (global extent, or a map no larger than the extent) raises in
``train()`` mode (mmdet's ``norm_eval=True`` puts these BNs in eval mode with the backbone's).

Not residual: the block gates its input, as in the paper.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from .checks import check_at_least, check_feature_map
from .init import kaiming_init_


class GatherExcite(nn.Module):
    """Gather-excite block (GE-theta^- or GE-theta) for ``(N, C, H, W)`` feature maps.

    Args:
        in_channels: channels ``C`` of the input.
        extent: gather extent ``e`` (the gather output is ``ceil(H / e) x ceil(W / e)``), an
            int >= 2 (a power of two when ``parametric``); ``None`` or 0: global extent.
        parametric: ``False``: GE-theta^- (average pooling, no parameters); ``True``: GE-theta
            (depthwise convs with BN).
        global_grid: side of the adaptive average pooling before the depthwise conv of a
            parametric gather with global extent (unused otherwise).
    """

    _abbr_ = "ge_block"

    def __init__(self, in_channels: int, extent: int | None = None, parametric: bool = False,
                 global_grid: int = 7):
        super().__init__()
        check_at_least(1, in_channels=in_channels)
        extent = extent or 0
        if not isinstance(extent, int) or extent < 0 or extent == 1:
            raise ValueError(f"extent must be None or 0 (global) or an int >= 2, got {extent}")
        if parametric and extent & (extent - 1):
            raise ValueError(f"a parametric gather reaches its extent with log2(extent) stride-2 convs, "
                             f"so extent must be a power of two, got {extent}")
        check_at_least(1, global_grid=global_grid)
        self.in_channels = in_channels
        self.extent = extent  # 0: global
        self.parametric = parametric
        self.global_grid = global_grid
        self.gather = self._depthwise_gather() if parametric else None
        self.reset_parameters()

    def _depthwise_gather(self) -> nn.Sequential:
        """Global: (adaptive pool, then) one ``global_grid``-sized depthwise conv + BN; extent ``e``:
        ``log2(e)`` times [3x3 stride-2 depthwise conv, BN], with ReLU between them."""
        c = self.in_channels
        if self.extent == 0:
            return nn.Sequential(nn.Conv2d(c, c, self.global_grid, groups=c, bias=False), nn.BatchNorm2d(c))
        layers: list[nn.Module] = []
        for _ in range(self.strided_convs):
            layers += [nn.Conv2d(c, c, 3, stride=2, padding=1, groups=c, bias=False), nn.BatchNorm2d(c),
                       nn.ReLU(inplace=True)]
        return nn.Sequential(*layers[:-1])

    @property
    def strided_convs(self) -> int:
        """``log2(e)``: the stride-2 convs of a parametric gather with extent ``e`` (0 for global)."""
        return self.extent.bit_length() - 1 if self.extent else 0

    def reset_parameters(self) -> None:
        """Kaiming-normal (fan_in) depthwise weights and unit BatchNorms (nothing for GE-theta^-)."""
        if self.gather is not None:
            kaiming_init_(self.gather)

    def extra_repr(self) -> str:
        grid = f", global_grid={self.global_grid}" if self.parametric and self.extent == 0 else ""
        return f"{self.in_channels}, extent={self.extent or None}, parametric={self.parametric}{grid}"

    def gathered(self, x: torch.Tensor) -> torch.Tensor:
        """``xi_G(x)``: ``(N, C, 1, 1)`` for the global extent, else ``(N, C, ceil(H/e), ceil(W/e))``."""
        e = self.extent
        if self.gather is not None:
            return self.gather(F.adaptive_avg_pool2d(x, self.global_grid) if e == 0 else x)
        if e == 0:
            return x.mean((2, 3), keepdim=True)
        return F.avg_pool2d(x, 2 * e - 1, stride=e, padding=e - 1, count_include_pad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_feature_map(x, self.in_channels)
        context = self.gathered(x)
        if context.shape[2:] != (1, 1):
            context = F.interpolate(context, size=x.shape[2:], mode="nearest")  # (N, C, H, W)
        return x * torch.sigmoid(context)

    def macs(self, x: torch.Tensor) -> int:
        """Multiply-adds of one forward pass on ``(N, C, H, W)``: the depthwise gather convs (0 for
        GE-theta^-; pooling, interpolation and the gating are not counted)."""
        n, c, h, w = x.shape
        if not self.parametric:
            return 0
        if self.extent == 0:
            return n * c * self.global_grid ** 2
        total = 0
        for _ in range(self.strided_convs):
            h, w = (h + 1) // 2, (w + 1) // 2  # 3x3, stride 2, padding 1: ceil(size / 2)
            total += n * c * 9 * h * w
        return total
