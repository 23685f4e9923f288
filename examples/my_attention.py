"""A mechanism of your own, benchmarked against the paper's: a spatial gate, y = x + gamma * x * sigmoid(s(x)),
where s scores each position from its channels (1x1 conv, ReLU, 1x1 conv to one map) and gamma starts at 0.

    python tools/sweep.py --modules my_attention.SpatialGate --factors 0010 --preset smoke   # from this folder
"""
import torch
from torch import nn


class SpatialGate(nn.Module):
    """(N, C, H, W) -> (N, C, H, W): each position scaled by a learnt score of its own channels."""

    def __init__(self, in_channels: int, reduction: int = 4):
        super().__init__()
        hidden = max(1, in_channels // reduction)
        self.score = nn.Sequential(nn.Conv2d(in_channels, hidden, 1), nn.ReLU(), nn.Conv2d(hidden, 1, 1))
        self.gamma = nn.Parameter(torch.zeros(1))  # starts as the identity, as the paper's blocks do

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.gamma * x * torch.sigmoid(self.score(x))


class LocalMix(nn.Module):
    """A translation slot of your own (enc-self, dec-self): each step mixes the last ``window`` steps with learnt
    weights per channel, a causal depthwise convolution, y_t = sum_j w_j * x_(t-j); padded steps read as zeros.

        python tools/sweep.py --tasks nmt --slot enc-self --modules my_attention.LocalMix:window=5 --preset smoke
    """

    def __init__(self, embed_dim: int, num_heads: int, causal: bool, dropout: float, window: int = 3):
        super().__init__()
        self.window = window
        self.weight = nn.Parameter(torch.full((embed_dim, 1, window), 1.0 / window))

    def mix(self, x: torch.Tensor, key_padding_mask: torch.Tensor | None, last: int) -> torch.Tensor:
        if key_padding_mask is not None:
            x = x.masked_fill(key_padding_mask[..., None], 0.0)
        padded = nn.functional.pad(x.transpose(1, 2), (self.window - 1, 0))  # (B, C, window - 1 + T)
        y = nn.functional.conv1d(padded, self.weight, groups=x.shape[-1]).transpose(1, 2)
        return y[:, x.shape[1] - last:]
