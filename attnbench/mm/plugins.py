"""The attention mechanisms as OpenMMLab building blocks, registered from :data:`attnbench.variants.ALL_MECHANISMS`.

ResNet plugins (``plugins=[dict(cfg=dict(type='attnbench.GeneralizedAttention', ...),
stages=..., position='after_conv2')]``) are built by mmcv's ``build_plugin_layer`` with
``in_channels`` and named by their ``_abbr_``; conv2 replacements (``dcn=dict(type='attnbench.DCN')``)
are built by ``build_conv_layer(cfg, in, out, kernel_size, stride=, padding=, dilation=, bias=)``.
Decode heads register themselves (attnbench.mm.heads).
"""
from attnbench.attention.user_module import UserModule
from attnbench.variants import ALL_MECHANISMS

from .registry import MODELS

#: ResNet plugins placed after a Bottleneck's conv2: registered name -> class (a user's module through its adapter).
PLUGINS = {m.registered_name: m.module for m in ALL_MECHANISMS if m.placement == "plugin"} | {"UserModule": UserModule}
#: Replacements of a Bottleneck's 3x3 conv2 (``dcn=dict(type=...)``).
CONV_LAYERS = {m.registered_name: m.module for m in ALL_MECHANISMS if m.placement == "conv2"}

for _name, _cls in {**PLUGINS, **CONV_LAYERS}.items():
    MODELS.register_module(name=_name, module=_cls)
