"""The study as data (attnbench.analysis.studies): every part plans, the finished parts plan exactly the runs their
committed stores hold, and `tools/sweep.py --study` runs parts with the flags given."""
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pandas as pd
import pytest

from attnbench.analysis.studies import COMMON, DEFAULT_PARTS, parts_of, study_parts, with_flags
from attnbench.analysis.summary import progress

ROOT = Path(__file__).resolve().parents[1]
from attnbench.commands import study, sweep  # tools/sweep.py's commands

#: Parts whose runs all finished: their stores hold every run they plan, under the same run ids (the
#: run id hashes the run's config, so a change to a row's config or seeds would show here). Not
#: protocol-screen: it chose the protocol (gate 1, conv3 on) that later became the mini presets' own, so
#: its rows' configs, and ids, predate it.
FINISHED = ("protocol-confirm", "position-screen", "side-screen", "side-lr-screen",
            "side-long-screen", "flag-long-screen", "side-fcn-screen", "claims-det", "claims-seg", "claims-tradeoff",
            "claims-flag", "claims-side", "l10n-pilot", "l10n-claims", "mini-corpus-claims", "fcn-flag-screen",
            "fcn-flag-start")


def registrations() -> dict[str, str]:
    """Each part named in docs/registry.md's table -> the commit of its first registration there."""
    first = {}
    for line in (ROOT / "docs" / "registry.md").read_text().splitlines():
        if re.match(r"\| \d{4}-\d\d-\d\d \|", line):
            cells = [cell.strip() for cell in line.split("|")[1:-1]]
            for name in re.findall(r"`([^`]+)`", cells[3]):
                first.setdefault(name, cells[1])
    return first


#: The registered parts with runs in their stores (l10n-tradeoff, still running, is for a plot: not registered).
RAN = [name for name in FINISHED if name in registrations()]


@cache  # the finished-part tests plan the same parts: once each
def planned(part, *flags: str) -> list:
    return [run for args in part.sweeps for run in sweep.plan(sweep.parse_args([*COMMON, *with_flags(args, list(flags))]))]


def test_the_registry_names_parts_that_exist():
    named = {name for name in registrations() if re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)+", name)}
    assert named - set(study_parts()) == set()
    assert {"protocol-confirm", "claims-det", "l10n-claims", "fcn-flag-start"} <= named


@pytest.mark.slow
@pytest.mark.parametrize("name", RAN)
def test_a_registered_parts_runs_started_after_the_commit_that_registered_it(name):
    """Predictions before runs: every run of the part in its committed store started after the commit
    time of the part's first line in docs/registry.md (the commit holds the prediction and the seeds)."""
    shallow = subprocess.run(["git", "rev-parse", "--is-shallow-repository"], capture_output=True, text=True, cwd=ROOT)
    if shallow.returncode or shallow.stdout.strip() == "true":
        pytest.skip("needs the repository's history (a full git clone)")
    commit = registrations()[name]
    registered = pd.Timestamp(subprocess.run(["git", "show", "-s", "--format=%cI", commit], capture_output=True,
                                             text=True, check=True, cwd=ROOT).stdout.strip())
    part = study_parts()[name]
    store = pd.read_csv(ROOT / part.results / "results.csv")
    runs = store[store["run_id"].isin({run.run_id for run in planned(part)})]
    assert len(runs), f"no run of {name} in {part.results}"
    early = runs[pd.to_datetime(runs["started_at"], utc=True) < registered]
    assert early.empty, f"{len(early)} runs of {name} started before {commit} ({registered}): {list(early['run_id'][:3])}"


@pytest.mark.parametrize("name", list(study_parts()))
def test_every_part_plans_its_runs(name):
    part = study_parts()[name]
    flags = ("--modules", "1111") if part.confirmation else ()
    runs = planned(part, *flags)
    assert bool(runs) == bool(part.sweeps)
    assert part.sweeps or part.reports


@pytest.mark.slow
@pytest.mark.parametrize("name", FINISHED)
def test_a_finished_part_plans_the_runs_its_store_holds(name):
    part = study_parts()[name]
    store = pd.read_csv(ROOT / part.results / "results.csv")
    ok = set(store.loc[store["status"] == "ok", "run_id"])
    missing = [run.run_id for run in planned(part) if run.run_id not in ok]
    assert not missing, f"{len(missing)} planned runs not in {part.results}: {missing[:3]}"


def test_rows_given_replace_the_parts_rows_and_other_flags_follow_its_own():
    args = ("--tasks", "det", "--factors", "all", "--modules", "deformable", "--seeds", "1-2")
    assert with_flags(args, ["--seeds", "3"]) == [*args, "--seeds", "3"]
    assert with_flags(args, ["--modules", "1111"]) == ["--tasks", "det", "--seeds", "1-2", "--modules", "1111"]
    runs = planned(study_parts()["det"], "--modules", "1111", "--seeds", "2")
    assert sorted({run.variant for run in runs}) == ["1111", "baseline"] and {run.seed for run in runs} == {0, 1}


def test_parts_by_name_and_the_default_group():
    assert [part.name for part in parts_of("default")] == list(DEFAULT_PARTS)
    assert [part.name for part in parts_of("claims-det, claims-report")] == ["claims-det", "claims-report"]
    with pytest.raises(ValueError, match="unknown part nope.*claims-det"):
        parts_of("claims-det,nope")


def test_study_list_describes_every_part(capsys):
    assert sweep.main(["--study", "list"]) == 0
    out = capsys.readouterr().out
    assert all(f"{name}  ->  " in out for name in study_parts())


def test_progress_counts_a_parts_runs_and_prices_those_left():
    store = pd.DataFrame({"run_id": ["a", "b", "c", "x"], "task": ["det", "det", "seg", "seg"],
                          "preset": "mini", "variant": ["0010", "0010", "1111", "0010"],
                          "status": ["ok", "failed", "ok", "ok"], "run_seconds": [100.0, 7.0, 300.0, 500.0]})
    rows = [("det", "mini", "0010"), ("det", "mini", "0010"), ("seg", "mini", "1111"), ("seg", "mini", "0100"),
            ("nmt", "mini", "0010")]
    counts = progress(["a", "b", "c", "d", "e"], rows, store.iloc[:3], jobs=2, costs=store)
    # left: b (det 0010, 100 s), d (seg 0100: no such row, seg's median 400 s), e (nmt: no cost known)
    assert {key: counts[key] for key in ("planned", "done", "failed", "left")} == dict(planned=5, done=2, failed=1,
                                                                                       left=3)
    assert pd.isna(counts["hours left"])
    counts = progress(["a", "b", "d", "a"], rows[:2] + rows[3:4] + rows[:1], store, jobs=2)
    assert counts["planned"] == 3 and counts["left"] == 2 and counts["hours left"] == round((100 + 400) / 2 / 3600, 1)


def test_study_status_counts_a_finished_part_asks_a_confirmation_for_its_row_and_says_why_a_part_is_closed(capsys):
    assert sweep.main(["--study", "status:fcn-flag-screen,fcn-flag-confirm,protocol-screen"]) == 0
    lines = capsys.readouterr().out.splitlines()
    screen = next(line for line in lines if line.split()[0] == "fcn-flag-screen").split()
    assert screen[1:7] == ["results/protocol", "8", "8", "0", "0", "0.0"]
    assert "In all: 0 runs left" in next(line for line in lines if line.startswith("hours left"))
    assert next(line for line in lines if line.startswith("confirmations")).endswith(
        "--study status:NAME --modules ROW): fcn-flag-confirm")
    assert lines[-2:] == ["closed (not run again):", f"  protocol-screen: {study_parts()['protocol-screen'].closed}"]
    assert sweep.main(["--study", "status:nope"]) == 2
    assert "unknown part nope" in capsys.readouterr().err


def test_study_status_prices_a_part_with_an_empty_store_from_the_studys_stores(tmp_path, capsys):
    assert sweep.main(["--study", "status:claims-seg", "--results", str(tmp_path)]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.split()[0] == "claims-seg").split()
    assert row[2:6] == ["130", "0", "0", "130"] and float(row[6]) > 0  # the seg rows' run times of results/claims


def test_study_status_refuses_a_bad_row_or_store_in_one_line(tmp_path, capsys):
    assert sweep.main(["--study", "status:fcn-flag-confirm", "--modules", "nope"]) == 2
    assert capsys.readouterr().err.splitlines()[-1].startswith("sweep.py: error: unknown token 'nope'")
    (tmp_path / "results.csv").write_text("not,a,store\n")
    assert sweep.main(["--study", "status:claims-seg", "--results", str(tmp_path)]) == 2
    assert capsys.readouterr().err.splitlines()[-1].startswith("sweep.py: error: ")


def test_flags_are_taken_by_their_full_names_only(capsys):
    """main() finds --study by its name; argparse's abbreviations (--stud) would have hidden it."""
    with pytest.raises(SystemExit) as exit:
        sweep.main(["--stud", "list"])
    assert exit.value.code == 2 and "unrecognized arguments: --stud list" in capsys.readouterr().err


def test_a_report_that_fails_names_its_part_leaves_no_file_and_the_next_report_runs(tmp_path, capsys):
    from attnbench.analysis.studies import Report

    refused = Report("compare", ("--results", "{results}", "--rows", "nope"), "{results}/refused.md")
    written = Report("compare", ("--results", "{results}", "--format", "csv"), "{results}/written.csv")
    (tmp_path / "results.csv").write_bytes((ROOT / "results/claims/results.csv").read_bytes())
    assert [study.run_report(report, str(tmp_path)) for report in (refused, written)] == [False, True]
    assert not (tmp_path / "refused.md").exists() and (tmp_path / "written.csv").stat().st_size > 0
    assert "sweep.py: report failed: tools/compare.py --results" in capsys.readouterr().err


def test_zero_processes_a_run_is_refused_not_read_as_one():
    with pytest.raises(ValueError, match="--procs-per-run must be a positive integer, got 0"):
        sweep.plan(sweep.parse_args(["--tasks", "det", "--factors", "0010", "--procs-per-run", "0"]))


def test_a_confirmation_needs_its_row_and_an_unknown_part_is_refused(capsys):
    assert sweep.main(["--study", "side-confirm", "--dry-run"]) == 2
    assert "--modules ROW" in capsys.readouterr().err
    assert sweep.main(["--study", "nope"]) == 2
    assert "unknown part nope" in capsys.readouterr().err


@pytest.mark.slow
def test_study_sh_runs_a_part_through_the_sweep(tmp_path):
    """The wrapper's environment becomes flags: a dry run of a screen into a scratch store."""
    env = {"PATH": "/usr/bin:/bin", "PYTHON": sys.executable, "RESULTS": str(tmp_path), "SEEDS": "20-20",
           "HOME": str(tmp_path)}
    done = subprocess.run(["bash", "tools/study.sh", "protocol-screen", "--dry-run"], cwd=ROOT, env={**env, "WANDB_MODE": "disabled"},
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "== study part: protocol-screen" in done.stdout
    assert "_seed20_" in done.stdout and "_seed21_" not in done.stdout  # SEEDS became --seeds, over the part's own
    assert not (tmp_path / "results.csv").exists()  # a dry run records nothing


def test_blind_prints_each_runs_status_and_not_its_metric(tmp_path, monkeypatch, capsys):
    """The study's parts run --blind: a finished run's line says ok or FAILED, never its value."""
    from attnbench.sweep.launch import SweepRunner

    def run_all(self, runs, on_start=None, fresh=False):
        for run, status in zip(runs, ("ok", "failed")):
            yield dict(task=run.task, slot=run.slot, variant=run.variant, seed=run.seed, status=status,
                       metric="translation/BLEU", value=12.3456, error="diverged")

    monkeypatch.setattr(SweepRunner, "run_all", run_all)
    flags = ["--tasks", "nmt", "--slot", "enc-dec", "--factors", "1111", "--seeds", "1", "--results",
             str(tmp_path), "--no-wandb", "--no-plot"]
    assert sweep.main([*flags, "--blind"]) == 1
    blind = capsys.readouterr().out
    assert "nmt/baseline/seed0: ok" in blind and "nmt/enc-dec/1111/seed0: FAILED diverged" in blind  # its slot too
    assert "12.35" not in blind
    sweep.main(flags)
    assert "nmt/baseline/seed0: translation/BLEU=12.35" in capsys.readouterr().out
    assert "--blind" in COMMON
