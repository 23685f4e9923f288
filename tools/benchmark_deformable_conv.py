"""Deformable convolution on the CPU: torchvision's ``deform_conv2d`` kernel against the gathered columns.

    python tools/benchmark_deformable_conv.py [--threads 1] [--modulated] [--repeats 3]

Prints, per shape, the best of ``--repeats`` forward + backward times of the convolution over the
sampled locations (offset branch excluded: both paths share it) with each path, at offsets of about
a pixel. ``DeformConv2d`` and ``ModulatedDeformConv2d`` take the gathered path on the CPU
(``_conv_over_gathered_columns``: bilinear gather, then one matmul) and torchvision's kernel elsewhere.
The default shapes: the mini segmentor's deformable 3x3 convs (DeepLabV3, ResNet-50 of width 8,
8 crops of 128x128: conv3's stride-2 first block, then conv3, conv4, conv5 at 16x16; the mini
detector's conv3 has conv3's shape) and a larger map (2 images, 64 channels, 64x64).
"""
import argparse
import time

import torch
from torchvision.ops import deform_conv2d

from attnbench.attention import DeformConv2d, ModulatedDeformConv2d

# (label, N, C, H, W, stride, dilation): input shapes of 3x3 convs with C in and out channels
SHAPES = (
    ("seg mini conv3, first block (stride 2)", 8, 16, 32, 32, 2, 1),
    ("seg mini conv3", 8, 16, 16, 16, 1, 1),
    ("seg mini conv4 (dilation 2)", 8, 32, 16, 16, 1, 2),
    ("seg mini conv5 (dilation 4)", 8, 64, 16, 16, 1, 4),
    ("2 x 64 x 64x64", 2, 64, 64, 64, 1, 1),
)


def best_time(step, repeats: int) -> float:
    step()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--modulated", action="store_true", help="v2 (with the mask) instead of v1")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cls = ModulatedDeformConv2d if args.modulated else DeformConv2d
    print(f"{cls.__name__} 3x3, fp32 forward + backward of the conv over sampled locations, best of "
          f"{args.repeats}, {args.threads} thread(s)\n")
    print("| shape | N x C x H x W | torchvision kernel s | gathered s | speed-up |\n|---|---|---|---|---|")
    for label, n, channels, height, width, stride, dilation in SHAPES:
        m = cls(channels, channels, 3, stride=stride, padding=dilation, dilation=dilation)
        x = torch.randn(n, channels, height, width, requires_grad=True)
        offset, mask = m._offset_and_mask(x)
        offset = (torch.randn_like(offset) * 0.7).requires_grad_()  # about a pixel, as after training
        mask = None if mask is None else torch.rand_like(mask).requires_grad_()

        def kernel():
            deform_conv2d(x, offset, m.weight, None, m.stride, m.padding, m.dilation, mask).sum().backward()

        def gathered():
            m._conv_over_gathered_columns(x, offset, m.weight, None, mask).sum().backward()

        seconds = {name: best_time(step, args.repeats) for name, step in (("kernel", kernel), ("gathered", gathered))}
        print(f"| {label} | {n} x {channels} x {height}x{width} | {seconds['kernel']:.4f} | "
              f"{seconds['gathered']:.4f} | {seconds['kernel'] / seconds['gathered']:.1f}x |", flush=True)


if __name__ == "__main__":
    main()
