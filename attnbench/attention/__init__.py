"""Spatial-attention mechanisms in pure PyTorch (no OpenMMLab import), one file per mechanism.

Each name is imported from its file on first use (PEP 562), so that the torch-free parts (``factors``: the
factor strings and score names) and the vocabulary built on them (attnbench.variants) import no torch. Two
functions share their file's name (``area_attention``, ``separable_bias_attention``): the package's attribute of
that name is the function, also after ``import attnbench.attention.area_attention`` (which would otherwise set
it to the file), as it was when this package imported every name eagerly."""
from __future__ import annotations

import importlib
import sys
import types

#: Each exported name -> the file of this package that defines it.
_SOURCES = {
    "AsymmetricNonLocal2d": "asymmetric_non_local", "AreaAttention1d": "area_attention",
    "AreaAttention2d": "area_attention", "AreaKeyCombiner": "area_attention", "Areas": "area_attention",
    "area_attention": "area_attention", "count_areas": "area_attention", "BAM": "bam", "CBAM": "cbam",
    "CrissCrossAttention": "criss_cross", "DeformConv2d": "deformable_conv",
    "ModulatedDeformConv2d": "deformable_conv", "DeformConv1d": "deformable_conv1d",
    "DoubleAttention": "double_attention", "DualAttention": "dual_attention", "DynamicConv1d": "dynamic_conv",
    "LightweightConv1d": "dynamic_conv", "dynamic_conv1d": "dynamic_conv", "DynamicConv2d": "dynamic_conv2d",
    "ALL_FACTORS": "factors", "AttentionFactors": "factors",
    "FrequencyChannelAttention": "frequency_channel_attention", "GatherExcite": "gather_excite",
    "GeneralizedAttention": "generalized_attention", "GeneralizedAttention1d": "generalized_attention1d",
    "GlobalContext": "global_context", "InteractionAggregation2d": "interaction_aggregation",
    "NonLocal2d": "non_local", "ObjectContext": "object_context", "sinusoidal_embedding": "position",
    "ResidualAttention": "residual_attention", "SpatialChannelSqueezeExcite": "scse",
    "SelectiveKernelConv2d": "selective_kernel", "separable_bias_attention": "separable_bias_attention",
    "SpatialPyramidAttention": "spatial_pyramid_attention", "SqueezeExcite": "squeeze_excite",
    "UserModule": "user_module", "UserSlot": "user_module",
}
__all__ = list(_SOURCES)


def __getattr__(name: str):
    if name not in _SOURCES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_SOURCES[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_SOURCES})


class _Package(types.ModuleType):
    """This package, whose attribute named as one of its files stays the function exported under that name
    when the import system sets it to the file on importing it."""

    def __setattr__(self, name: str, value) -> None:
        if isinstance(value, types.ModuleType) and _SOURCES.get(name) == name:
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
