"""Spatial-attention mechanisms in pure PyTorch (no OpenMMLab import), one file per mechanism."""
from .factors import ALL_FACTORS, AttentionFactors
from .generalized_attention import GeneralizedAttention
from .generalized_attention1d import GeneralizedAttention1d
from .position import sinusoidal_embedding
from .separable_bias_attention import separable_bias_attention

__all__ = [
    "ALL_FACTORS", "AttentionFactors", "GeneralizedAttention", "GeneralizedAttention1d", "separable_bias_attention",
    "sinusoidal_embedding",
]
