"""Sinusoidal embeddings of relative positions, shared by the 1D and 2D attentions.

Vaswani et al. 2017, Sec. 3.5, applied to offsets ``o`` (Zhu et al. 2019 embed key minus query
offsets the same way, one embedding per spatial axis):

    emb(o) = [sin(o * f_0), ..., sin(o * f_{n-1}), cos(o * f_0), ..., cos(o * f_{n-1})],
    f_k = wave_length ** (-k / n),   n = ceil(dim / 2)

truncated to ``dim`` entries when ``dim`` is odd. For even ``dim`` this is exactly the per-axis
embedding of mmcv's ``GeneralizedAttention.get_position_embedding``.
"""
import math

import torch


def sinusoidal_embedding(offsets: torch.Tensor, dim: int, wave_length: float = 1000.0) -> torch.Tensor:
    """Embed a tensor of offsets ``(...)`` into ``(..., dim)``."""
    if dim <= 0:
        raise ValueError(f"embedding dim must be positive, got {dim}")
    num_freq = math.ceil(dim / 2)
    exponent = torch.arange(num_freq, device=offsets.device, dtype=offsets.dtype) / num_freq
    angles = offsets.unsqueeze(-1) / wave_length ** exponent  # (..., num_freq)
    return torch.cat((angles.sin(), angles.cos()), dim=-1)[..., :dim]
