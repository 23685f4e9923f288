"""Generalized attention over sequences (1D), for translation models.

Zhu et al., "An Empirical Study of Spatial Attention Mechanisms in Deep Networks", ICCV 2019,
https://arxiv.org/abs/1904.05873 (Eq. 2, the Transformer experiments of Sec. 4); the relative
position terms follow Transformer-XL (Dai et al. 2019, https://arxiv.org/abs/1901.02860).

For query position ``i`` (``t_i = query_offset + i``), key position ``j`` and head ``m``:

    logit_ij = ( E1: q_i . k_j  +  E2: q_i . r_{j - t_i}  +  E3: u . k_j  +  E4: v . r_{j - t_i} ) / sqrt(d)
    y_i = W_out [ sum_j softmax_j(logit_ij) W_v x_j ]_{heads}

with ``q = W_q x_query``, ``k = W_k x_key``, ``r_o = W_r emb(o)`` (sinusoidal ``emb``, wave length
10000) and ``u, v`` learned per head. Keys come from the query sequence itself (self-attention) or
from ``memory`` (encoder-decoder attention). E1 alone is standard multi-head attention and runs
through ``scaled_dot_product_attention``; otherwise the position logits are computed once per
distinct offset (``T + S - 1`` of them) and gathered into the ``T x S`` logit matrix.

The score of E1 can be another function (``score``, :mod:`~attnbench.attention.scores`): ``scaled_dot``
(the above, the default), ``dot`` (``q_i . k_j`` unscaled), ``bilinear`` (``q_i^T W_m k_j / sqrt(d)``)
or ``additive`` (``w_m . tanh(q_i + k_j)``), with ``q, k`` the projections above; the other terms keep
their ``1 / sqrt(d)``. ``hard = K`` attends hard: the mean of the values at the ``K`` keys of highest
logit, with the soft weights' gradient (straight-through).

Masks: ``causal`` hides keys with ``j > t_i``; ``window = r >= 0`` hides keys with ``|j - t_i| > r``
(the study's Figure 4 restricts E2 to a dynamic convolution's kernel this way; a causal window keeps
``t_i - r <= j <= t_i``); ``key_padding_mask`` (True = padding) hides padded keys. A query whose keys
are all hidden (a padded query whose window holds padding only) attends to nothing and gets zeros
before the output projection, as ``scaled_dot_product_attention`` gives. The window masks the ``T x S``
logits: it costs what the unrestricted attention costs.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from .attention_maps import AttentionMaps, flat_index, term_weights
from .checks import check_multiple
from .factors import AttentionFactors
from .position import sinusoidal_embedding
from .scores import (
    add_score_parameters, attention_weights, check_score, reset_score_parameters, score_logits, score_macs)


class GeneralizedAttention1d(nn.Module):
    """Multi-head generalized attention for ``(B, T, C)`` sequences.

    Args:
        embed_dim: model width ``C``; divisible by ``num_heads``.
        num_heads: attention heads.
        attention_type: factor string ``E1E2E3E4``.
        position_dim: size of the sinusoidal offset embedding (default ``embed_dim``).
        dropout: dropout on the attention weights during training.
        wave_length: longest wave length of the sinusoidal embedding.
        window: keep only keys within this many positions of the query (-1: all).
        score: E1's score function, one of :data:`~attnbench.attention.scores.SCORES`.
        hard: attend to the ``hard`` keys of highest logit (0: soft attention).
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        attention_type: str = "1111",
        position_dim: int | None = None,
        dropout: float = 0.0,
        wave_length: float = 10000.0,
        window: int = -1,
        score: str = "scaled_dot",
        hard: int = 0,
    ):
        super().__init__()
        self.factors = AttentionFactors.parse(attention_type)
        check_multiple("embed_dim", embed_dim, "num_heads", num_heads)
        if not isinstance(window, int) or window < -1:
            raise ValueError(f"window must be -1 (all keys) or an integer >= 0, got {window!r}")
        check_score(score, hard, self.factors, default="scaled_dot")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.position_dim = position_dim or embed_dim
        self.dropout = dropout
        self.wave_length = wave_length
        self.window = window
        self.score = score
        self.hard = hard
        f = self.factors
        if f.needs_query:
            self.q_proj = nn.Linear(embed_dim, embed_dim)
        if f.needs_key:
            self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        if f.needs_position:
            self.pos_proj = nn.Linear(self.position_dim, embed_dim, bias=False)
        if f.key:
            self.content_bias = nn.Parameter(torch.empty(num_heads, self.head_dim))
        if f.position:
            self.position_bias = nn.Parameter(torch.empty(num_heads, self.head_dim))
        add_score_parameters(self, score, num_heads, self.head_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Xavier-uniform projections and zero projection biases (as nn.MultiheadAttention)."""
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
        for name in ("content_bias", "position_bias"):
            if hasattr(self, name):
                nn.init.normal_(getattr(self, name), std=self.head_dim ** -0.5)
        reset_score_parameters(self, self.head_dim)

    @property
    def attention_type(self) -> str:
        return str(self.factors)

    def extra_repr(self) -> str:
        extra = f", window={self.window}" if self.window >= 0 else ""
        extra += f", score='{self.score}'" if self.score != "scaled_dot" else ""
        extra += f", hard={self.hard}" if self.hard else ""
        return f"{self.embed_dim}, num_heads={self.num_heads}, attention_type='{self.factors}'{extra}"

    def _split_heads(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape  # (B, T, C) -> (B, heads, T, d)
        return x.view(b, t, self.num_heads, self.head_dim).transpose(1, 2)

    def _check_inputs(self, query, memory, key_padding_mask):
        if query.dim() != 3 or query.shape[-1] != self.embed_dim:
            raise ValueError(f"query must be (B, T, {self.embed_dim}), got {tuple(query.shape)}")
        keys = query if memory is None else memory
        if memory is not None and (memory.dim() != 3 or memory.shape[0] != query.shape[0]
                                   or memory.shape[-1] != self.embed_dim):
            raise ValueError(
                f"memory must be (B={query.shape[0]}, S, {self.embed_dim}), got {tuple(memory.shape)}")
        if key_padding_mask is not None and (key_padding_mask.dtype != torch.bool
                                             or key_padding_mask.shape != keys.shape[:2]):
            raise ValueError(
                f"key_padding_mask must be a bool tensor of shape (B, S) = {tuple(keys.shape[:2])}, "
                f"got {key_padding_mask.dtype} {tuple(key_padding_mask.shape)}")

    def _hidden_keys(self, batch, num_q, num_kv, query_offset, causal, key_padding_mask, device):
        """Bool mask (B or 1, 1, T, S), True where a key is hidden; None when nothing is."""
        hidden = None
        if causal or self.window >= 0:
            offset = (torch.arange(num_kv, device=device)[None, :]
                      - torch.arange(num_q, device=device)[:, None] - query_offset)  # j - t_i
            hidden = (offset > 0) if causal else torch.zeros_like(offset, dtype=torch.bool)
            if self.window >= 0:
                hidden = hidden | (offset.abs() > self.window)
            hidden = hidden[None, None]
        if key_padding_mask is not None:
            pad = key_padding_mask[:, None, None, :]
            hidden = pad if hidden is None else hidden | pad
        return hidden

    def _position_logits(self, position_query, num_q, num_kv, query_offset) -> torch.Tensor:
        """``p_i . r_{j - t_i}`` for all (i, j), (B or 1, heads, T, S)."""
        # distinct offsets j - t_i, from -(query_offset + T - 1) to S - 1 - query_offset
        offsets = torch.arange(num_q + num_kv - 1, device=position_query.device,
                               dtype=position_query.dtype) - (num_q - 1 + query_offset)
        rel = self.pos_proj(sinusoidal_embedding(offsets, self.position_dim, self.wave_length))
        rel = rel.view(-1, self.num_heads, self.head_dim).transpose(0, 1)  # (heads, T+S-1, d)
        all_offsets = position_query @ rel.transpose(-1, -2)  # (B or 1, heads, T or 1, T+S-1)
        all_offsets = all_offsets.expand(-1, -1, num_q, -1)
        index = (torch.arange(num_kv, device=offsets.device)[None, :]
                 - torch.arange(num_q, device=offsets.device)[:, None] + num_q - 1)
        return all_offsets.gather(-1, index.expand(*all_offsets.shape[:2], -1, -1))

    def forward(
        self,
        query: torch.Tensor,
        memory: torch.Tensor | None = None,
        causal: bool = False,
        key_padding_mask: torch.Tensor | None = None,
        query_offset: int = 0,
    ) -> torch.Tensor:
        """Attend from ``query`` (B, T, C) to ``memory`` (B, S, C), or to itself when None.

        ``query_offset`` is the position of the first query (incremental decoding, where the
        keys are the whole prefix and the queries its last steps).
        """
        self._check_inputs(query, memory, key_padding_mask)
        keys_in = query if memory is None else memory
        b, t, _ = query.shape
        s = keys_in.shape[1]
        f = self.factors
        scale = self.head_dim ** -0.5
        dropout = self.dropout if self.training else 0.0
        hidden = self._hidden_keys(b, t, s, query_offset, causal, key_padding_mask, query.device)

        q = self._split_heads(self.q_proj(query)) if f.needs_query else None
        k = self._split_heads(self.k_proj(keys_in)) if f.needs_key else None
        v = self._split_heads(self.v_proj(keys_in))
        if f.bits == (True, False, False, False) and self.score == "scaled_dot" and not self.hard:
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=None if hidden is None else ~hidden, dropout_p=dropout)
        else:
            logits = query.new_zeros(())
            scored = self.score != "scaled_dot"  # E1 apart, at its own scale
            if (f.query_key and not scored) or f.key:
                content = (q if f.query_key and not scored else 0) + (self.content_bias[:, None] if f.key else 0)
                logits = logits + content @ k.transpose(-1, -2)
            if f.needs_position:
                position = (q if f.query_position else 0) + (self.position_bias[:, None] if f.position else 0)
                position = position if position.dim() == 4 else position[None]
                logits = logits + self._position_logits(position, t, s, query_offset)
            logits = logits * scale
            if scored:
                logits = logits + score_logits(self, q, k, scale)
            logits = logits.expand(b, self.num_heads, t, s)
            if hidden is not None:
                empty = hidden.all(-1, keepdim=True)  # queries that see no key: zero weights, no NaN
                logits = logits.masked_fill(hidden & ~empty, float("-inf"))
            weights = attention_weights(logits, self.hard)
            if hidden is not None:
                weights = weights.masked_fill(empty, 0.0)
            out = F.dropout(weights, dropout, self.training) @ v
        out = out.transpose(1, 2).reshape(b, t, self.embed_dim)
        return self.out_proj(out)

    def attention_maps(
        self,
        query: torch.Tensor,
        memory: torch.Tensor | None = None,
        causal: bool = False,
        key_padding_mask: torch.Tensor | None = None,
        query_offset: int = 0,
        queries: torch.Tensor | None = None,
    ) -> AttentionMaps:
        """Attention weights of chosen query steps over the keys, as trained and for each enabled term.

        For the query steps ``i`` (indices into the ``T`` steps of ``query``; all when ``queries`` is
        None), the ``S`` keys ``j`` and ``H_i`` the keys forward hides from query ``i`` (``causal``,
        ``window``, ``key_padding_mask``):

            weights['all'][b, m, i, j] = softmax_j( sum of the enabled terms ),  H_i at -inf
            weights['Et'][b, m, i, j]  = softmax_j( Et ),                          H_i at -inf

        with the terms as in the module docstring: E2, E3, E4 divided by ``sqrt(d)``, E1 under the
        module's ``score``. A query that sees no key gets zeros. With ``hard > 0`` 'all' is the hard
        weights forward uses; the terms alone stay soft. Forward's output is ``W_out`` of
        ``weights['all'] @ (W_v x_keys)`` per head (in training, after dropout on the weights,
        which these are before). Arguments as :meth:`forward`, plus ``queries``.

        Returns:
            :class:`~attnbench.attention.attention_maps.AttentionMaps`: weights ``(B, heads, Q, S)``,
            ``query_grid = (T,)``, ``key_grid = (S,)``.
        """
        self._check_inputs(query, memory, key_padding_mask)
        keys_in = query if memory is None else memory
        b, t, _ = query.shape
        s = keys_in.shape[1]
        index = flat_index(queries, (t,), query.device)
        f = self.factors
        scale = self.head_dim ** -0.5
        q = self._split_heads(self.q_proj(query)) if f.needs_query else None
        k = self._split_heads(self.k_proj(keys_in)) if f.needs_key else None
        logits = {}
        if f.query_key:
            logits["E1"] = score_logits(self, q[:, :, index], k, scale)
        if f.query_position:
            logits["E2"] = self._position_logits(q, t, s, query_offset)[:, :, index] * scale
        if f.key:
            logits["E3"] = self.content_bias[:, None] @ k.transpose(-1, -2) * scale  # (B, heads, 1, S)
        if f.position:
            position = self.position_bias[None, :, None]  # (1, heads, 1, d)
            logits["E4"] = self._position_logits(position, t, s, query_offset)[:, :, index] * scale
        hidden = self._hidden_keys(b, t, s, query_offset, causal, key_padding_mask, query.device)
        if hidden is not None:
            hidden = hidden.expand(-1, -1, t, -1)[:, :, index]
        shape = (b, self.num_heads, index.numel(), s)
        return AttentionMaps(term_weights(logits, hidden, self.hard, shape), (t,), (s,))

    def macs(self, query: torch.Tensor, memory: torch.Tensor | None = None, causal: bool = False,
             key_padding_mask: torch.Tensor | None = None, query_offset: int = 0) -> int:
        """Multiply-adds of ``forward(query, memory, ...)``; causality, padding and the query offset
        (the other arguments) do not change them."""
        batch, t, _ = query.shape
        s = t if memory is None else memory.shape[1]
        c, d, heads, f = self.embed_dim, self.head_dim, self.num_heads, self.factors
        total = batch * (t + s) * c * c  # value and output projections
        total += f.needs_query * batch * t * c * c + f.needs_key * batch * s * c * c
        if f.query_key and self.score == "scaled_dot":
            total += batch * heads * t * s * d  # E1 (and E3 with it)
        else:
            total += f.key * batch * heads * s * d  # E3 alone
            total += f.query_key * score_macs(self.score, batch * heads, t, s, d)
        if f.needs_position:
            total += (t + s - 1) * self.position_dim * c
            total += (batch * t if f.query_position else 1) * heads * (t + s - 1) * d
        return total + batch * heads * t * s * d  # weighted sum of values
