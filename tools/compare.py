"""Table of variants from a results store: mean ± std over seeds, delta vs baseline, FLOPs.

    python tools/compare.py [--results results/sweep] [--format text|markdown|csv]
"""
import argparse

from attnbench.sweep.report import comparison_table
from attnbench.sweep.store import ResultsStore


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results", default="results/sweep")
    p.add_argument("--format", default="text", choices=["text", "markdown", "csv"])
    args = p.parse_args()
    print(comparison_table(ResultsStore(args.results).read(), args.format))


if __name__ == "__main__":
    main()
