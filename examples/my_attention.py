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
