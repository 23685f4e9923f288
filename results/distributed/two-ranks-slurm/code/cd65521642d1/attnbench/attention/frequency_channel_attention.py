"""Multi-spectral channel attention: channel gates from 2D DCT components instead of the mean.

Qin, Zhang, Wu, Li, "FcaNet: Frequency Channel Attention Networks", ICCV 2021,
https://arxiv.org/abs/2012.11879 (Sec. 3: the 2D DCT and multi-spectral channel attention);
reference code consulted: the authors' https://github.com/cfzd/FcaNet (``model/layer.py``,
``MultiSpectralAttentionLayer``), whose frequency tables, scaling, pooling and fcs this module follows.

With ``D = dct_size`` and the orthonormal 1D DCT-II basis

    b_u(t) = cos(pi u (t + 1/2) / D) / sqrt(D),  times sqrt(2) for u > 0

the channels are split into one group per selected frequency ``(u_k, v_k)`` and

    x'  = adaptive_avgpool_{D x D}(x)           only when (H, W) != (D, D), as the official code
    f_c = sum_{i,j} x'_{c,i,j} b_{u_k}(i) b_{v_k}(j)     c in group k
    y   = x * sigmoid(W2 relu(W1 f))            W1: C -> max(C // r, 1), W2 -> C, no biases

Frequencies: ``frequency_selection = 'top' | 'low' | 'bot'`` + ``1, 2, 4, 8, 16, 32`` picks the first
``n`` entries of the official tables (the paper's per-frequency ImageNet ranking, low frequencies
first, and the worst-ranked first), defined on a 7x7 grid; on a ``D x D`` grid
(``D`` a multiple of 7) they are scaled by ``D // 7``, as in the official code. ``(0, 0)`` is the
DC component: ``f_c = D * mean(x'_c)``, so ``'top1'`` pools like SE's global average pooling,
up to that scale.

Channel groups: with ``F`` frequencies the official code requires ``F | C``. Here the first
``C mod F`` frequencies get ``C // F + 1`` channels and the others ``C // F``, contiguous and in table
order (the official split when ``F | C``); when ``C < F`` only the first ``C`` frequencies are used,
one channel each.

The DCT filter is a fixed, non-persistent buffer (``persistent=False``: it is rebuilt from the
arguments and not stored in checkpoints). The weighted sum is an einsum (a batched matmul), so
``count_macs`` and :meth:`FrequencyChannelAttention.macs` include it: ``N C D^2`` multiply-adds.

Not residual: the block gates its input.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .checks import check_at_least, check_feature_map
from .init import kaiming_init_

#: The official (u, v) tables on a 7x7 grid, u along the height and v along the width, best first.
FREQUENCY_TABLES: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {
    "top": ((0, 0, 6, 0, 0, 1, 1, 4, 5, 1, 3, 0, 0, 0, 3, 2, 4, 6, 3, 5, 5, 2, 6, 5, 5, 3, 3, 4, 2, 2, 6, 1),
            (0, 1, 0, 5, 2, 0, 2, 0, 0, 6, 0, 4, 6, 3, 5, 2, 6, 3, 3, 3, 5, 1, 1, 2, 4, 2, 1, 1, 3, 0, 5, 3)),
    "low": ((0, 0, 1, 1, 0, 2, 2, 1, 2, 0, 3, 4, 0, 1, 3, 0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5, 6, 1, 2, 3, 4),
            (0, 1, 0, 1, 2, 0, 1, 2, 2, 3, 0, 0, 4, 3, 1, 5, 4, 3, 2, 1, 0, 6, 5, 4, 3, 2, 1, 0, 6, 5, 4, 3)),
    "bot": ((6, 1, 3, 3, 2, 4, 1, 2, 4, 4, 5, 1, 4, 6, 2, 5, 6, 1, 6, 2, 2, 4, 3, 3, 5, 5, 6, 2, 5, 5, 3, 6),
            (6, 4, 4, 6, 6, 3, 1, 4, 4, 5, 6, 5, 2, 2, 5, 1, 4, 3, 5, 0, 3, 1, 1, 2, 4, 2, 1, 1, 5, 3, 3, 3)),
}
FREQUENCY_COUNTS = (1, 2, 4, 8, 16, 32)


def selected_frequencies(selection: str, dct_size: int = 7) -> list[tuple[int, int]]:
    """The ``(u, v)`` pairs of ``'top16'`` etc. on a ``dct_size`` grid (7x7 values times ``dct_size // 7``)."""
    table, count = selection[:3], selection[3:]
    if table not in FREQUENCY_TABLES or not count.isdigit() or int(count) not in FREQUENCY_COUNTS:
        raise ValueError(f"frequency_selection must be one of {sorted(FREQUENCY_TABLES)} followed by one "
                         f"of {FREQUENCY_COUNTS}, e.g. 'top16'; got {selection!r}")
    scale = dct_size // 7
    us, vs = FREQUENCY_TABLES[table]
    return [(u * scale, v * scale) for u, v in zip(us[:int(count)], vs[:int(count)])]


def group_sizes(channels: int, num_frequencies: int) -> list[int]:
    """Channels per frequency: ``C // F``, one more for the first ``C mod F`` (0 past the ``C``-th)."""
    base, extra = divmod(channels, num_frequencies)
    return [base + (k < extra) for k in range(num_frequencies)]


def dct_filters(channels: int, frequencies: list[tuple[int, int]], size: int) -> torch.Tensor:
    """``(C, size, size)``: channel ``c`` holds ``b_u(i) b_v(j)`` for its group's ``(u, v)``."""
    t = torch.arange(size, dtype=torch.float64) + 0.5

    def basis(u: int) -> torch.Tensor:  # (size,)
        return torch.cos(math.pi * u * t / size) / math.sqrt(size) * (math.sqrt(2) if u else 1.0)

    per_frequency = [torch.outer(basis(u), basis(v)) for u, v in frequencies]
    sizes = group_sizes(channels, len(frequencies))
    return torch.cat([f.expand(n, size, size) for f, n in zip(per_frequency, sizes)]).float()


class FrequencyChannelAttention(nn.Module):
    """FcaNet multi-spectral channel attention block for ``(N, C, H, W)`` feature maps.

    Args:
        in_channels: channels ``C`` of the input.
        reduction: ratio ``r`` of the bottleneck; hidden width ``max(C // r, 1)``.
        frequency_selection: ``'top' | 'low' | 'bot'`` followed by the number of frequencies
            (1, 2, 4, 8, 16 or 32), as in the official code.
        dct_size: side ``D`` of the DCT grid (a multiple of 7); inputs of another size are
            adaptively average-pooled to ``D x D`` first.
    """

    _abbr_ = "fca_block"

    def __init__(self, in_channels: int, reduction: int = 16, frequency_selection: str = "top16",
                 dct_size: int = 7):
        super().__init__()
        check_at_least(1, in_channels=in_channels, reduction=reduction)
        if not isinstance(dct_size, int) or dct_size < 7 or dct_size % 7:
            raise ValueError(f"dct_size must be a positive multiple of 7 (the frequencies live on a 7x7 "
                             f"grid), got {dct_size!r}")
        self.frequencies = selected_frequencies(frequency_selection, dct_size)
        self.in_channels = in_channels
        self.reduction = reduction
        self.frequency_selection = frequency_selection
        self.dct_size = dct_size
        self.hidden_channels = max(in_channels // reduction, 1)
        self.register_buffer("dct_filter", dct_filters(in_channels, self.frequencies, dct_size),
                             persistent=False)  # (C, D, D)
        self.fc1 = nn.Linear(in_channels, self.hidden_channels, bias=False)
        self.fc2 = nn.Linear(self.hidden_channels, in_channels, bias=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Kaiming-normal (fan_in) weights (the DCT filter is fixed)."""
        kaiming_init_(self)

    def extra_repr(self) -> str:
        return (f"{self.in_channels}, reduction={self.reduction}, "
                f"frequency_selection={self.frequency_selection!r}, dct_size={self.dct_size}")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_feature_map(x, self.in_channels)
        d = self.dct_size
        pooled = x if x.shape[2:] == (d, d) else F.adaptive_avg_pool2d(x, d)  # (N, C, D, D)
        spectrum = torch.einsum("nchw,chw->nc", pooled, self.dct_filter)  # (N, C)
        gate = torch.sigmoid(self.fc2(F.relu(self.fc1(spectrum))))  # (N, C)
        return x * gate[:, :, None, None]

    def macs(self, x: torch.Tensor) -> int:
        """Multiply-adds of one forward pass on ``(N, C, H, W)``: the DCT weighted sum (``C D^2`` per
        sample) and the two fcs (the adaptive pooling is not counted)."""
        n, c, _, _ = x.shape
        return n * c * (self.dct_size ** 2 + 2 * self.hidden_channels)
