"""Area attention from summed-area tables and pooled maxima against explicit enumeration of the areas.

    python tools/benchmark_area_attention.py
    python tools/benchmark_area_attention.py --batch 4 --heads 8 --head-dim 64 --repeats 5

The enumeration baseline is what a straightforward implementation does: for every area size and
every position it slices the area's items and reduces them (vectorised over batch, heads and
channels only), then stacks the area keys and values. Both paths then run the same attention
(``F.scaled_dot_product_attention``), so "total" differs only by how the areas are built.
Rows: a sequence of 512 items with areas up to 5 items, and a 32 x 32 map with areas up to 3 x 3,
each with mean keys and summed values, and with max keys and max values. "areas" times building the
area keys and values; "total" adds the attention itself. fp32 forward, median of the repeats; one
thread by default, as timings with more threads than free cores are mostly waiting.
"""
from __future__ import annotations

import argparse
import platform
import statistics
import time

import torch
import torch.nn.functional as F

from attnbench.attention.area_attention import Areas, area_attention, count_areas

CASES = [  # name, memory height, memory width, max area height, max area width
    ("1D n=512, width <= 5", 1, 512, 1, 5),
    ("2D 32x32, <= 3x3", 32, 32, 3, 3),
]


def enumerated_keys_and_values(k, v, memory_height, max_area_height, max_area_width, key_mode, value_mode):
    """Area keys and values by slicing and reducing every area separately, (B, heads, A, d)."""
    reduce = {"mean": lambda x: x.mean(2), "sum": lambda x: x.sum(2), "max": lambda x: x.amax(2)}
    grid_k, grid_v = (t.unflatten(2, (memory_height, -1)) for t in (k, v))  # (B, heads, H, W, d)
    height, width = grid_k.shape[2:4]
    keys, values = [], []
    for h in range(1, min(max_area_height, height) + 1):
        for w in range(1, min(max_area_width, width) + 1):
            for top in range(height - h + 1):
                for left in range(width - w + 1):
                    keys.append(reduce[key_mode](grid_k[:, :, top:top + h, left:left + w].flatten(2, 3)))
                    values.append(reduce[value_mode](grid_v[:, :, top:top + h, left:left + w].flatten(2, 3)))
    return torch.stack(keys, 2), torch.stack(values, 2)


def enumerated_area_attention(q, k, v, memory_height, max_area_height, max_area_width, key_mode, value_mode):
    keys, values = enumerated_keys_and_values(k, v, memory_height, max_area_height, max_area_width, key_mode,
                                              value_mode)
    return F.scaled_dot_product_attention(q, keys, values)


def summed_area_keys_and_values(k, v, memory_height, max_area_height, max_area_width, key_mode, value_mode):
    """The same from one summed-area table (sum, mean) or from pooled maxima (max)."""
    areas = Areas.enumerate(memory_height, k.shape[2] // memory_height, max_area_height, max_area_width, k.device)
    reduce = {"mean": areas.mean, "sum": areas.sum, "max": areas.max}
    return reduce[key_mode](k), reduce[value_mode](v)


def summed_area_attention(q, k, v, memory_height, max_area_height, max_area_width, key_mode, value_mode):
    return area_attention(q, k, v, max_area_width, max_area_height, memory_height, key_mode, value_mode)


def median_seconds(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--head-dim", type=int, default=32)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    print(f"B={args.batch} heads={args.heads} d={args.head_dim}, fp32 forward, cpu "
          f"({platform.processor() or platform.machine()}, {args.threads} threads)\n")
    print("| memory | key / value | areas | enumerated areas s | summed-area areas s | speed-up "
          "| enumerated total s | summed-area total s | speed-up | max abs diff |")
    print("|" + "---|" * 10)
    for name, height, width, max_height, max_width in CASES:
        q, k, v = (torch.randn(args.batch, args.heads, height * width, args.head_dim) for _ in range(3))
        for key_mode, value_mode in (("mean", "sum"), ("max", "max")):
            area_args = (k, v, height, max_height, max_width, key_mode, value_mode)
            attention_args = (q, *area_args)
            with torch.no_grad():
                slow_areas = median_seconds(lambda: enumerated_keys_and_values(*area_args), args.repeats)
                fast_areas = median_seconds(lambda: summed_area_keys_and_values(*area_args), args.repeats)
                slow_total = median_seconds(lambda: enumerated_area_attention(*attention_args), args.repeats)
                fast_total = median_seconds(lambda: summed_area_attention(*attention_args), args.repeats)
                diff = (enumerated_area_attention(*attention_args)
                        - summed_area_attention(*attention_args)).abs().max().item()
            print(f"| {name} | {key_mode} / {value_mode} | {count_areas(width, max_width, height, max_height)} "
                  f"| {slow_areas:.4f} | {fast_areas:.4f} | {slow_areas / fast_areas:.0f}x "
                  f"| {slow_total:.4f} | {fast_total:.4f} | {slow_total / fast_total:.1f}x | {diff:.1e} |",
                  flush=True)


if __name__ == "__main__":
    main()
