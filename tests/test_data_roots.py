"""The sweep pointed at data elsewhere (--data-root), and a missing data root found before anything runs."""
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]


def sweep(results, *args):
    return subprocess.run([sys.executable, "tools/sweep.py", "--results", str(results), "--no-wandb", "--no-plot",
                           *args], cwd=ROOT, capture_output=True, text=True, timeout=900)


@pytest.mark.parametrize("dry_run", [False, True])
def test_a_missing_data_root_stops_the_sweep_before_it_runs(tmp_path, dry_run):
    done = sweep(tmp_path, "--tasks", "det", "--factors", "0010", "--preset", "full",
                 "--data-root", f"det={tmp_path / 'no-coco'}", *(["--dry-run"] if dry_run else []))
    line = f"task det: train_dataloader's data_root '{tmp_path / 'no-coco'}' does not exist"
    assert line in done.stderr and "--data-root det=PATH" in done.stderr
    if dry_run:  # the plan and its FLOPs still print
        assert done.returncode == 0 and "2 runs" in done.stdout
    else:
        assert done.returncode == 2 and not (tmp_path / "results.csv").exists() and not (tmp_path / "runs").exists()


def test_data_root_names_a_task_the_sweep_runs(tmp_path):
    done = sweep(tmp_path, "--tasks", "det", "--factors", "0010", "--data-root", "seg=/data", "--dry-run")
    assert done.returncode == 2 and "--data-root names task(s) ['seg']" in done.stderr


@pytest.mark.slow
def test_the_sweep_reads_a_moved_data_set(tmp_path):
    moved = tmp_path / "elsewhere" / "shapes"
    subprocess.run([sys.executable, "tools/make_mini_data.py", "--root", str(moved)], cwd=ROOT, check=True,
                   capture_output=True)
    done = sweep(tmp_path / "results", "--tasks", "det", "--factors", "0010", "--no-baseline", "--preset", "smoke",
                 "--data-root", f"det={moved}")
    assert done.returncode == 0, done.stdout + done.stderr
    (row,) = pd.read_csv(tmp_path / "results" / "results.csv").to_dict("records")
    assert row["status"] == "ok"
    spec = json.loads((tmp_path / "results" / "runs" / row["run_id"] / "run.json").read_text())
    assert spec["cfg_options"]["train_dataloader.dataset.data_root"] == str(moved)
    assert spec["cfg_options"]["val_evaluator.0.ann_file"] == str(moved / "annotations/instances_val.json")
