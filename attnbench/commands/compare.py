"""Table of variants from a results store: mean ± std over seeds, delta vs baseline, FLOPs.

    python tools/compare.py [--results results/sweep] [--format text|markdown|csv]
    python tools/compare.py --effects       # main effect of each term E1..E4 (paired factor sets)
    python tools/compare.py --power --effect det=0.01,seg=1,nmt=2   # what the seeds can detect, seeds needed
    python tools/compare.py --tasks nmt --slot enc-dec
    python tools/compare.py --results results/diagnostics --value context   # the diagnostic tasks' context accuracy
    python tools/compare.py --results results/figure4 --slot enc-self --reference dynamic:kernel=7   # against a row
    python tools/compare.py --results results/flags --tasks det-flag --seeds 2-11   # the seeds a prediction was registered on
    python tools/compare.py --results results/flags --value context --per-seed   # each run's value, seed by seed
    python tools/compare.py --results results/claims --claims   # the study's claims C1-C5: contrasts, Holm, verdicts
    python tools/compare.py --results results/l10n --claims     # translation's claims T1-T4 (real language)
    python tools/compare.py --results results/claims --claims --by-claim   # a line per claim, its verdict per task
    python tools/compare.py --results results/e4-seg --seeds 230-234 --claims e4-seg   # a registered lead
    python tools/compare.py --results results/run-cost --cost   # where each run's time went: training and the rest
    python tools/compare.py --results results/claims --seeds 110-112 --rows survey   # the survey's modules alone

"delta vs baseline" and "t" compare the means (Welch's t). A row's run and the baseline's at one
seed are paired when they share the protocol (threads, processes, device, torch and mmcv versions, all
recorded): "paired Δ" is the mean ± std of their differences and "paired t" its t. "p" is
two-sided: the paired t-test's where a row has two paired seeds or more, else Welch's followed by
"u" (unpaired), e.g. 0.004 against 0.210u; "p_holm" is that p adjusted by Holm's step-down over
the rows of a task (and slot), which all face the same reference (--no-holm leaves it out), and
"p_wilcoxon" the Wilcoxon signed-rank test's p of the paired differences (zero differences
dropped; exact without ties). On the diagnostic tasks, "learnt" is k/n: k of the row's n runs
learnt the rule (context accuracy 0.9 or more), and "p_exact" tests learnt against not: McNemar's
exact test on the seeds where the runs pair, else Fisher's exact test followed by "u", and where
the runs record it "context mass (chance)": the mean share of the object queries' attention on the
pixels that decide their class (the generalized attention's weights, over its blocks, heads and the
validation objects; attnbench.mm.attention_mass) and, in brackets, that context's share of the image,
the mass uniform attention would give it. Rows not paired on all their seeds are named under the
table, with the reason. With --claims and --seeds, a line under the table names the tested contrasts
paired at fewer seeds than asked: a verdict read before a registered part's runs are all in is a look.
"""
import argparse
import sys
from collections.abc import Sequence

import pandas as pd

from attnbench.sweep import plan
from attnbench.analysis.claims import CLAIM_FAMILIES, all_claims_table, claim_verdicts, claims_text
from attnbench.analysis.effects import factor_effects, power_table
from attnbench.analysis.plots import ROW_GROUPS, select_rows
from attnbench.analysis.summary import (comparison_table, context_values, cost_table, p_text, pairing_notes, per_seed_table,
                                     summarize)
from attnbench.sweep.store import read_store_or_exit, tasks_in
from attnbench.variants import TRANSLATION_TASKS, Variant


def effect_sizes(text: str) -> float | dict[str, float]:
    """``--effect``: one number for every task, or ``TASK=NUMBER,...``."""
    try:
        if "=" not in text:
            return float(text)
        return {task.strip(): float(size) for task, size in (item.split("=", 1) for item in text.split(","))}
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give a number, or TASK=NUMBER,... "
                                         "(e.g. det=0.01,seg=1.0,nmt=2)") from None


def seed_list(text: str) -> list[int]:
    """``--seeds`` as tools/sweep.py reads it (attnbench.sweep.plan.parse_seeds): ``2-11``, ``0,3,5``, a mix
    (``0,2-4``) or a count ``N`` (seeds 0 .. N-1)."""
    try:
        return plan.parse_seeds(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def frame_text(frame: pd.DataFrame, fmt: str, floatfmt: str = ".4f") -> str:
    if fmt == "csv":
        return frame.to_csv(index=False)
    if fmt == "markdown":  # p-values as the comparison table prints them (a tiny p is not 0.0000)
        frame = frame.assign(p=frame["p"].map(p_text)) if "p" in frame else frame
        return frame.to_markdown(index=False, floatfmt=floatfmt)
    return frame.to_string(index=False)


def print_with_notes(text: str, notes: list[str], fmt: str) -> None:
    """TEXT, then the notes after a blank line (on stderr for csv, so that stdout stays one table)."""
    print(text)
    if notes:
        print("\n" + "\n".join(notes), file=sys.stderr if fmt == "csv" else sys.stdout)


def power_notes(power: pd.DataFrame, args: argparse.Namespace) -> list[str]:
    """What the --power columns mean, and the tasks whose spread comes from unpaired runs."""
    meaning = (f"min_detectable_effect: the smallest mean difference from the baseline (in the metric's unit) that a "
               f"two-sided paired t-test over `seeds` seeds detects at significance {args.alpha} with power "
               f"{args.power_target}")
    if args.effect is not None:
        meaning += "; seeds_needed: the seeds that detect `effect`"
    unpaired = [task + (f"/{slot}" if slot else "")
                for task, slot, paired in zip(power["task"], power["slot"], power["paired"]) if not paired]
    if not unpaired:
        return [meaning]
    return [meaning, f"{', '.join(unpaired)}: no paired runs (no row with two seeds sharing a protocol with the "
                     "baseline): sd_difference is sqrt(2) x the pooled seed std, that of two independent runs"]


def incomplete_notes(table: pd.DataFrame, seeds: list[int] | None) -> list[str]:
    """A line naming the tested contrasts paired at fewer than the ``--seeds`` asked: their runs are not all
    in, and a verdict read now is a look of its own."""
    if seeds is None:
        return []
    short = table[table["p"].notna() & (table["seeds"] < len(seeds))]
    if short.empty:
        return []
    where = sorted({f"{task}/{slot}" if isinstance(slot, str) and slot else task
                    for task, slot in zip(short["task"], short["slot"])})
    low, high = short["seeds"].min(), short["seeds"].max()
    return [f"incomplete ({', '.join(where)}): {len(short)} of {int(table['p'].notna().sum())} tested contrasts paired "
            f"at {low if low == high else f'{low} to {high}'} of the {len(seeds)} seeds asked; a verdict read before "
            "every registered run is in counts as a look"]


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results", default="results/sweep")
    p.add_argument("--format", default="text", choices=["text", "markdown", "csv"])
    p.add_argument("--effects", action="store_true",
                   help="the main effect of each term E1..E4 instead: the metric's change when the term is added "
                   "to a factor set, over the pairs of sets that differ in it only; `paired` where the runs of all "
                   "pairs share a protocol at two seeds or more (then `p` is from Student's t over the per-seed "
                   "effects; otherwise from the normal)")
    p.add_argument("--power", action="store_true",
                   help="per task (and nmt slot) instead: the spread of the paired differences row - baseline, the "
                   "seeds at hand and the smallest difference they detect with a paired t-test (its power from the "
                   "noncentral t)")
    p.add_argument("--effect", type=effect_sizes,
                   help="with --power: a difference in the metric's unit, one for all tasks (0.01) or one per task "
                   "(det=0.01,seg=1.0,nmt=2): also print the seeds needed to detect it")
    p.add_argument("--per-seed", action="store_true",
                   help="each run's value instead, a row per task and seed and a column per variant (with --value "
                   "context: whether a rule was learnt at each seed)")
    p.add_argument("--claims", nargs="?", const="study", choices=list(CLAIM_FAMILIES), metavar="FAMILY",
                   help="a registered family of claims instead (attnbench.analysis.claims; default study: C1-C5 on the "
                   "image tasks, T1-T4 on the translation tasks, each contrast in its slot; figure4-det: F4; e4-seg: "
                   "E4's lead on the segmentor; translation-first: T1 and T3, translation-rest: T2 and T4, the small "
                   "preset's two families): each as a contrast of rows paired by seed, predicted positive, "
                   "tested (paired t, or the sign test of learnt rules on the diagnostic tasks), Holm-adjusted over "
                   "each task's contrasts, with a verdict")
    p.add_argument("--by-claim", action="store_true",
                   help="with --claims: a line per claim instead, its verdict on each task (every tested contrast "
                   "reproduced: reproduced; any refuted: refuted; else undecided) with each contrast's mean and "
                   "Holm-adjusted p")
    p.add_argument("--cost", action="store_true",
                   help="where each run's time went instead: its wall time, training steps, validations and the "
                   "rest (set-up, FLOPs count, validation, logging), and that rest's share of the run")
    p.add_argument("--alpha", type=float, default=0.05,
                   help="with --power or --claims: significance level, two-sided (0.05)")
    p.add_argument("--power-target", type=float, default=0.8, help="with --power: the power wanted (0.8)")
    p.add_argument("--value", default="metric", choices=["metric", "context"],
                   help="what every statistic is computed on: each task's metric (the default), or the context "
                   "accuracy of the diagnostic tasks (the share of found objects given the right class; runs "
                   "without it are left out)")
    p.add_argument("--tasks", help="comma-separated tasks to show (default: all)")
    p.add_argument("--seeds", type=seed_list, help="only the runs at these seeds, e.g. 2-11 (default: all): a "
                   "test registered on seeds not yet run when its prediction was written; as sweep.py's, a count N "
                   "is seeds 0 .. N-1 and one seed alone A-A")
    p.add_argument("--slot", help="nmt slot to show: enc-self, dec-self or enc-dec (and the shared baseline)")
    p.add_argument("--no-holm", action="store_true", help="leave out p_holm, the p-values Holm-adjusted over "
                   "the rows of a task (and slot); p is unadjusted either way")
    p.add_argument("--reference", default="baseline", help="the row every other is compared with, paired by seed "
                   "like the baseline (default: baseline), e.g. dynamic:kernel=7")
    p.add_argument("--rows", choices=ROW_GROUPS, help="only the study's rows (the factor sets, its other "
                   "mechanisms and their combinations) or only the survey's modules, each with the reference "
                   "(default: all): p_holm then adjusts over the rows shown, as the trade-off plots give the "
                   "survey a panel of its own")
    args = p.parse_args(argv)
    if sum((args.effects, args.power, args.per_seed, bool(args.claims), args.cost)) > 1:
        p.error("--effects, --power, --per-seed, --claims and --cost are different outputs: choose one")
    if args.by_claim and not args.claims:
        p.error("--by-claim needs --claims")
    if args.effect is not None and not args.power:
        p.error("--effect needs --power")
    if not 0 < args.alpha < args.power_target < 1:
        p.error(f"need 0 < --alpha < --power-target < 1 (got {args.alpha} and {args.power_target})")
    results = read_store_or_exit(args.results, "compare.py")
    if args.value == "context":
        results = context_values(results)
        if results.empty:
            p.error(f"no run in {args.results} records a context accuracy (the diagnostic tasks det-RULE and "
                    "seg-RULE do)")
    if args.tasks:
        try:
            results = results[results["task"].isin(tasks_in(results, args.tasks, args.results))]
        except ValueError as error:
            p.error(str(error))
    if args.seeds is not None:
        results = results[results["seed"].astype(int).isin(args.seeds)]
    if args.slot:
        if not (results["slot"] == args.slot).any():
            p.error(f"--slot {args.slot}: no runs in {args.results} (slots there: "
                    f"{', '.join(sorted(results['slot'].dropna().unique()))})")
        results = results[(results["slot"] == args.slot) | results["slot"].isna()]
    if results.empty:
        p.error(f"no results in {args.results} for tasks {args.tasks or 'any'}, slot {args.slot or 'any'} and "
                f"seeds {args.seeds or 'any'}")
    if args.reference != "baseline":
        try:
            args.reference = Variant.parse(args.reference).name
        except ValueError as error:
            p.error(f"--reference: {error}")
        if not (results["variant"] == args.reference).any():
            p.error(f"--reference {args.reference} has no runs in {args.results}")
    if args.rows:
        results = select_rows(results, args.rows, args.reference)
        if (results["variant"] == args.reference).all():
            p.error(f"no {args.rows} rows in {args.results} for tasks {args.tasks or 'any'} and seeds "
                    f"{args.seeds or 'any'}")
    if args.effects:
        print(frame_text(factor_effects(results), args.format))
    elif args.per_seed:
        print(frame_text(per_seed_table(results), args.format))
    elif args.cost:
        table = cost_table(results)
        if table.empty:
            p.error(f"no finished run in {args.results} records its time outside training (outside_seconds)")
        print(frame_text(table, args.format, floatfmt=".1f"))  # seconds
    elif args.claims:
        table = all_claims_table(results, alpha=args.alpha, family=args.claims)
        if table.empty:
            p.error(f"no task of the {args.claims} claims in {args.results}: C1-C5, F4 and E4-seg are about images "
                    f"(det, seg and the diagnostic tasks), T1-T4 about translation ({', '.join(TRANSLATION_TASKS)})")
        if args.by_claim:  # in markdown each contrast on a line of its own
            text = frame_text(claim_verdicts(table, "<br>" if args.format == "markdown" else None), args.format)
        else:
            text = claims_text(table, args.format, args.alpha)
        print_with_notes(text, incomplete_notes(table, args.seeds), args.format)
    elif args.power:
        power = power_table(results, args.alpha, args.power_target, args.effect)
        print_with_notes(frame_text(power, args.format), power_notes(power, args), args.format)
    else:
        print_with_notes(comparison_table(results, args.format, args.reference, holm_adjusted=not args.no_holm),
                         pairing_notes(summarize(results, args.reference)), args.format)


if __name__ == "__main__":
    main()
