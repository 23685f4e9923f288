"""Table of variants from a results store: mean ± std over seeds, delta vs baseline, FLOPs.

    python tools/compare.py [--results results/sweep] [--format text|markdown|csv]
    python tools/compare.py --effects       # main effect of each term E1..E4 (paired factor sets)
    python tools/compare.py --tasks nmt --slot enc-dec
"""
import argparse
from collections.abc import Sequence

from attnbench.sweep.report import comparison_table, factor_effects
from attnbench.sweep.store import ResultsStore


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results", default="results/sweep")
    p.add_argument("--format", default="text", choices=["text", "markdown", "csv"])
    p.add_argument("--effects", action="store_true",
                   help="the main effect of each term E1..E4 instead: the metric's change when the term is added "
                   "to a factor set, over the pairs of sets that differ in it only")
    p.add_argument("--tasks", help="comma-separated tasks to show (default: all)")
    p.add_argument("--slot", help="nmt slot to show: enc-self, dec-self or enc-dec (and the shared baseline)")
    args = p.parse_args(argv)
    results = ResultsStore(args.results).read()
    if args.tasks:
        results = results[results["task"].isin(args.tasks.split(","))]
    if args.slot:
        if not (results["slot"] == args.slot).any():
            p.error(f"no results in {args.results} for slot {args.slot!r} (slots there: "
                    f"{sorted(results['slot'].dropna().unique())})")
        results = results[(results["slot"] == args.slot) | results["slot"].isna()]
    if results.empty:
        p.error(f"no results in {args.results} for tasks {args.tasks or 'any'} and slot {args.slot or 'any'}")
    if not args.effects:
        print(comparison_table(results, args.format))
        return
    effects = factor_effects(results)
    if args.format == "csv":
        print(effects.to_csv(index=False))
    elif args.format == "markdown":
        print(effects.to_markdown(index=False, floatfmt=".4f"))
    else:
        print(effects.to_string(index=False))


if __name__ == "__main__":
    main()
