"""Accuracy-versus-FLOPs trade-off plots from a results store (PNG and SVG).

    python tools/plot.py [--results results/sweep] [--out results/sweep/tradeoff] [--no-published]
"""
import argparse

from attnbench.sweep.report import plot_tradeoffs
from attnbench.sweep.store import ResultsStore


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results", default="results/sweep")
    p.add_argument("--out", help="output path without extension (default: RESULTS/tradeoff)")
    p.add_argument("--no-published", action="store_true", help="omit published reference points")
    args = p.parse_args()
    store = ResultsStore(args.results)
    for path in plot_tradeoffs(store.read(), args.out or store.root / "tradeoff", not args.no_published):
        print(path)


if __name__ == "__main__":
    main()
