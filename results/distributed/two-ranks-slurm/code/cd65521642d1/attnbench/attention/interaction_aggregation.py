"""Interaction-aggregation-update (IAU) block of IAUnet, image form: channel IAU and spatial IAU.

Hou et al., "IAUnet: Global Context-Aware Feature Learning for Person Re-Identification", IEEE
TNNLS 2021, https://arxiv.org/abs/2009.01035 (the IAU formulation, the spatial(-temporal) IAU
between body parts, the channel IAU); reference code consulted: the authors'
https://github.com/blue-blue272/ImgReID-IAnet (``models/IAU.py``, ``models/SIAU.py``: the image
block, which this module follows layer for layer; the equations below are read from that code).

Each IAU step has an interaction (pairwise relations), an aggregation (relation-weighted sums)
and an update (``z = x + W(aggregate)``, ``W`` ending in a BatchNorm whose bias is zero at init and
whose weight is ``out_gain``: at the default 0 every step, and the block, starts as identity, and
only those BNs get a gradient until their weights move).

Channel IAU, on the ``C x HW`` matrix ``X`` of ``x`` (no embedding, no logit scale):

    F = softmax_j( X X^T )                          (C, C), channel interaction
    z = x + BN_0(W_c (F X) + b_c)                   W_c: C -> C 1x1 conv

Spatial IAU, over ``P`` soft body parts plus a global node (``C' = max(C // reduction, 1)``):

    A = sigmoid(BN(W_a x + b_a))                    (P, HW) part maps
    p_i = g(sum_l A_il x_l),  u = g(mean_l x_l)     g: C -> C' 1x1 conv; part and global nodes
    r_ij = BN_1(w_r . [|p_i - p_j|, u] + b_r)        pair relation (a 1x1 conv 2C' -> 1 and a
                                                    one-channel BN over all pairs of the batch)
    R_ij = softmax_{j != i}( r_ij )                  interaction; no self-edges
    p'_i = ReLU(BN(W_g [p_i, sum_j R_ij p_j] + b_g)) aggregation, W_g: 2C' -> C'
    z = x + BN_0(W_u [mean_i p'_i, u] + b_u)        update, W_u: 2C' -> C, one vector per sample
                                                    added at every position

``mode='both'`` runs the channel IAU, then the spatial IAU on its output, in the order of the
authors' image block.

Choices the paper and code leave to us, or that differ from them:
- The part maps are learned without supervision here: IAUnet trains them with human-parsing masks
  (head, upper body, lower body, shoes; ``num_parts=4``), which detection and segmentation data
  do not have.
- The spatial interaction is between the ``P`` part nodes (and the global node), as in the paper,
  not between all ``HW`` positions (that is the authors' earlier IANet, CVPR 2019, whose spatial
  step also needs a fixed feature size for its Gaussian position prior). Its cost is linear in
  ``HW``.
- The part nodes are attention-weighted sums, not means (as in the code), so their scale grows
  with ``HW``; the relation and aggregation BNs absorb it.
- ``reduction`` generalises the code's fixed ``C' = C // 2``; the update conv then maps ``2C'`` to
  ``C``. Conv biases start at zero (the code leaves PyTorch's default).
- The BN closing the spatial update sees one vector per sample: in training it needs a batch of
  at least 2, and at exactly 2 its batch statistics reduce every channel to -1 / +1 (IAUnet trains
  with batches of 64). Frozen BNs (``norm_eval``) or larger batches avoid both.
"""
from __future__ import annotations

import torch
import torch.nn as nn

from .checks import check_at_least, check_feature_map
from .dual_attention import channel_attention
from .init import branch_gate_init_, kaiming_init_

MODES = ("spatial", "channel", "both")


class InteractionAggregation2d(nn.Module):
    """IAU block (channel and/or spatial interaction-aggregation-update) for ``(N, C, H, W)``
    feature maps.

    Args:
        in_channels: channels ``C`` of the input.
        mode: ``'channel'``, ``'spatial'`` or ``'both'`` (channel IAU, then spatial IAU).
        reduction: ratio of the spatial node width, ``C' = max(C // reduction, 1)``.
        num_parts: number ``P`` of part maps (spatial nodes besides the global one), >= 2.
        out_gain: initial weight of the BN closing each update (0: the block starts as identity).
    """

    _abbr_ = "iau_block"

    def __init__(self, in_channels: int, mode: str = "both", reduction: int = 2, num_parts: int = 4,
                 out_gain: float = 0.0):
        super().__init__()
        check_at_least(1, in_channels=in_channels)
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        check_at_least(1, reduction=reduction)
        check_at_least(2, num_parts=num_parts)
        self.in_channels = in_channels
        self.mode = mode
        self.reduction = reduction
        self.num_parts = num_parts
        self.out_gain = float(out_gain)
        self.node_channels = max(in_channels // reduction, 1)
        self.channel = mode in ("channel", "both")
        self.spatial = mode in ("spatial", "both")
        c, cn = in_channels, self.node_channels
        if self.channel:
            self.channel_update = nn.Sequential(nn.Conv2d(c, c, 1), nn.BatchNorm2d(c))
        if self.spatial:
            self.part_maps = nn.Sequential(nn.Conv2d(c, num_parts, 1), nn.BatchNorm2d(num_parts))
            self.embed = nn.Conv2d(c, cn, 1)
            self.relation = nn.Sequential(nn.Conv2d(2 * cn, 1, 1), nn.BatchNorm2d(1))
            self.aggregate = nn.Sequential(
                nn.Conv2d(2 * cn, cn, 1), nn.BatchNorm2d(cn), nn.ReLU(inplace=True))
            self.spatial_update = nn.Sequential(nn.Conv2d(2 * cn, c, 1), nn.BatchNorm2d(c))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """As the authors' code: Kaiming-normal (fan_out) convs, unit BNs with fresh running
        statistics, and zero bias and weight ``out_gain`` in the BN closing each update (zero by
        default: the block starts as identity); conv biases zero."""
        kaiming_init_(self, mode="fan_out")
        for name, m in self.named_children():
            if name.endswith("_update"):  # (conv, BN)
                branch_gate_init_(m[1], self.out_gain)

    def extra_repr(self) -> str:
        return (f"{self.in_channels}, mode={self.mode!r}, reduction={self.reduction}, "
                f"num_parts={self.num_parts}")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_feature_map(x, self.in_channels)
        if self.channel:
            x = x + self.channel_update(channel_attention(x.flatten(2), negate=False).view_as(x))
        if self.spatial:
            x = x + self._spatial_update(x)
        return x

    def _spatial_update(self, x: torch.Tensor) -> torch.Tensor:
        """The spatial IAU's update ``BN_0(W_u [mean_i p'_i, u] + b_u)``: ``(N, C, 1, 1)``."""
        flat = x.flatten(2)  # (N, C, HW)
        maps = torch.sigmoid(self.part_maps(x)).flatten(2)  # (N, P, HW)
        pooled = torch.bmm(flat, maps.transpose(1, 2))  # (N, C, P): sum_l A_il x_l
        nodes = torch.cat([pooled, flat.mean(2, keepdim=True)], 2)  # (N, C, P+1)
        nodes = self.embed(nodes[..., None])[..., 0]  # (N, C', P+1)
        parts, glob = nodes[:, :, :-1], nodes[:, :, -1:]  # (N, C', P), (N, C', 1)
        p = self.num_parts
        pairs = torch.cat([(parts[:, :, :, None] - parts[:, :, None, :]).abs(),  # (N, 2C', P_i, P_j)
                           glob[..., None].expand(-1, -1, p, p)], 1)
        logits = self.relation(pairs)[:, 0]  # (N, P, P)
        self_edges = torch.eye(p, dtype=torch.bool, device=x.device)
        weights = logits.masked_fill(self_edges, float("-inf")).softmax(-1)  # (N, P_i, P_j)
        neighbours = torch.bmm(parts, weights.transpose(1, 2))  # (N, C', P): sum_j R_ij p_j
        updated = self.aggregate(torch.cat([parts, neighbours], 1)[..., None])[..., 0]  # (N, C', P)
        return self.spatial_update(torch.cat([updated.mean(2, keepdim=True), glob], 1)[..., None])

    def macs(self, x: torch.Tensor) -> int:
        """Multiply-adds of one forward pass on ``(N, C, H, W)``. Channel IAU: the two ``C x C x
        HW`` products and the ``C x C`` update conv at every pixel. Spatial IAU: the part-map conv
        and the part pooling (``P x C x HW`` each), then the small node-level convs and product."""
        n, c, h, w = x.shape
        hw, cn, p = h * w, self.node_channels, self.num_parts
        total = 0
        if self.channel:
            total += 3 * c * c * hw
        if self.spatial:
            total += 2 * p * c * hw  # part maps and part pooling
            total += (p + 1) * c * cn + 3 * cn * p * p + 2 * cn * cn * p + 2 * cn * c  # node-level
        return n * total
