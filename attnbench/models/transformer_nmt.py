"""Transformer encoder-decoder for translation whose three attention slots take any mechanism.

Vaswani et al., "Attention Is All You Need", NeurIPS 2017, https://arxiv.org/abs/1706.03762;
the slot-by-slot ablation of Zhu et al., "An Empirical Study of Spatial Attention Mechanisms in
Deep Networks", ICCV 2019, https://arxiv.org/abs/1904.05873 (Sec. 4, Transformer on WMT14 En-De).
Reference code consulted: fairseq ``transformer`` (layers, tied embeddings) and ``sequence_generator``
(beam search with finished-hypothesis bookkeeping and length penalty).

Each layer is a stack of sublayers ``F`` (post-norm, the original: ``x = LN(x + Dropout(F(x)))``;
pre-norm: ``x = x + Dropout(F(LN(x)))`` and a final LN):

    encoder:  Mix_enc(x, padding)              -> FFN
    decoder:  Mix_dec(y, causal) -> Attend(y, memory = encoder output, padding) -> FFN
    FFN(x) = W_2 Dropout(ReLU(W_1 x)),   embeddings sqrt(C) E[token] + sinusoid(position), tied with
    the output projection (one joint vocabulary), logits = h E^T.

The three slots are configured independently, ``dict(type=<mechanism>, **options)``, from
:data:`MECHANISMS` (a name -> builder table): ``standard`` (multi-head attention through
``scaled_dot_product_attention``: :class:`GeneralizedAttention1d` with E1 only), ``generalized``
(any factor string; ``window``, ``score`` and ``hard`` as in GeneralizedAttention1d), ``area``, and
for the self-attention slots ``lightweight``, ``dynamic`` (in the GLU block of Wu et al. 2019) and
``deformable``. Every mechanism is built causal in the decoder.

Training: teacher forcing with label-smoothed cross entropy over the non-padding target tokens.
Decoding: greedy, or beam search ranking finished hypotheses by ``log p(y | x) / |y|^alpha``
(``|y|`` counts EOS; ``alpha`` = ``len_penalty``), up to ``max_len_a * S + max_len_b`` tokens.
Incremental decoding caches, per decoder layer, the inputs of its self-attention slot for the
steps decoded so far; a step runs every layer on the new position only, and each mechanism reads
from the cache what it needs (attention: all keys, projected again at every step; convolutions:
the last ``k - 1`` steps; area attention and deformable convolution recompute the causal prefix).
The encoder-decoder slot projects the memory at every step too: the mechanisms own their projections.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmengine.model import BaseModel

from attnbench.attention import (
    AreaAttention1d, DeformConv1d, DynamicConv1d, GeneralizedAttention1d, LightweightConv1d, UserSlot,
    sinusoidal_embedding)
from attnbench.data.translation import BOS_ID, EOS_ID, PAD_ID
from attnbench.variants import GENERALIZED_ATTENTION, SLOTS
from attnbench.variants import MECHANISMS as CATALOGUE

POSITION_WAVE_LENGTH = 10000.0

# ----------------------------------------------------------------------------------------------
# Slot adapters: one interface per slot kind over the mechanisms' own forward signatures.
#   self-attention slots: mix(x (B, T, C), key_padding_mask (B, T) | None, last) -> (B, last, C),
#       the outputs of the last `last` steps of x (all of them in training, the new ones when
#       decoding incrementally with x = cached steps + new steps);
#   encoder-decoder slot: attend(query (B, n, C), memory (B, S, C), memory_padding_mask, query_offset)
#       -> (B, n, C), where query_offset is the target position of the first query.
# ----------------------------------------------------------------------------------------------


class GeneralizedSlot(nn.Module):
    """:class:`GeneralizedAttention1d` in any slot: queries only for the new steps, keys for all."""

    def __init__(self, attention: GeneralizedAttention1d, causal: bool):
        super().__init__()
        self.attention = attention
        self.causal = causal

    def mix(self, x: torch.Tensor, key_padding_mask: torch.Tensor | None, last: int) -> torch.Tensor:
        first = x.shape[1] - last
        return self.attention(x[:, first:], x, self.causal, key_padding_mask, query_offset=first)

    def attend(self, query, memory, memory_padding_mask, query_offset: int) -> torch.Tensor:
        return self.attention(query, memory, key_padding_mask=memory_padding_mask, query_offset=query_offset)


class AreaSlot(nn.Module):
    """:class:`AreaAttention1d` in any slot; causal areas are indexed from the first step, so the
    self-attention slot recomputes the whole prefix and keeps the last outputs."""

    def __init__(self, attention: AreaAttention1d, causal: bool):
        super().__init__()
        self.attention = attention
        self.causal = causal

    def mix(self, x: torch.Tensor, key_padding_mask: torch.Tensor | None, last: int) -> torch.Tensor:
        return self.attention(x, causal=self.causal, key_padding_mask=key_padding_mask)[:, x.shape[1] - last:]

    def attend(self, query, memory, memory_padding_mask, query_offset: int) -> torch.Tensor:
        return self.attention(query, memory, key_padding_mask=memory_padding_mask)


class ConvSlot(nn.Module):
    """Lightweight or dynamic convolution in the block of Wu et al. 2019 (Fig. 2):
    ``W_out Conv(GLU(W_in x))``; a causal one reads only the last ``k - 1 + last`` steps."""

    def __init__(self, conv: LightweightConv1d | DynamicConv1d):
        super().__init__()
        dim = conv.embed_dim
        self.in_proj = nn.Linear(dim, 2 * dim)
        self.conv = conv
        self.out_proj = nn.Linear(dim, dim)
        for m in (self.in_proj, self.out_proj):
            nn.init.xavier_uniform_(m.weight)
            nn.init.zeros_(m.bias)

    def mix(self, x: torch.Tensor, key_padding_mask: torch.Tensor | None, last: int) -> torch.Tensor:
        if self.conv.causal:
            x = x[:, -(self.conv.kernel_size - 1 + last):]  # the receptive field of the last outputs
        h = self.conv(F.glu(self.in_proj(x), -1), key_padding_mask)
        return self.out_proj(h[:, -last:])


class DeformSlot(nn.Module):
    """:class:`DeformConv1d` (``C -> C``, one offset group per head) as a token mixer. Padded steps
    read as zeros, as outside the sequence; a causal one recomputes the prefix (offsets reach back
    without bound)."""

    def __init__(self, conv: DeformConv1d):
        super().__init__()
        self.conv = conv

    def mix(self, x: torch.Tensor, key_padding_mask: torch.Tensor | None, last: int) -> torch.Tensor:
        if key_padding_mask is not None:
            x = x.masked_fill(key_padding_mask[..., None], 0.0)
        return self.conv(x)[:, x.shape[1] - last:]


# Builders: (embed_dim, num_heads, causal, dropout, **options) -> slot adapter. `dropout` is the
# attention-weight dropout (DropConnect on the kernel taps for the convolutions).

def _standard(embed_dim: int, num_heads: int, causal: bool, dropout: float) -> GeneralizedSlot:
    return GeneralizedSlot(GeneralizedAttention1d(embed_dim, num_heads, "1000", dropout=dropout), causal)


def _generalized(embed_dim: int, num_heads: int, causal: bool, dropout: float, attention_type: str = "1111",
                 **options) -> GeneralizedSlot:
    """``options``: GeneralizedAttention1d's ``window``, ``score`` and ``hard``."""
    attention = GeneralizedAttention1d(embed_dim, num_heads, attention_type, dropout=dropout, **options)
    return GeneralizedSlot(attention, causal)


def _area(embed_dim: int, num_heads: int, causal: bool, dropout: float, max_area_width: int = 3,
          area_key_mode: str = "mean", area_value_mode: str = "sum", top_k_areas: int = 0) -> AreaSlot:
    attention = AreaAttention1d(embed_dim, num_heads, max_area_width, area_key_mode, area_value_mode,
                                top_k_areas, dropout)
    return AreaSlot(attention, causal)


def _head_shared_conv(conv_class: type[LightweightConv1d] | type[DynamicConv1d]) -> Callable[..., ConvSlot]:
    def build(embed_dim: int, num_heads: int, causal: bool, dropout: float, kernel_size: int = 7,
              weight_softmax: bool = True) -> ConvSlot:
        return ConvSlot(conv_class(embed_dim, kernel_size, num_heads, weight_softmax=weight_softmax,
                                   weight_dropout=dropout, causal=causal))
    return build


def _deformable(embed_dim: int, num_heads: int, causal: bool, dropout: float, kernel_size: int = 3) -> DeformSlot:
    """``dropout`` is unused: a deformable convolution has no attention weights."""
    return DeformSlot(DeformConv1d(embed_dim, embed_dim, kernel_size, deform_groups=num_heads, causal=causal))


@dataclass(frozen=True)
class Mechanism:
    """How to build a mechanism, and which slots it can fill."""

    build: Callable[..., nn.Module]
    slots: frozenset[str]


#: A builder per translation token of the catalogue (attnbench.variants: ``generalized`` stands for the factor
#: strings) and ``standard``, the baseline's attention (E1 alone); the slots each fills are the catalogue's.
BUILDERS: dict[str, Callable[..., nn.Module]] = {
    "standard": _standard, "generalized": _generalized, "area": _area,
    "lightweight": _head_shared_conv(LightweightConv1d), "dynamic": _head_shared_conv(DynamicConv1d),
    "deformable": _deformable,
}
MECHANISMS: dict[str, Mechanism] = {
    name: Mechanism(build, (GENERALIZED_ATTENTION if name in ("standard", "generalized") else CATALOGUE[name]).slots)
    for name, build in BUILDERS.items()}


def build_slot(slot: str, cfg: dict, embed_dim: int, num_heads: int, dropout: float) -> nn.Module:
    """The mechanism ``cfg = dict(type=name, **options)`` for ``slot`` (a key of :data:`SLOTS`); ``type='user'``
    is a user's class by its ``import_path`` (:class:`~attnbench.attention.UserSlot`)."""
    options = dict(cfg)
    name = options.pop("type", None)
    if name == "user":
        return UserSlot(slot, embed_dim, num_heads, causal=slot == "dec-self", dropout=dropout, **options)
    if name not in MECHANISMS:
        raise ValueError(f"{slot} slot: unknown mechanism {name!r}; choose one of {sorted(MECHANISMS)}")
    if slot not in MECHANISMS[name].slots:
        allowed = sorted(n for n, m in MECHANISMS.items() if slot in m.slots)
        raise ValueError(f"{slot} slot needs {SLOTS[slot].needs}, which mechanism {name!r} cannot provide; "
                         f"choose one of {allowed}")
    return MECHANISMS[name].build(embed_dim, num_heads, causal=slot == "dec-self", dropout=dropout, **options)


# ----------------------------------------------------------------------------------------------
# Layers
# ----------------------------------------------------------------------------------------------


class Sublayer(nn.Module):
    """Residual connection with layer norm before (pre-norm) or after (post-norm) the function."""

    def __init__(self, embed_dim: int, dropout: float, pre_norm: bool):
        super().__init__()
        self.norm = nn.LayerNorm(embed_dim)
        self.dropout = nn.Dropout(dropout)
        self.pre_norm = pre_norm

    def enter(self, x: torch.Tensor) -> torch.Tensor:
        """The function's input."""
        return self.norm(x) if self.pre_norm else x

    def leave(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The sublayer's output from its input ``x`` and the function's output ``y``."""
        x = x + self.dropout(y)
        return x if self.pre_norm else self.norm(x)

    def forward(self, x: torch.Tensor, function: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        return self.leave(x, function(self.enter(x)))


class FeedForward(nn.Sequential):
    def __init__(self, embed_dim: int, ffn_dim: int, dropout: float):
        super().__init__(nn.Linear(embed_dim, ffn_dim), nn.ReLU(), nn.Dropout(dropout), nn.Linear(ffn_dim, embed_dim))


@dataclass(frozen=True)
class LayerSpec:
    """Sizes shared by all layers."""

    embed_dim: int
    num_heads: int
    ffn_dim: int
    dropout: float
    attention_dropout: float
    pre_norm: bool


class EncoderLayer(nn.Module):
    def __init__(self, spec: LayerSpec, self_attention: dict):
        super().__init__()
        self.self_attn = build_slot("enc-self", self_attention, spec.embed_dim, spec.num_heads, spec.attention_dropout)
        self.self_sub = Sublayer(spec.embed_dim, spec.dropout, spec.pre_norm)
        self.ffn = FeedForward(spec.embed_dim, spec.ffn_dim, spec.dropout)
        self.ffn_sub = Sublayer(spec.embed_dim, spec.dropout, spec.pre_norm)

    def forward(self, x: torch.Tensor, padding_mask: torch.Tensor) -> torch.Tensor:
        x = self.self_sub(x, lambda h: self.self_attn.mix(h, padding_mask, h.shape[1]))
        return self.ffn_sub(x, self.ffn)


class DecoderLayer(nn.Module):
    def __init__(self, spec: LayerSpec, self_attention: dict, cross_attention: dict):
        super().__init__()
        self.self_attn = build_slot("dec-self", self_attention, spec.embed_dim, spec.num_heads, spec.attention_dropout)
        self.self_sub = Sublayer(spec.embed_dim, spec.dropout, spec.pre_norm)
        self.cross_attn = build_slot("enc-dec", cross_attention, spec.embed_dim, spec.num_heads, spec.attention_dropout)
        self.cross_sub = Sublayer(spec.embed_dim, spec.dropout, spec.pre_norm)
        self.ffn = FeedForward(spec.embed_dim, spec.ffn_dim, spec.dropout)
        self.ffn_sub = Sublayer(spec.embed_dim, spec.dropout, spec.pre_norm)

    def forward(self, x: torch.Tensor, memory: torch.Tensor, memory_padding_mask: torch.Tensor,
                cached: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """New steps ``x`` (B, n, C) after the ``t`` cached ones ((B, t, C) inputs of the self-attention
        slot, or None) -> their outputs (B, n, C) and the cache extended to (B, t + n, C)."""
        h = self.self_sub.enter(x)
        states = h if cached is None else torch.cat([cached, h], 1)
        x = self.self_sub.leave(x, self.self_attn.mix(states, None, h.shape[1]))
        offset = states.shape[1] - h.shape[1]
        x = self.cross_sub(x, lambda q: self.cross_attn.attend(q, memory, memory_padding_mask, offset))
        return self.ffn_sub(x, self.ffn), states


# ----------------------------------------------------------------------------------------------
# The model
# ----------------------------------------------------------------------------------------------

DECODE_DEFAULTS = dict(beam_size=4, len_penalty=1.0, max_len_a=1.2, max_len_b=10)
DecoderCache = list[torch.Tensor]  # per decoder layer: (B, t, C) inputs of its self-attention slot


class TransformerNMT(BaseModel):
    """Transformer encoder-decoder with configurable attention slots (defaults: Transformer-base).

    Args:
        vocab_size: size of the joint source/target vocabulary (embeddings tied with the output).
        embed_dim, num_heads, ffn_dim: model width, heads, feed-forward width.
        num_encoder_layers, num_decoder_layers: layer counts.
        dropout: on embeddings, sublayer outputs and the FFN's hidden units.
        attention_dropout: on attention weights (convolution kernel taps).
        pre_norm: layer norm before each sublayer (and at the end) instead of after it.
        label_smoothing: mass spread uniformly over the vocabulary in the training loss.
        encoder_self_attention, decoder_self_attention, cross_attention: ``dict(type=<mechanism>, **options)``
            with a mechanism of :data:`MECHANISMS` allowed in that slot.
        decode_cfg: ``dict(beam_size, len_penalty, max_len_a, max_len_b)`` for ``mode='predict'``
            (``beam_size=1``: greedy).
        pad_id, bos_id, eos_id: special token ids.
        data_preprocessor, init_cfg: as ``mmengine.model.BaseModel``.
    """

    def __init__(
        self,
        vocab_size: int,
        embed_dim: int = 512,
        num_heads: int = 8,
        ffn_dim: int = 2048,
        num_encoder_layers: int = 6,
        num_decoder_layers: int = 6,
        dropout: float = 0.1,
        attention_dropout: float = 0.0,
        pre_norm: bool = False,
        label_smoothing: float = 0.1,
        encoder_self_attention: dict | None = None,
        decoder_self_attention: dict | None = None,
        cross_attention: dict | None = None,
        decode_cfg: dict | None = None,
        pad_id: int = PAD_ID,
        bos_id: int = BOS_ID,
        eos_id: int = EOS_ID,
        data_preprocessor: dict | None = None,
        init_cfg: dict | None = None,
    ):
        super().__init__(data_preprocessor=data_preprocessor, init_cfg=init_cfg)
        if vocab_size <= max(pad_id, bos_id, eos_id):
            raise ValueError(f"vocab_size ({vocab_size}) must exceed the special ids {pad_id, bos_id, eos_id}")
        if num_encoder_layers < 1 or num_decoder_layers < 1:
            raise ValueError(f"need at least one encoder and one decoder layer, got "
                             f"{num_encoder_layers} and {num_decoder_layers}")
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1), got {label_smoothing}")
        self.decode_cfg = {**DECODE_DEFAULTS, **(decode_cfg or {})}
        if set(self.decode_cfg) != set(DECODE_DEFAULTS):
            raise ValueError(f"decode_cfg takes {sorted(DECODE_DEFAULTS)}, got {dict(decode_cfg)}")
        if not isinstance(self.decode_cfg["beam_size"], int) or self.decode_cfg["beam_size"] < 1:
            raise ValueError(f"decode_cfg.beam_size must be a positive integer, got {self.decode_cfg['beam_size']!r}")
        spec = LayerSpec(embed_dim, num_heads, ffn_dim, dropout, attention_dropout, pre_norm)
        standard = dict(type="standard")
        self.vocab_size = vocab_size
        self.embed_dim = embed_dim
        self.label_smoothing = label_smoothing
        self.pad_id, self.bos_id, self.eos_id = pad_id, bos_id, eos_id
        self.embed = nn.Embedding(vocab_size, embed_dim, padding_idx=pad_id)
        self.embed_dropout = nn.Dropout(dropout)
        self.encoder_layers = nn.ModuleList(
            EncoderLayer(spec, encoder_self_attention or standard) for _ in range(num_encoder_layers))
        self.decoder_layers = nn.ModuleList(
            DecoderLayer(spec, decoder_self_attention or standard, cross_attention or standard)
            for _ in range(num_decoder_layers))
        self.encoder_norm = nn.LayerNorm(embed_dim) if pre_norm else nn.Identity()
        self.decoder_norm = nn.LayerNorm(embed_dim) if pre_norm else nn.Identity()
        nn.init.normal_(self.embed.weight, std=embed_dim ** -0.5)
        nn.init.zeros_(self.embed.weight[pad_id])

    # -- network ---------------------------------------------------------------------------------

    def _embed(self, tokens: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """sqrt(C) E[tokens] + sinusoid(offset + position), (B, T) -> (B, T, C)."""
        positions = torch.arange(offset, offset + tokens.shape[1], device=tokens.device, dtype=torch.float32)
        pos = sinusoidal_embedding(positions, self.embed_dim, POSITION_WAVE_LENGTH)
        return self.embed_dropout(self.embed(tokens) * math.sqrt(self.embed_dim) + pos.to(self.embed.weight.dtype))

    def encode(self, src_tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, S) source ids -> memory (B, S, C) and its padding mask (B, S), True at padding."""
        padding_mask = src_tokens.eq(self.pad_id)
        x = self._embed(src_tokens)
        for layer in self.encoder_layers:
            x = layer(x, padding_mask)
        return self.encoder_norm(x), padding_mask

    def decode(self, tokens: torch.Tensor, memory: torch.Tensor, memory_padding_mask: torch.Tensor,
               cache: DecoderCache | None = None) -> tuple[torch.Tensor, DecoderCache]:
        """Logits (B, n, V) for target ids (B, n) following the cached steps (none when ``cache`` is
        None: teacher forcing), and the extended cache."""
        cache = cache or [None] * len(self.decoder_layers)
        offset = 0 if cache[0] is None else cache[0].shape[1]
        x = self._embed(tokens, offset)
        new_cache = []
        for layer, cached in zip(self.decoder_layers, cache):
            x, states = layer(x, memory, memory_padding_mask, cached)
            new_cache.append(states)
        return F.linear(self.decoder_norm(x), self.embed.weight), new_cache

    def forward(self, src_tokens: torch.Tensor, tgt_tokens: torch.Tensor | None = None,
                data_samples: list[dict] | None = None, mode: str = "tensor"):
        """``src_tokens`` (B, S) = source + EOS, ``tgt_tokens`` (B, T) = BOS + target + EOS.

        ``mode='loss'``: ``dict(loss=...)``; ``'predict'``: ``data_samples`` with ``pred_tokens``
        added; ``'tensor'``: teacher-forced logits (B, T - 1, V).
        """
        if mode == "predict":
            hypotheses, _ = self.generate(src_tokens)
            return [dict(sample, pred_tokens=hyp) for sample, hyp in zip(data_samples, hypotheses)]
        if mode not in ("loss", "tensor"):
            raise ValueError(f"mode must be 'loss', 'predict' or 'tensor', got {mode!r}")
        memory, memory_padding_mask = self.encode(src_tokens)
        logits, _ = self.decode(tgt_tokens[:, :-1], memory, memory_padding_mask)
        if mode == "tensor":
            return logits
        loss = F.cross_entropy(logits.flatten(0, 1).float(), tgt_tokens[:, 1:].flatten(),
                               ignore_index=self.pad_id, label_smoothing=self.label_smoothing)
        return dict(loss=loss)

    # -- decoding --------------------------------------------------------------------------------

    def _max_length(self, src_tokens: torch.Tensor) -> int:
        return int(self.decode_cfg["max_len_a"] * src_tokens.shape[1] + self.decode_cfg["max_len_b"])

    def _next_log_probs(self, logits: torch.Tensor, force_eos: bool) -> torch.Tensor:
        """Log-probabilities of the next token (N, V); never PAD or BOS, only EOS when ``force_eos``."""
        log_probs = logits.float().log_softmax(-1)
        banned = torch.ones_like(log_probs, dtype=torch.bool) if force_eos else torch.zeros_like(
            log_probs, dtype=torch.bool)
        banned[:, [self.pad_id, self.bos_id]] = True
        banned[:, self.eos_id] = False
        return log_probs.masked_fill(banned, float("-inf"))

    def _strip(self, tokens: list[int]) -> list[int]:
        return tokens[:tokens.index(self.eos_id)] if self.eos_id in tokens else tokens

    @torch.no_grad()
    def generate(self, src_tokens: torch.Tensor) -> tuple[list[list[int]], torch.Tensor]:
        """Translate with ``decode_cfg``: greedy for ``beam_size=1``, else beam search."""
        if self.decode_cfg["beam_size"] == 1:
            return self.greedy_search(src_tokens)
        return self.beam_search(src_tokens, self.decode_cfg["beam_size"], self.decode_cfg["len_penalty"])

    @torch.no_grad()
    def greedy_search(self, src_tokens: torch.Tensor) -> tuple[list[list[int]], torch.Tensor]:
        """Most probable next token at every step -> token lists (without EOS) and their log-probs (B,)."""
        memory, memory_padding_mask = self.encode(src_tokens)
        batch, max_length = src_tokens.shape[0], self._max_length(src_tokens)
        tokens = src_tokens.new_full((batch, 1), self.bos_id)
        scores = memory.new_zeros(batch, dtype=torch.float32)
        finished = torch.zeros(batch, dtype=torch.bool, device=src_tokens.device)
        cache = None
        for step in range(max_length + 1):
            logits, cache = self.decode(tokens[:, -1:], memory, memory_padding_mask, cache)
            best_score, best = self._next_log_probs(logits[:, -1], step == max_length).max(-1)
            scores += best_score.masked_fill(finished, 0.0)
            tokens = torch.cat([tokens, best.masked_fill(finished, self.pad_id)[:, None]], 1)
            finished |= best.eq(self.eos_id)
            if finished.all():
                break
        return [self._strip(t) for t in tokens[:, 1:].tolist()], scores

    @torch.no_grad()
    def beam_search(self, src_tokens: torch.Tensor, beam_size: int, len_penalty: float = 1.0
                    ) -> tuple[list[list[int]], torch.Tensor]:
        """Beam search -> best finished hypothesis per sentence (without EOS) and its score (B,),
        ``log p / |y|^len_penalty``. Each step keeps the ``beam_size`` best continuations that do not
        end; those ending with EOS among the best ``beam_size`` candidates are finished, and a
        sentence is done when it has ``beam_size`` finished hypotheses."""
        memory, memory_padding_mask = self.encode(src_tokens)
        batch, k, vocab = src_tokens.shape[0], beam_size, self.vocab_size
        memory = memory.repeat_interleave(k, 0)  # (B * K, S, C), beams of a sentence adjacent
        memory_padding_mask = memory_padding_mask.repeat_interleave(k, 0)
        max_length = self._max_length(src_tokens)
        tokens = src_tokens.new_full((batch * k, 1), self.bos_id)
        beam_scores = memory.new_full((batch, k), float("-inf"), dtype=torch.float32)
        beam_scores[:, 0] = 0.0  # the beams start identical: expand only the first
        finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(batch)]
        done = torch.zeros(batch, dtype=torch.bool)
        first_beam = torch.arange(batch, device=tokens.device)[:, None] * k
        cache = None
        for step in range(max_length + 1):
            logits, cache = self.decode(tokens[:, -1:], memory, memory_padding_mask, cache)
            log_probs = self._next_log_probs(logits[:, -1], step == max_length).view(batch, k, vocab)
            candidates = (beam_scores[..., None] + log_probs).view(batch, k * vocab)
            top_scores, top = candidates.topk(2 * k, -1)  # (B, 2K): at least K of them do not end
            source_beam, token = top // vocab, top % vocab
            ends = token.eq(self.eos_id) & top_scores.isfinite()
            for b, j in (ends[:, :k] & ~done[:, None].to(ends.device)).nonzero().tolist():
                hypothesis = tokens[first_beam[b, 0] + source_beam[b, j], 1:].tolist()
                finished[b].append((top_scores[b, j].item() / (step + 1) ** len_penalty, hypothesis))
            done = torch.tensor([len(f) >= k for f in finished])
            if done.all():
                break
            beam_scores, keep = top_scores.masked_fill(ends, float("-inf")).topk(k, -1)  # (B, K)
            rows = (first_beam + source_beam.gather(1, keep)).flatten()
            tokens = torch.cat([tokens[rows], token.gather(1, keep).view(-1, 1)], 1)
            cache = [states[rows] for states in cache]
        best = [max(f) for f in finished]
        return [hyp for _, hyp in best], torch.tensor([score for score, _ in best])

    @torch.no_grad()
    def score(self, src_tokens: torch.Tensor, hypotheses: list[list[int]]) -> torch.Tensor:
        """Teacher-forced ``log p(hypothesis + EOS | source)`` per sentence, (B,)."""
        memory, memory_padding_mask = self.encode(src_tokens)
        targets = [torch.tensor([self.bos_id, *h, self.eos_id], device=src_tokens.device) for h in hypotheses]
        tgt = nn.utils.rnn.pad_sequence(targets, batch_first=True, padding_value=self.pad_id)
        logits, _ = self.decode(tgt[:, :-1], memory, memory_padding_mask)
        log_probs = logits.float().log_softmax(-1).gather(-1, tgt[:, 1:, None])[..., 0]
        return log_probs.masked_fill(tgt[:, 1:].eq(self.pad_id), 0.0).sum(-1)
