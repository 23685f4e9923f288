"""Area attention: attend to areas (groups of adjacent memory items) instead of single items.

Li, Kaiser, Bengio, Si, "Area Attention", ICML 2019, https://arxiv.org/abs/1810.10126.
Reference code consulted: tensor2tensor ``tensor2tensor/layers/area_attention.py``, whose key and
value modes, area order and statistics (``std = sqrt(variance + 1e-6)``) this module follows.

The memory is a grid of ``memory_height`` rows (a sequence when 1), flattened row-major. Every
rectangle ``r`` of ``h x w`` adjacent items, ``h <= max_area_height`` and ``w <= max_area_width``,
is one unit of attention, with

    mu_r = (1/|r|) sum_{i in r} k_i      sigma_r = sqrt( (1/|r|) sum_{i in r} k_i^2 - mu_r^2 + eps )
    y = sum_r softmax_r( q . key_r / sqrt(d) ) value_r

    value_r = sum_{i in r} v_i (sum) | (1/|r|) sum_{i in r} v_i (mean) | max_{i in r} v_i (max)
    key_r   = mu_r (mean) | max_{i in r} k_i (max) | mu~_r = mu_r + sigma_r * N(0, 1) (sample)
            | MLP([mu_r, sigma_r, s_r]) (concat) | MLP([max_r, s_r]) (max_concat)
            | MLP(mu_r + sigma_r + s_r) (sum) | MLP([mu~_r, s_r]) (sample_concat) | MLP(mu~_r + s_r) (sample_sum)

with ``s_r = [e_h(h), e_w(w)]`` learned embeddings of the area's height and width and
``MLP(z) = W_2 relu(W_1 z + b_1) + b_2``; these learned parts live in :class:`AreaKeyCombiner`,
which the module wrappers own. The noise of the sample modes is drawn only when ``training``.

Sums come from a summed-area table ``S[a, b] = sum of the items in rows < a and columns < b``: rows
``[t, t + h)`` and columns ``[l, l + w)`` sum to ``S[t+h, l+w] - S[t, l+w] - S[t+h, l] + S[t, l]``, so
sums, means and standard deviations cost O(1) per area (the tables behind the standard
deviation are float64, as ``E[x^2] - E[x]^2`` cancels). Maxima come from max pools grown by one
column, then one row, at a time. A sequence of ``n`` items has ``W n - W (W - 1) / 2`` areas of
width up to ``W <= n``.

Masks: ``key_padding_mask`` (True = padding) hides every area that touches a padded item;
``causal`` shows query ``i`` only the areas whose last item (row-major) is at most ``i``;
``top_k_areas = k > 0`` keeps the ``k`` largest logits of each query (ties at the k-th are all kept;
tensor2tensor zeroes and renormalises the other weights, which is the same).
The attention over the areas runs in ``F.scaled_dot_product_attention``; a query that sees no area
(every item padded) gets what it gives for a fully masked row.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from .checks import check_multiple, check_positive_int

STD_EPSILON = 1e-6

# key mode -> (area statistics it uses, how AreaKeyCombiner joins them; None: the statistic is the key)
KEY_MODES: dict[str, tuple[tuple[str, ...], str | None]] = {
    "mean": (("mean",), None),
    "max": (("max",), None),
    "sample": (("sample",), None),
    "concat": (("mean", "std", "size"), "concat"),
    "max_concat": (("max", "size"), "concat"),
    "sum": (("mean", "std", "size"), "sum"),
    "sample_concat": (("sample", "size"), "concat"),
    "sample_sum": (("sample", "size"), "sum"),
}
VALUE_MODES = ("sum", "mean", "max")


def count_areas(width: int, max_area_width: int, height: int = 1, max_area_height: int = 1) -> int:
    """Areas of a ``height x width`` grid: sum_{h} (height - h + 1) * sum_{w} (width - w + 1)."""
    rows = sum(height - h + 1 for h in range(1, min(max_area_height, height) + 1))
    columns = sum(width - w + 1 for w in range(1, min(max_area_width, width) + 1))
    return rows * columns


@dataclass(frozen=True)
class Areas:
    """Every area of a ``memory_height x memory_width`` grid, in tensor2tensor's order: by area
    height, then area width, then position row-major. ``top, left, height, width`` are (A,)."""

    memory_height: int
    memory_width: int
    max_height: int  # largest area height present, min(max_area_height, memory_height)
    max_width: int
    top: torch.Tensor
    left: torch.Tensor
    height: torch.Tensor
    width: torch.Tensor

    @classmethod
    def enumerate(cls, memory_height: int, memory_width: int, max_area_height: int, max_area_width: int,
                  device: torch.device | None = None) -> Areas:
        """The areas up to ``max_area_height x max_area_width`` (clipped to the grid)."""
        max_height, max_width = min(max_area_height, memory_height), min(max_area_width, memory_width)
        blocks = []
        for h in range(1, max_height + 1):
            for w in range(1, max_width + 1):
                top, left = torch.meshgrid(torch.arange(memory_height - h + 1),
                                           torch.arange(memory_width - w + 1), indexing="ij")
                top, left = top.flatten(), left.flatten()
                blocks.append(torch.stack([top, left, torch.full_like(top, h), torch.full_like(top, w)]))
        top, left, height, width = torch.cat(blocks, 1).to(device)
        return cls(memory_height, memory_width, max_height, max_width, top, left, height, width)

    def __len__(self) -> int:
        return self.top.numel()

    @property
    def shapes(self) -> list[tuple[int, int]]:
        """Area shapes ``(h, w)`` in order; the areas of one shape are contiguous, row-major."""
        return [(h, w) for h in range(1, self.max_height + 1) for w in range(1, self.max_width + 1)]

    @property
    def size(self) -> torch.Tensor:
        """Items per area, (A,)."""
        return self.height * self.width

    @property
    def last_item(self) -> torch.Tensor:
        """Row-major index of each area's bottom-right item, (A,)."""
        return (self.top + self.height - 1) * self.memory_width + self.left + self.width - 1

    def _wide_sum(self, x: torch.Tensor, at_least: torch.dtype = torch.float32) -> torch.Tensor:
        """Sum over each area, (..., H * W, c) -> (..., A, c), from one summed-area table accumulated
        in ``x.dtype`` or ``at_least``, the wider: ``S[t+h, l+w] - S[t, l+w] - S[t+h, l] + S[t, l]``."""
        x = x.to(torch.promote_types(x.dtype, at_least))
        grid = x.unflatten(-2, (self.memory_height, self.memory_width))  # (..., H, W, c)
        table = F.pad(grid.cumsum(-3).cumsum(-2), (0, 0, 1, 0, 1, 0))  # S, (..., H + 1, W + 1, c)
        blocks = [table[..., h:, w:, :] - table[..., :-h, w:, :] - table[..., h:, :-w, :] + table[..., :-h, :-w, :]
                  for h, w in self.shapes]  # all h x w areas at once, (..., H - h + 1, W - w + 1, c)
        return torch.cat([block.flatten(-3, -2) for block in blocks], -2)

    def sum(self, x: torch.Tensor) -> torch.Tensor:
        """Sum over each area, (..., H * W, c) -> (..., A, c)."""
        return self._wide_sum(x).to(x.dtype)

    def mean(self, x: torch.Tensor) -> torch.Tensor:
        """Mean over each area, (..., H * W, c) -> (..., A, c)."""
        total = self._wide_sum(x)
        return (total / self.size.to(total.dtype)[:, None]).to(x.dtype)

    def mean_and_std(self, x: torch.Tensor, epsilon: float = STD_EPSILON) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and standard deviation ``sqrt(E[x^2] - E[x]^2 + epsilon)`` over each area, each (..., A, c).

        The difference cancels, and the tables of ``x^2`` grow with the memory, so they are float64:
        float32 tables over 512 items give errors of ~1e-2 in the std of a single item."""
        wide = x.to(torch.float64)
        total, square_total = self._wide_sum(torch.cat([wide, wide * wide], -1)).chunk(2, -1)
        size = self.size.to(total.dtype)[:, None]
        mean = total / size
        std = (square_total / size - mean * mean).clamp_min(0.0).add(epsilon).sqrt()
        return mean.to(x.dtype), std.to(x.dtype)

    def max(self, x: torch.Tensor) -> torch.Tensor:
        """Maximum over each area, (..., H * W, c) -> (..., A, c), from max pools grown by one
        column (``max(M_{w-1}[:, :-1], x[:, w-1:])``), then by one row, at a time."""
        grid = x.unflatten(-2, (self.memory_height, self.memory_width))  # (..., H, W, c)
        blocks = {}
        rows = grid  # max over w adjacent columns, (..., H, W - w + 1, c)
        for w in range(1, self.max_width + 1):
            if w > 1:
                rows = torch.maximum(rows[..., :, :-1, :], grid[..., :, w - 1:, :])
            pooled = rows  # max over h x w areas, (..., H - h + 1, W - w + 1, c)
            for h in range(1, self.max_height + 1):
                if h > 1:
                    pooled = torch.maximum(pooled[..., :-1, :, :], rows[..., h - 1:, :, :])
                blocks[h, w] = pooled.flatten(-3, -2)
        return torch.cat([blocks[shape] for shape in self.shapes], -2)


class AreaKeyCombiner(nn.Module):
    """Learned keys of the combined modes: ``MLP(z) = W_2 relu(W_1 z + b_1) + b_2``, where ``z`` joins
    the statistics of ``KEY_MODES[area_key_mode]`` by concatenation or sum; its ``size`` term is
    ``[e_h(h), e_w(w)]``, embeddings of the area height and width (``d // 2`` and ``d - d // 2`` wide).

    Args:
        head_dim: key width ``d`` per head (the combiner is shared by all heads).
        max_area_width, max_area_height: largest area; sizes the embedding tables.
        area_key_mode: one of ``concat, max_concat, sum, sample_concat, sample_sum``.
    """

    def __init__(self, head_dim: int, max_area_width: int, max_area_height: int = 1,
                 area_key_mode: str = "concat"):
        super().__init__()
        parts, join = KEY_MODES.get(area_key_mode, ((), None))
        if join is None:
            raise ValueError(f"AreaKeyCombiner's area_key_mode must be one of "
                             f"{[m for m, (_, j) in KEY_MODES.items() if j]}, got {area_key_mode!r}")
        check_positive_int(head_dim=head_dim, max_area_width=max_area_width, max_area_height=max_area_height)
        self.area_key_mode = area_key_mode
        self.parts, self.join = parts, join
        self.head_dim = head_dim
        self.height_embedding = nn.Embedding(max_area_height, head_dim // 2)
        self.width_embedding = nn.Embedding(max_area_width, head_dim - head_dim // 2)
        self.in_features = head_dim * (len(parts) if join == "concat" else 1)
        self.hidden = nn.Linear(self.in_features, head_dim)
        self.output = nn.Linear(head_dim, head_dim)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Xavier-uniform embeddings and weights, zero biases (tensor2tensor's defaults)."""
        for m in (self.height_embedding, self.width_embedding, self.hidden, self.output):
            nn.init.xavier_uniform_(m.weight)
        nn.init.zeros_(self.hidden.bias)
        nn.init.zeros_(self.output.bias)

    def extra_repr(self) -> str:
        return f"area_key_mode='{self.area_key_mode}'"

    def size_embedding(self, height: torch.Tensor, width: torch.Tensor) -> torch.Tensor:
        """``[e_h(h), e_w(w)]`` per area, (A,) -> (A, d)."""
        return torch.cat([self.height_embedding(height - 1), self.width_embedding(width - 1)], -1)

    def forward(self, statistics: list[torch.Tensor]) -> torch.Tensor:
        """Key from the statistics named by ``self.parts``, each (..., A, d), in that order."""
        z = torch.cat(statistics, -1) if self.join == "concat" else sum(statistics)
        return self.output(F.relu(self.hidden(z)))

    def head_macs(self, num_areas: int) -> int:
        """Multiply-adds of one call on ``num_areas`` areas of one head."""
        return num_areas * (self.in_features + self.head_dim) * self.head_dim


def _check_modes(area_key_mode: str, area_value_mode: str) -> None:
    if area_key_mode not in KEY_MODES:
        raise ValueError(f"area_key_mode must be one of {list(KEY_MODES)}, got {area_key_mode!r}")
    if area_value_mode not in VALUE_MODES:
        raise ValueError(f"area_value_mode must be one of {list(VALUE_MODES)}, got {area_value_mode!r}")


def _check_top_k(top_k_areas: int) -> None:
    if not isinstance(top_k_areas, int) or top_k_areas < 0:
        raise ValueError(f"top_k_areas must be a non-negative integer (0 keeps all), got {top_k_areas!r}")


def _check_tensors(q, k, v, memory_height, key_padding_mask) -> None:
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError(f"q, k and v must be (B, heads, T, d), got {tuple(q.shape)}, {tuple(k.shape)}, "
                         f"{tuple(v.shape)}")
    if k.shape[:3] != v.shape[:3] or q.shape[:2] != k.shape[:2] or q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q (B, heads, Tq, d), k (B, heads, Tk, d) and v (B, heads, Tk, dv) do not match: "
                         f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if k.shape[2] % memory_height:
        raise ValueError(f"the key length {k.shape[2]} is not divisible by memory_height ({memory_height})")
    batch_keys = (k.shape[0], k.shape[2])
    if key_padding_mask is not None and (key_padding_mask.dtype != torch.bool
                                         or key_padding_mask.shape != batch_keys):
        raise ValueError(f"key_padding_mask must be a bool tensor of shape (B, Tk) = {batch_keys}, "
                         f"got {key_padding_mask.dtype} {tuple(key_padding_mask.shape)}")


def _check_key_combiner(key_combiner, area_key_mode, head_dim, areas: Areas) -> None:
    if KEY_MODES[area_key_mode][1] is None:
        if key_combiner is not None:
            raise ValueError(f"area_key_mode '{area_key_mode}' takes no key_combiner")
        return
    if key_combiner is None:
        raise ValueError(f"area_key_mode '{area_key_mode}' has learned parameters: pass "
                         "key_combiner=AreaKeyCombiner(...), or use AreaAttention1d / AreaAttention2d")
    if key_combiner.area_key_mode != area_key_mode or key_combiner.head_dim != head_dim:
        raise ValueError(f"key_combiner is for area_key_mode '{key_combiner.area_key_mode}' and head_dim "
                         f"{key_combiner.head_dim}, got '{area_key_mode}' and {head_dim}")
    embedded = (key_combiner.height_embedding.num_embeddings, key_combiner.width_embedding.num_embeddings)
    if embedded[0] < areas.max_height or embedded[1] < areas.max_width:
        raise ValueError(f"key_combiner embeds areas up to {embedded[0]} x {embedded[1]}, "
                         f"got areas up to {areas.max_height} x {areas.max_width}")


def _area_keys(k, areas: Areas, area_key_mode, key_combiner, training) -> torch.Tensor:
    """Area keys (B, heads, Tk, d) -> (B, heads, A, d) for ``area_key_mode``."""
    parts, join = KEY_MODES[area_key_mode]
    stats = {}
    if "max" in parts:
        stats["max"] = areas.max(k)
    elif "std" in parts or "sample" in parts:
        stats["mean"], stats["std"] = areas.mean_and_std(k)
    else:
        stats["mean"] = areas.mean(k)
    if "sample" in parts:
        noise = torch.randn_like(stats["std"]) if training else 0.0
        stats["sample"] = stats["mean"] + stats["std"] * noise
    if "size" in parts:
        size = key_combiner.size_embedding(areas.height, areas.width)  # (A, d)
        stats["size"] = size.expand(*k.shape[:-2], -1, -1)
    statistics = [stats[p] for p in parts]
    return statistics[0] if join is None else key_combiner(statistics)


def _area_values(v, areas: Areas, area_value_mode) -> torch.Tensor:
    """Area values (B, heads, Tk, dv) -> (B, heads, A, dv) for ``area_value_mode``."""
    return {"sum": areas.sum, "mean": areas.mean, "max": areas.max}[area_value_mode](v)


def _hidden_areas(areas: Areas, num_queries, key_padding_mask, causal, device):
    """Bool mask (B or 1, 1, Tq or 1, A), True where an area is hidden; None when none is."""
    hidden = None
    if causal:
        queries = torch.arange(num_queries, device=device)[:, None]
        hidden = (areas.last_item[None, :] > queries)[None, None]
    if key_padding_mask is not None:
        padded_items = areas.sum(key_padding_mask[..., None].float())[..., 0]  # (B, A), exact counts
        touches_padding = (padded_items > 0)[:, None, None, :]
        hidden = touches_padding if hidden is None else hidden | touches_padding
    return hidden


def _hide_below_top_k(q, keys, hidden, top_k_areas) -> torch.Tensor:
    """``hidden`` widened to the areas below each query's k-th largest logit, (B, heads, Tq, A)."""
    with torch.no_grad():  # the selection is piecewise constant: no gradient flows through it
        logits = q @ keys.transpose(-1, -2)  # unscaled: the ranking is the same
        if hidden is not None:
            logits = logits.masked_fill(hidden, float("-inf"))
        kth_largest = logits.topk(min(top_k_areas, logits.shape[-1]), -1).values[..., -1:]
        below = logits < kth_largest
    return below if hidden is None else below | hidden


def area_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    max_area_width: int,
    max_area_height: int = 1,
    memory_height: int = 1,
    area_key_mode: str = "mean",
    area_value_mode: str = "sum",
    key_padding_mask: torch.Tensor | None = None,
    causal: bool = False,
    top_k_areas: int = 0,
    dropout_p: float = 0.0,
    training: bool = False,
    key_combiner: AreaKeyCombiner | None = None,
) -> torch.Tensor:
    """Scaled dot-product area attention, q (B, heads, Tq, d), k (B, heads, Tk, d), v (B, heads, Tk, dv)
    -> (B, heads, Tq, dv).

    The memory is ``memory_height`` rows of ``Tk / memory_height`` items, row-major. The combined key
    modes (``concat, max_concat, sum, sample_concat, sample_sum``) need ``key_combiner``, an
    :class:`AreaKeyCombiner` for that mode; ``training`` draws the noise of the sample modes.
    ``dropout_p`` is applied to the attention weights whenever it is positive (it is passed to
    ``F.scaled_dot_product_attention``).
    """
    _check_modes(area_key_mode, area_value_mode)
    check_positive_int(max_area_width=max_area_width, max_area_height=max_area_height, memory_height=memory_height)
    _check_top_k(top_k_areas)
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p must be in [0, 1), got {dropout_p}")
    _check_tensors(q, k, v, memory_height, key_padding_mask)
    areas = Areas.enumerate(memory_height, k.shape[2] // memory_height, max_area_height, max_area_width, k.device)
    _check_key_combiner(key_combiner, area_key_mode, k.shape[-1], areas)
    keys = _area_keys(k, areas, area_key_mode, key_combiner, training)  # (B, heads, A, d)
    values = _area_values(v, areas, area_value_mode)  # (B, heads, A, dv)
    hidden = _hidden_areas(areas, q.shape[2], key_padding_mask, causal, q.device)
    if top_k_areas:
        hidden = _hide_below_top_k(q, keys, hidden, top_k_areas)
    return F.scaled_dot_product_attention(
        q, keys, values, attn_mask=None if hidden is None else ~hidden, dropout_p=dropout_p)


class _AreaAttentionBase(nn.Module):
    """Mode checks, the key combiner and the attention call shared by the 1D and 2D wrappers."""

    def __init__(self, channels, num_heads, max_area_width, max_area_height, area_key_mode, area_value_mode,
                 top_k_areas, dropout):
        super().__init__()
        check_multiple("channels", channels, "num_heads", num_heads)
        _check_modes(area_key_mode, area_value_mode)
        check_positive_int(max_area_width=max_area_width, max_area_height=max_area_height)
        _check_top_k(top_k_areas)
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.num_heads = num_heads
        self.head_dim = channels // num_heads
        self.max_area_width = max_area_width
        self.max_area_height = max_area_height
        self.area_key_mode = area_key_mode
        self.area_value_mode = area_value_mode
        self.top_k_areas = top_k_areas
        self.dropout = dropout
        self.key_combiner = (AreaKeyCombiner(self.head_dim, max_area_width, max_area_height, area_key_mode)
                             if KEY_MODES[area_key_mode][1] else None)

    def _reset_projections(self, projections) -> None:
        """Xavier-uniform ``projections`` and zero biases, then the key combiner's own parameters."""
        for m in projections:
            nn.init.xavier_uniform_(m.weight)
            nn.init.zeros_(m.bias)
        if self.key_combiner is not None:
            self.key_combiner.reset_parameters()

    def _attend(self, q, k, v, memory_height, causal=False, key_padding_mask=None):
        return area_attention(
            q, k, v, self.max_area_width, self.max_area_height, memory_height, self.area_key_mode,
            self.area_value_mode, key_padding_mask, causal, self.top_k_areas,
            self.dropout if self.training else 0.0, self.training, self.key_combiner)

    def _attention_macs(self, batch, num_queries, num_areas) -> int:
        """Area-key MLP, logits (twice with top-k: selection, then attention) and weighted values."""
        total = (2 + bool(self.top_k_areas)) * batch * self.num_heads * num_queries * num_areas * self.head_dim
        if self.key_combiner is not None:
            total += batch * self.num_heads * self.key_combiner.head_macs(num_areas)
        return total


class AreaAttention1d(_AreaAttentionBase):
    """Multi-head area attention for ``(B, T, C)`` sequences (self- or encoder-decoder attention).

    Args:
        embed_dim: model width ``C``; divisible by ``num_heads``.
        num_heads: attention heads.
        max_area_width: longest area (in items).
        area_key_mode, area_value_mode: see the module docstring.
        top_k_areas: keep the ``k`` highest-scoring areas per query (0 keeps all).
        dropout: dropout on the attention weights during training.
    """

    def __init__(self, embed_dim: int, num_heads: int, max_area_width: int, area_key_mode: str = "mean",
                 area_value_mode: str = "sum", top_k_areas: int = 0, dropout: float = 0.0):
        super().__init__(embed_dim, num_heads, max_area_width, 1, area_key_mode, area_value_mode,
                         top_k_areas, dropout)
        self.embed_dim = embed_dim
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Xavier-uniform projections and zero biases (as nn.MultiheadAttention); the key combiner's own."""
        self._reset_projections((self.q_proj, self.k_proj, self.v_proj, self.out_proj))

    def extra_repr(self) -> str:
        return (f"{self.embed_dim}, num_heads={self.num_heads}, max_area_width={self.max_area_width}, "
                f"area_key_mode='{self.area_key_mode}', area_value_mode='{self.area_value_mode}', "
                f"top_k_areas={self.top_k_areas}")

    def _split_heads(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape  # (B, T, C) -> (B, heads, T, d)
        return x.view(b, t, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, query: torch.Tensor, memory: torch.Tensor | None = None, causal: bool = False,
                key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Attend from ``query`` (B, T, C) to the areas of ``memory`` (B, S, C), or of itself when None."""
        if query.dim() != 3 or query.shape[-1] != self.embed_dim:
            raise ValueError(f"query must be (B, T, {self.embed_dim}), got {tuple(query.shape)}")
        if memory is not None and (memory.dim() != 3 or memory.shape[0] != query.shape[0]
                                   or memory.shape[-1] != self.embed_dim):
            raise ValueError(
                f"memory must be (B={query.shape[0]}, S, {self.embed_dim}), got {tuple(memory.shape)}")
        keys_in = query if memory is None else memory
        q = self._split_heads(self.q_proj(query))
        k = self._split_heads(self.k_proj(keys_in))
        v = self._split_heads(self.v_proj(keys_in))
        out = self._attend(q, k, v, 1, causal, key_padding_mask)  # (B, heads, T, d)
        return self.out_proj(out.transpose(1, 2).reshape(query.shape))

    def macs(self, query: torch.Tensor, memory: torch.Tensor | None = None, causal: bool = False,
             key_padding_mask: torch.Tensor | None = None) -> int:
        """Multiply-adds of ``forward(query, memory, ...)``; causality and padding (the other
        arguments) do not change them."""
        batch, t, _ = query.shape
        s = t if memory is None else memory.shape[1]
        projections = batch * (2 * t + 2 * s) * self.embed_dim * self.embed_dim
        return projections + self._attention_macs(batch, t, count_areas(s, self.max_area_width))


class AreaAttention2d(_AreaAttentionBase):
    """Area attention block for ``(N, C, H, W)`` feature maps: ``y = x + gamma * W_out area_attention(x)``.

    Queries are all pixels; keys and values come from the grid subsampled by ``kv_stride``, and the
    areas are its rectangles up to ``max_area_height x max_area_width``. ``gamma`` starts at
    ``gamma_init``, 0 by default, so the block starts as the identity (a ResNet plugin) and only
    ``gamma`` gets a gradient until it moves.

    Args:
        in_channels: channels of the feature map; divisible by ``num_heads``.
        num_heads: attention heads.
        max_area_width, max_area_height: largest area, in key-grid pixels.
        kv_stride: subsampling stride of the key/value grid.
        area_key_mode, area_value_mode: see the module docstring.
        top_k_areas: keep the ``k`` highest-scoring areas per query (0 keeps all).
        dropout: dropout on the attention weights during training.
        gamma_init: initial value of the residual gate ``gamma`` (0: the block starts as identity).
    """

    _abbr_ = "area_attention_block"

    def __init__(self, in_channels: int, num_heads: int = 8, max_area_width: int = 3, max_area_height: int = 3,
                 kv_stride: int = 1, area_key_mode: str = "mean", area_value_mode: str = "sum",
                 top_k_areas: int = 0, dropout: float = 0.0, gamma_init: float = 0.0):
        super().__init__(in_channels, num_heads, max_area_width, max_area_height, area_key_mode, area_value_mode,
                         top_k_areas, dropout)
        check_positive_int(kv_stride=kv_stride)
        self.in_channels = in_channels
        self.kv_stride = kv_stride
        self.gamma_init = float(gamma_init)
        self.query_conv = nn.Conv2d(in_channels, in_channels, 1)
        self.key_conv = nn.Conv2d(in_channels, in_channels, 1)
        self.value_conv = nn.Conv2d(in_channels, in_channels, 1)
        self.out_conv = nn.Conv2d(in_channels, in_channels, 1)
        self.gamma = nn.Parameter(torch.zeros(1))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Xavier-uniform 1x1 convolutions, zero biases, the key combiner's own, gamma = ``gamma_init``."""
        self._reset_projections((self.query_conv, self.key_conv, self.value_conv, self.out_conv))
        nn.init.constant_(self.gamma, self.gamma_init)

    def extra_repr(self) -> str:
        return (f"{self.in_channels}, num_heads={self.num_heads}, max_area={self.max_area_height}x"
                f"{self.max_area_width}, kv_stride={self.kv_stride}, area_key_mode='{self.area_key_mode}', "
                f"area_value_mode='{self.area_value_mode}', top_k_areas={self.top_k_areas}")

    def _split_heads(self, x: torch.Tensor) -> torch.Tensor:
        n, _, h, w = x.shape  # (N, C, h, w) -> (N, heads, h * w, d)
        return x.view(n, self.num_heads, self.head_dim, h * w).transpose(2, 3).contiguous()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 4 or x.shape[1] != self.in_channels:
            raise ValueError(f"x must be (N, {self.in_channels}, H, W), got {tuple(x.shape)}")
        n, c, h, w = x.shape
        memory = x[:, :, ::self.kv_stride, ::self.kv_stride]  # (N, C, Hk, Wk)
        q = self._split_heads(self.query_conv(x))
        k = self._split_heads(self.key_conv(memory))
        v = self._split_heads(self.value_conv(memory))
        out = self._attend(q, k, v, memory.shape[2])  # (N, heads, h * w, d)
        out = out.transpose(2, 3).reshape(n, c, h, w)
        return x + self.gamma * self.out_conv(out)

    def macs(self, x: torch.Tensor) -> int:
        """Multiply-adds of one forward pass on an input of shape ``(N, C, H, W)``."""
        batch, _, height, width = x.shape
        key_height, key_width = -(-height // self.kv_stride), -(-width // self.kv_stride)
        pixels, key_pixels = height * width, key_height * key_width
        projections = batch * 2 * (pixels + key_pixels) * self.in_channels ** 2
        areas = count_areas(key_width, self.max_area_width, key_height, self.max_area_height)
        return projections + self._attention_macs(batch, pixels, areas)
