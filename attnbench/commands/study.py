"""``tools/sweep.py --study``: the study's parts (:mod:`attnbench.analysis.studies`) run as sweeps, each
followed by its reports (the commands of :mod:`attnbench.commands`), and each part's progress."""
import contextlib
import importlib
import shlex
import sys
import time
from pathlib import Path

from attnbench.commands.sweep import main, parse_args, plan


def run_report(report, results: str) -> bool:
    """One of a part's reports: tools/<tool>.py with its arguments, its output written to its file; False
    (the tool's error printed, no file left) where the tool refuses."""
    args = [arg.format(results=results) for arg in report.args]
    tool = importlib.import_module(f"attnbench.commands.{report.tool}")  # tools/<tool>.py's command
    out = Path(report.out.format(results=results)) if report.out else None
    try:
        with open(out, "w") if out else contextlib.nullcontext() as file, contextlib.redirect_stdout(file or sys.stdout):
            tool.main(args)
    except SystemExit as exit:
        if exit.code:
            if out:
                out.unlink()
            print(f"sweep.py: report failed: tools/{report.tool}.py {shlex.join(args)}", file=sys.stderr)
            return False
    if out:
        print(out)
    return True


def print_study_status(parts, flags: list[str]) -> int:
    """``--study status[:PARTS]``: each open part's planned runs against its store, and the hours left at two runs
    at a time (or ``--jobs``), a run at the median ``run_seconds`` of its row (else its task) over the study's stores
    (every part's, whichever parts were asked); then the confirmations that need their row, and the closed parts with
    the reason."""
    import pandas as pd

    from attnbench.sweep.store import ResultsStore
    from attnbench.analysis.studies import COMMON, study_parts, with_flags
    from attnbench.analysis.summary import progress

    given = parse_args([*COMMON, *flags])
    planned, stores = {}, {}
    for part in parts:
        if not part.sweeps or part.closed or (part.confirmation and not given.modules):
            continue
        print(f"planning {part.name} ...", file=sys.stderr, flush=True)
        sweeps = [parse_args([*COMMON, *with_flags(sweep, flags)]) for sweep in part.sweeps]
        runs = [run for args in sweeps for run in plan(args)]
        results = sweeps[0].results
        stores.setdefault(results, ResultsStore(results).read())
        planned[part.name] = results, runs
    others = {part.results for part in study_parts().values()} - set(stores)
    priced = [ResultsStore(results).read() for results in sorted(others)]
    costs = pd.concat([*stores.values(), *priced], ignore_index=True) if stores else None
    jobs = given.jobs
    table = pd.DataFrame([{"part": name, "store": results, **progress(
        [run.run_id for run in runs], [(run.task, run.preset, run.variant) for run in runs], stores[results], jobs,
        costs)} for name, (results, runs) in planned.items()],
        columns=["part", "store", "planned", "done", "failed", "left", "hours left"])
    if len(table):
        print(table.to_string(index=False, na_rep="", float_format="{:.1f}".format))
        unpriced = " (the blank ones not counted)" if table["hours left"].isna().any() else ""
        print(f"hours left: the runs left at {jobs} at a time, each at the median run_seconds of its row (else its "
              f"task) in the study's stores; blank where none has it. In all: {table['left'].sum()} runs left, about "
              f"{table['hours left'].sum():.1f} hours{unpriced}")
    waiting = [part.name for part in parts if part.sweeps and not part.closed and part.name not in planned]
    if waiting:
        print(f"confirmations (give the row their screen chose, --study status:NAME --modules ROW): {', '.join(waiting)}")
    closed = [part for part in parts if part.sweeps and part.closed]
    if closed:
        print("closed (not run again):", *(f"  {part.name}: {part.closed}" for part in closed), sep="\n")
    return 0


def run_study(spec: str, flags: list[str]) -> int:
    """``--study PARTS``: each part's sweeps (:data:`attnbench.analysis.studies.COMMON`, the part's arguments, then
    ``flags``), then its reports; a part with a failed run is named at the end, and the study goes on."""
    from attnbench.analysis.studies import COMMON, describe, parts_of, study_parts, with_flags

    if spec == "list":
        print(describe(study_parts()))
        return 0
    if spec == "status" or spec.startswith("status:"):
        try:  # a part, a flag or a store that is not right (ResultsStoreError is a ValueError)
            named = spec.removeprefix("status").removeprefix(":")
            return print_study_status(parts_of(named) if named else list(study_parts().values()), flags)
        except ValueError as error:
            print(f"sweep.py: error: {error}", file=sys.stderr)
            return 2
    try:
        parts = parts_of(spec)
    except ValueError as error:
        print(f"sweep.py: error: {error}", file=sys.stderr)
        return 2
    given = parse_args(flags)
    own_results = any(flag == "--results" or flag.startswith("--results=") for flag in flags)
    failed = []
    for part in parts:
        if part.confirmation and not given.modules:
            print(f"sweep.py: error: part {part.name} confirms the row its screen chose: give it with --modules ROW",
                  file=sys.stderr)
            return 2
        print(f"== study part: {part.name} ({time.strftime('%H:%M:%S')})", flush=True)
        if part.closed:
            print(f"note: the study closed this part: {part.closed}. Running it as asked.", flush=True)
        if any([main([*COMMON, *with_flags(sweep, flags)]) for sweep in part.sweeps]):
            failed.append(part.name)
        if not given.dry_run:
            reported = [run_report(report, given.results if own_results else part.results) for report in part.reports]
            if not all(reported) and part.name not in failed:
                failed.append(part.name)
    if failed:
        print(f"sweep.py: runs or reports failed in: {', '.join(failed)} (rerunning the parts redoes them)",
              file=sys.stderr)
    return 1 if failed else 0
