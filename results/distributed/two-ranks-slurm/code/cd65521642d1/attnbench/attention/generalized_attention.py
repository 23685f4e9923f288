"""Generalized attention on feature maps (2D), with any subset of the terms E1..E4.

Zhu, Cheng, Zhang, Lin, Dai, "An Empirical Study of Spatial Attention Mechanisms in Deep
Networks", ICCV 2019, https://arxiv.org/abs/1904.05873 (Eq. 2). Reference code consulted:
mmcv ``mmcv/cnn/bricks/generalized_attention.py``, whose constructor, parameter names and
initialisation this module keeps, so mmcv and mmdet ``empirical_attention`` checkpoints load.

For query pixel ``i`` and key pixel ``j`` of head ``m`` (``d = in_channels // num_heads``):

    logit_ij = E1: q_i . k_j  +  E2: q_i . (P^x_{x_i - x_j} + P^y_{y_i - y_j})
             + E3: u . k_j    +  E4: v . (P^x_{x_i - x_j} + P^y_{y_i - y_j})
    y_i = x_i + gamma * W_out [ sum_j softmax_j(logit_ij) W_v x_j ]_{heads}

with ``q = W_q x`` on the query grid (stride ``q_stride``), ``k = W_k x`` and ``W_v x`` on the key
grid (stride ``kv_stride``), ``P^x_o = W_x emb(o * position_magnitude) / sqrt(2)`` (sinusoidal
``emb``, likewise ``P^y``), offsets in input pixels, and no 1/sqrt(d) scaling (as in mmcv).

Computation: the relative-position terms are separable, a per-query table over key columns
(``(q_i + v) . P^x``) plus one over key rows, and E3 is a per-key bias folded into the query
(``(q_i + u) . k_j``), so the attention is
:func:`~attnbench.attention.separable_bias_attention.separable_bias_attention` (a fused
scaled-dot-product kernel, or query chunks with recomputation in backward) and never stores the
``HW x HW_kv`` logits. E3 alone is query-independent: one global context vector per head.

E1's score can be another function (``score``: ``scaled_dot``, ``bilinear``, ``additive``; the
default ``dot`` is the above) and attention can be hard (``hard = K``: the mean of the values at the
``K`` keys of highest logit, straight-through gradient); :mod:`~attnbench.attention.scores` gives the
math. Those materialise the ``HW x HW_kv`` logits (memory grows with their number), with the
positions outside ``spatial_range`` hidden.

Deliberate differences from mmcv 2.x:
  * E2 without E4 (``0100, 0110, 1100, 1110``) is computed as above; mmcv permutes the query
    wrongly for the y axis there (crashes when h != w, wrong values when h == w).
  * ``spatial_range = r >= 0`` keeps exactly the keys within ``r`` input pixels of the query along
    each axis (``|y_i - y_j| <= r`` and ``|x_i - x_j| <= r``), for any channel count and map size.
    mmcv's mask is only built for 256/512 channels up to 84x84 maps, ignores ``q_stride`` and keeps
    a wider, asymmetric window. mmcv stores that mask as a parameter ``local_constraint_map``; it is
    dropped when an mmcv state_dict is loaded. ``r`` must be at least ``kv_stride - 1`` so that every
    query sees a key.
  * A per-axis embedding size (``position_embedding_dim // 2``) that is odd is allowed (the last
    cosine is dropped); mmcv fails on it.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .attention_maps import AttentionMaps, flat_index, term_weights
from .checks import check_feature_map, check_multiple, check_positive_int
from .factors import AttentionFactors
from .position import sinusoidal_embedding
from .scores import (
    add_score_parameters, attention_weights, check_score, reset_score_parameters, score_logits, score_macs)
from .separable_bias_attention import (
    IMPLEMENTATIONS, separable_bias_attention, separable_bias_attention_macs)


def _strided_size(size: int, stride: int) -> int:
    """Length of ``range(0, size, stride)``: the grid that mmcv's ``AvgPool2d(1, stride)`` keeps."""
    return -(-size // stride)


class GeneralizedAttention(nn.Module):
    """Generalized attention block (drop-in for ``mmcv.cnn.bricks.GeneralizedAttention``).

    Args:
        in_channels: channels of the input feature map; divisible by ``num_heads``.
        spatial_range: keep only keys within this many input pixels of the query along each axis;
            -1 for no constraint.
        num_heads: attention heads.
        position_embedding_dim: size of the sinusoidal relative-position embedding of both axes
            together (half per axis); -1 for ``in_channels``.
        position_magnitude: multiplier of the pixel offsets before embedding.
        kv_stride: subsampling stride of the key/value grid.
        q_stride: subsampling stride of the query grid (output upsampled bilinearly).
        attention_type: factor string ``E1E2E3E4``, e.g. ``'1111'`` or ``'0010'``.
        implementation: how logits with position terms are computed: ``'chunked'``, ``'fused'`` or
            ``'auto'`` (fused on CUDA, chunked elsewhere); see
            :mod:`~attnbench.attention.separable_bias_attention`. Not in mmcv's signature.
        score: E1's score function, one of :data:`~attnbench.attention.scores.SCORES` (default
            ``'dot'``, mmcv's). Not in mmcv's signature.
        hard: attend to the ``hard`` keys of highest logit (0: soft attention). Not in mmcv's signature.
        gamma_init: initial value of the residual gate ``gamma`` (mmcv's 0 starts the block as the
            identity and leaves every other weight of it without gradient until ``gamma`` moves).
            Not in mmcv's signature.
    """

    _abbr_ = "gen_attention_block"

    def __init__(
        self,
        in_channels: int,
        spatial_range: int = -1,
        num_heads: int = 9,
        position_embedding_dim: int = -1,
        position_magnitude: int = 1,
        kv_stride: int = 2,
        q_stride: int = 1,
        attention_type: str = "1111",
        implementation: str = "auto",
        score: str = "dot",
        hard: int = 0,
        gamma_init: float = 0.0,
    ):
        super().__init__()
        self.factors = AttentionFactors.parse(attention_type)
        if implementation not in IMPLEMENTATIONS:
            raise ValueError(f"implementation must be one of {IMPLEMENTATIONS}, got {implementation!r}")
        self.implementation = implementation
        check_score(score, hard, self.factors, default="dot")
        check_multiple("in_channels", in_channels, "num_heads", num_heads)
        check_positive_int(kv_stride=kv_stride, q_stride=q_stride)
        if spatial_range < -1:
            raise ValueError(f"spatial_range must be -1 (unconstrained) or >= 0, got {spatial_range}")
        if 0 <= spatial_range < kv_stride - 1:
            raise ValueError(
                f"spatial_range {spatial_range} < kv_stride - 1 = {kv_stride - 1}: some queries would "
                "see no key")
        self.in_channels = in_channels
        self.num_heads = num_heads
        self.qk_embed_dim = in_channels // num_heads
        self.spatial_range = spatial_range
        self.position_embedding_dim = position_embedding_dim if position_embedding_dim > 0 else in_channels
        if self.factors.needs_position and self.position_embedding_dim < 2:
            raise ValueError(f"position_embedding_dim must be >= 2, got {self.position_embedding_dim}")
        self.position_magnitude = position_magnitude
        self.kv_stride = kv_stride
        self.q_stride = q_stride
        self.score = score
        self.hard = hard
        self.gamma_init = float(gamma_init)

        inner = self.qk_embed_dim * num_heads
        f = self.factors
        if f.needs_query:
            self.query_conv = nn.Conv2d(in_channels, inner, 1, bias=False)
        if f.needs_key:
            self.key_conv = nn.Conv2d(in_channels, inner, 1, bias=False)
        self.value_conv = nn.Conv2d(in_channels, inner, 1, bias=False)
        if f.needs_position:
            self.appr_geom_fc_x = nn.Linear(self.position_embedding_dim // 2, inner, bias=False)
            self.appr_geom_fc_y = nn.Linear(self.position_embedding_dim // 2, inner, bias=False)
        if f.key:
            self.appr_bias = nn.Parameter(torch.empty(inner))
        if f.position:
            self.geom_bias = nn.Parameter(torch.empty(inner))
        add_score_parameters(self, score, num_heads, self.qk_embed_dim)
        self.proj_conv = nn.Conv2d(inner, in_channels, 1, bias=True)
        self.gamma = nn.Parameter(torch.zeros(1))
        self._register_load_state_dict_pre_hook(_drop_mmcv_constraint_map)
        self.reset_parameters()

    @property
    def attention_type(self) -> str:
        return str(self.factors)

    def reset_parameters(self) -> None:
        """mmcv's initialisation: Kaiming-normal (fan_in) projections, uniform biases, gamma =
        ``gamma_init`` (mmcv's 0 by default); an identity bilinear score, an N(0, 1 / d) additive score vector."""
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="leaky_relu")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
        bound = 1.0 / math.sqrt(self.qk_embed_dim * 2)
        for name in ("appr_bias", "geom_bias"):
            if hasattr(self, name):
                nn.init.uniform_(getattr(self, name), -bound, bound)
        nn.init.constant_(self.gamma, self.gamma_init)
        reset_score_parameters(self, self.qk_embed_dim)

    def extra_repr(self) -> str:
        extra = f", score='{self.score}'" if self.score != "dot" else ""
        extra += f", hard={self.hard}" if self.hard else ""
        return (f"{self.in_channels}, attention_type='{self.factors}', num_heads={self.num_heads}, "
                f"kv_stride={self.kv_stride}, q_stride={self.q_stride}, spatial_range={self.spatial_range}{extra}")

    def _project_heads(self, conv: nn.Conv2d, tokens: torch.Tensor) -> torch.Tensor:
        """1x1 conv of pixel tokens straight into head layout: (N, h * w, C) -> (N, heads, h * w, d).

        A matmul over tokens leaves ``d`` contiguous, as the fused kernels need, without the copy
        a conv output would take to get there.
        """
        out = F.linear(tokens, conv.weight.flatten(1))  # (N, h * w, heads * d)
        return out.view(tokens.shape[0], -1, self.num_heads, self.qk_embed_dim).transpose(1, 2)

    @property
    def _global_context(self) -> bool:
        """E3 alone (no query term, no position term, no range), soft: one context vector per head and image."""
        f = self.factors
        return not (f.needs_query or f.needs_position or self.spatial_range >= 0 or self.hard)

    def _global_context_vectors(self, tokens: torch.Tensor) -> torch.Tensor:
        """E3 alone, without projecting keys or values: (N, L, C) -> (N, heads, 1, d).

        The logit of key j is ``u . W_k x_j = (W_k^T u) . x_j`` and its weights sum to one, so the
        output ``sum_j w_j W_v x_j = W_v (sum_j w_j x_j)``: one key direction per head, a weighted
        mean of the input pixels, one value projection (as GCNet's context modelling).
        """
        heads, d = self.num_heads, self.qk_embed_dim
        key_weight = self.key_conv.weight.view(heads, d, -1)
        value_weight = self.value_conv.weight.view(heads, d, -1)
        key_direction = torch.einsum("md,mdc->mc", self.appr_bias.view(heads, d), key_weight)  # (heads, C)
        weights = (tokens @ key_direction.T.to(tokens.dtype)).softmax(dim=1)  # (N, L, heads)
        context = torch.einsum("nlm,nlc->nmc", weights, tokens)  # (N, heads, C)
        return torch.einsum("nmc,mdc->nmd", context, value_weight.to(context.dtype))[:, :, None, :]

    def _query_side(self, query: torch.Tensor | None, with_query: bool, bias_name: str | None
                    ) -> torch.Tensor | None:
        """``query`` (if used) plus a learned per-head vector (if any), (N or 1, heads, L or 1, d).

        Content logits: ``E1 q + E3 u`` (``appr_bias``); position logits: ``E2 q + E4 v`` (``geom_bias``).
        """
        bias = getattr(self, bias_name).view(1, self.num_heads, 1, self.qk_embed_dim) if bias_name else None
        if with_query:
            return query if bias is None else query + bias
        return bias

    def _axis_offsets(self, q_len: int, kv_len: int, like: torch.Tensor) -> torch.Tensor:
        """Query minus key position in input pixels, (q_len, kv_len)."""
        q_pos = torch.arange(q_len, device=like.device, dtype=like.dtype) * self.q_stride
        kv_pos = torch.arange(kv_len, device=like.device, dtype=like.dtype) * self.kv_stride
        return q_pos[:, None] - kv_pos[None, :]

    def _axis_position_features(self, fc: nn.Linear, offsets: torch.Tensor) -> torch.Tensor:
        """P_o = W emb(o * magnitude) / sqrt(2) per head, (heads, q_len, kv_len, d)."""
        emb = sinusoidal_embedding(offsets * self.position_magnitude, self.position_embedding_dim // 2)
        feat = fc(emb) / math.sqrt(2)
        return feat.view(*offsets.shape, self.num_heads, self.qk_embed_dim).permute(2, 0, 1, 3)

    def _range_mask(self, offsets: torch.Tensor) -> torch.Tensor:
        """Additive logit mask: 0 within ``spatial_range``, a large negative number outside."""
        outside = offsets.abs() > self.spatial_range
        return outside.to(offsets.dtype) * (torch.finfo(offsets.dtype).min / 4)

    @property
    def _dense(self) -> bool:
        """Whether the logits are materialised: a score other than ``dot``, or hard attention."""
        return self.score != "dot" or bool(self.hard)

    def _axis_biases(self, position_query, n, grid, key_grid, like):
        """Per-query logit tables over key columns and rows, (N, heads, L, Wk) and (N, heads, L, Hk);
        the range mask in them unless the logits are materialised (:meth:`_outside_range` hides those)."""
        (h, w), (h_kv, w_kv) = grid, key_grid
        off_x, off_y = self._axis_offsets(w, w_kv, like), self._axis_offsets(h, h_kv, like)
        if position_query is not None:
            pq = position_query.expand(-1, -1, h * w, -1)
            pq = pq.reshape(pq.shape[0], self.num_heads, h, w, self.qk_embed_dim)
            feat_x = self._axis_position_features(self.appr_geom_fc_x, off_x)
            feat_y = self._axis_position_features(self.appr_geom_fc_y, off_y)
            bias_x = torch.einsum("nmyxd,mxjd->nmyxj", pq, feat_x)  # (N, heads, h, w, Wk)
            bias_y = torch.einsum("nmyxd,myid->nmyxi", pq, feat_y)  # (N, heads, h, w, Hk)
        else:
            bias_x = off_x.new_zeros(1, 1, 1, w, w_kv)
            bias_y = off_y.new_zeros(1, 1, h, 1, h_kv)
        if self.spatial_range >= 0 and not self._dense:
            bias_x = bias_x + self._range_mask(off_x)               # (w, Wk) over (.., h, w, Wk)
            bias_y = bias_y + self._range_mask(off_y)[:, None, :]   # (h, 1, Hk) over (.., h, w, Hk)
        shape = (n, self.num_heads, h, w)
        bias_x = bias_x.expand(*shape, w_kv).reshape(n, self.num_heads, h * w, w_kv)
        bias_y = bias_y.expand(*shape, h_kv).reshape(n, self.num_heads, h * w, h_kv)
        return bias_x, bias_y

    def _outside_range(self, grid, key_grid, like) -> torch.Tensor:
        """Bool (h * w, Hk * Wk): True for a key beyond ``spatial_range`` of the query on either axis."""
        (h, w), (h_kv, w_kv) = grid, key_grid
        far_x = self._axis_offsets(w, w_kv, like).abs() > self.spatial_range  # (w, Wk)
        far_y = self._axis_offsets(h, h_kv, like).abs() > self.spatial_range  # (h, Hk)
        return (far_y[:, None, :, None] | far_x[None, :, None, :]).reshape(h * w, h_kv * w_kv)

    def _dense_attention(self, query, key, value, bias_x, bias_y, grid, key_grid, like) -> torch.Tensor:
        """Attention over materialised logits, (N, heads, h * w, d): E1 under :attr:`score`, E3 per key,
        the position tables summed over each key's row and column, soft or :attr:`hard` weights."""
        f = self.factors
        logits = like.new_zeros(())
        if f.query_key:
            logits = logits + score_logits(self, query, key, 1.0)
        if f.key:
            logits = logits + self.appr_bias.view(1, self.num_heads, 1, -1) @ key.transpose(-1, -2)
        if bias_x is not None:
            logits = logits + (bias_y[..., :, None] + bias_x[..., None, :]).flatten(-2)
        if self.spatial_range >= 0:
            logits = logits.masked_fill(self._outside_range(grid, key_grid, like), float("-inf"))
        out = attention_weights(logits, self.hard) @ value  # (N, heads, 1, d) if no term reads the query
        return out.expand(-1, -1, grid[0] * grid[1], -1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_feature_map(x, self.in_channels)
        x_q = x[:, :, ::self.q_stride, ::self.q_stride]
        x_kv = x[:, :, ::self.kv_stride, ::self.kv_stride]
        n, _, h, w = x_q.shape
        h_kv, w_kv = x_kv.shape[2:]
        f = self.factors

        tokens_kv = x_kv.flatten(2).transpose(1, 2)  # (N, Hk * Wk, C), shared by key and value
        if self._global_context:
            out = self._global_context_vectors(tokens_kv)
            h, w = 1, 1
        else:
            query = self._project_heads(self.query_conv, x_q.flatten(2).transpose(1, 2)) if f.needs_query else None
            key = self._project_heads(self.key_conv, tokens_kv) if f.needs_key else None
            value = self._project_heads(self.value_conv, tokens_kv)
            position_query = self._query_side(query, f.query_position, "geom_bias" if f.position else None)
            bias_x = bias_y = None
            if position_query is not None or (self.spatial_range >= 0 and not self._dense):
                bias_x, bias_y = self._axis_biases(position_query, n, (h, w), (h_kv, w_kv), x)
            if self._dense:
                out = self._dense_attention(query, key, value, bias_x, bias_y, (h, w), (h_kv, w_kv), x)
            else:
                content_query = self._query_side(query, f.query_key, "appr_bias" if f.key else None)
                if content_query is not None:
                    content_query = content_query.expand(n, -1, h * w, -1)
                out = separable_bias_attention(content_query, key, value, bias_x, bias_y, (h_kv, w_kv),
                                               self.implementation)

        out = out.transpose(2, 3).reshape(n, self.num_heads * self.qk_embed_dim, h, w)
        out = self.proj_conv(out)
        if (h, w) != (1, 1) and out.shape[2:] != x.shape[2:]:
            out = F.interpolate(out, size=x.shape[2:], mode="bilinear", align_corners=False)
        return self.gamma * out + x

    def attention_maps(self, x: torch.Tensor, queries: torch.Tensor | None = None) -> AttentionMaps:
        """Attention weights of chosen queries over the key grid, as trained and for each enabled term.

        For the queries ``i`` (flat, row-major indices into the ``h x w`` query grid of stride
        ``q_stride``; all when ``queries`` is None) and the keys ``j`` of the ``Hk x Wk`` grid of
        stride ``kv_stride``, with ``R_i`` the keys beyond ``spatial_range`` of query ``i``:

            weights['all'][n, m, i, j] = softmax_j( E1 + E2 + E3 + E4 (the enabled ones) ),  R_i at -inf
            weights['Et'][n, m, i, j]  = softmax_j( Et ),                                       R_i at -inf

        with E1 under the module's ``score`` and the terms as in the module docstring (E3 alone,
        the global-context case, gives every query the same weights). With ``hard > 0`` 'all' is
        the hard weights forward uses (:func:`~attnbench.attention.scores.attention_weights`);
        the terms alone stay soft. Forward's attention output at a query is ``weights['all'] @
        (W_v x_kv)`` per head (before ``W_out``, the gate and, for ``q_stride > 1``, the bilinear
        upsampling). The logits are materialised (``Q x Hk Wk`` per head and term); forward is
        unchanged. Autograd records as usual: wrap in ``torch.no_grad()`` to inspect only.

        Args:
            x: ``(N, C, H, W)`` input of the block.
            queries: 1-D int64 flat indices into the query grid, or None for all ``h * w``.

        Returns:
            :class:`~attnbench.attention.attention_maps.AttentionMaps`: weights ``(N, heads, Q,
            Hk * Wk)``, ``query_grid = (h, w)``, ``key_grid = (Hk, Wk)``.
        """
        check_feature_map(x, self.in_channels)
        x_q = x[:, :, ::self.q_stride, ::self.q_stride]
        x_kv = x[:, :, ::self.kv_stride, ::self.kv_stride]
        n, _, h, w = x_q.shape
        grid, key_grid = (h, w), tuple(x_kv.shape[2:])
        index = flat_index(queries, grid, x.device)
        f = self.factors
        tokens_kv = x_kv.flatten(2).transpose(1, 2)  # (N, Hk * Wk, C)
        query = None
        if f.needs_query:
            query = self._project_heads(self.query_conv, x_q.flatten(2).transpose(1, 2)[:, index])  # (N, heads, Q, d)
        key = self._project_heads(self.key_conv, tokens_kv) if f.needs_key else None
        logits = {}
        if f.query_key:
            logits["E1"] = score_logits(self, query, key, 1.0)
        if f.query_position:
            logits["E2"] = self._position_term(query, index, grid, key_grid, x)
        if f.key:
            logits["E3"] = self._query_side(None, False, "appr_bias") @ key.transpose(-1, -2)  # (N, heads, 1, M)
        if f.position:
            logits["E4"] = self._position_term(self._query_side(None, False, "geom_bias"), index, grid, key_grid, x)
        hidden = self._outside_range(grid, key_grid, x)[index] if self.spatial_range >= 0 else None
        shape = (n, self.num_heads, index.numel(), key_grid[0] * key_grid[1])
        return AttentionMaps(term_weights(logits, hidden, self.hard, shape), grid, key_grid)

    def _position_term(self, position_query, index, grid, key_grid, like) -> torch.Tensor:
        """``p_i . (P^x_{x_i - x_j} + P^y_{y_i - y_j})`` for the queries ``index`` of the ``grid`` and all
        keys, (N or 1, heads, Q, Hk * Wk); ``position_query`` (N or 1, heads, Q or 1, d) is ``q`` (E2) or
        ``v`` (E4)."""
        (h, w), (h_kv, w_kv) = grid, key_grid
        feat_x = self._axis_position_features(self.appr_geom_fc_x, self._axis_offsets(w, w_kv, like))
        feat_y = self._axis_position_features(self.appr_geom_fc_y, self._axis_offsets(h, h_kv, like))
        pq = position_query.expand(-1, -1, index.numel(), -1)
        bias_x = torch.einsum("nmqd,mqjd->nmqj", pq, feat_x[:, index % w])  # (N or 1, heads, Q, Wk)
        bias_y = torch.einsum("nmqd,mqid->nmqi", pq, feat_y[:, index // w])  # (N or 1, heads, Q, Hk)
        return (bias_y[..., :, None] + bias_x[..., None, :]).flatten(-2)

    def macs(self, x: torch.Tensor) -> int:
        """Multiply-adds of one forward pass on an input of shape ``(N, C, H, W)``.

        Counts the 1x1 projections, the position-feature projections and tables, and the
        attention logits and weighted sum as the module's implementation computes them on the
        device of its parameters; not the softmax, bias additions, interpolation or residual sum.
        """
        n, c, height, width = x.shape
        h, w = _strided_size(height, self.q_stride), _strided_size(width, self.q_stride)
        h_kv, w_kv = _strided_size(height, self.kv_stride), _strided_size(width, self.kv_stride)
        num_q, num_kv, d, heads = h * w, h_kv * w_kv, self.qk_embed_dim, self.num_heads
        inner = heads * d
        f = self.factors
        if self._global_context:  # key direction, logits, weighted mean, value and output projections
            return inner * c + 2 * n * num_kv * c * heads + 2 * n * inner * c
        total = n * num_kv * c * inner + n * num_q * inner * c  # value and output projections
        total += f.needs_query * n * num_q * c * inner + f.needs_key * n * num_kv * c * inner
        if f.needs_position:
            total += (w * w_kv + h * h_kv) * (self.position_embedding_dim // 2) * inner
            table_batch = n if f.query_position else 1
            total += table_batch * heads * num_q * (w_kv + h_kv) * d
        if self._dense:  # E1 under its score, E3 per key, the weighted sum of values
            total += f.query_key * score_macs(self.score, n * heads, num_q, num_kv, d)
            return total + f.key * n * heads * num_kv * d + n * heads * num_q * num_kv * d
        key_size = (h_kv, w_kv) if f.needs_position or self.spatial_range >= 0 else None
        implementation = self.implementation
        if implementation == "auto":
            implementation = "fused" if self.proj_conv.weight.is_cuda else "chunked"
        return total + separable_bias_attention_macs(
            n, heads, num_q, num_kv, d if f.needs_key else 0, d, key_size, implementation)


def _drop_mmcv_constraint_map(state_dict, prefix, *args) -> None:
    """mmcv stores its spatial-range mask as a parameter; this module computes the mask instead."""
    state_dict.pop(prefix + "local_constraint_map", None)
