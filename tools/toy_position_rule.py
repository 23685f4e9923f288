"""The `flag-side` rule on a toy map, learnt by one generalized attention block and a 1x1 read-out alone.

    python tools/toy_position_rule.py                          # 0001 at the mini presets' lr and 10x it
    python tools/toy_position_rule.py --factors 0001,0010,1111 --lr 0.02,0.2 --steps 400
    python tools/toy_position_rule.py --factors 0001,0100 --background 1   # a constant channel, as after a ReLU

Can a term learn the rule at all, when nothing but the block stands between the flag and the
loss? Each sample is a 16x16 map of C = 16 channels of N(0, 0.1^2) noise with a 3x3 flag at a random
place (channel 0: +1 yellow, -1 cyan; channel 1: 1 on the flag); every query column wholly left or
right of the flag gets the target *agree* when the flag lies on the side its colour names (yellow:
left), as in attnbench.data.mini_shapes. ``--background b`` adds b to channel 2 everywhere: a feature
every pixel shares, as the positive mean of a ReLU network's features (without one a bias-free
query, E2's, is noise away from the flag). One block (gate 1, kv_stride 1, 4 heads) and a 1x1
convolution to a logit are trained with SGD (momentum 0.9, batch 16) on binary cross-entropy over
those queries; the table gives the accuracy on 1,024 fresh samples after training. Chance is 0.5.
The mini presets train with SGD at lr 0.02 (detection), so a term that needs 0.2 here learns too
slowly there.
"""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from attnbench.attention import GeneralizedAttention

SIZE, CHANNELS, FLAG = 16, 16, 3


def samples(n: int, generator: torch.Generator, background: float = 0.0
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Maps (n, C, S, S), targets and the mask of the queries that are wholly left or right of the flag (n, 1, S, S)."""
    x = 0.1 * torch.randn(n, CHANNELS, SIZE, SIZE, generator=generator)
    x[:, 2] += background
    left_edge = torch.randint(0, SIZE - FLAG + 1, (n,), generator=generator)
    top = torch.randint(0, SIZE - FLAG + 1, (n,), generator=generator)
    colour = torch.randint(0, 2, (n,), generator=generator) * 2 - 1  # +1 yellow, -1 cyan
    for i in range(n):
        x[i, 0, top[i]:top[i] + FLAG, left_edge[i]:left_edge[i] + FLAG] = colour[i]
        x[i, 1, top[i]:top[i] + FLAG, left_edge[i]:left_edge[i] + FLAG] = 1.0
    columns = torch.arange(SIZE)[None, :]
    flag_left = columns >= left_edge[:, None] + FLAG   # the flag wholly to the query's left
    flag_right = columns < left_edge[:, None]
    agree = torch.where(colour[:, None] > 0, flag_left, flag_right)
    shape = (n, 1, SIZE, SIZE)
    return x, agree[:, None, None, :].expand(shape).float(), (flag_left | flag_right)[:, None, None, :].expand(shape)


def train(factors: str, lr: float, steps: int, seed: int = 0, background: float = 0.0) -> float:
    """Accuracy on fresh samples after ``steps`` SGD steps of one block of ``factors`` and a 1x1 read-out."""
    torch.manual_seed(seed)
    block = GeneralizedAttention(CHANNELS, num_heads=4, attention_type=factors, kv_stride=1, gamma_init=1.0)
    readout = torch.nn.Conv2d(CHANNELS, 1, 1)
    optimizer = torch.optim.SGD([*block.parameters(), *readout.parameters()], lr=lr, momentum=0.9)
    data = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x, target, mask = samples(16, data, background)
        loss = F.binary_cross_entropy_with_logits(readout(block(x)), target, reduction="none")[mask].mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        x, target, mask = samples(1024, torch.Generator().manual_seed(10_000 + seed), background)
        return float(((readout(block(x)) > 0).float() == target)[mask].float().mean())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--factors", default="0001", help="comma-separated factor strings (default 0001)")
    p.add_argument("--lr", default="0.02,0.2", help="comma-separated learning rates (default 0.02,0.2)")
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--seeds", type=int, default=1, help="seeds per cell; the table gives each accuracy")
    p.add_argument("--background", type=float, default=0.0,
                   help="constant added to channel 2 everywhere: a feature all pixels share (default 0)")
    args = p.parse_args()
    torch.set_num_threads(1)
    rates = [float(v) for v in args.lr.split(",")]
    shared = f", background {args.background:g} in channel 2" if args.background else ""
    print(f"flag-side on a {SIZE}x{SIZE} toy map{shared}, {args.steps} SGD steps, accuracy on fresh samples "
          "(chance 0.5)\n")
    print("| factors | " + " | ".join(f"lr {r:g}" for r in rates) + " |")
    print("|---|" + "---|" * len(rates))
    for factors in args.factors.split(","):
        cells = [", ".join(f"{train(factors, r, args.steps, s, args.background):.3f}" for s in range(args.seeds))
                 for r in rates]
        print(f"| {factors} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
