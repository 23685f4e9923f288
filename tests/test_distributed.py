"""Runs on several processes: Slurm's ranks read as torchrun's, the learning rate scaled by mmengine's rule,
runs on more ranks being other runs, and (slow) two local gloo ranks training half the batches each."""
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from mmengine.config import Config

from attnbench.sweep.plan import build_plan
from attnbench.sweep.worker import distributed_world, scale_learning_rate

ROOT = Path(__file__).resolve().parents[1]
DET = str(ROOT / "configs/detection/faster-rcnn_r50w8_fpn_mini-shapes.py")
NMT = str(ROOT / "configs/translation/transformer-mini_mini-corpus.py")
RANK_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


@pytest.fixture
def clean_environment(monkeypatch):
    for name in (*RANK_VARIABLES, "SLURM_NTASKS", "SLURM_NPROCS", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_JOB_ID",
                 "SLURM_JOB_NODELIST", "SLURM_STEP_NODELIST", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID"):
        monkeypatch.delenv(name, raising=False)
    yield
    for name in RANK_VARIABLES:  # distributed_world writes them into os.environ itself
        os.environ.pop(name, None)


def test_one_process_is_rank_0_of_1(clean_environment):
    assert distributed_world() == (0, 1)


def test_slurm_tasks_read_as_torchrun_ranks(clean_environment, monkeypatch):
    monkeypatch.setenv("SLURM_NTASKS", "2")
    monkeypatch.setenv("SLURM_PROCID", "1")
    monkeypatch.setenv("SLURM_LOCALID", "1")
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "localhost")
    assert distributed_world() == (1, 2)
    assert (os.environ["LOCAL_RANK"], os.environ["MASTER_ADDR"]) == ("1", "localhost")
    assert os.environ["MASTER_PORT"] == str(20000 + 42 * 101 % 20000)  # every task of the job agrees


def test_torchrun_ranks_are_left_alone(clean_environment, monkeypatch):
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("SLURM_NTASKS", "1")
    assert distributed_world() == (3, 4)


@pytest.mark.parametrize("config, per_rank, expected_base", [
    (DET, 4, 8),     # the config states base_batch_size = 8: 2 ranks x 4 = 8 keep the learning rate
    (NMT, 128, 256),  # none stated: the file's own batch (256) is the reference, whatever --cfg-options say
])
def test_learning_rate_follows_the_total_batch(config, per_rank, expected_base):
    cfg = Config.fromfile(config)
    cfg.merge_from_dict({"train_dataloader.batch_size": per_rank})
    scale_learning_rate(cfg, config)
    assert cfg.auto_scale_lr == dict(enable=True, base_batch_size=expected_base)


def test_a_run_on_more_ranks_is_another_run():
    one, two = (build_plan(["det"], ["0010"], [], [0], "mini", procs=procs)[1] for procs in (1, 2))
    assert (one.procs, two.procs) == (1, 2) and one.run_id != two.run_id and one.cfg_options == two.cfg_options
    options = build_plan(["nmt"], [], [], [0], "smoke", cfg_options={"train_dataloader.batch_size": 64})[0]
    assert options.cfg_options["train_dataloader.batch_size"] == 64
    with pytest.raises(ValueError, match="--procs-per-run"):
        build_plan(["det"], [], [], [0], "mini", procs=0)


@pytest.mark.slow
def test_two_local_ranks_each_train_half_the_batches(tmp_path):
    def sweep(*args):
        done = subprocess.run([sys.executable, "tools/sweep.py", "--tasks", "det,nmt", "--slot", "enc-dec",
                               "--factors", "0010", "--preset", "smoke", "--results", str(tmp_path), "--no-wandb",
                               "--no-plot", *args], cwd=ROOT, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stdout + done.stderr

    sweep()
    sweep("--procs-per-run", "2")
    rows = pd.read_csv(tmp_path / "results.csv")
    assert (rows["status"] == "ok").all() and sorted(rows["world_size"]) == [1] * 4 + [2] * 4
    det = rows[rows["task"] == "det"].groupby("world_size")["train_iters"].agg(set)
    assert det[1] == {2} and det[2] == {1}  # 16 images, 8 a batch: 2 steps on one rank, 1 on each of two
    nmt = rows[rows["task"] == "nmt"].groupby("world_size")["train_iters"].agg(set)
    assert nmt[1] == nmt[2] == {4}  # an iteration-based schedule: the same steps, twice the total batch
