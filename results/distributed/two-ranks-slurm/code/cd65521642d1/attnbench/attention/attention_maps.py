"""Attention weights of chosen queries, as trained and per term, for inspecting the mechanisms.

For the generalized attentions (1D and 2D, terms E1..E4 of Zhu et al. 2019,
https://arxiv.org/abs/1904.05873, Eq. 2) with the enabled terms' logits ``l^t_ij`` and the keys a
mask hides ``H_i`` (outside the range or window, in the future, padding):

    all:  A_ij = softmax_j( sum_t l^t_ij ),  hidden keys at -inf   (hard attention: the forward's weights)
    t:    A^t_ij = softmax_j( l^t_ij ),      hidden keys at -inf   (each enabled term alone, always soft)

A query whose keys are all hidden gets zero weights, as the forward passes give it. The modules'
``attention_maps`` methods compute the per-term logits; this module holds what they share.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .factors import AttentionFactors
from .scores import attention_weights

#: Names of the terms E1..E4, in the order of the factor string.
TERMS = ("E1", "E2", "E3", "E4")


def enabled_terms(factors: AttentionFactors) -> tuple[str, ...]:
    """Names of the terms ``factors`` enables, e.g. ``('E2', 'E3')`` for ``'0110'``."""
    return tuple(name for name, bit in zip(TERMS, factors.bits) if bit)


@dataclass(frozen=True)
class AttentionMaps:
    """Attention weights of chosen queries over all keys.

    Attributes:
        weights: ``'all'`` (the weights forward uses) and one entry per enabled term (``'E1'`` ..
            ``'E4'``), each ``(N, heads, Q, K)`` for the ``Q`` chosen queries and all ``K`` keys.
        query_grid: the grid the chosen queries index, row-major: ``(h, w)`` in 2D, ``(T,)`` in 1D.
        key_grid: the grid the last axis of the weights flattens, row-major: ``(Hk, Wk)`` in 2D,
            ``(S,)`` in 1D; ``weights[name].unflatten(-1, key_grid)`` gives the key map.
    """

    weights: dict[str, torch.Tensor]
    query_grid: tuple[int, ...]
    key_grid: tuple[int, ...]


def flat_index(indices: torch.Tensor | None, grid: tuple[int, ...], device: torch.device,
               name: str = "queries") -> torch.Tensor:
    """``indices`` (flat, row-major positions on ``grid``) checked and on ``device``, or all of them when None."""
    size = math.prod(grid)
    if indices is None:
        return torch.arange(size, device=device)
    shape = "x".join(map(str, grid))
    if not torch.is_tensor(indices) or indices.dim() != 1 or indices.dtype != torch.int64:
        got = f"{indices.dtype} {tuple(indices.shape)}" if torch.is_tensor(indices) else type(indices).__name__
        raise ValueError(f"{name} must be a 1-D int64 tensor of flat indices into the {shape} grid, got {got}")
    if indices.numel() and (indices.min() < 0 or indices.max() >= size):
        raise ValueError(f"{name} must lie in [0, {size - 1}] (the {shape} grid, row-major), got values "
                         f"from {indices.min().item()} to {indices.max().item()}")
    return indices.to(device)


def _masked_weights(logits: torch.Tensor, hidden: torch.Tensor | None, hard: int) -> torch.Tensor:
    """:func:`~attnbench.attention.scores.attention_weights` of ``logits`` with the ``hidden`` keys at
    -inf; zeros for a query that sees no key."""
    if hidden is None:
        return attention_weights(logits, hard)
    empty = hidden.all(-1, keepdim=True)
    weights = attention_weights(logits.masked_fill(hidden & ~empty, float("-inf")), hard)
    return weights.masked_fill(empty, 0.0)


def term_weights(logits: dict[str, torch.Tensor], hidden: torch.Tensor | None, hard: int,
                 shape: tuple[int, int, int, int]) -> dict[str, torch.Tensor]:
    """``'all'`` (soft, or ``hard``) and each term alone (soft) from the terms' logits, broadcastable
    to ``shape = (N, heads, Q, K)``, and the ``hidden`` keys (bool, broadcastable, or None)."""
    named = {"all": sum(logits.values()), **logits}
    return {name: _masked_weights(term.expand(shape), hidden, hard if name == "all" else 0)
            for name, term in named.items()}
