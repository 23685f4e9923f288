"""Every mechanism the benchmark can place in a vision backbone: token, placement, family, paper,
parameters and MACs of one module at a reference shape.

    python tools/list_modules.py                  # at conv4 of Faster R-CNN R-50-FPN, 800x1333 input
    python tools/list_modules.py --shape 1,512,25,42 --format csv

Tokens are what ``tools/sweep.py --factors/--modules`` accept (``python tools/sweep.py --list`` prints
the same table).
"""
import argparse

from attnbench.sweep.catalog import REFERENCE_SHAPE, format_mechanism_table, mechanism_table


def parse_shape(text: str) -> tuple[int, int, int, int]:
    try:
        shape = tuple(int(v) for v in text.split(","))
    except ValueError:
        shape = ()
    if len(shape) != 4 or min(shape) < 1:
        raise argparse.ArgumentTypeError(f"--shape must be four positive integers N,C,H,W, got {text!r}")
    return shape


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shape", type=parse_shape, default=REFERENCE_SHAPE, help="input N,C,H,W (default: %(default)s)")
    p.add_argument("--format", default="text", choices=["text", "csv"])
    args = p.parse_args()
    table = mechanism_table(args.shape)
    print(table.to_csv(index=False) if args.format == "csv" else format_mechanism_table(table, args.shape), end="\n")


if __name__ == "__main__":
    main()
