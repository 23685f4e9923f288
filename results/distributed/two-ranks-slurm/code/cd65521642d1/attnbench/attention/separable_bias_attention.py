"""Attention with a separable per-axis logit bias, without storing the logit matrix.

For keys on an ``Hk x Wk`` grid (key ``j`` at row ``y_j``, column ``x_j``):

    out_i = sum_j softmax_j( q_i . k_j  +  B^x[i, x_j]  +  B^y[i, y_j] ) v_j

Two exact implementations, both with memory linear in the number of queries and keys:

``'fused'``: the bias tables are folded into one dot product by appending them to the query and
one-hot codes of the key's column and row to the key,

    [q_i, B^x[i, :], B^y[i, :]] . [k_j, e_{x_j}, e_{y_j}] = q_i . k_j + B^x[i, x_j] + B^y[i, y_j],

and ``torch.nn.functional.scaled_dot_product_attention`` runs it with its fused kernels (flash /
memory-efficient on CUDA). The price is ``Wk + Hk`` extra dimensions in the dot products.

``'chunked'``: queries are processed in chunks; each chunk's logits are ``q . k`` plus the two
tables broadcast over the key grid. Only the outputs and the per-query log-sum-exp are kept for
the backward pass, which recomputes each chunk's weights (as flash attention does) and returns
the table gradients as row and column sums of the logit gradient. Cheaper than ``'fused'`` on
CPUs, where the extra dimensions cost more than the broadcasts.

``'auto'`` picks ``'fused'`` on CUDA and ``'chunked'`` elsewhere. Without bias tables both reduce
to one plain fused ``scaled_dot_product_attention`` call.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .dtypes import to_common_dtype

# Fused kernels are fastest (on CUDA only available) for head sizes that are multiples of 8.
_HEAD_DIM_MULTIPLE = 8
# Logit elements per chunk of the chunked path (8 MB in fp32; measured fastest and leanest on CPU).
_CHUNK_ELEMENTS = 1 << 21

IMPLEMENTATIONS = ("auto", "fused", "chunked")


def folded_head_dim(query_dim: int, value_dim: int, key_size: tuple[int, int] | None) -> int:
    """Head size of the fused call: logit dims plus bias codes, padded to a multiple of 8."""
    logit_dim = query_dim + (sum(key_size) if key_size is not None else 0)
    dim = max(logit_dim, value_dim)
    return -(-dim // _HEAD_DIM_MULTIPLE) * _HEAD_DIM_MULTIPLE


def _grid_one_hot(key_size: tuple[int, int], like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Column and row one-hot codes of row-major grid keys: (Hk*Wk, Wk) and (Hk*Wk, Hk)."""
    h_kv, w_kv = key_size
    col = torch.eye(w_kv, device=like.device, dtype=like.dtype).repeat(h_kv, 1)
    row = torch.eye(h_kv, device=like.device, dtype=like.dtype).repeat_interleave(w_kv, dim=0)
    return col, row


def _fused(query, key, value, bias_x, bias_y, key_size):
    n, heads, m, dv = value.shape
    parts_q, parts_k = [], []
    if query is not None:
        parts_q.append(query)
        parts_k.append(key)
    if bias_x is not None:
        # a bias of -inf, or one that overflows to -inf in the dtype the kernel computes in (autocast's
        # when on), times a one-hot zero is NaN: a quarter of that dtype's lowest value masks as well
        device = value.device.type
        dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else value.dtype
        low = torch.finfo(dtype).min / 4
        col, row = _grid_one_hot(key_size, value)
        parts_q += [bias_x.clamp_min(low), bias_y.clamp_min(low)]
        parts_k += [col.expand(n, heads, m, -1), row.expand(n, heads, m, -1)]
    dim = folded_head_dim(0 if query is None else query.shape[-1], dv,
                          None if bias_x is None else key_size)
    q, k = (parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1) for parts in (parts_q, parts_k))
    q, k, v = (t if t.shape[-1] == dim else F.pad(t, (0, dim - t.shape[-1])) for t in (q, k, value))
    return F.scaled_dot_product_attention(q, k, v, scale=1.0)[..., :dv]


class _ChunkedSeparableBiasAttention(torch.autograd.Function):
    """Query-chunked attention with per-axis bias tables; recomputes weights in backward."""

    @staticmethod
    def _chunk_logits(query, key_t, bias_x, bias_y, rows, key_size):
        bx = bias_x[:, :, rows]
        n, heads, c, _ = bx.shape
        if query is None:
            logits = bx.new_zeros(n, heads, c, *key_size)
        else:
            logits = torch.matmul(query[:, :, rows], key_t).view(n, heads, c, *key_size)
        logits.add_(bx.unsqueeze(-2)).add_(bias_y[:, :, rows].unsqueeze(-1))
        return logits.view(n, heads, c, -1)

    @staticmethod
    def forward(ctx, query, key, value, bias_x, bias_y, key_size, chunk):
        n, heads, num_q, _ = bias_x.shape
        out = value.new_empty(n, heads, num_q, value.shape[-1])
        lse = value.new_empty(n, heads, num_q, 1)
        key_t = None if key is None else key.transpose(-1, -2)
        for start in range(0, num_q, chunk):
            rows = slice(start, start + chunk)
            logits = _ChunkedSeparableBiasAttention._chunk_logits(query, key_t, bias_x, bias_y, rows, key_size)
            row_max = logits.amax(dim=-1, keepdim=True)
            unnormalised = logits.sub_(row_max).exp_()
            total = unnormalised.sum(dim=-1, keepdim=True)
            torch.matmul(unnormalised, value, out=out[:, :, rows]).div_(total)
            lse[:, :, rows] = row_max + total.log()
        ctx.save_for_backward(query, key, value, bias_x, bias_y, out, lse)
        ctx.key_size, ctx.chunk = key_size, chunk
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):
        query, key, value, bias_x, bias_y, out, lse = ctx.saved_tensors
        key_size, chunk = ctx.key_size, ctx.chunk
        n, heads, num_q, _ = bias_x.shape
        grad_out = grad_out.contiguous()
        # d logit = w * (d w) - w * sum_j w_j (d w_j), and sum_j w_j dw_j = dO . O per query
        row_dot = (grad_out * out).sum(-1, keepdim=True)
        grad_q = None if query is None else torch.empty_like(query)
        grad_k = None if key is None else torch.zeros_like(key)
        grad_v = torch.zeros_like(value)
        grad_bx, grad_by = torch.empty_like(bias_x), torch.empty_like(bias_y)
        key_t = None if key is None else key.transpose(-1, -2)
        value_t = value.transpose(-1, -2)
        for start in range(0, num_q, chunk):
            rows = slice(start, start + chunk)
            logits = _ChunkedSeparableBiasAttention._chunk_logits(query, key_t, bias_x, bias_y, rows, key_size)
            weights = logits.sub_(lse[:, :, rows]).exp_()
            grad_v.add_(torch.matmul(weights.transpose(-1, -2), grad_out[:, :, rows]))
            grad_logits = torch.matmul(grad_out[:, :, rows], value_t).sub_(row_dot[:, :, rows]).mul_(weights)
            if query is not None:
                torch.matmul(grad_logits, key, out=grad_q[:, :, rows])
                grad_k.add_(torch.matmul(grad_logits.transpose(-1, -2), query[:, :, rows]))
            grid = grad_logits.view(n, heads, -1, *key_size)
            torch.sum(grid, dim=-2, out=grad_bx[:, :, rows])
            torch.sum(grid, dim=-1, out=grad_by[:, :, rows])
        return grad_q, grad_k, grad_v, grad_bx, grad_by, None, None


def separable_bias_attention(
    query: torch.Tensor | None,
    key: torch.Tensor | None,
    value: torch.Tensor,
    bias_x: torch.Tensor | None = None,
    bias_y: torch.Tensor | None = None,
    key_size: tuple[int, int] | None = None,
    implementation: str = "auto",
) -> torch.Tensor:
    """Softmax attention with logits ``q . k + B^x + B^y`` (no scaling).

    Args:
        query: ``(N, H, L, D)`` content query, or None for bias-only logits.
        key: ``(N, H, M, D)`` content key (None exactly when ``query`` is None).
        value: ``(N, H, M, Dv)``.
        bias_x: ``(N, H, L, Wk)`` logit bias per query and key column, or None.
        bias_y: ``(N, H, L, Hk)`` logit bias per query and key row (given with ``bias_x``).
        key_size: ``(Hk, Wk)`` with ``Hk * Wk == M``; required with the biases.
        implementation: ``'auto'``, ``'fused'`` or ``'chunked'`` (see the module docstring).

    Returns:
        ``(N, H, L, Dv)``.
    """
    if (query is None) != (key is None):
        raise ValueError("query and key must be given together (or both None for bias-only logits)")
    if (bias_x is None) != (bias_y is None):
        raise ValueError("bias_x and bias_y must be given together")
    if query is None and bias_x is None:
        raise ValueError("no logit term: give query/key, the biases, or both")
    if implementation not in IMPLEMENTATIONS:
        raise ValueError(f"implementation must be one of {IMPLEMENTATIONS}, got {implementation!r}")
    m = value.shape[-2]
    if bias_x is not None:
        if key_size is None or key_size[0] * key_size[1] != m:
            raise ValueError(f"key_size {key_size} does not match the {m} keys")
        if bias_x.shape[-1] != key_size[1] or bias_y.shape[-1] != key_size[0]:
            raise ValueError(
                f"bias_x (..., {bias_x.shape[-1]}) and bias_y (..., {bias_y.shape[-1]}) must end in "
                f"the key grid's width {key_size[1]} and height {key_size[0]}")
    query, key, value, bias_x, bias_y = to_common_dtype(query, key, value, bias_x, bias_y)
    if implementation == "fused" or bias_x is None or (implementation == "auto" and value.is_cuda):
        return _fused(query, key, value, bias_x, bias_y, key_size)
    n, heads, num_q = bias_x.shape[:3]
    chunk = max(1, _CHUNK_ELEMENTS // (n * heads * m))
    with torch.autocast(value.device.type, enabled=False):  # its out= products keep the inputs' one dtype
        return _ChunkedSeparableBiasAttention.apply(query, key, value, bias_x, bias_y, tuple(key_size), chunk)


def separable_bias_attention_macs(
    batch: int, heads: int, num_queries: int, num_keys: int, query_dim: int, value_dim: int,
    key_size: tuple[int, int] | None, implementation: str = "fused",
) -> int:
    """Multiply-adds of one forward call: logits and weighted sum.

    ``'fused'`` counts them at the folded head size; ``'chunked'`` at the content and value sizes
    (its bias broadcasts are additions, not multiply-adds).
    """
    if implementation == "chunked" and key_size is not None:
        return batch * heads * num_queries * num_keys * (query_dim + value_dim)
    dim = folded_head_dim(query_dim, value_dim, key_size)
    return 2 * batch * heads * num_queries * num_keys * dim
