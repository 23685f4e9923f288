"""A stored run: its row in a results store, its folder ``RESULTS/runs/<run id>/`` (the config mmengine
dumped, the checkpoints) and the command that trains it again, since runs reproduce by seed."""
from __future__ import annotations

import shlex
from pathlib import Path

import pandas as pd

from attnbench.variants import Variant

from .plan import build_plan
from .store import finished_runs
from .tasks import TASKS


def find_run(results: pd.DataFrame, run_id: str | None = None, task: str | None = None, variant: str | None = None,
             seed: int | None = None, preset: str | None = None, slot: str | None = None) -> dict:
    """The finished row with ``run_id``, or the one of ``task``, ``variant`` and ``seed`` (and ``preset``,
    ``slot`` where given); ValueError naming what there is when none or several match."""
    ok = finished_runs(results).assign(slot=results["slot"].fillna(""))
    if run_id is not None:
        rows = ok[ok["run_id"] == run_id]
        wanted = f"run {run_id}"
    else:
        rows = ok[(ok["task"] == task) & (ok["variant"] == variant) & (ok["seed"].astype(int) == seed)]
        rows = rows[rows["preset"] == preset] if preset else rows
        rows = rows[rows["slot"] == slot] if slot else rows
        wanted = f"run of task {task}, variant {variant}, seed {seed}" + (f", preset {preset}" if preset else "") + \
            (f", slot {slot}" if slot else "")
    if len(rows) == 1:
        return rows.iloc[0].to_dict()
    if rows.empty:
        raise ValueError(f"the store has no finished {wanted}")
    raise ValueError(f"{len(rows)} finished runs match the {wanted}: {', '.join(rows['run_id'])}; "
                     "name one with --run (or narrow with --preset, --slot)")


def last_checkpoint(run_dir: Path) -> Path | None:
    """The checkpoint mmengine's ``last_checkpoint`` file names, if it is still there."""
    pointer = run_dir / "last_checkpoint"
    if not pointer.is_file():
        return None
    path = run_dir / Path(pointer.read_text().strip()).name  # mmengine writes absolute paths
    return path if path.is_file() else None


def dumped_config(run_dir: Path) -> Path | None:
    """The config mmengine dumped into the run's folder (the config file's name, the overrides merged)."""
    configs = sorted(run_dir.glob("*.py"))
    return configs[0] if len(configs) == 1 else None


def _plan_arguments(row: dict) -> tuple[list[str], list[str], str | None]:
    """The factor strings, the other variants and the slot of the run of ``row``, as ``tools/sweep.py``
    takes them (the baseline: neither)."""
    if row["variant"] == "baseline":
        factors, modules = [], []
    elif Variant.parse(row["variant"]).factors and len(Variant.parse(row["variant"]).tokens) == 1:
        factors, modules = [row["variant"]], []
    else:
        factors, modules = [], [row["variant"]]
    slot = row.get("slot")
    return factors, modules, slot if isinstance(slot, str) and slot else None  # the store reads no slot as NaN


def retrain_command(row: dict, results: str | Path) -> str:
    """The ``tools/sweep.py`` command that trains the run of ``row`` again, and only it, into ``results``
    (a ``--config`` task's from its file, the processes it trained on); with a note when today's plan would
    make it another run than the row's (the run id hashes the resolved config)."""
    factors, modules, slot = _plan_arguments(row)
    seed = int(row["seed"])
    procs = int(row["world_size"]) if pd.notna(row.get("world_size")) else 1
    user_configs = [] if row["task"] in TASKS else [row["config"]]
    argv = ["--config", row["config"]] if user_configs else ["--tasks", row["task"]]
    argv += ["--factors", *factors] if factors else ["--modules", *modules] if modules else []
    argv += ["--no-baseline"] if factors or modules else []
    argv += ["--slot", slot] if slot else []
    argv += ["--procs-per-run", str(procs)] if procs > 1 else []
    argv += ["--preset", row["preset"], "--seeds", f"{seed}-{seed}", "--results", str(results), "--force", "--no-wandb"]
    command = "python tools/sweep.py " + shlex.join(argv)
    (run,) = build_plan([] if user_configs else [row["task"]], factors, modules, [seed], row["preset"], slot,
                        baseline=not (factors or modules), procs=procs, user_configs=user_configs)
    if run.run_id != row["run_id"]:
        command += (f" (this trains {run.run_id}: the configs have changed since the run, or it had --cfg-options, "
                    "--data-root or --threads, which the store does not keep)")
    return command
