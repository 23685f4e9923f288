"""The attention mechanisms as OpenMMLab building blocks.

ResNet plugins (``plugins=[dict(cfg=dict(type='attnbench.GeneralizedAttention', ...),
stages=..., position='after_conv2')]``) are built by mmcv's ``build_plugin_layer`` with
``in_channels`` and named by their ``_abbr_``; conv2 replacements (``dcn=dict(type='attnbench.DCN')``)
are built by ``build_conv_layer(cfg, in, out, kernel_size, stride=, padding=, dilation=, bias=)``.
"""
from attnbench.attention import (
    CBAM, AreaAttention2d, DeformConv2d, DynamicConv2d, GeneralizedAttention, GlobalContext,
    ModulatedDeformConv2d, NonLocal2d, SqueezeExcite)

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
}
#: Replacements of a Bottleneck's 3x3 conv2 (``dcn=dict(type=...)``).
CONV_LAYERS = {
    "DCN": DeformConv2d,
    "DCNv2": ModulatedDeformConv2d,
}

for _name, _cls in {**PLUGINS, **CONV_LAYERS}.items():
    MODELS.register_module(name=_name, module=_cls)
