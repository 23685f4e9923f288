"""Attention with a separable per-axis bias, run by a fused scaled-dot-product kernel.

For keys on an ``Hk x Wk`` grid (key ``j`` at row ``y_j``, column ``x_j``):

    out_i = sum_j softmax_j( q_i . k_j + B^x[i, x_j] + B^y[i, y_j] ) v_j

The two bias tables are folded into one dot product by appending them to the query and one-hot
codes of the key's column and row to the key:

    [q_i, B^x[i, :], B^y[i, :]] . [k_j, e_{x_j}, e_{y_j}] = q_i . k_j + B^x[i, x_j] + B^y[i, y_j]

so ``torch.nn.functional.scaled_dot_product_attention`` computes the whole attention with its
fused kernels (flash on CPU, flash / memory-efficient on CUDA) and never stores the
``L x Hk*Wk`` logit matrix: memory is linear in the number of queries and keys. The price is
``Wk + Hk`` extra dimensions in the logit dot product, counted by :func:`separable_bias_attention_macs`.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

# Fused kernels are fastest (and on CUDA only available) for head sizes that are multiples of 8.
_HEAD_DIM_MULTIPLE = 8


def _grid_one_hot(key_size: tuple[int, int], like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Column and row one-hot codes of row-major grid keys: (Hk*Wk, Wk) and (Hk*Wk, Hk)."""
    h_kv, w_kv = key_size
    col = torch.eye(w_kv, device=like.device, dtype=like.dtype).repeat(h_kv, 1)
    row = torch.eye(h_kv, device=like.device, dtype=like.dtype).repeat_interleave(w_kv, dim=0)
    return col, row


def folded_head_dim(query_dim: int, value_dim: int, key_size: tuple[int, int] | None) -> int:
    """Head size of the fused kernel's call: logit dims plus bias codes, padded to a multiple of 8."""
    logit_dim = query_dim + (sum(key_size) if key_size is not None else 0)
    dim = max(logit_dim, value_dim)
    return -(-dim // _HEAD_DIM_MULTIPLE) * _HEAD_DIM_MULTIPLE


def separable_bias_attention(
    query: torch.Tensor | None,
    key: torch.Tensor | None,
    value: torch.Tensor,
    bias_x: torch.Tensor | None = None,
    bias_y: torch.Tensor | None = None,
    key_size: tuple[int, int] | None = None,
) -> torch.Tensor:
    """Softmax attention with logits ``q . k + B^x + B^y`` (no scaling).

    Args:
        query: ``(N, H, L, D)`` content query, or None for position-only logits.
        key: ``(N, H, M, D)`` content key (None exactly when ``query`` is None).
        value: ``(N, H, M, Dv)``.
        bias_x: ``(N, H, L, Wk)`` logit bias per query and key column, or None.
        bias_y: ``(N, H, L, Hk)`` logit bias per query and key row (given with ``bias_x``).
        key_size: ``(Hk, Wk)`` with ``Hk * Wk == M``; required with the biases.

    Returns:
        ``(N, H, L, Dv)``.
    """
    if (query is None) != (key is None):
        raise ValueError("query and key must be given together (or both None for bias-only logits)")
    if (bias_x is None) != (bias_y is None):
        raise ValueError("bias_x and bias_y must be given together")
    if query is None and bias_x is None:
        raise ValueError("no logit term: give query/key, the biases, or both")
    n, heads, m, dv = value.shape
    parts_q, parts_k = [], []
    if query is not None:
        parts_q.append(query)
        parts_k.append(key)
    if bias_x is not None:
        if key_size is None or key_size[0] * key_size[1] != m:
            raise ValueError(f"key_size {key_size} does not match the {m} keys")
        if bias_x.shape[-1] != key_size[1] or bias_y.shape[-1] != key_size[0]:
            raise ValueError(
                f"bias_x (..., {bias_x.shape[-1]}) and bias_y (..., {bias_y.shape[-1]}) must end in "
                f"the key grid's width {key_size[1]} and height {key_size[0]}")
        col, row = _grid_one_hot(key_size, value)
        parts_q += [bias_x, bias_y]
        parts_k += [col.expand(n, heads, m, -1), row.expand(n, heads, m, -1)]
    num_queries = parts_q[0].shape[-2]
    parts_q = [p.expand(n, heads, num_queries, -1) for p in parts_q]
    q = torch.cat(parts_q, dim=-1)
    k = torch.cat(parts_k, dim=-1)
    dim = folded_head_dim(0 if query is None else query.shape[-1], dv,
                          None if bias_x is None else key_size)
    q = F.pad(q, (0, dim - q.shape[-1]))
    k = F.pad(k, (0, dim - k.shape[-1]))
    v = F.pad(value, (0, dim - dv))
    return F.scaled_dot_product_attention(q, k, v, scale=1.0)[..., :dv]


def separable_bias_attention_macs(
    batch: int, heads: int, num_queries: int, num_keys: int, query_dim: int, value_dim: int,
    key_size: tuple[int, int] | None,
) -> int:
    """Multiply-adds of :func:`separable_bias_attention`: logits and weighted sum at the folded size."""
    dim = folded_head_dim(query_dim, value_dim, key_size)
    return 2 * batch * heads * num_queries * num_keys * dim
