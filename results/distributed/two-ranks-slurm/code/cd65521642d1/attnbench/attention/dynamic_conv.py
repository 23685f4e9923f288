"""Lightweight and dynamic convolution over sequences (1D), for translation models.

Wu, Fan, Baevski, Dauphin, Auli, "Pay Less Attention with Lightweight and Dynamic Convolutions",
ICLR 2019, https://arxiv.org/abs/1901.10430 (Eq. 2-4). Reference code consulted: fairseq
``fairseq/modules/lightweight_convolution.py`` and ``dynamic_convolution.py``.

Channels are split into ``H`` heads of ``R = C / H`` consecutive channels (channel ``c`` belongs to
head ``h(c) = c // R``); every head has one kernel of ``k`` taps shared by its channels:

    y[t, c] = sum_{j=0}^{k-1} W[t, h(c), j] * x[t + j - P, c]        (x = 0 outside [0, T))

    LightweightConv1d:  W[t, h, :] = softmax(w_h)                     (one learned kernel per head)
    DynamicConv1d:      W[t, h, :] = softmax((W_Q x_t)_{h, :})        (predicted from step t)

with the softmax over the taps (optional), DropConnect on ``W`` in training, and left padding
``P = k // 2`` (centred, right padding ``k - 1 - P``) or ``P = k - 1`` (causal: no output reads a
later input). Input and output projections (the GLU of the paper's block) belong to the model.

Two computations of the same sum, chosen by :func:`resolve_path`:
  * ``'unfold'``: gather the ``k``-window of every step, ``(B, T, H, R, k)``, and contract it with the
    kernel: ``B T C k`` multiply-adds, memory linear in ``T``.
  * ``'band'``: write the kernels into a banded ``(B, H, T, T)`` matrix and multiply it with the
    input: ``B T^2 C`` multiply-adds, memory quadratic in ``T``, but one dense batched matmul, which
    fairseq found faster than the gather for short sequences.
  ``'auto'`` takes the band up to ``BAND_MAX_LENGTH = 512`` steps and unfolds beyond, the switch
  fairseq's dynamic convolution uses to keep the ``T x T`` matrices of long sequences out of memory.
"""
from __future__ import annotations

from abc import ABC, abstractmethod

import torch
import torch.nn as nn
import torch.nn.functional as F

from .checks import check_at_least, check_multiple

PATHS = ("auto", "unfold", "band")
BAND_MAX_LENGTH = 512


def _check_path(path: str) -> None:
    if path not in PATHS:
        raise ValueError(f"path must be one of {PATHS}, got {path!r}")


def resolve_path(path: str, length: int) -> str:
    """``'unfold'`` or ``'band'``: ``path`` itself, or for ``'auto'`` the band up to 512 steps."""
    _check_path(path)
    if path == "auto":
        return "band" if length <= BAND_MAX_LENGTH else "unfold"
    return path


def _unfold_conv(x: torch.Tensor, weight: torch.Tensor, padding_l: int) -> torch.Tensor:
    """(B, T, H, R) input, (B or 1, T or 1, H, k) kernels -> (B, T, H, R) via k-windows."""
    k = weight.shape[-1]
    padded = F.pad(x, (0, 0, 0, 0, padding_l, k - 1 - padding_l))  # (B, T + k - 1, H, R)
    windows = padded.unfold(1, k, 1)  # (B, T, H, R, k); tap j of step t reads input step t + j - P
    return torch.einsum("bthrk,bthk->bthr", windows, weight)


def _band_conv(x: torch.Tensor, weight: torch.Tensor, padding_l: int) -> torch.Tensor:
    """(B, T, H, R) input, (B or 1, T or 1, H, k) kernels -> (B, T, H, R) via a banded matmul."""
    t, k = x.shape[1], weight.shape[-1]
    weight = weight.expand(-1, t, -1, -1).transpose(1, 2)  # (B or 1, H, T, k)
    # Skew (T, k + T) rows into (T, T + k - 1) ones: skewed[t, t + j] = W[t, j], zero elsewhere.
    # Column t + j is step t + j - P of the input, so keeping columns P .. P + T - 1 (the input
    # steps, without the padding) leaves band[t, s] = W[t, s - t + P].
    skewed = F.pad(weight, (0, t)).flatten(-2)[..., :-t].unflatten(-1, (t, t + k - 1))
    band = skewed[..., padding_l:padding_l + t]  # (B or 1, H, T, T)
    return (band @ x.transpose(1, 2)).transpose(1, 2)


def dynamic_conv1d(x: torch.Tensor, weight: torch.Tensor, padding_l: int, path: str = "auto") -> torch.Tensor:
    """Head-shared convolution with per-step kernels, ``y[t, c] = sum_j W[t, h(c), j] x[t + j - P, c]``.

    Args:
        x: ``(B, T, C)`` input.
        weight: ``(B or 1, T or 1, H, k)`` kernels (already normalised), ``C`` divisible by ``H``;
            size-1 batch or time dimensions are broadcast (a lightweight kernel is ``(1, 1, H, k)``).
        padding_l: left padding ``P`` in ``[0, k - 1]``; the right padding is ``k - 1 - P``.
        path: ``'unfold'``, ``'band'`` or ``'auto'`` (see :func:`resolve_path`).

    Returns:
        ``(B, T, C)``.
    """
    if x.dim() != 3:
        raise ValueError(f"x must be (B, T, C), got {tuple(x.shape)}")
    b, t, c = x.shape
    broadcastable = weight.dim() == 4 and weight.shape[0] in (1, b) and weight.shape[1] in (1, t)
    if not broadcastable or weight.shape[2] < 1 or c % weight.shape[2]:
        raise ValueError(
            f"weight must be (B or 1, T or 1, H, k) with B={b}, T={t} and H dividing C={c}, "
            f"got {tuple(weight.shape)}")
    heads, k = weight.shape[2:]
    if not 0 <= padding_l <= k - 1:
        raise ValueError(f"padding_l must be in [0, k - 1] = [0, {k - 1}], got {padding_l}")
    conv = _band_conv if resolve_path(path, t) == "band" else _unfold_conv
    return conv(x.reshape(b, t, heads, c // heads), weight, padding_l).reshape(b, t, c)


def dynamic_conv1d_macs(batch: int, length: int, channels: int, kernel_size: int, path: str = "auto") -> int:
    """Multiply-adds of :func:`dynamic_conv1d`: ``B T C k`` unfolded, ``B T^2 C`` banded."""
    taps = length if resolve_path(path, length) == "band" else kernel_size
    return batch * length * channels * taps


class _HeadSharedConv1d(nn.Module, ABC):
    """What lightweight and dynamic convolution share: checks, padding, softmax, DropConnect, bias."""

    def __init__(
        self,
        embed_dim: int,
        kernel_size: int,
        num_heads: int,
        weight_softmax: bool = True,
        weight_dropout: float = 0.0,
        causal: bool = False,
        bias: bool = False,
        path: str = "auto",
    ):
        super().__init__()
        check_at_least(1, kernel_size=kernel_size)
        check_multiple("embed_dim", embed_dim, "num_heads", num_heads)
        if not 0.0 <= weight_dropout < 1.0:
            raise ValueError(f"weight_dropout must be in [0, 1), got {weight_dropout}")
        _check_path(path)
        self.embed_dim = embed_dim
        self.kernel_size = kernel_size
        self.num_heads = num_heads
        self.weight_softmax = weight_softmax
        self.weight_dropout = weight_dropout
        self.causal = causal
        self.path = path
        self.bias = nn.Parameter(torch.empty(embed_dim)) if bias else None
        self.make_kernel_parameters()
        self.reset_parameters()

    @abstractmethod
    def make_kernel_parameters(self) -> None:
        """Create the parameters the kernels come from."""

    @abstractmethod
    def reset_parameters(self) -> None:
        """Initialise the kernel parameters; zero bias."""

    @property
    def padding_l(self) -> int:
        """Left padding: ``k - 1`` when causal, else ``k // 2`` (centred)."""
        return self.kernel_size - 1 if self.causal else self.kernel_size // 2

    def extra_repr(self) -> str:
        return (f"{self.embed_dim}, kernel_size={self.kernel_size}, num_heads={self.num_heads}, "
                f"weight_softmax={self.weight_softmax}, weight_dropout={self.weight_dropout}, "
                f"causal={self.causal}, bias={self.bias is not None}, path='{self.path}'")

    @abstractmethod
    def kernel_logits(self, x: torch.Tensor) -> torch.Tensor:
        """Unnormalised kernels ``(B or 1, T or 1, H, k)`` for the (masked) input ``x``."""

    @abstractmethod
    def kernel_macs(self, batch: int, length: int) -> int:
        """Multiply-adds spent computing the kernels."""

    def _masked_input(self, x: torch.Tensor, key_padding_mask: torch.Tensor | None) -> torch.Tensor:
        """``x`` (B, T, C) checked, with the steps where ``key_padding_mask`` (B, T) is True set to zero."""
        if x.dim() != 3 or x.shape[-1] != self.embed_dim:
            raise ValueError(f"x must be (B, T, {self.embed_dim}), got {tuple(x.shape)}")
        b, t, _ = x.shape
        if key_padding_mask is not None:
            if key_padding_mask.dtype != torch.bool or key_padding_mask.shape != (b, t):
                raise ValueError(
                    f"key_padding_mask must be a bool tensor of shape (B, T) = {(b, t)}, "
                    f"got {key_padding_mask.dtype} {tuple(key_padding_mask.shape)}")
            x = x.masked_fill(key_padding_mask[..., None], 0.0)
        return x

    def _normalised_kernels(self, x: torch.Tensor) -> torch.Tensor:
        """Kernels ``(B or 1, T or 1, H, k)`` of the masked input: softmax over the taps if ``weight_softmax``."""
        weight = self.kernel_logits(x)
        return weight.softmax(-1) if self.weight_softmax else weight

    def kernel_weights(self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        """The kernels forward applies (before DropConnect; softmax-normalised if ``weight_softmax``),
        ``W[b, t, h, j]``, ``(B, T, H, k)``: tap ``j`` of step ``t`` weighs input step ``t + j - P``
        (``P = padding_l``; zero outside ``[0, T)``). Arguments as :meth:`forward`."""
        x = self._masked_input(x, key_padding_mask)
        return self._normalised_kernels(x).expand(*x.shape[:2], -1, -1)

    def forward(self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Convolve ``x`` (B, T, C); steps where ``key_padding_mask`` (B, T) is True read as zeros."""
        x = self._masked_input(x, key_padding_mask)
        b, t, _ = x.shape
        weight = self._normalised_kernels(x)
        if self.training and self.weight_dropout > 0:
            # DropConnect: an independent mask for every step and sample, as in fairseq.
            weight = F.dropout(weight.expand(b, t, -1, -1), self.weight_dropout, training=True)
        out = dynamic_conv1d(x, weight, self.padding_l, self.path)
        return out if self.bias is None else out + self.bias

    def macs(self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None) -> int:
        """Multiply-adds of ``forward(x, key_padding_mask)`` on the path it would take (the mask
        does not change them)."""
        batch, length, _ = x.shape
        conv = dynamic_conv1d_macs(batch, length, self.embed_dim, self.kernel_size, self.path)
        return self.kernel_macs(batch, length) + conv


class LightweightConv1d(_HeadSharedConv1d):
    """One learned kernel of ``kernel_size`` taps per head, shared over time and the head's channels.

    Args:
        embed_dim: model width ``C``; divisible by ``num_heads``.
        kernel_size: taps ``k``.
        num_heads: heads ``H`` (kernels).
        weight_softmax: normalise each kernel with a softmax over its taps.
        weight_dropout: DropConnect rate on the kernel taps during training.
        causal: pad on the left only (decoders).
        bias: add a learned per-channel bias to the output.
        path: ``'auto'``, ``'unfold'`` or ``'band'`` (see :func:`resolve_path`).
    """

    def make_kernel_parameters(self) -> None:
        self.weight = nn.Parameter(torch.empty(self.num_heads, self.kernel_size))

    def reset_parameters(self) -> None:
        """Xavier-uniform kernels with fairseq's ``(H, 1, k)`` fans; zero bias."""
        with torch.no_grad():
            nn.init.xavier_uniform_(self.weight.view(self.num_heads, 1, self.kernel_size))
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def kernel_logits(self, x: torch.Tensor) -> torch.Tensor:
        return self.weight[None, None]  # (1, 1, H, k)

    def kernel_macs(self, batch: int, length: int) -> int:
        return 0


class DynamicConv1d(_HeadSharedConv1d):
    """Kernels predicted at every step from that step's input, ``W_Q x_t`` (C -> H k, no bias).

    Args: as :class:`LightweightConv1d`.
    """

    def make_kernel_parameters(self) -> None:
        self.kernel_proj = nn.Linear(self.embed_dim, self.num_heads * self.kernel_size, bias=False)

    def reset_parameters(self) -> None:
        """Xavier-uniform kernel predictor (as fairseq); zero bias."""
        nn.init.xavier_uniform_(self.kernel_proj.weight)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def kernel_logits(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        return self.kernel_proj(x).view(b, t, self.num_heads, self.kernel_size)  # (B, T, H, k)

    def kernel_macs(self, batch: int, length: int) -> int:
        return batch * length * self.embed_dim * self.num_heads * self.kernel_size
