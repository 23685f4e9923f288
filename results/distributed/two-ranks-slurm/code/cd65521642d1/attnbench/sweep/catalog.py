"""Every mechanism of the vision benchmark with its family, paper, parameters and MACs at one shape.

The reference shape is the input of an attention module in conv4 of the study's detector: a
Faster R-CNN R-50-FPN at 800x1333 has a 50x84 map there, and the Bottleneck's conv2 width is 256.
"""
from __future__ import annotations

import pandas as pd
import torch
import torch.nn as nn

from attnbench.attention.factors import ALL_FACTORS
from attnbench.variants import VISION_TOKENS, Variant, mechanism_of

#: (N, C, H, W) at conv4 of Faster R-CNN R-50-FPN, 800x1333 input.
REFERENCE_SHAPE = (1, 256, 50, 84)
#: Object regions of a decode head's object context (the 19 Cityscapes classes).
REFERENCE_REGIONS = 19


def build_mechanism(token: str, channels: int) -> nn.Module:
    """The module a one-token variant adds, built as the benchmark builds it: a plugin after a conv2
    of ``channels`` channels, that conv2's replacement (3x3, stride 1), or a decode head's object
    context (``channels`` in), with the arguments mmcv's ``build_plugin_layer`` and
    ``build_conv_layer`` pass."""
    parsed = Variant.parse(token)
    (name,) = parsed.tokens
    module = mechanism_of(name).module
    if parsed.head:
        return module(channels)
    overrides = parsed.backbone_overrides()
    if "dcn" in overrides:
        kwargs = {k: v for k, v in overrides["dcn"].items() if k not in ("type", "fallback_on_stride")}
        return module(in_channels=channels, out_channels=channels, kernel_size=3, stride=1, padding=1, dilation=1,
                      bias=False, **kwargs)
    (plugin,) = overrides["plugins"]
    return module(in_channels=channels, **{k: v for k, v in plugin["cfg"].items() if k != "type"})


def _params_and_macs(token: str, shape: tuple[int, int, int, int]) -> tuple[int, int]:
    """Parameters and analytic MACs of :func:`build_mechanism`'s module on an input of ``shape``."""
    module = build_mechanism(token, shape[1])
    inputs = [torch.empty(shape, device="meta")]  # macs() reads the shapes of forward's arguments
    if mechanism_of(token).placement == "head":  # a decode head's context also reads the object regions
        inputs.append(torch.empty((shape[0], REFERENCE_REGIONS, *shape[2:]), device="meta"))
    return sum(p.numel() for p in module.parameters()), module.macs(*inputs)


def mechanism_table(shape: tuple[int, int, int, int] = REFERENCE_SHAPE) -> pd.DataFrame:
    """One row per mechanism token (the 15 factor strings included): where it goes, its family and
    paper, its parameters and its analytic multiply-adds on an input of ``shape``."""
    rows = []
    for token in (*ALL_FACTORS, *VISION_TOKENS):
        mechanism = mechanism_of(token)
        params, macs = _params_and_macs(token, shape)
        rows.append(dict(token=token, type=mechanism.type, placement=mechanism.placement, family=mechanism.family,
                         params=params, mmacs=macs / 1e6, paper=mechanism.paper))
    return pd.DataFrame(rows)


def format_mechanism_table(table: pd.DataFrame, shape: tuple[int, int, int, int] = REFERENCE_SHAPE) -> str:
    lines = [f"{'token':16} {'placement':9} {'family':30} {'params':>9} {'MMACs':>9}  paper"]
    lines += [f"{r.token:16} {r.placement:9} {r.family:30} {r.params:9d} {r.mmacs:9.4g}  {r.paper}"
              for r in table.itertuples()]
    lines.append(f"{len(table)} mechanisms; parameters and analytic multiply-adds of one module on an input of "
                 f"shape {tuple(shape)} (conv4 of Faster R-CNN R-50-FPN at 800x1333); conv2 replacements count the "
                 f"whole conv; heads count their object context ({REFERENCE_REGIONS} regions); combine tokens "
                 "with '+', e.g. 0010+deformable")
    return "\n".join(lines)
