"""Cost card: parameters, MACs (analytic and counted), forward + backward time and peak memory of one module
of every mechanism, at the ResNet-50 stage shapes it runs at, and how its time and memory grow with the map.

    python tools/cost_card.py --shapes mini                        # -> results/cost-card/mini-cpu/
    python tools/cost_card.py --shapes full --device cuda          # conv3..conv5 of an 800x1333 image, on a GPU
    python tools/cost_card.py --mechanisms 1111,0010,nonlocal --shapes mini --sizes 8,16,24,32 --out /tmp/card

Rows: the reference 3x3 conv, the 15 factor sets of the generalized attention and every mechanism token
(python tools/list_modules.py). Shapes (--shapes): "full", conv3 to conv5 of Faster R-CNN R-50-FPN at
800x1333 and of DeepLabV3 R-50-D8 at 512x1024, 2 images; "mini", the same stages of the mini presets' width-8
ResNet-50 on 128x128 images, 8 images; each with square maps of growing side (--sizes) at conv4's width for
the growth exponents. Writes card.csv (one row a cell), growth.csv (the exponents), card.md and
scaling.png/.svg (time against tokens, log-log) to --out; progress on stderr. A cell whose estimated memory
passes --max-gib or whose extrapolated time passes --max-seconds is marked, not run. What each column
measures: docs/mechanisms.md, "Cost card".
"""
import argparse
import shlex
import sys
from pathlib import Path

from attnbench.cost_card import PRESETS, Options, card_rows, run_card, write_card
from attnbench.user_modules import is_user_token


def _sides(text: str) -> tuple[int, ...]:
    try:
        sides = tuple(sorted({int(v) for v in text.split(",") if v.strip()}))
    except ValueError:
        sides = ()
    if len(sides) < 4 or min(sides) < 2:
        raise argparse.ArgumentTypeError(f"--sizes takes at least four distinct sides >= 2, e.g. 8,16,32,64; "
                                         f"got {text!r}")
    return sides


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--shapes", default="both", choices=["full", "mini", "both"])
    p.add_argument("--mechanisms", default="", help="comma-separated rows (default: all): a factor string, a "
                   "mechanism token or conv3x3")
    p.add_argument("--repeats", type=int, default=5, help="timed passes per cell, after a warm-up (default 5)")
    p.add_argument("--sizes", type=_sides, default=None,
                   help="sides of the square maps of the growth fit, at least four (default: full 16,32,64,128; "
                   "mini 8,12,16,24,32)")
    p.add_argument("--max-gib", type=float, default=None, help="memory cap of a cell, estimated before it runs "
                   "(default: 8 on the CPU, 80%% of the GPU's memory on CUDA)")
    p.add_argument("--max-seconds", type=float, default=60.0, help="time cap of one forward + backward pass, "
                   "extrapolated from the row's smaller cells (default 60)")
    p.add_argument("--threads", type=int, default=1, help="torch's CPU threads (default 1, as the sweep's runs)")
    p.add_argument("--out", default=None, help="output folder (default: results/cost-card/SHAPES-DEVICE, where the "
                   "committed cards are)")
    args = p.parse_args(argv)
    if args.repeats < 1 or args.threads < 1:
        p.error("--repeats and --threads must be at least 1")
    tokens = tuple(t.strip() for t in args.mechanisms.split(",") if t.strip()) or card_rows()
    unknown = [t for t in tokens if t not in card_rows() and not is_user_token(t)]
    if unknown:
        p.error(f"unknown --mechanisms {unknown}; choose from {', '.join(card_rows())}, or your module's import "
                "path MODULE.CLASS")
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            p.error("--device cuda: no CUDA GPU here (torch.cuda.is_available() is False)")
        max_gib = args.max_gib or 0.8 * torch.cuda.get_device_properties(0).total_memory / 2 ** 30
    else:
        max_gib = args.max_gib or 8.0
    presets = tuple(PRESETS) if args.shapes == "both" else (args.shapes,)
    options = Options(args.device, args.repeats, max_gib, args.max_seconds, args.threads)
    out = Path(args.out or f"results/cost-card/{args.shapes}-{args.device}")
    out.mkdir(parents=True, exist_ok=True)
    try:
        card = run_card(tokens, presets, options, args.sizes,
                        partial=lambda cells: cells.to_csv(out / "card.csv", index=False))  # rows so far, if cut short
    except ValueError as error:  # a user's module that does not import or breaks the plugin contract
        p.error(str(error))
    command = shlex.join(["python", "tools/cost_card.py", *(sys.argv[1:] if argv is None else argv)])
    for path in write_card(card, out, command):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
