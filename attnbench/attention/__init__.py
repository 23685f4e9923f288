"""Spatial-attention mechanisms in pure PyTorch (no OpenMMLab import), one file per mechanism."""
from .area_attention import AreaAttention1d, AreaAttention2d, AreaKeyCombiner, Areas, area_attention, count_areas
from .cbam import CBAM
from .deformable_conv import DeformConv2d, ModulatedDeformConv2d
from .deformable_conv1d import DeformConv1d
from .dynamic_conv import DynamicConv1d, LightweightConv1d, dynamic_conv1d
from .dynamic_conv2d import DynamicConv2d
from .factors import ALL_FACTORS, AttentionFactors
from .generalized_attention import GeneralizedAttention
from .generalized_attention1d import GeneralizedAttention1d
from .global_context import GlobalContext
from .non_local import NonLocal2d
from .position import sinusoidal_embedding
from .separable_bias_attention import separable_bias_attention
from .squeeze_excite import SqueezeExcite

__all__ = [
    "AreaAttention1d", "AreaAttention2d", "AreaKeyCombiner", "Areas", "area_attention", "count_areas",
    "ALL_FACTORS", "AttentionFactors", "DeformConv1d", "DeformConv2d", "DynamicConv1d", "DynamicConv2d",
    "GeneralizedAttention", "GeneralizedAttention1d", "LightweightConv1d", "ModulatedDeformConv2d",
    "dynamic_conv1d", "separable_bias_attention", "sinusoidal_embedding",
    "CBAM", "GlobalContext", "NonLocal2d", "SqueezeExcite",
]
