"""Object-contextual representations (OCR): every pixel attends to K soft object regions.

Yuan, Chen, Wang, "Object-Contextual Representations for Semantic Segmentation", ECCV 2020,
https://arxiv.org/abs/1909.11065 (Eq. 1-4); reference code consulted: mmseg
``mmseg/models/decode_heads/ocr_head.py`` (``SpatialGatherModule`` and ``ObjectAttentionBlock``,
which this module matches on copied weights, state-dict keys included) and
``mmseg/models/utils/self_attention_block.py``.

With pixel features ``x_i`` (``C`` channels), soft object regions ``m_ki`` (``K`` region logits
per pixel, e.g. a coarse segmentation) and ``C'`` key channels:

    f_k  = sum_i softmax_i(s m_ki) x_i                              (Eq. 1, object region representations)
    w_ik = softmax_k( phi(x_i)^T psi(f_k) / sqrt(C') )              (Eq. 2, pixel-region relation)
    y_i  = rho( sum_k w_ik delta(f_k) )                             (Eq. 3, object contextual representation)
    z_i  = g([x_i^T y_i^T]^T)                                       (Eq. 4, augmented representation)

``phi`` and ``psi`` are two 1x1 conv + BN + ReLU units ``C -> C' -> C'``, ``delta`` one unit
``C -> C'``, ``rho`` one unit ``C' -> C`` and ``g`` one unit ``2C -> C``; the 1x1 convs have no bias
when followed by a norm. The region softmax runs over positions, on logits scaled by ``s``.

Differences from the paper, kept to match mmseg and the authors' code: the relation logits are
divided by ``sqrt(C')``; ``g`` takes ``[y, x]`` in that order (a permutation of its input
channels, which fixes the checkpoint layout). mmseg's ``scale`` also max-pools the query when
``scale > 1``, but that path fails in mmseg (the attended map is reshaped to the un-pooled size);
here ``scale`` is only the softmax factor ``s`` of Eq. 1, as mmseg's ``OCRHead`` documents it.
The block is not residual: nothing is zero-initialised.
"""
from __future__ import annotations

from collections import OrderedDict
from functools import partial
from typing import Callable

import torch
import torch.nn as nn

from .checks import check_at_least, check_feature_map
from .non_local import non_local_attention

NormLayer = Callable[[int], nn.Module]
ActLayer = Callable[[], nn.Module]


def conv1x1_unit(in_channels: int, out_channels: int, norm_layer: NormLayer | None,
                 act_layer: ActLayer | None) -> nn.Sequential:
    """1x1 conv (with bias only when there is no norm), norm, activation; children named ``conv``,
    ``bn``, ``activate`` as in mmcv's ``ConvModule`` with a batch norm, so state dicts line up."""
    layers = OrderedDict(conv=nn.Conv2d(in_channels, out_channels, 1, bias=norm_layer is None))
    if norm_layer is not None:
        layers["bn"] = norm_layer(out_channels)
    if act_layer is not None:
        layers["activate"] = act_layer()
    return nn.Sequential(layers)


def gather_regions(feats: torch.Tensor, regions: torch.Tensor, scale: float) -> torch.Tensor:
    """Eq. 1: ``(N, C, H, W)`` features pooled by the ``(N, K, H, W)`` region logits, each
    softmax-normalised over positions; returns ``(N, C, K, 1)``."""
    weights = (scale * regions.flatten(2)).softmax(2)  # (N, K, HW)
    pooled = torch.bmm(weights, feats.flatten(2).transpose(1, 2))  # (N, K, C)
    return pooled.transpose(1, 2).unsqueeze(3)


class ObjectContext(nn.Module):
    """OCR block: ``(N, C, H, W)`` features and ``(N, K, H, W)`` soft object regions in,
    ``(N, C, H, W)`` object-contextual features out.

    Args:
        in_channels: channels ``C`` of the features (and of the output).
        channels: key/query/value channels ``C'``; default ``max(C // 2, 1)`` (the paper's 512 -> 256).
        scale: factor ``s`` on the region logits before their softmax over positions (Eq. 1).
        norm_layer: ``norm_layer(channels)`` builds the norm of every unit, ``None`` for none (the
            convs then have a bias); default batch norm.
        act_layer: ``act_layer()`` builds the activation of every unit, ``None`` for none; default
            in-place ReLU.

    In training mode the region units' batch norms need more than one region vector (``N * K > 1``),
    as in mmseg.
    """

    _abbr_ = "object_context_block"

    def __init__(self, in_channels: int, channels: int | None = None, scale: float = 1.0,
                 norm_layer: NormLayer | None = nn.BatchNorm2d,
                 act_layer: ActLayer | None = partial(nn.ReLU, inplace=True)):
        super().__init__()
        check_at_least(1, in_channels=in_channels)
        channels = max(in_channels // 2, 1) if channels is None else channels
        check_at_least(1, channels=channels)
        if not scale > 0:
            raise ValueError(f"scale must be > 0, got {scale}")
        self.in_channels = in_channels
        self.channels = channels
        self.scale = scale
        unit = partial(conv1x1_unit, norm_layer=norm_layer, act_layer=act_layer)
        self.key_project = nn.Sequential(unit(in_channels, channels), unit(channels, channels))  # psi
        self.query_project = nn.Sequential(unit(in_channels, channels), unit(channels, channels))  # phi
        self.value_project = unit(in_channels, channels)  # delta
        self.out_project = unit(channels, in_channels)  # rho
        self.bottleneck = unit(2 * in_channels, in_channels)  # g
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """As mmcv's ``ConvModule``: Kaiming-normal (fan_out, ReLU) convs with zero biases, unit norms."""
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif m is not self and hasattr(m, "reset_parameters"):
                m.reset_parameters()

    def extra_repr(self) -> str:
        return f"{self.in_channels}, channels={self.channels}, scale={self.scale}"

    def forward(self, feats: torch.Tensor, regions: torch.Tensor) -> torch.Tensor:
        check_feature_map(feats, self.in_channels, "feats")
        n, _, h, w = feats.shape
        if regions.dim() != 4 or regions.shape[1] < 1 or regions.shape[0] != n or regions.shape[2:] != (h, w):
            raise ValueError(f"expected regions (N, K, H, W) = ({n}, K, {h}, {w}) with K >= 1, "
                             f"got {tuple(regions.shape)}")
        objects = gather_regions(feats, regions, self.scale)  # (N, C, K, 1)
        query = self.query_project(feats).flatten(2).transpose(1, 2)  # (N, HW, C')
        key = self.key_project(objects).flatten(2).transpose(1, 2)  # (N, K, C')
        value = self.value_project(objects).flatten(2).transpose(1, 2)  # (N, K, C')
        context = non_local_attention(query, key, value, "embedded_gaussian")  # (N, HW, C')
        context = self.out_project(context.transpose(1, 2).reshape(n, self.channels, h, w))  # (N, C, H, W)
        return self.bottleneck(torch.cat([context, feats], 1))

    def macs(self, feats: torch.Tensor, regions: torch.Tensor) -> int:
        """Multiply-adds of ``forward(feats, regions)`` on ``(N, C, H, W)`` features and ``K``
        regions: the region pooling, the units on pixels and on regions, and two ``HW x K x C'``
        products."""
        n, c, h, w = feats.shape
        hw, k, ci = h * w, regions.shape[1], self.channels
        pooling = hw * k * c
        pixel_units = hw * (c * ci + ci * ci + ci * c + 2 * c * c)  # phi, rho, g
        region_units = k * (c * ci + ci * ci + c * ci)  # psi, delta
        return n * (pooling + pixel_units + region_units + 2 * hw * k * ci)
