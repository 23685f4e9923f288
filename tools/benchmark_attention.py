"""Speed and memory of attnbench's GeneralizedAttention against mmcv's, for all 15 factor sets.

    python tools/benchmark_attention.py                  # detection-scale default, prints a table
    python tools/benchmark_attention.py --size 25 42 --factors 1111,0010
    python tools/benchmark_attention.py --device cuda --amp fp16 --implementation chunked

Each (implementation, factors) pair runs in a fresh process: same weights (attnbench loads the
mmcv module's state_dict), same input, forward + backward in fp32 or under fp16/bf16 autocast
(``--amp``); ``--implementation`` picks attnbench's path (``auto``: fused on CUDA, chunked
elsewhere). "added MB" is the growth of the process's peak resident memory (on CUDA: of the peak
allocated device memory) during the first forward + backward; time is the median of the
following repeats. With ``--processes K`` each pair runs in K fresh processes and both columns are
the medians over them: a process's resident memory moves by a few MB from run to run, which at
``0010``'s size (one context vector per head) is as much as the difference measured. mmcv cannot
run E2 without E4 (0100, 0110, 1100, 1110) on non-square maps; those rows are compared with mmcv's 1111.
"""
from __future__ import annotations

import argparse
import json
import platform
import resource
import statistics
import subprocess
import sys
import time

from attnbench.attention.factors import ALL_FACTORS  # imports no torch


def worker(impl: str, factors: str, args) -> dict:
    import torch
    from mmcv.cnn.bricks import GeneralizedAttention as MMCVAttention

    from attnbench.attention import GeneralizedAttention

    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    kwargs = dict(num_heads=args.heads, kv_stride=args.kv_stride, attention_type=factors)
    module = MMCVAttention(args.channels, **kwargs)
    if impl == "attnbench":
        ours = GeneralizedAttention(args.channels, implementation=args.implementation, **kwargs)
        ours.load_state_dict(module.state_dict(), strict=True)
        module = ours
    with torch.no_grad():
        module.gamma.fill_(1.0)
    device = torch.device(args.device)
    module.to(device)
    x = torch.randn(args.batch, args.channels, *args.size, device=device, requires_grad=True)

    amp = {"fp32": None, "fp16": torch.float16, "bf16": torch.bfloat16}[args.amp]

    def step():
        module.zero_grad(set_to_none=True)
        x.grad = None
        with torch.autocast(device.type, dtype=amp, enabled=amp is not None):
            out = module(x)
        out.float().square().mean().backward()
        if device.type == "cuda":
            torch.cuda.synchronize()

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    else:
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        step()
    except Exception as e:  # mmcv's E2-without-E4 branch raises on non-square maps
        return {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:80]}"}
    if device.type == "cuda":
        added_mb = (torch.cuda.max_memory_allocated() - base) / 2**20
    else:
        added_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return {"seconds": statistics.median(times), "added_mb": added_mb}


def run(impl: str, factors: str, argv: list[str], processes: int = 1) -> dict:
    """One (implementation, factors) pair in ``processes`` fresh processes: the medians of their results."""
    cmd = [sys.executable, __file__, "--worker", impl, "--factors", factors, *argv]
    results = []
    for _ in range(processes):
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode:
            return {"error": proc.stderr.strip().splitlines()[-1][:80]}
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        if "error" in result:
            return result
        results.append(result)
    return {key: statistics.median(r[key] for r in results) for key in ("seconds", "added_mb")}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--factors", default="all", help="comma-separated factor strings, or 'all'")
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--channels", type=int, default=256)
    p.add_argument("--size", type=int, nargs=2, default=(50, 84), metavar=("H", "W"))
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--kv-stride", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--processes", type=int, default=1,
                   help="fresh processes per pair; the table gives the medians over them (default 1)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--device", default="cpu")
    p.add_argument("--amp", choices=["fp32", "fp16", "bf16"], default="fp32",
                   help="fp32, or forward under autocast to fp16 / bf16")
    p.add_argument("--implementation", choices=["auto", "fused", "chunked"], default="auto",
                   help="attnbench's implementation (auto: fused on CUDA, chunked elsewhere)")
    p.add_argument("--worker", choices=["mmcv", "attnbench"], help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.processes < 1 or args.repeats < 1:
        p.error("--processes and --repeats must be at least 1")
    if args.worker:
        print(json.dumps(worker(args.worker, args.factors, args)))
        return
    factors = ALL_FACTORS if args.factors == "all" else args.factors.split(",")
    argv = ["--batch", str(args.batch), "--channels", str(args.channels), "--size", *map(str, args.size),
            "--heads", str(args.heads), "--kv-stride", str(args.kv_stride), "--repeats", str(args.repeats),
            "--threads", str(args.threads), "--device", args.device,
            "--amp", args.amp, "--implementation", args.implementation]
    if args.device.startswith("cuda"):
        import torch

        where = torch.cuda.get_device_name(args.device)
    else:
        where = f"{platform.processor() or platform.machine()}, {args.threads} threads"
    print(f"N={args.batch} C={args.channels} {args.size[0]}x{args.size[1]} heads={args.heads} "
          f"kv_stride={args.kv_stride}, {args.amp} forward+backward, attnbench {args.implementation}, "
          f"{args.device} ({where}), medians over {args.processes} process(es) of {args.repeats} repeats\n")
    header = ("| factors | mmcv s | mmcv added MB | attnbench s | attnbench added MB "
              "| speed-up | memory ratio |")
    print(header)
    print("|" + "---|" * 7)
    mmcv_1111 = None
    for f in sorted(factors, key=lambda s: s != "1111"):
        ref = run("mmcv", f, argv, args.processes)
        ours = run("attnbench", f, argv, args.processes)
        if f == "1111":
            mmcv_1111 = ref
        base, note = ref, ""
        if "error" in ref and mmcv_1111 and "error" not in mmcv_1111:
            base, note = mmcv_1111, " (vs mmcv 1111)"
        if "error" in ours:
            print(f"| {f} | {ref.get('seconds', 'fails')} | | attnbench failed: {ours['error']} | | | |")
            continue
        ref_s = f"{ref['seconds']:.3f}" if "error" not in ref else "fails"
        ref_m = f"{ref['added_mb']:.0f}" if "error" not in ref else "-"
        speed = f"{base['seconds'] / ours['seconds']:.1f}x{note}" if "error" not in base else "-"
        mem = f"{base['added_mb'] / max(ours['added_mb'], 1):.1f}x{note}" if "error" not in base else "-"
        print(f"| {f} | {ref_s} | {ref_m} | {ours['seconds']:.3f} | {ours['added_mb']:.0f} | {speed} | {mem} |",
              flush=True)


if __name__ == "__main__":
    main()
