"""Demonstration: every generalized-attention factor set on one feature map.

    python tools/demo_attention.py [--size 25 42] [--channels 64]

For each of the 15 factor strings it builds ``attnbench.attention.GeneralizedAttention``, runs it,
checks the output against a float64 evaluation of the same module, and prints its parameters,
analytic multiply-adds (checked against torch.utils.flop_counter) and forward time.
"""
import argparse
import time

import torch

from attnbench.attention import ALL_FACTORS, GeneralizedAttention
from attnbench.flops import count_macs


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--channels", type=int, default=64)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--size", type=int, nargs=2, default=(25, 42), metavar=("H", "W"))
    p.add_argument("--kv-stride", type=int, default=2)
    args = p.parse_args()
    torch.manual_seed(0)
    x = torch.randn(1, args.channels, *args.size)
    print(f"input {tuple(x.shape)}, {args.heads} heads, kv_stride {args.kv_stride}\n")
    print(f"{'factors':8} {'params':>8} {'MMACs':>8} {'counted':>8} {'ms':>7} {'max |fp32 - fp64|':>18}")
    for factors in ALL_FACTORS:
        m = GeneralizedAttention(args.channels, num_heads=args.heads, kv_stride=args.kv_stride,
                                 attention_type=factors)
        with torch.no_grad():
            m.gamma.fill_(1.0)
            t0 = time.perf_counter()
            y = m(x)
            ms = 1000 * (time.perf_counter() - t0)
            err = (y.double() - m.double()(x.double())).abs().max().item()
            m.float()
        params = sum(q.numel() for q in m.parameters())
        print(f"{factors:8} {params:8d} {m.macs(x) / 1e6:8.2f} "
              f"{count_macs(m, x) / 1e6:8.2f} {ms:7.1f} {err:18.2e}")


if __name__ == "__main__":
    main()
