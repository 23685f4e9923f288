"""The sweep on a real one-node Slurm cluster (tools/slurm_local.sh): 2-rank jobs, one job array, rows
recorded once through a requeue and a cancel. Skipped, with the script's reason, where Slurm and munge are
missing and cannot be installed; any other failure to start fails."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


#: What tools/slurm_local.sh says where this machine cannot have the cluster (a skip); any other failure of the
#: script is a failure of the test.
MISSING_PREREQUISITES = ("are not installed and this is not root", "no apt-get", "apt-get could not install")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    state = tmp_path_factory.mktemp("slurm")
    env = os.environ | {"ATTNBENCH_SLURM_DIR": str(state)}
    try:
        started = subprocess.run(["bash", str(ROOT / "tools/slurm_local.sh"), "start"], env=env, capture_output=True,
                                 text=True, timeout=600)
    except subprocess.TimeoutExpired:
        pytest.fail("tools/slurm_local.sh start: the local Slurm cluster did not start within 10 minutes")
    if started.returncode:
        reason = (started.stderr.strip().splitlines() or [""])[-1]
        if any(missing in reason for missing in MISSING_PREREQUISITES):
            pytest.skip(f"no local Slurm cluster: {reason}")
        pytest.fail(f"tools/slurm_local.sh start failed: {started.stderr[-2000:]}")
    yield env | {"SLURM_CONF": str(state / "slurm.conf")}
    subprocess.run(["bash", str(ROOT / "tools/slurm_local.sh"), "stop"], env=env, capture_output=True)


def sweep(env, results, *args, timeout=900):
    command = [sys.executable, "tools/sweep.py", "--launcher", "slurm", "--partition", "local", "--results",
               str(results), "--no-wandb", "--no-plot", *args]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def queue_empty(env) -> bool:
    jobs = subprocess.run(["squeue", "-h", "-o", "%i"], env=env, capture_output=True, text=True, check=True)
    return not jobs.stdout.strip()


def wait_until(condition, timeout, what):
    deadline = time.time() + timeout
    while not condition():
        if time.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(1)


def test_two_rank_jobs_record_each_row_once(cluster, tmp_path):
    done = sweep(cluster, tmp_path, "--procs-per-run", "2", "--preset", "smoke", "--factors", "0010",
                 "--tasks", "det,nmt", "--slot", "enc-dec")
    assert done.returncode == 0, done.stdout + done.stderr
    rows = pd.read_csv(tmp_path / "results.csv")
    assert len(rows) == 4 and rows["run_id"].is_unique
    assert (rows["status"] == "ok").all() and (rows["world_size"] == 2).all()
    assert sorted(rows["task"]) == ["det", "det", "nmt", "nmt"]
    array_jobs = {p.name.split("_")[0] for p in (tmp_path / "submitit").glob("*_submitted.pkl")}
    assert len(array_jobs) == 1  # one sbatch: a job array


LONG_NMT = ["--tasks", "nmt", "--slot", "enc-dec", "--factors", "0010", "--no-baseline", "--preset", "smoke",
            "--cfg-options", "train_cfg.max_iters=300", "train_cfg.val_interval=300",
            "default_hooks.checkpoint.interval=25", "--procs-per-run", "2", "--no-wait"]


def job_of(results) -> tuple[str, Path]:
    (run_dir,) = (results / "runs").iterdir()
    (submitted,) = (results / "submitit").glob("*_submitted.pkl")
    return submitted.name.split("_")[0], run_dir


@pytest.mark.parametrize("interrupt", ["requeue", "cancel"])
def test_an_interrupted_job_resumes_from_its_checkpoint_and_its_row_lands_once(cluster, tmp_path, interrupt):
    submitted = sweep(cluster, tmp_path, *LONG_NMT)
    assert submitted.returncode == 0 and "submitted" in submitted.stdout, submitted.stdout + submitted.stderr
    job, run_dir = job_of(tmp_path)
    twice = sweep(cluster, tmp_path, *LONG_NMT)  # the same sweep while the job waits or runs: no second job
    assert twice.returncode == 0, twice.stdout + twice.stderr
    assert f"queued by an earlier sweep {run_dir.name}: job {job}" in twice.stdout, twice.stdout
    assert "submitted 0 runs" in twice.stdout and f"1 already queued by an earlier sweep" in twice.stdout
    assert f"squeue -j {job}" in twice.stdout and job_of(tmp_path)[0] == job  # one submission in submitit/
    wait_until(lambda: (run_dir / "last_checkpoint").exists(), 300, "the run's first checkpoint")
    if interrupt == "requeue":  # what preemption does: the job goes back to the queue and starts again
        subprocess.run(["scontrol", "requeue", job], env=cluster, check=True)
    else:
        subprocess.run(["scancel", job], env=cluster, check=True)
        wait_until(lambda: queue_empty(cluster), 60, "the cancelled job to leave the queue")
        assert not (tmp_path / "results.csv").exists()  # cancelled: no row
        again = sweep(cluster, tmp_path, *LONG_NMT)  # the sweep again: the run, not done, is submitted again
        assert again.returncode == 0, again.stdout + again.stderr
    wait_until(lambda: queue_empty(cluster), 600, "the job to finish")
    rows = pd.read_csv(tmp_path / "results.csv")
    assert len(rows) == 1 and rows.loc[0, "status"] == "ok" and rows.loc[0, "world_size"] == 2
    logs = "".join(p.read_text() for p in run_dir.glob("*/*.log"))
    assert "resumed" in logs, "the second attempt did not resume from the checkpoint"
    later = sweep(cluster, tmp_path, *LONG_NMT)  # a later sweep sees the job's row: nothing to submit
    assert later.returncode == 0 and "0 to run" in later.stdout, later.stdout
    assert json.loads((run_dir / "result.json").read_text())["status"] == "ok"
