"""Accuracy-versus-FLOPs trade-off plots from a results store (PNG and SVG).

    python tools/plot.py [--results results/sweep] [--out results/sweep/tradeoff] [--no-published]
    python tools/plot.py --results results/sweep --cost attention   # against the attention's MACs (tradeoff_attention)
    python tools/plot.py --results results/claims --cost attention --tasks det,seg --rows study --out OUT
    python tools/plot.py --results results/figure4 --windows   # accuracy and cost against the window size
"""
import argparse
import sys
from pathlib import Path

from attnbench.analysis.plots import ROW_GROUPS, plot_tradeoffs, plot_windows, select_rows
from attnbench.sweep.store import finished_runs, read_store_or_exit, tasks_in


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results", default="results/sweep")
    p.add_argument("--out", help="output path without extension (default: RESULTS/tradeoff)")
    p.add_argument("--no-published", action="store_true", help="omit published reference points")
    p.add_argument("--cost", choices=["model", "attention"], default="model",
                   help="the x axis: the whole model's MACs (default) or the added modules' (the attention's); "
                   "the default output for attention is RESULTS/tradeoff_attention")
    p.add_argument("--windows", action="store_true", help="the study's Figure 4 instead: each windowed mechanism's "
                   "metric and attention MACs against its window size (rows with kernel= or range=; default "
                   "output RESULTS/windows)")
    p.add_argument("--tasks", help="comma-separated tasks to plot (default: all)")
    p.add_argument("--rows", choices=ROW_GROUPS, help="only the study's rows (the factor sets, its other mechanisms "
                   "and their combinations) or only the survey's modules, each with the baseline (default: all)")
    args = p.parse_args(argv)
    results = read_store_or_exit(args.results, "plot.py")
    if args.tasks:
        try:
            results = results[results["task"].isin(tasks_in(results, args.tasks, args.results))]
        except ValueError as error:
            p.error(str(error))
    if args.rows:
        results = select_rows(results, args.rows)
        if (results["variant"] == "baseline").all():
            p.error(f"no {args.rows} rows in {args.results} for tasks {args.tasks or 'any'}")
    if finished_runs(results).empty:
        sys.exit(f"plot.py: error: no successful runs to plot in {args.results} ({len(results)} rows, none 'ok')")
    if args.windows:
        try:
            paths = plot_windows(results, args.out or Path(args.results) / "windows")
        except ValueError as error:
            sys.exit(f"plot.py: error: {error} in {args.results}")
    else:
        stem = "tradeoff" if args.cost == "model" else "tradeoff_attention"
        paths = plot_tradeoffs(results, args.out or Path(args.results) / stem, not args.no_published, args.cost)
    for path in paths:
        print(path)


if __name__ == "__main__":
    main()
