"""The attention mechanisms as OpenMMLab building blocks.

ResNet plugins (``plugins=[dict(cfg=dict(type='attnbench.GeneralizedAttention', ...),
stages=..., position='after_conv2')]``) are built by mmcv's ``build_plugin_layer`` with
``in_channels`` and named by their ``_abbr_``; conv2 replacements (``dcn=dict(type='attnbench.DCN')``)
are built by ``build_conv_layer(cfg, in, out, kernel_size, stride=, padding=, dilation=, bias=)``.
"""
from attnbench.attention import (
    AreaAttention2d, AsymmetricNonLocal2d, BAM, CBAM, DeformConv2d, DoubleAttention, DualAttention,
    DynamicConv2d, FrequencyChannelAttention, GatherExcite, GeneralizedAttention, GlobalContext,
    InteractionAggregation2d, ModulatedDeformConv2d, NonLocal2d, ResidualAttention, SelectiveKernelConv2d,
    SpatialChannelSqueezeExcite, SpatialPyramidAttention, SqueezeExcite)

from .registry import MODELS

#: ResNet plugins placed after a Bottleneck's conv2: registered name -> class.
PLUGINS = {
    "GeneralizedAttention": GeneralizedAttention,
    "AreaAttention2d": AreaAttention2d,
    "DynamicConv2d": DynamicConv2d,
    "SqueezeExcite": SqueezeExcite,
    "CBAM": CBAM,
    "GlobalContext": GlobalContext,
    "NonLocal2d": NonLocal2d,
    "GatherExcite": GatherExcite,
    "SpatialPyramidAttention": SpatialPyramidAttention,
    "FrequencyChannelAttention": FrequencyChannelAttention,
    "BAM": BAM,
    "SpatialChannelSqueezeExcite": SpatialChannelSqueezeExcite,
    "DoubleAttention": DoubleAttention,
    "ResidualAttention": ResidualAttention,
    "DualAttention": DualAttention,
    "AsymmetricNonLocal2d": AsymmetricNonLocal2d,
    "InteractionAggregation2d": InteractionAggregation2d,
}
#: Replacements of a Bottleneck's 3x3 conv2 (``dcn=dict(type=...)``).
CONV_LAYERS = {
    "DCN": DeformConv2d,
    "DCNv2": ModulatedDeformConv2d,
    "SelectiveKernelConv2d": SelectiveKernelConv2d,
}

for _name, _cls in {**PLUGINS, **CONV_LAYERS}.items():
    MODELS.register_module(name=_name, module=_cls)
