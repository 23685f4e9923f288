"""Where the band-matrix path of dynamic convolution stops beating the unfold path.

    python tools/benchmark_dynamic_conv.py [--lengths 16 64 256 512 1024] [--threads 1]

Prints, per sequence length, the best of 3 forward + backward times of ``DynamicConv1d`` with each
path (B=4, C=512, 8 heads, kernel 7 by default); ``path='auto'`` switches at ``BAND_MAX_LENGTH``.
"""
import argparse
import time

import torch

from attnbench.attention import DynamicConv1d
from attnbench.attention.dynamic_conv import BAND_MAX_LENGTH


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lengths", type=int, nargs="+", default=[16, 64, 256, 512, 1024])
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--channels", type=int, default=512)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--kernel-size", type=int, default=7)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    print(f"B={args.batch} C={args.channels} heads={args.heads} k={args.kernel_size}, fp32 forward+backward, "
          f"{args.threads} thread(s); auto switches to unfold above {BAND_MAX_LENGTH} steps\n")
    print("| length | unfold s | band s | band speed-up |\n|---|---|---|---|")
    for length in args.lengths:
        x = torch.randn(args.batch, length, args.channels, requires_grad=True)
        best = {}
        for path in ("unfold", "band"):
            module = DynamicConv1d(args.channels, args.kernel_size, args.heads, path=path)
            times = []
            for _ in range(3):
                start = time.perf_counter()
                module(x).sum().backward()
                times.append(time.perf_counter() - start)
            best[path] = min(times)
        print(f"| {length} | {best['unfold']:.4f} | {best['band']:.4f} | {best['unfold'] / best['band']:.1f}x |")


if __name__ == "__main__":
    main()
