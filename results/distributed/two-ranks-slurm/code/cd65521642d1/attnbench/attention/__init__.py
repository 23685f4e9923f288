"""Spatial-attention mechanisms in pure PyTorch (no OpenMMLab import), one file per mechanism."""
from .asymmetric_non_local import AsymmetricNonLocal2d
from .area_attention import AreaAttention1d, AreaAttention2d, AreaKeyCombiner, Areas, area_attention, count_areas
from .bam import BAM
from .cbam import CBAM
from .criss_cross import CrissCrossAttention
from .deformable_conv import DeformConv2d, ModulatedDeformConv2d
from .deformable_conv1d import DeformConv1d
from .double_attention import DoubleAttention
from .dual_attention import DualAttention
from .dynamic_conv import DynamicConv1d, LightweightConv1d, dynamic_conv1d
from .dynamic_conv2d import DynamicConv2d
from .factors import ALL_FACTORS, AttentionFactors
from .frequency_channel_attention import FrequencyChannelAttention
from .gather_excite import GatherExcite
from .generalized_attention import GeneralizedAttention
from .generalized_attention1d import GeneralizedAttention1d
from .global_context import GlobalContext
from .interaction_aggregation import InteractionAggregation2d
from .non_local import NonLocal2d
from .object_context import ObjectContext
from .position import sinusoidal_embedding
from .residual_attention import ResidualAttention
from .scse import SpatialChannelSqueezeExcite
from .selective_kernel import SelectiveKernelConv2d
from .separable_bias_attention import separable_bias_attention
from .spatial_pyramid_attention import SpatialPyramidAttention
from .squeeze_excite import SqueezeExcite

__all__ = [
    "AreaAttention1d", "AreaAttention2d", "AreaKeyCombiner", "Areas", "area_attention", "count_areas",
    "ALL_FACTORS", "AttentionFactors", "DeformConv1d", "DeformConv2d", "DynamicConv1d", "DynamicConv2d",
    "GeneralizedAttention", "GeneralizedAttention1d", "LightweightConv1d", "ModulatedDeformConv2d",
    "dynamic_conv1d", "separable_bias_attention", "sinusoidal_embedding",
    "AsymmetricNonLocal2d", "BAM", "CBAM", "CrissCrossAttention", "DoubleAttention", "DualAttention", "FrequencyChannelAttention",
    "GatherExcite", "GlobalContext", "InteractionAggregation2d", "NonLocal2d", "ObjectContext",
    "ResidualAttention", "SelectiveKernelConv2d", "SpatialChannelSqueezeExcite", "SpatialPyramidAttention",
    "SqueezeExcite",
]
