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
    python tools/sweep.py --preset full --launcher slurm --partition gpu --gpus 8 --factors 1111   # 8 ranks a run
    python tools/sweep.py --preset smoke --procs-per-run 2 --factors 0010 --tasks det,nmt    # 2 gloo ranks a run
    python tools/sweep.py --launcher slurm --no-wait --slurm-opt account=lab --qos normal ...   # queue and return
    python tools/sweep.py --study list                    # the CPU-scale study's parts (attnbench.analysis.studies)
    python tools/sweep.py --study status                  # each part: runs planned, done, left, hours left
    python tools/sweep.py --study status:fcn-flag-confirm --modules 1111:stages=2-5   # a confirmation, with its row
    python tools/sweep.py --study l10n-claims             # run one part; it resumes where it stopped

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


def parse_key_values(items: list[str], flag: str) -> list[tuple[str, str]]:
    """``KEY=VALUE`` strings -> pairs; ValueError naming ``flag`` otherwise."""
    pairs = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"{flag} takes KEY=VALUE, got {item!r}")
        pairs.append((key, value))
    return pairs


def parse_cfg_options(items: list[str]) -> dict:
    """``--cfg-options`` as mmengine reads them (``a.b=1``, ``x=[1,2]``, ``s=text``) -> overrides."""
    from mmengine.config import DictAction

    return {key: DictAction._parse_iterable(value) for key, value in parse_key_values(items, "--cfg-options")}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                allow_abbrev=False)  # main() finds --study in argv by its full name
    p.add_argument("--factors", default="", help="comma-separated factor strings E1E2E3E4, or 'all' (15)")
    p.add_argument("--modules", default="", help="other mechanisms (see --list): deformable, dynamic, area, se, "
                   "cbam, ..., combinations such as 0010+deformable; for nmt: dynamic, lightweight, area, deformable; "
                   "any variant with parameters, e.g. 0100:range=7,dynamic:kernel=7 (docs/sweep.md#variants)")
    p.add_argument("--tasks",
                   help="comma-separated: det, seg, nmt, or a diagnostic task det-RULE, seg-RULE (DeepLabV3), "
                        "fcn-RULE (segmentation with an FCN head) with RULE "
                        f"{', '.join(r for r in RULES if r != DEFAULT_RULE)} (docs/diagnostics.md), nmt-l10n "
                        "(default: det,seg; with --config: none but those)")
    p.add_argument("--slot", help="nmt attention slot to vary: enc-self, dec-self or enc-dec (default: all three)")
    p.add_argument("--preset", default="mini", help="mini (CPU-sized, the default), full (paper-scale "
                   "configs), small (nmt-l10n with a model that translates: 20 minutes a run on one thread, tested "
                   "on the held-out packages too), smoke (the mini configs for a few iterations: checks a sweep end "
                   "to end in a minute) or long (the mini vision configs trained 4x longer)")
    p.add_argument("--seeds", default="1", help="a count N (seeds 0 .. N-1, default 1) or the seeds as A-B, A,B,C "
                   "or a mix: --seeds 12-19 adds fresh seeds to a store without rerunning or re-listing the old ones")
    p.add_argument("--no-baseline", action="store_true", help="do not add the baseline row")
    p.add_argument("--results", default="results/sweep", help="results directory (default: results/sweep)")
    p.add_argument("--force", action="store_true", help="redo runs already recorded as done, from scratch (their "
                   "run folders, checkpoints included, are removed first)")
    p.add_argument("--no-snapshot", action="store_true", help="run the workers from the checkout itself, not from "
                   "the copy of attnbench/ and configs/ taken at the start (RESULTS/code/<hash>/)")
    p.add_argument("--dry-run", action="store_true", help="print the plan, configs and FLOPs; train nothing")
    p.add_argument("--launcher", default="local", help="local, slurm, or submitit-local (testing)")
    p.add_argument("--jobs", type=int, default=1, help="parallel local runs")
    p.add_argument("--threads", type=int, help="CPU threads per run, overriding the config's cpu_threads (the mini "
                   "presets fix 1, so that a run's numbers do not depend on --jobs; another count makes other runs)")
    p.add_argument("--partition", help="slurm partition")
    p.add_argument("--procs-per-run", type=int, help="processes each run trains on (torchrun's ranks locally, a "
                   "Slurm job's tasks): the total batch is that many times the config's, the learning rate scaled by "
                   "mmengine's auto_scale_lr (docs/sweep.md, 'Running at scale'); gloo on CPUs (default 1)")
    p.add_argument("--gpus", type=int, default=0, help="GPUs per run, one rank each (sets --procs-per-run); with "
                   "--launcher slurm they are requested from Slurm, locally each parallel job gets its own")
    p.add_argument("--config", action="append", default=[], metavar="FILE",
                   help="your own mmdet or mmseg config as a task named after the file (a ResNet-style backbone "
                   "with Bottleneck blocks): the variants go into its backbone, FLOPs at its test-time scale "
                   "(docs/openmmlab.md, 'Your own config'); repeat for more")
    p.add_argument("--data-root", action="append", default=[], metavar="TASK=PATH",
                   help="the folder a task's datasets read, e.g. det=/data/coco (repeat for more tasks); the data "
                   "is checked before anything runs, --dry-run included (docs/openmmlab.md, 'Data sets')")
    p.add_argument("--cfg-options", nargs="+", default=[], metavar="KEY=VALUE",
                   help="override config keys of every run (mmengine's --cfg-options syntax), after the task's own")
    p.add_argument("--timeout-min", type=int, default=24 * 60, help="time limit per slurm run")
    p.add_argument("--cpus-per-task", type=int, help="Slurm CPUs per rank (default 1)")
    p.add_argument("--mem", help="Slurm memory per node, e.g. 64G")
    p.add_argument("--account", help="Slurm account")
    p.add_argument("--qos", help="Slurm quality of service")
    p.add_argument("--array-parallelism", type=int, help="most jobs of the sweep's Slurm job array running at once")
    p.add_argument("--slurm-opt", action="append", default=[], metavar="KEY=VALUE",
                   help="any other sbatch option, e.g. --slurm-opt constraint=a100 (repeat for more)")
    p.add_argument("--no-wait", action="store_true", help="with --launcher slurm: submit and return; each job "
                   "records its own row, which a later sweep.py or compare.py on the same store reads")
    p.add_argument("--wandb-mode", choices=["online", "offline", "disabled"],
                   help="W&B mode of the runs, on whatever machine they train (default: online where this machine "
                   "has W&B credentials, else offline)")
    p.add_argument("--wandb-project", default="attnbench")
    p.add_argument("--wandb-group", help="W&B group (default: the results directory name)")
    p.add_argument("--no-wandb", action="store_true", help="do not log to W&B")
    p.add_argument("--no-plot", action="store_true", help="skip the trade-off plot at the end")
    p.add_argument("--blind", action="store_true",
                   help="print each finished run's status, not its metric: a registered comparison's values wait "
                   "for its one look (the study's parts run so)")
    p.add_argument("--list", action="store_true", help="list every vision mechanism token (tools/list_modules.py) "
                   "and exit")
    p.add_argument("--study", metavar="PARTS", help="run parts of the CPU-scale study (attnbench.analysis.studies), "
                   "comma-separated, each resuming where it stopped; 'list' describes them, 'status' (or "
                   "status:PARTS) counts the runs each has done and left. The other flags given override each "
                   "part's own (--seeds, --jobs, --results, --dry-run, ...)")
    return p.parse_args(argv)


def plan(args: argparse.Namespace) -> list:
    """The runs of a sweep's arguments (``attnbench.sweep.plan.build_plan``); ValueError for what cannot run."""
    from attnbench.sweep.plan import build_plan, parse_factors, parse_seeds

    factors = parse_factors(args.factors) if args.factors else []
    modules = [m.strip() for m in args.modules.split(",") if m.strip()]
    tasks = [t.strip() for t in (args.tasks if args.tasks is not None else "" if args.config else "det,seg")
             .split(",") if t.strip()]
    procs = args.procs_per_run if args.procs_per_run is not None else args.gpus or 1  # build_plan refuses 0
    if args.gpus and args.launcher == "local" and not args.dry_run:
        import torch

        if not torch.cuda.is_available():
            raise ValueError(f"--gpus {args.gpus}: this machine has no CUDA GPU; --procs-per-run "
                             f"{args.gpus} trains each run on that many CPU processes instead")
    if args.gpus and args.procs_per_run and args.gpus != args.procs_per_run:
        raise ValueError(f"--gpus {args.gpus} means {args.gpus} ranks a run; --procs-per-run says {args.procs_per_run}")
    return build_plan(tasks, factors, modules, parse_seeds(args.seeds), args.preset, args.slot, not args.no_baseline,
                      args.threads, parse_cfg_options(args.cfg_options), procs,
                      dict(parse_key_values(args.data_root, "--data-root")), args.config)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.study:
        at = next(i for i, flag in enumerate(argv) if flag == "--study" or flag.startswith("--study="))
        from attnbench.commands.study import run_study

        return run_study(args.study, argv[:at] + argv[at + (1 if "=" in argv[at] else 2):])
    if args.list:
        from attnbench.sweep.catalog import format_mechanism_table, mechanism_table

        print(format_mechanism_table(mechanism_table()))
        return 0
    from attnbench.sweep.launch import SweepRunner, wandb_mode
    from attnbench.sweep.plan import check_data
    from attnbench.sweep.store import ResultsStore, ResultsStoreError

    try:
        runs = plan(args)
        try:
            check_data(runs)
        except ValueError as e:
            if not args.dry_run:
                raise
            print(f"sweep.py: warning: {e} (a sweep without --dry-run stops here)", file=sys.stderr)
        store = ResultsStore(args.results)
        store.check_writable()
        store.read()  # a foreign or damaged results.csv stops the sweep here, before it could overwrite it
        wandb = None if args.no_wandb else dict(
            project=args.wandb_project, group=args.wandb_group or store.root.name, mode=args.wandb_mode or wandb_mode())
        slurm = dict(partition=args.partition, gpus=args.gpus, timeout_min=args.timeout_min,
                     cpus_per_task=args.cpus_per_task, mem=args.mem, account=args.account, qos=args.qos,
                     array_parallelism=args.array_parallelism, extra=dict(parse_key_values(args.slurm_opt, "--slurm-opt")))
        runner = SweepRunner(store, args.launcher, args.jobs, wandb, slurm, snapshot=not args.no_snapshot,
                             wait=not args.no_wait)
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
        def label(task: str, slot, variant: str, seed: int) -> str:  # the store reads no slot as NaN
            return f"{task}/{slot + '/' if isinstance(slot, str) and slot else ''}{variant}/seed{seed}"

        def on_start(run):
            bar.set_postfix_str(label(run.task, run.slot, run.variant, run.seed))

        for row in runner.run_all(todo, on_start, fresh=args.force):
            failed += row["status"] != "ok"
            outcome = (f"FAILED {row['error']}" if row["status"] != "ok" else "ok" if args.blind
                       else f"{row['metric']}={row['value']:.4g}")
            bar.write(f"{label(row['task'], row.get('slot'), row['variant'], row['seed'])}: {outcome}")
            bar.update()
    if args.no_wait:  # queued, not done: each job records its own row when it ends
        jobs = sorted({*runner.submitted.values(), *runner.queued.values()})
        print(f"submitted {len(runner.submitted)} runs in {time.time() - start:.0f} s"
              + (f", {len(runner.queued)} already queued by an earlier sweep" if runner.queued else "")
              + f"; none finished yet: each job records its row in {store.path} when it ends. Logs: "
              f"{store.root / 'submitit'}; their state: squeue -j {','.join(jobs) or '(none)'}")
        return 0
    print(f"sweep finished in {time.time() - start:.0f} s: {len(todo) - failed} ok, {failed} failed")
    if not args.no_plot and len(store.read()):
        from attnbench.analysis.plots import plot_tradeoffs
        from attnbench.analysis.summary import comparison_table

        print(comparison_table(store.read(), fmt="markdown"))
        for path in plot_tradeoffs(store.read(), store.root / "tradeoff"):
            print(f"plot: {path}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
