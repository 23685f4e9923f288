"""E1's score functions and hard attention, shared by the 1D and 2D generalized attention.

Survey of attention mechanisms (seed 004, Sec. 8.3): the score of the query-content x key-content
term E1 for query ``q_i`` and key ``k_j`` of head ``m`` (``d`` channels per head) is one of

    dot          q_i . k_j                            (the 2D module's default, as mmcv)
    scaled_dot   q_i . k_j / sqrt(d)                  (the 1D module's default, as the Transformer)
    bilinear     q_i^T W_m k_j x the module's scale   W_m learned per head, identity at the start
    additive     w_m . tanh(q_i + k_j)                w_m learned per head (Bahdanau et al. 2015)

so ``bilinear`` starts as the module's default score. Hard attention (``hard = K``) takes the mean
of the values at the ``K`` visible keys of highest logit (fewer where fewer are visible) and passes
the soft weights' gradient straight through (Bengio et al. 2013's straight-through estimator).
"""
from __future__ import annotations

import torch
import torch.nn as nn

from .factors import SCORES, AttentionFactors


def check_score(score: str, hard: int, factors: AttentionFactors, default: str) -> None:
    """ValueError for an unknown score, a score other than ``default`` without E1, or a bad ``hard``."""
    if score not in SCORES:
        raise ValueError(f"score must be one of {SCORES}, got {score!r}")
    if score != default and not factors.query_key:
        raise ValueError(f"score {score!r} changes the E1 term, which attention_type '{factors}' lacks")
    if not isinstance(hard, int) or hard < 0:
        raise ValueError(f"hard must be 0 (soft attention) or a positive number of keys, got {hard!r}")


def add_score_parameters(module: nn.Module, score: str, num_heads: int, head_dim: int) -> None:
    """``score_weight`` (heads, d, d) for ``bilinear``, ``score_vector`` (heads, d, 1) for ``additive``."""
    if score == "bilinear":
        module.score_weight = nn.Parameter(torch.empty(num_heads, head_dim, head_dim))
    if score == "additive":
        module.score_vector = nn.Parameter(torch.empty(num_heads, head_dim, 1))


def reset_score_parameters(module: nn.Module, head_dim: int) -> None:
    """Identity ``score_weight``; ``score_vector`` drawn from N(0, 1 / d)."""
    if hasattr(module, "score_vector"):
        nn.init.normal_(module.score_vector, std=head_dim ** -0.5)
    if hasattr(module, "score_weight"):
        with torch.no_grad():
            module.score_weight.copy_(torch.eye(head_dim).expand_as(module.score_weight))


def score_logits(module: nn.Module, q: torch.Tensor, k: torch.Tensor, scale: float) -> torch.Tensor:
    """E1 under ``module.score`` for queries (N, heads, L, d) and keys (N, heads, M, d): (N, heads, L, M).
    ``scale`` is the module's (1 / sqrt(d) in 1D, 1 in 2D), applied to ``bilinear``."""
    score = module.score
    if score == "dot":
        return q @ k.transpose(-1, -2)
    if score == "scaled_dot":
        return q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5
    if score == "bilinear":
        return (q @ module.score_weight) @ k.transpose(-1, -2) * scale
    return (torch.tanh(q[:, :, :, None, :] + k[:, :, None, :, :]) @ module.score_vector[:, None]).squeeze(-1)


def score_macs(score: str, batch_heads: int, num_q: int, num_kv: int, head_dim: int) -> int:
    """Multiply-adds of :func:`score_logits` over ``batch_heads`` (batch x heads) attention maps."""
    total = batch_heads * num_q * num_kv * head_dim  # q . k, or w . tanh(q + k)
    return total + (score == "bilinear") * batch_heads * num_q * head_dim * head_dim


def hard_weights(logits: torch.Tensor, hard: int) -> torch.Tensor:
    """Weight ``1 / K`` on each of the ``K = hard`` visible (finite-logit) keys of highest logit."""
    top = logits.topk(min(hard, logits.shape[-1]), dim=-1)
    picked = torch.zeros_like(logits).scatter(-1, top.indices, top.values.isfinite().to(logits.dtype))
    return picked / picked.sum(-1, keepdim=True)


def attention_weights(logits: torch.Tensor, hard: int) -> torch.Tensor:
    """Softmax weights over the last axis, or hard ones (``hard`` > 0) with the softmax's gradient."""
    weights = logits.softmax(-1)
    if hard:
        weights = hard_weights(logits, hard) + weights - weights.detach()
    return weights
