"""Train, evaluate and FLOP-count attention variants; record them and plot accuracy vs FLOPs.

Examples:
    python tools/sweep.py --factors 0110                  # 0110 vs the baseline on det and seg (mini)
    python tools/sweep.py --factors 0110,0010,1111 --seeds 3
    python tools/sweep.py --tasks det-flag --factors 1111 --seeds 12-19   # fresh seeds beside the old 0 .. 11
    python tools/sweep.py --factors all --modules deformable,dynamic,area,0010+deformable
    python tools/sweep.py --tasks nmt --slot enc-dec --factors 1111,1000,0111,0010
    python tools/sweep.py --tasks det-near-far,seg-near-far --factors 1111,0010 --seeds 5  # a diagnostic rule
    python tools/sweep.py --tasks nmt --slot enc-self --modules dynamic:kernel=7,0100:range=7 --seeds 3
    python tools/sweep.py --factors all --dry-run         # the plan, configs and FLOPs; no training
    python tools/sweep.py --factors 0110 --preset smoke   # a few iterations per run: checks the set-up
    python tools/sweep.py --list                          # every mechanism token, its family, paper, MACs
    python tools/sweep.py --preset full --launcher slurm --partition gpu --gpus 8 --factors 1111

Each run trains in its own process (log and work dir under RESULTS/runs/<run id>/) and becomes one
row of RESULTS/results.csv; a rerun skips runs already done (--force redoes them), so a killed
sweep resumes where it stopped. Workers import the package and read the configs from a copy taken
when the sweep starts (RESULTS/code/<hash>/), so editing the code during a sweep leaves its runs
alone. Runs log to Weights & Biases, offline unless W&B is configured
(WANDB_MODE, WANDB_API_KEY or `wandb login`); sync offline runs later with `wandb sync`.
The sweep ends with RESULTS/tradeoff.png (tools/plot.py) and a table (tools/compare.py).
"""
import argparse
import sys
import time

from tqdm import tqdm

from attnbench.data.mini_shapes import DEFAULT_RULE, RULES


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--factors", default="", help="comma-separated factor strings E1E2E3E4, or 'all' (15)")
    p.add_argument("--modules", default="", help="other mechanisms (see --list): deformable, dynamic, area, se, "
                   "cbam, ..., combinations such as 0010+deformable; for nmt: dynamic, lightweight, area, deformable; "
                   "any variant with parameters, e.g. 0100:range=7,dynamic:kernel=7 (docs/sweep.md#variants)")
    p.add_argument("--tasks", default="det,seg",
                   help="comma-separated: det, seg, nmt, or a diagnostic task det-RULE, seg-RULE (DeepLabV3), "
                        "fcn-RULE (segmentation with an FCN head) with RULE "
                        f"{', '.join(r for r in RULES if r != DEFAULT_RULE)} (docs/diagnostics.md) (default: det,seg)")
    p.add_argument("--slot", help="nmt attention slot to vary: enc-self, dec-self or enc-dec (default: all three)")
    p.add_argument("--preset", default="mini", help="mini (CPU-sized, the default), full (paper-scale "
                   "configs), smoke (the mini configs for a few iterations: checks a sweep end to end in a minute) "
                   "or long (the mini vision configs trained 4x longer)")
    p.add_argument("--seeds", default="1", help="a count N (seeds 0 .. N-1, default 1) or the seeds as A-B, A,B,C "
                   "or a mix: --seeds 12-19 adds fresh seeds to a store without rerunning or re-listing the old ones")
    p.add_argument("--no-baseline", action="store_true", help="do not add the baseline row")
    p.add_argument("--results", default="results/sweep", help="results directory (default: results/sweep)")
    p.add_argument("--force", action="store_true", help="redo runs already recorded as done")
    p.add_argument("--no-snapshot", action="store_true", help="run the workers from the checkout itself, not from "
                   "the copy of attnbench/ and configs/ taken at the start (RESULTS/code/<hash>/)")
    p.add_argument("--dry-run", action="store_true", help="print the plan, configs and FLOPs; train nothing")
    p.add_argument("--launcher", default="local", help="local, slurm, or submitit-local (testing)")
    p.add_argument("--jobs", type=int, default=1, help="parallel local runs")
    p.add_argument("--threads", type=int, help="CPU threads per run, overriding the config's cpu_threads (the mini "
                   "presets fix 1, so that a run's numbers do not depend on --jobs; another count makes other runs)")
    p.add_argument("--partition", help="slurm partition")
    p.add_argument("--gpus", type=int, default=1, help="GPUs per slurm run")
    p.add_argument("--timeout-min", type=int, default=24 * 60, help="time limit per slurm run")
    p.add_argument("--wandb-project", default="attnbench")
    p.add_argument("--wandb-group", help="W&B group (default: the results directory name)")
    p.add_argument("--no-wandb", action="store_true", help="do not log to W&B")
    p.add_argument("--no-plot", action="store_true", help="skip the trade-off plot at the end")
    p.add_argument("--list", action="store_true", help="list every vision mechanism token (tools/list_modules.py) "
                   "and exit")
    return p.parse_args()


def main() -> int:
    args = parse_args()
    if args.list:
        from attnbench.sweep.catalog import format_mechanism_table, mechanism_table

        print(format_mechanism_table(mechanism_table()))
        return 0
    from attnbench.sweep.launch import SweepRunner, wandb_mode
    from attnbench.sweep.plan import build_plan, parse_factors, parse_seeds
    from attnbench.sweep.store import ResultsStore, ResultsStoreError

    try:
        factors = parse_factors(args.factors) if args.factors else []
        modules = [m.strip() for m in args.modules.split(",") if m.strip()]
        tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
        runs = build_plan(tasks, factors, modules, parse_seeds(args.seeds), args.preset, args.slot, not args.no_baseline,
                          args.threads)
        store = ResultsStore(args.results)
        store.check_writable()
        store.read()  # a foreign or damaged results.csv stops the sweep here, before it could overwrite it
        wandb = None if args.no_wandb else dict(
            project=args.wandb_project, group=args.wandb_group or store.root.name, mode=wandb_mode())
        runner = SweepRunner(store, args.launcher, args.jobs, wandb,
                             dict(partition=args.partition, gpus=args.gpus, timeout_min=args.timeout_min),
                             snapshot=not args.no_snapshot)
    except ResultsStoreError as e:
        print(f"sweep.py: error: {e}", file=sys.stderr)
        return 1
    except ValueError as e:
        print(f"sweep.py: error: {e}", file=sys.stderr)
        return 2

    if args.dry_run:
        from attnbench.sweep.dry_run import print_plan

        print_plan(runs)
        return 0
    done = set() if args.force else store.completed()
    todo = [r for r in runs if r.run_id not in done]
    print(f"{len(runs)} runs planned, {len(runs) - len(todo)} already done, {len(todo)} to run "
          f"-> {store.path}" + (f" (W&B {wandb['mode']}, group {wandb['group']})" if wandb else ""))
    failed = 0
    start = time.time()
    with tqdm(total=len(todo), unit="run", dynamic_ncols=True) as bar:
        def on_start(run):
            bar.set_postfix_str(f"{run.task}/{run.slot + '/' if run.slot else ''}{run.variant}/seed{run.seed}")

        for row in runner.run_all(todo, on_start):
            failed += row["status"] != "ok"
            outcome = f"{row['metric']}={row['value']:.4g}" if row["status"] == "ok" else f"FAILED {row['error']}"
            bar.write(f"{row['task']}/{row['variant']}/seed{row['seed']}: {outcome}")
            bar.update()
    print(f"sweep finished in {time.time() - start:.0f} s: {len(todo) - failed} ok, {failed} failed")
    if not args.no_plot and len(store.read()):
        from attnbench.sweep.report import comparison_table, plot_tradeoffs

        print(comparison_table(store.read(), fmt="markdown"))
        for path in plot_tradeoffs(store.read(), store.root / "tradeoff"):
            print(f"plot: {path}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
