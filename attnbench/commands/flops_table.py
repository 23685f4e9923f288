"""Full-scale FLOPs table: every variant's multiply-adds at the paper's input sizes, no training.

    python tools/flops_table.py                          # det, seg and nmt -> results/flops-full/
    python tools/flops_table.py --tasks det --out /tmp/flops
    python tools/flops_table.py --tasks det,seg --variants 0010,0010+deformable   # some rows (and the baseline)
    python tools/flops_table.py --tasks nmt --variants 0100:range=7,dynamic:kernel=7  # rows with parameters
    python tools/flops_table.py --tasks det,seg --variants 0010 --update   # recount rows in the existing table

Faster R-CNN R-50-FPN at 800x1333, DeepLabV3 R-50-D8 at 512x1024, Transformer-base on 50-token
sentences (source and target); every mechanism of the vision benchmark (survey rows included) and,
for translation, every mechanism in each attention slot. Each model is built from its full-scale
config and run once under torch.utils.flop_counter; the attention modules' share is checked against
their analytic counts. Writes flops.csv and flops.md (with the published accuracy where one exists).
"""
import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd


def plan(tasks: list[str], only: list[str]):
    from attnbench.sweep.plan import build_plan, parse_factors
    from attnbench.variants import TRANSLATION_MECHANISMS, TRANSLATION_TASKS, Variant, vision_rows

    def row(variant: str) -> str:  # the benchmark row a variant sets parameters of
        return replace(Variant.parse(variant), params=()).name

    runs, known = [], set()
    for task in tasks:
        if task in TRANSLATION_TASKS:
            variants = [*parse_factors("all"), *TRANSLATION_MECHANISMS]
        elif task in ("det", "seg"):
            variants = [v for v in vision_rows(task) if v != "baseline"]
        else:
            raise ValueError(f"unknown task {task!r}; choose from det, seg, {', '.join(TRANSLATION_TASKS)}")
        known.update(variants)
        chosen = [v for v in only if row(v) in variants] if only else variants
        runs += build_plan([task], [], chosen, seeds=1, preset="full")
    unknown = [v for v in only if row(v) not in known]
    if unknown:
        raise ValueError(f"--variants {unknown} are not rows of {tasks} (see tools/list_modules.py)")
    return runs


def _row_keys(table: pd.DataFrame) -> pd.Series:
    return table["task"] + "/" + table["slot"].astype(str) + "/" + table["variant"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", default="det,seg,nmt", help="comma-separated: det, seg, nmt")
    p.add_argument("--variants", default="", help="comma-separated rows to count (default: all); the baseline "
                   "is always counted")
    p.add_argument("--out", default="results/flops-full", help="output folder (default: %(default)s)")
    p.add_argument("--update", action="store_true", help="replace the counted rows in OUT's existing table "
                   "and keep the others (after a change to some mechanisms' counts), instead of a new table")
    args = p.parse_args(argv)
    from attnbench.sweep.dry_run import analytic_check, count_runs
    from attnbench.analysis.published import PUBLISHED

    try:
        runs = plan([t.strip() for t in args.tasks.split(",") if t.strip()],
                    [v.strip() for v in args.variants.split(",") if v.strip()])
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    rows, start = [], time.time()
    for i, (run, c) in enumerate(count_runs(runs), 1):
        published = PUBLISHED.get((run.task, run.variant), (None, ""))
        rows.append(dict(
            task=run.task, slot=run.slot or "", variant=run.variant, input_size=c["input_size"],
            gmacs_model=round(c["macs_model"] / 1e9, 3), gmacs_attention=round(c["macs_modules"] / 1e9, 4),
            analytic_check=analytic_check(c), params_model_m=round(c["params_model"] / 1e6, 3),
            published=published[0], published_source=published[1]))
        print(f"[{i}/{len(runs)} {time.time() - start:5.0f}s] {run.task} {run.slot or ''} {run.variant}: "
              f"{rows[-1]['gmacs_model']} GMACs", flush=True)
    table = pd.DataFrame(rows)
    out = Path(args.out)
    if args.update and (out / "flops.csv").exists():  # the recounted rows in place, the others as they were
        old = pd.read_csv(out / "flops.csv", keep_default_na=False)
        table = pd.concat([old[~_row_keys(old).isin(set(_row_keys(table)))], table])
        # a row new to the table goes after the last old row of its task
        position = {key: i for i, key in enumerate(_row_keys(old))}
        last = {task: i for i, task in enumerate(old["task"])}
        order = [position.get(key, last.get(task, len(old)) + 0.5) for key, task in zip(_row_keys(table), table["task"])]
        table = table.iloc[pd.Series(order).argsort(kind="stable").to_numpy()]
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "flops.csv", index=False)
    (out / "flops.md").write_text(table.astype(object).fillna("").to_markdown(index=False) + "\n")
    print(f"{len(table)} rows -> {out / 'flops.csv'}, {out / 'flops.md'} ({time.time() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
