"""How far the attention of a store's vision runs left its start: the final |gamma| of every gated block
and the mean length of the deformable convolutions' offsets.

    python tools/gates.py --results results/flags [--runs] [--tasks det-flag] [--format text|markdown]
    python tools/gates.py --results results/claims --tasks fcn-flag --moved-by-loss 0.01
    python tools/gates.py --results results/protocol,results/claims --tasks fcn-flag --start results/flag-start
    python tools/gates.py --decay-only configs/segmentation/deeplabv3_r50w8-d8-attn1111_mini-shapes-128x128.py
    python tools/gates.py --decay-only configs/detection/faster-rcnn_r50w8-attn1111_fpn_mini-shapes.py --iters-per-epoch 50

Gated blocks add ``gamma * branch(x)`` to their input with ``gamma`` at 0 at init (mmcv's, unless the
variant sets ``gate``), so a gate that stays near 0 means the block barely took part in the run;
deformable convolutions start with zero offsets. Each run's store row records both since they were
added (``gate_max``, ``offset_mean_px``: attnbench.mm.hooks.OpeningHook), and later how far the loss,
not weight decay, moved the gates (``gate_loss_max``); for rows from before the first two the gates
are read from the run's last checkpoint under RESULTS/runs/<run id>/ (runs with neither are skipped
and counted). Per variant: the runs read, the mean of the largest |gamma| of each run and the
smallest and largest of those, the mean and largest ``gate_loss_max`` where recorded, how many runs'
loss opened the gate it moved most (``gate_loss_opened`` > 0: held it further open than weight decay
alone) out of those that record it, and the mean offset length in pixels; ``--runs`` lists every run
(with ``learnt`` on a diagnostic rule).
``--moved-by-loss T`` asks of the diagnostic runs whether a run learnt its rule exactly when the loss
moved its gates by T or more (``gate_loss_max >= T``): per variant, the runs in each of the four cells
and how many agree. ``--start STORE`` asks whether a diagnostic run's start foretells that it learnt its
rule: STORE holds one-iteration runs (``--cfg-options train_cfg.max_iters=1``) of the same task, preset,
variant and seed as runs of RESULTS, which records whether each learnt it; per variant and start column
(``loss_first``: the loss of the initial weights on the first batch; ``mass_context``: the attention mass
on the deciding context after that one step) the mean and range of the runs that learnt the rule and of
those that did not, the exact two-sided Mann-Whitney p and Holm's over the columns (``--runs``: every
run). ``--decay-only CONFIG`` prints where weight decay alone takes a gate under CONFIG's optimizer and
learning-rate schedule (its gradient always 0): the value a gate ends at when the loss never moves it
(``--iters-per-epoch`` for a config that trains by epoch: its training images over the batch size).
"""
import argparse
from pathlib import Path

import pandas as pd

from attnbench.analysis.gates import (decay_only_gate, moved_against_learnt, opened_count, opening, run_gates,
                                start_against_learnt)
from attnbench.sweep.store import read_store_or_exit, tasks_in


def main(argv: list[str] | None = None) -> None:
    try:
        report(argv)
    except ValueError as error:
        raise SystemExit(f"gates.py: {error}") from None


def report(argv: list[str] | None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results", default="results/sweep",
                   help="results folder, or several comma-separated (default: results/sweep)")
    p.add_argument("--runs", action="store_true", help="one line per run instead of per variant")
    p.add_argument("--tasks", help="only these tasks (comma-separated, e.g. det-flag,fcn-flag)")
    p.add_argument("--moved-by-loss", type=float, metavar="T",
                   help="per variant of the diagnostic runs: learnt or not against gate_loss_max >= T or not")
    p.add_argument("--start", metavar="STORE",
                   help="one-iteration runs of RESULTS' diagnostic runs: does their start foretell a rule learnt?")
    p.add_argument("--format", choices=("text", "markdown"), default="text")
    p.add_argument("--decay-only", metavar="CONFIG|TASK",
                   help="print where weight decay alone takes a gate started at 1 under CONFIG's schedule; or "
                        "a sweep task's run, with --preset and --variant (its gate's start and lr multiplier)")
    p.add_argument("--preset", default="mini", help="with --decay-only TASK: the run's preset (default: mini)")
    p.add_argument("--variant", default="1111", help="with --decay-only TASK: the run's variant (default: 1111)")
    p.add_argument("--iters-per-epoch", type=int, metavar="N",
                   help="with --decay-only, for a config that trains by epoch: its iterations per epoch")
    args = p.parse_args(argv)
    if args.iters_per_epoch is not None and not args.decay_only:
        p.error("--iters-per-epoch goes with --decay-only")
    if args.decay_only and Path(args.decay_only).suffix != ".py":
        cfg, gates = run_gates(args.decay_only, args.preset, args.variant)
        for token, name, start in gates:
            value, iterations = decay_only_gate(cfg, args.iters_per_epoch, start, name)
            print(f"weight decay alone takes {token}'s gate started at {start:g} to {value:.4f} in {iterations} "
                  f"iterations of {args.decay_only}'s {args.preset} run of {args.variant}")
        return
    if args.decay_only:
        value, iterations = decay_only_gate(args.decay_only, args.iters_per_epoch)
        print(f"weight decay alone takes a gate started at 1 to {value:.4f} in {iterations} iterations "
              f"of {args.decay_only}'s optimizer and schedule")
        return

    if args.moved_by_loss is not None and args.runs:
        p.error("--moved-by-loss counts runs per variant; --runs lists them")
    if args.moved_by_loss is not None and args.start:
        p.error("--moved-by-loss and --start ask two different questions: give one")
    stores = {store: read_store_or_exit(store, "gates.py") for store in args.results.split(",")}
    if args.tasks:
        try:
            tasks = tasks_in(pd.concat(stores.values()), args.tasks, args.results)
        except ValueError as error:
            p.error(str(error))
        stores = {store: results[results["task"].isin(tasks)] for store, results in stores.items()}
    if args.start:
        runs, table = start_against_learnt(pd.concat(stores.values()), read_store_or_exit(args.start, "gates.py"))
        show(runs if args.runs else table, args.format)
        return
    opened = [opening(results, Path(store)) for store, results in stores.items()]
    table, missing = pd.concat([table for table, _ in opened]), sum(missing for _, missing in opened)
    if table.empty:
        raise SystemExit(f"gates.py: no run of {args.results} records a residual gate or an offset "
                         f"({missing} attention runs record neither and have no checkpoint)")
    table = table.sort_values(["task", "preset", "variant", "seed"])
    if args.moved_by_loss is not None:
        table = moved_against_learnt(table, args.moved_by_loss)
    elif not args.runs:
        table = table.groupby(["task", "preset", "variant"], sort=False).agg(
            runs=("seed", "size"), mean_gate_max=("gate_max", "mean"), lowest=("gate_max", "min"),
            highest=("gate_max", "max"), mean_gate_loss_max=("gate_loss_max", "mean"),
            highest_gate_loss_max=("gate_loss_max", "max"), opened_by_loss=("gate_loss_opened", opened_count),
            mean_offset_px=("offset_mean_px", "mean")).reset_index()
    show(table, args.format)
    if missing:
        print(f"\n{missing} finished attention runs record no gate or offset and have no checkpoint left: not counted")


def show(table: pd.DataFrame, form: str) -> None:
    table = table.dropna(axis=1, how="all")
    print(table.to_markdown(index=False, floatfmt=".4f") if form == "markdown"
          else table.to_string(index=False, float_format="%.4f"))


if __name__ == "__main__":
    main()
