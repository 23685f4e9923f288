"""The sweep: results store, plan validation, failure recording, resume, W&B offline, plots."""
import io
import json
import os
import subprocess
import sys
import time
from multiprocessing import Pool
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from attnbench.config_files import vision_config_path
from attnbench.mm.run_setup import cpu_model
from attnbench.sweep.launch import SweepRunner, snapshot_code
from attnbench.sweep.plan import Run, build_plan, parse_seeds, seed_list
from attnbench.analysis.effects import factor_effects
from attnbench.analysis.plots import pareto_front, plot_panels, plot_tradeoffs, row_kind, select_rows
from attnbench.analysis.summary import comparison_table, cost_table, summarize
from attnbench.sweep.store import ResultsStore
from attnbench.sweep.tasks import TASKS
from wandb_log import config_and_summary

ROOT = Path(__file__).resolve().parent.parent
from attnbench.commands import sweep as sweep_tool  # tools/sweep.py's command (`sweep` is a fixture here)


def _record(args):
    root, i = args
    ResultsStore(root).record({"run_id": f"r{i}", "task": "det", "status": "ok", "value": i})


def test_store_replaces_rows_and_loses_nothing_under_concurrency(tmp_path):
    with Pool(4) as pool:
        pool.map(_record, [(tmp_path, i) for i in range(24)])
    store = ResultsStore(tmp_path)
    assert sorted(store.read()["run_id"]) == sorted(f"r{i}" for i in range(24))
    store.record({"run_id": "r3", "task": "det", "status": "failed", "error": "boom"})
    df = store.read()
    assert len(df) == 24 and df.loc[df["run_id"] == "r3", "status"].item() == "failed"
    assert "r3" not in store.completed() and "r4" in store.completed()
    assert not list(tmp_path.glob(".results-*"))  # no temporary file left behind


@pytest.mark.parametrize("argv,message", [
    (["--factors", "0120"], "four characters"),
    (["--factors", "0000"], "enables no term"),
    (["--factors", "0110", "--modules", "teleport"], "unknown token 'teleport'"),
    (["--factors", "0110", "--tasks", "det,cls"], "unknown task"),
    (["--factors", "0110", "--slot", "enc-dec"], "applies to the translation tasks"),
    (["--factors", "0110", "--seeds", "0"], "--seeds must be a positive count"),
    (["--factors", "0110", "--results", "/proc/attnbench"], "not writable"),
    (["--factors", "0110", "--launcher", "kubernetes"], "unknown launcher"),
    (["--modules", "ocr", "--tasks", "det,seg"], "replaces the segmentation decode head; there is no det config"),
    (["--modules", "ocr+se", "--tasks", "seg"], "'ocr' replaces the decode head and is run alone"),
])
def test_bad_input_fails_with_one_line_before_training(argv, message):
    # The timeout guards against a hang, not the speed: each call imports torch and OpenMMLab, which on a loaded
    # 2-core machine took more than 120 s.
    proc = subprocess.run([sys.executable, str(ROOT / "tools/sweep.py"), *argv, "--no-wandb"],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 2
    errors = [line for line in proc.stderr.splitlines() if line.startswith("sweep.py: error")]
    assert len(errors) == 1 and message in errors[0], proc.stderr


def tiny_run(tmp_path, variant, seed=0, **extra):
    """A det mini run on 16 generated images for 2 iterations."""
    data_root = str(tmp_path / "data") + "/"
    generate = dict(num_train=16, num_val=4)
    dataset = dict(data_root=data_root, generate=generate)
    options = {
        "train_dataloader.dataset": dataset, "val_dataloader.dataset": dataset,
        "test_dataloader.dataset": dataset, "train_dataloader.batch_size": 8,
        **{f"{split}_evaluator.{i}.ann_file": data_root + "annotations/instances_val.json"
           for split in ("val", "test") for i in (0, 1)},  # bbox AP, class-agnostic AP
        "train_cfg.max_epochs": 1, "train_cfg.val_interval": 1, "param_scheduler": [],
    } | extra
    return Run("det", "mini", variant, seed, None, str(vision_config_path("det", "mini", variant)), options)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """Three runs: a baseline, an attention variant logging to W&B offline, and a diverging one."""
    tmp_path = tmp_path_factory.mktemp("sweep")
    store = ResultsStore(tmp_path / "results")
    store.check_writable()
    runs = [tiny_run(tmp_path, "baseline"), tiny_run(tmp_path, "0010"),
            tiny_run(tmp_path, "1111", **{"optim_wrapper.optimizer.lr": 1e12, "optim_wrapper.clip_grad": None})]
    runner = SweepRunner(store, wandb=dict(project="attnbench-test", group="test", mode="offline"))
    rows = {row["variant"]: row for row in runner.run_all(runs)}
    return store, runner, runs, rows


@pytest.mark.slow
def test_runs_are_recorded_with_measurements(sweep):
    store, _, _, rows = sweep
    ok = rows["0010"]
    assert ok["status"] == "ok", ok.get("error")
    assert ok["metric"] == "coco/bbox_mAP" and 0.0 <= ok["value"] <= 1.0
    assert ok["macs_modules"] > 0 and abs(ok["macs_modules"] - ok["macs_modules_analytic"]) <= 0.02 * ok["macs_modules"]
    assert ok["macs_model"] > ok["macs_modules"] and ok["params_model"] > ok["params_modules"] > 0
    assert rows["baseline"]["status"] == "ok" and rows["baseline"]["macs_modules"] == 0
    df = store.read()
    assert set(df["variant"]) == {"baseline", "0010", "1111"}
    assert df["git_commit"].notna().all() and df["config_hash"].notna().all()
    assert (df["config"] == "configs/detection/" + df["config"].str.split("/").str[-1]).all()  # repository-relative


@pytest.mark.slow
def test_each_run_records_its_own_times_and_cost(sweep):
    store, _, _, rows = sweep
    ok = rows["0010"]
    assert ok["run_seconds"] > ok["train_seconds"] >= ok["val_seconds"] > 0
    assert ok["outside_seconds"] == pytest.approx(ok["run_seconds"] - ok["train_seconds"] + ok["val_seconds"], abs=0.15)
    starts = sorted(row["started_at"] for row in rows.values())
    assert ok["started_at"] <= ok["finished_at"] and starts[0] < starts[-1]  # each run's own start, not the sweep's


@pytest.mark.slow
def test_workers_run_from_the_code_snapshot_taken_at_the_start(sweep):
    store, runner, runs, _ = sweep
    code = runner.code
    assert code.parent == store.root / "code" and snapshot_code(store.root) == code  # one copy per content
    assert (code / "attnbench" / "sweep" / "worker.py").read_bytes() == (ROOT / "attnbench/sweep/worker.py").read_bytes()
    spec = json.loads((runner.run_dir(runs[1]) / "run.json").read_text())
    assert Path(spec["config"]).is_relative_to(code / "configs")
    assert f"from {code / 'attnbench'}" in (runner.run_dir(runs[1]) / "run.log").read_text()  # what the worker imported


@pytest.mark.slow
def test_a_run_forked_by_the_server_trains_as_one_run_in_a_process_of_its_own(sweep, tmp_path):
    """The local launcher forks runs from a server that imported once; the one-run worker (Slurm,
    submitit) starts a fresh process: the same run trains to the same weights, bit for bit."""
    _, runner, runs, rows = sweep
    forked = runner.run_dir(runs[1])
    spec = json.loads((forked / "run.json").read_text()) | {"work_dir": str(tmp_path), "wandb": None}
    (tmp_path / "run.json").write_text(json.dumps(spec))
    proc = subprocess.run([sys.executable, "-m", "attnbench.sweep.worker", str(tmp_path / "run.json"),
                           str(tmp_path / "result.json")], env=os.environ | {"OMP_NUM_THREADS": "1"},
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert json.loads((tmp_path / "result.json").read_text())["value"] == rows["0010"]["value"]
    weights = [torch.load(folder / "epoch_1.pth", map_location="cpu", weights_only=False)["state_dict"]
               for folder in (forked, tmp_path)]
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
    assert list((runner.store.root / "runs").glob("fork-server-*.log"))  # the servers' own output


def test_the_summary_keeps_the_loss_of_the_first_iteration_only():
    from types import SimpleNamespace

    from mmengine.logging import MessageHub

    from attnbench.mm.hooks import RunSummaryHook

    runner = SimpleNamespace(iter=0, message_hub=MessageHub.get_instance("test-loss-first"))
    hook = RunSummaryHook()
    hook.before_run(runner)
    hook.before_train(runner)
    assert np.isnan(hook.extra["loss_first"])  # nothing trained yet
    for loss in (2.5, 1.5):
        hook.after_train_iter(runner, 0, outputs=dict(loss=torch.tensor(loss)))
        runner.iter += 1
    assert hook.extra["loss_first"] == 2.5 and runner.message_hub.get_info("loss_first") == 2.5
    resumed = RunSummaryHook()  # a later attempt reads it back from the checkpoint's message hub
    resumed.before_run(runner)
    resumed.before_train(runner)
    resumed.after_train_iter(runner, 0, outputs=dict(loss=torch.tensor(0.5)))
    assert resumed.extra["loss_first"] == 2.5


def test_the_cost_table_gives_each_finished_runs_share_outside_training():
    runs = pd.DataFrame([
        dict(task="det", preset="mini", variant="0010", seed=1, status="ok", run_seconds=200.0, train_seconds=196.0,
             val_seconds=4.0, outside_seconds=8.0),
        dict(task="det", preset="mini", variant="baseline", seed=1, status="ok", run_seconds=100.0,
             train_seconds=99.0, val_seconds=2.0, outside_seconds=3.0),
        dict(task="det", preset="mini", variant="1111", seed=1, status="failed", run_seconds=50.0),
        dict(task="det", preset="mini", variant="0110", seed=1, status="ok", run_seconds=90.0),  # recorded before
        dict(task="det", preset="mini", variant="0011", seed=1, status="ok", run_seconds=50.0, train_seconds=99.0,
             val_seconds=2.0, outside_seconds=-47.0),  # resumed, recorded before the last attempt was told apart
    ])
    table = cost_table(runs)
    assert list(table["variant"]) == ["0010", "baseline"] and list(table["outside %"]) == [4.0, 3.0]
    assert cost_table(runs.drop(columns="outside_seconds")).empty


def test_the_time_outside_training_is_the_attempts_wall_time_less_its_training_steps():
    """A run resumed from a checkpoint: train_seconds spans both attempts (300 s before the kill, 200 s
    after), run_seconds the last attempt's 230 s, of which 200 - 10 trained; a failed run has no share."""
    from attnbench.sweep.worker import _cost

    row = dict(train_seconds=500.0, val_seconds=10.0)
    assert _cost(row, 230.0, attempt_train_seconds=200.0) == dict(run_seconds=230.0, outside_seconds=40.0)
    assert _cost(dict(status="failed"), 12.0, None) == dict(run_seconds=12.0)


def test_the_sweep_writes_the_generated_data_before_its_runs(tmp_path, monkeypatch):
    runner = SweepRunner(ResultsStore(tmp_path / "results"), snapshot=False)
    found = []

    def execute(run, on_start):  # what a worker would find
        found.append((tmp_path / "data" / "mini_shapes.json").is_file())
        return {"status": "failed", "error": "not run"}

    monkeypatch.setattr(runner, "_execute_local", execute)
    list(runner.run_all([tiny_run(tmp_path, "baseline"), tiny_run(tmp_path, "0010")]))
    assert found == [True, True]  # in no run's time


@pytest.mark.slow
def test_diverging_run_is_recorded_as_failed_and_the_sweep_goes_on(sweep):
    _, _, _, rows = sweep
    assert rows["1111"]["status"] == "failed"
    assert "diverged" in rows["1111"]["error"] or "nan" in rows["1111"]["error"].lower()


def test_a_rerun_skips_finished_runs_and_hands_failed_and_missing_ones_to_the_runner(tmp_path, monkeypatch, capsys):
    """tools/sweep.py on a store that holds a run ``ok`` and one ``failed``: it runs the failed and the unrecorded
    runs, not the finished one; ``--force`` runs all three afresh."""
    flags = ["--tasks", "nmt", "--slot", "enc-dec", "--factors", "1111,0111", "--seeds", "1", "--results",
             str(tmp_path), "--no-wandb", "--no-plot"]
    baseline, failed, missing = sweep_tool.plan(sweep_tool.parse_args(flags))
    store = ResultsStore(tmp_path)
    for run, status in ((baseline, "ok"), (failed, "failed")):
        store.record({"run_id": run.run_id, "task": run.task, "variant": run.variant, "seed": run.seed,
                      "status": status, "metric": "translation/BLEU", "value": 1.0})
    given = []

    def run_all(self, runs, on_start=None, fresh=False):
        given.append(([run.variant for run in runs], fresh))
        for run in runs:
            yield dict(task=run.task, variant=run.variant, seed=run.seed, status="ok", metric="translation/BLEU",
                       value=2.0)

    monkeypatch.setattr(SweepRunner, "run_all", run_all)
    assert sweep_tool.main(flags) == 0
    assert "3 runs planned, 1 already done, 2 to run" in capsys.readouterr().out
    assert sweep_tool.main([*flags, "--force"]) == 0
    assert given == [([failed.variant, missing.variant], False), (["baseline", failed.variant, missing.variant], True)]


@pytest.mark.slow
def test_run_killed_after_its_final_checkpoint_is_validated_when_resumed(sweep):
    store, runner, runs, rows = sweep
    baseline = runs[0]
    checkpoint_path = (runner.run_dir(baseline) / "last_checkpoint").read_text().strip()  # what a rerun resumes from
    checkpoint = torch.load(checkpoint_path, map_location="cpu", weights_only=False)
    saved_seconds = checkpoint["message_hub"]["runtime_info"]["train_seconds"]
    assert 0 < saved_seconds <= rows["baseline"]["train_seconds"]
    checkpoint["message_hub"]["runtime_info"]["train_seconds"] = 1000.0  # as if the first attempt had been long
    torch.save(checkpoint, checkpoint_path)
    (row,) = runner.run_all([baseline])
    assert row["status"] == "ok", row.get("error")
    assert row["value"] == pytest.approx(rows["baseline"]["value"])  # the same final weights, validated
    assert row["train_seconds"] > 1000.0  # both attempts counted
    assert 0 <= row["outside_seconds"] < row["run_seconds"]  # this attempt's, not less the first attempt's 1000 s
    assert row["loss_first"] == rows["baseline"]["loss_first"] > 0  # the first attempt's, restored from the checkpoint


@pytest.mark.slow
def test_a_forced_run_trains_again_from_scratch(sweep):
    """--force (``fresh``): the run's folder goes first, so a finished run trains again rather than resuming
    at its last checkpoint and only validating; on the same machine it reproduces its value."""
    store, runner, runs, rows = sweep
    baseline = runs[0]
    stale = runner.run_dir(baseline) / "stale.txt"
    stale.write_text("from an earlier attempt")
    (row,) = runner.run_all([baseline], fresh=True)
    assert row["status"] == "ok", row.get("error")
    assert not stale.exists() and len(list(runner.run_dir(baseline).glob("2*_*/"))) == 1  # one attempt's log folder
    assert row["value"] == rows["baseline"]["value"] and row["loss_first"] == rows["baseline"]["loss_first"]
    assert row["train_iters"] == rows["baseline"]["train_iters"] and row["train_seconds"] < 1000.0


@pytest.mark.slow
def test_wandb_offline_run_has_config_and_summary(sweep):
    store, runner, runs, _ = sweep
    (run_file,) = runner.run_dir(runs[1]).glob("**/offline-run-*/run-*.wandb")
    config, summary = config_and_summary(run_file)
    assert run_file.name == f"run-{store.read().set_index('run_id').loc[runs[1].run_id, 'wandb_id']}.wandb"
    identity = json.loads(config["attnbench_run"])
    assert identity["variant"] == "0010" and identity["task"] == "det" and identity["run_id"] == runs[1].run_id
    assert [identity[f"E{i}"] for i in range(1, 5)] == [False, False, True, False]  # W&B filters on the terms
    recorded = store.read().set_index("run_id").loc[runs[1].run_id]
    for column in ("gate_max", "gate_loss_max", "gate_loss_opened"):  # the gate; the loss's part of it, and its sign
        assert float(summary[column]) == pytest.approx(recorded[column])
    assert recorded["gate_loss_max"] > 0
    assert "attnbench.GeneralizedAttention" in config["model"]  # the full training config
    assert int(summary["macs_modules"]) > 0 and int(summary["macs_model"]) > int(summary["macs_modules"])
    row = store.read().set_index("run_id").loc[runs[1].run_id]
    assert float(summary["coco/bbox_mAP"]) == pytest.approx(row["value"])


@pytest.mark.slow
def test_report_table_and_plot(sweep, tmp_path):
    store, _, _, _ = sweep
    summary = summarize(store.read())
    assert set(summary["variant"]) == {"baseline", "0010"}  # failed runs are left out
    assert "delta vs baseline" in comparison_table(store.read(), "markdown")
    paths = plot_tradeoffs(store.read(), tmp_path / "plot")
    assert all(p.exists() and p.stat().st_size > 1000 for p in paths)


def test_plot_puts_survey_rows_in_a_panel_of_their_own_with_the_baseline(tmp_path):
    variants = {"det": ["baseline", "0110", "deformable", "0010+deformable", "se", "ocr"], "seg": ["baseline", "se"],
                "nmt": ["baseline", "1111", "lightweight"]}
    rows = [dict(task=task, preset="mini", slot="enc-dec" if task == "nmt" else None, variant=v, seed=seed,
                 metric="m", value=float(i + seed), status="ok", macs_model=1.0 + i, macs_modules=float(i),
                 params_model=1.0) for task, vs in variants.items() for i, v in enumerate(vs) for seed in (0, 1)]
    panels = {title: sorted(points["variant"]) for title, points in plot_panels(summarize(pd.DataFrame(rows)))}
    assert panels == {
        "det (mini): the study's rows": ["0010+deformable", "0110", "baseline", "deformable"],
        "det (mini): survey modules": ["baseline", "ocr", "se"],
        "nmt/enc-dec (mini)": ["1111", "baseline", "lightweight"],
        "seg (mini)": ["baseline", "se"]}
    assert [row_kind(v) for v in variants["det"]] == ["baseline", "factors", "study", "combination", "survey", "survey"]
    paths = plot_tradeoffs(pd.DataFrame(rows), tmp_path / "plot")
    assert all(p.exists() and p.stat().st_size > 1000 for p in paths)
    paths = plot_tradeoffs(pd.DataFrame(rows), tmp_path / "plot_attention", cost="attention")
    assert [p.name for p in paths] == ["plot_attention.png", "plot_attention.svg"]


def test_plot_and_compare_show_the_tasks_and_row_group_asked_for(tmp_path):
    """plot.py --tasks det --rows study draws the study's rows of det with the baseline, one panel; compare.py
    --rows survey gives the survey's rows with the baseline; a group or task without runs is one clear error."""
    store = ResultsStore(tmp_path)
    for task in ("det", "seg"):
        for i, variant in enumerate(("baseline", "0010", "se", "gc")):
            for seed in (0, 1):
                store.record(dict(run_id=f"{task}-{variant}-{seed}", task=task, preset="mini", variant=variant,
                                  seed=seed, metric="m", value=float(i + seed), status="ok", macs_model=1.0 + i,
                                  macs_modules=float(i), params_model=1.0))
    assert sorted(select_rows(store.read(), "survey")["variant"].unique()) == ["baseline", "gc", "se"]

    def tool(name, *args):
        return subprocess.run([sys.executable, f"tools/{name}.py", "--results", str(tmp_path), *args], cwd=ROOT,
                              capture_output=True, text=True, timeout=300)

    done = tool("plot", "--tasks", "det", "--rows", "study", "--out", str(tmp_path / "study"))
    assert done.returncode == 0 and (tmp_path / "study.png").is_file(), done.stderr
    shown = tool("compare", "--tasks", "seg", "--rows", "survey")
    assert shown.returncode == 0, shown.stderr
    assert [line.split()[2] for line in shown.stdout.splitlines() if line.split()[:2] == ["seg", "mini"]] == [
        "baseline", "se", "gc"]
    for name, args, error in [("plot", ("--tasks", "det,nmt"), "--tasks nmt: no runs in"),
                              ("compare", ("--tasks", "det,nmt"), "--tasks nmt: no runs in"),
                              ("plot", ("--tasks", "det", "--rows", "bogus"), "invalid choice: 'bogus'")]:
        failed = tool(name, *args)
        assert failed.returncode == 2 and error in failed.stderr, failed.stderr


def test_plot_draws_each_seed_as_a_dot(monkeypatch):
    """Beside each row's mean ± std, one dot per run at the row's cost: all-or-nothing outcomes show as clusters."""
    import matplotlib.collections

    from attnbench.analysis import plots

    figures = []
    monkeypatch.setattr(plots, "save_figure", lambda fig, stem: figures.append(fig) or [])

    values = {"baseline": [0.5, 0.55, 0.52], "1111": [1.0, 0.56, 0.99]}
    rows = [dict(task="det-flag", preset="mini", slot=None, variant=v, seed=s, metric="m", value=x, status="ok",
                 macs_model=2e9 if v == "1111" else 1e9, macs_modules=1e9 if v == "1111" else 0.0, params_model=1.0)
            for v, xs in values.items() for s, x in enumerate(xs)]
    plot_tradeoffs(pd.DataFrame(rows), "plot", cost="attention")
    (ax,) = figures[0].axes
    dots = [c.get_offsets() for c in ax.collections if isinstance(c, matplotlib.collections.PathCollection)]
    points = sorted(map(tuple, np.concatenate(dots).tolist()))
    assert points == sorted([(0.0, x) for x in values["baseline"]] + [(1.0, x) for x in values["1111"]])
    assert ax.get_xlabel().startswith("attention GMACs")
    assert "gate" not in ax.get_title()  # no run records a gate


def test_plot_titles_say_how_far_the_gates_ended_open(monkeypatch):
    from attnbench.analysis import plots

    figures = []
    monkeypatch.setattr(plots, "save_figure", lambda fig, stem: figures.append(fig) or [])
    rows = [dict(task="seg", preset="mini", slot=None, variant=v, seed=s, metric="m", value=0.5, status="ok",
                 macs_model=1e9, macs_modules=0.0, params_model=1.0, gate_max=gate)
            for v, gates in {"baseline": [None, None], "0010": [0.991, 1.024], "deformable": [None, None]}.items()
            for s, gate in enumerate(gates)]
    plot_tradeoffs(pd.DataFrame(rows), "plot")
    (ax,) = figures[0].axes
    assert ax.get_title() == "seg (mini)"  # one line; the gates in the caption
    assert ax.get_xlabel().endswith("\nlargest final gate |γ| per gated run: 0.991-1.024 (2 runs)")
    assert plots.gate_note(pd.DataFrame({"gate_max": [0.9925, None]})).endswith(": 0.993 (1 run)")
    moved = plots.gate_note(pd.DataFrame({"gate_max": [0.99, 1.02, 0.98], "gate_loss_max": [0.015, 0.05, None]}))
    assert moved == ("largest final gate |γ| per gated run: 0.980-1.020 (3 runs)"
                     "\ngate moved by the loss (not weight decay): 0.015-0.050 (2 runs)")


def test_single_seed_panels_draw_no_frontier_and_say_so_and_the_legend_fills_the_spare_cell(monkeypatch):
    from attnbench.analysis import plots

    figures = []
    monkeypatch.setattr(plots, "save_figure", lambda fig, stem: figures.append(fig) or [])
    seeds = {"det": 1, "seg": 3, "nmt": 2}
    rows = [dict(task=task, preset="mini", slot=None, variant=v, seed=s, metric="m", value=0.5 + 0.1 * s + (v == "0010"),
                 status="ok", macs_model=2e9 if v == "0010" else 1e9, macs_modules=0.0, params_model=1.0)
            for task, n in seeds.items() for v in ("baseline", "0010") for s in range(n)]
    plot_tradeoffs(pd.DataFrame(rows), "plot")
    axes = figures[0].axes
    assert [plots.grid_columns(n) for n in range(1, 8)] == [1, 2, 3, 2, 3, 3, 2] and len(axes) == 3
    frontier = {ax.get_title(): any(line.get_label().startswith("Pareto") for line in ax.lines) for ax in axes}
    assert frontier == {"det (mini): one seed, differences untested": False, "nmt (mini)": True, "seg (mini)": True}
    assert all("\n" not in ax.get_title() for ax in axes)
    assert [ax.get_legend() is not None for ax in axes] == [True, False, False]  # no spare cell: the first panel
    figures.clear()
    plot_tradeoffs(pd.DataFrame([r for r in rows if r["task"] != "nmt"]), "plot")
    axes = figures[0].axes
    assert len(axes) == 2 and [ax.get_legend() is not None for ax in axes] == [True, False]
    rows += [dict(r, task=task) for task in ("nmt-l10n", "det-flag") for r in rows if r["task"] == "nmt"]
    figures.clear()
    plot_tradeoffs(pd.DataFrame(rows), "plot")
    (*panels, spare) = figures[0].axes
    assert len(panels) == 5 and not spare.axison and spare.get_legend() is not None  # 3x2: the legend's cell
    assert all(ax.get_legend() is None for ax in panels)


def test_each_panel_counts_macs_in_the_unit_that_puts_its_largest_at_one_or_more(monkeypatch):
    from attnbench.analysis import plots

    assert plots.mac_unit([4.48e6, 4.8e6]) == (1e6, "M") and plots.mac_unit([0.0, 2e9]) == (1e9, "G")
    assert plots.mac_unit([0.0]) == (1e9, "G") and plots.mac_unit([512.0]) == (1.0, "")
    figures = []
    monkeypatch.setattr(plots, "save_figure", lambda fig, stem: figures.append(fig) or [])
    rows = [dict(task=task, preset="mini", slot=None, variant=v, seed=s, metric="m", value=s + (v == "0010"),
                 status="ok", macs_model=macs * (1.25 if v == "0010" else 1), macs_modules=0.0, params_model=1.0)
            for task, macs in (("det", 2e9), ("nmt", 4.48e6)) for v in ("baseline", "0010") for s in range(2)]
    plot_tradeoffs(pd.DataFrame(rows), "plot")
    det, nmt = figures[0].axes[:2]
    assert det.get_xlabel().startswith("model GMACs") and nmt.get_xlabel().startswith("model MMACs")
    assert sorted(x for x, _ in nmt.lines[0].get_xydata()) == pytest.approx([4.48, 5.6])  # the frontier, in MMACs


def test_labels_land_in_the_same_places_on_a_slow_machine(monkeypatch):
    """adjustText moves labels for one second by default, as many steps as the machine manages then: a step
    count instead draws a store's plot the same under any load."""
    import itertools

    import adjustText

    from attnbench.analysis import plots

    figures = []
    monkeypatch.setattr(plots, "save_figure", lambda fig, stem: figures.append(fig) or [])
    rows = [dict(task="det", preset="mini", slot=None, variant=v, seed=s, metric="m", value=0.5 + 0.001 * i + 0.01 * s,
                 status="ok", macs_model=1e9 * (1 + 0.001 * i), macs_modules=0.0, params_model=1.0)
            for i, v in enumerate(("baseline", "0010", "0100", "0110", "1000", "1111")) for s in range(2)]
    plot_tradeoffs(pd.DataFrame(rows), "plot")
    clock = itertools.count(step=10.0)  # ten seconds pass between any two looks at the clock
    monkeypatch.setattr(adjustText, "timer", lambda: next(clock))
    plot_tradeoffs(pd.DataFrame(rows), "plot")
    (fast, slow) = ([text.get_position() for text in figure.axes[0].texts] for figure in figures)
    assert len(fast) == 6 and fast == slow


def test_a_figure_saved_twice_writes_the_same_bytes(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from attnbench.analysis.plots import save_figure

    written = []
    for name in ("a", "b"):
        fig, ax = plt.subplots()
        ax.plot([0, 1], [1, 0], "o-")
        written.append([path.read_bytes() for path in save_figure(fig, tmp_path / name)])
    assert written[0] == written[1] and b"<dc:date>" not in written[0][1]


def test_pareto_front():
    points = pd.DataFrame({"variant": list("abcd"), "macs_model": [1, 2, 3, 4], "mean": [0.5, 0.4, 0.7, 0.6]})
    assert list(pareto_front(points)["variant"]) == ["a", "c"]
    points["macs_modules"] = [4, 3, 2, 1]
    assert list(pareto_front(points, "macs_modules")["variant"]) == ["d", "c"]


def test_summary_welch_t_against_the_baseline():
    values = {"baseline": [1.0, 2.0, 3.0], "0010": [3.0, 4.0, 5.0], "0100": [9.0]}
    rows = [dict(task="det", preset="mini", slot=None, variant=v, seed=i, metric="m", value=x, status="ok",
                 macs_model=1.0, macs_modules=0.0, params_model=1.0) for v, xs in values.items() for i, x in enumerate(xs)]
    s = summarize(pd.DataFrame(rows)).set_index("variant")
    assert s.loc["0010", "delta"] == pytest.approx(2.0) and s.loc["0100", "delta"] == pytest.approx(7.0)
    assert s.loc["0010", "delta_t"] == pytest.approx(2.0 / (1 / 3 + 1 / 3) ** 0.5)
    assert pd.isna(s.loc["0100", "delta_t"]) and pd.isna(s.loc["baseline", "delta_t"])  # one seed; itself


def test_compare_cli_filters_tasks_and_slots(tmp_path):
    store = ResultsStore(tmp_path / "results")
    for run_id, task, slot, variant, value in [("a", "det", None, "baseline", 0.3), ("b", "nmt", None, "baseline", 80.0),
                                               ("c", "nmt", "enc-dec", "0111", 75.0), ("d", "nmt", "enc-self", "0111", 79.0)]:
        store.record(dict(run_id=run_id, task=task, preset="mini", slot=slot, variant=variant, seed=0, metric="m",
                          value=value, status="ok", macs_model=1e9, macs_modules=0.0, params_model=1.0))

    def compare(*argv):
        return subprocess.run([sys.executable, str(ROOT / "tools/compare.py"), "--results", str(store.root), *argv],
                              capture_output=True, text=True, timeout=120)

    shown = compare("--tasks", "nmt", "--slot", "enc-dec", "--format", "csv")
    assert shown.returncode == 0, shown.stderr
    table = pd.read_csv(io.StringIO(shown.stdout))
    assert set(table["task"]) == {"nmt/enc-dec"} and set(table["variant"]) == {"baseline", "0111"}
    assert table.set_index("variant").loc["0111", "delta vs baseline"] == pytest.approx(-5.0)
    missing = compare("--tasks", "seg")
    assert missing.returncode == 2 and "--tasks seg: no runs in" in missing.stderr
    assert "(tasks there: det,nmt)" in missing.stderr
    misspelt = compare("--tasks", "nmt", "--slot", "encdec")
    assert misspelt.returncode == 2 and "--slot encdec: no runs in" in misspelt.stderr
    assert "(slots there: enc-dec, enc-self)" in misspelt.stderr


def test_readme_tables_refresh_from_the_store_they_name(tmp_path):
    store = ResultsStore(tmp_path / "results")
    for run_id, variant, value in [("a", "baseline", 0.3), ("b", "0010", 0.5)]:
        store.record(dict(run_id=run_id, task="det", preset="mini", slot=None, variant=variant, seed=0, metric="m",
                          value=value, status="ok", macs_model=1e9, macs_modules=0.0, params_model=1.0))
    doc = tmp_path / "doc.md"
    doc.write_text(f"Intro.\n<!-- compare.py --results {store.root} --format csv -->\nold table\n"
                   "<!-- end compare.py -->\nOutro.\n")

    def tables(*argv):
        return subprocess.run([sys.executable, str(ROOT / "tools/readme_tables.py"), str(doc), *argv],
                              capture_output=True, text=True, timeout=120)

    stale = tables("--check")
    assert stale.returncode == 1 and "stale: compare.py --results" in stale.stdout
    assert "old table" in doc.read_text()  # --check writes nothing
    assert tables().returncode == 0 and tables("--check").returncode == 0
    intro, table, outro = doc.read_text().split("\n<!-- ")[0], *doc.read_text().split("-->\n")[1:]
    assert intro == "Intro." and outro == "Outro.\n"
    shown = pd.read_csv(io.StringIO(table.removesuffix("<!-- end compare.py ")))
    assert shown.set_index("variant").loc["0010", "delta vs baseline"] == pytest.approx(0.2)
    missing = subprocess.run([sys.executable, str(ROOT / "tools/readme_tables.py"), str(tmp_path / "nope.md")],
                             capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and missing.stderr.splitlines()[-1].endswith("nope.md: no such file")


@pytest.mark.slow
def test_readme_tables_are_the_committed_results():
    """Every results table in README.md and docs/*.md is what compare.py prints from the results store
    it names (readme_tables.py with no path checks all of them)."""
    proc = subprocess.run([sys.executable, str(ROOT / "tools/readme_tables.py"), "--check"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr + "\n(run python tools/readme_tables.py)"


def test_factor_effects_recover_planted_term_effects():
    """metric = 1.0 E2 + 0.5 E3 (+-0.1 between two seeds): E2 and E3 show, E1 and E4 do not."""
    from attnbench.attention.factors import ALL_FACTORS

    rows = []
    for variant in ["baseline", *ALL_FACTORS]:
        bits = "0000" if variant == "baseline" else variant
        for seed, noise in enumerate((-0.1, 0.1)):
            rows.append(dict(task="det", preset="mini", slot=None, variant=variant, seed=seed, metric="m",
                             value=1.0 * int(bits[1]) + 0.5 * int(bits[2]) + noise, status="ok",
                             macs_model=1.0, macs_modules=0.0, params_model=1.0))
    effects = factor_effects(pd.DataFrame(rows)).set_index("term")
    assert list(effects["pairs"]) == [8, 8, 8, 8, 15]
    assert effects["effect"].to_dict() == pytest.approx({"E1": 0.0, "E2": 1.0, "E3": 0.5, "E4": 0.0, "any": 0.8})
    assert effects["seed_std"].iloc[0] == pytest.approx(2 ** 0.5 * 0.1)
    # 8 pairs of rows with 2 seeds each: se = seed_std * sqrt(8 * (1/2 + 1/2)) / 8
    assert effects["effect_se"].iloc[0] == pytest.approx(2 ** 0.5 * 0.1 / 8 ** 0.5)
    assert effects.loc["E2", "z"] == pytest.approx(1.0 / effects.loc["E2", "effect_se"])
    # "any": E2 is on in 8 of the 15 factor sets, E3 in 8, so (8 * 1.0 + 8 * 0.5) / 15 = 0.8
    assert effects.loc["any", "effect_se"] == pytest.approx(2 ** 0.5 * 0.1 * (15 / 2 / 15 ** 2 + 1 / 2) ** 0.5)
    without_baseline = factor_effects(pd.DataFrame([r for r in rows if r["variant"] != "baseline"]))
    assert list(without_baseline["pairs"]) == [7, 7, 7, 7]  # the pair with 0000 and the "any" row are gone


def test_plan_identity_and_resume_keys():
    runs = build_plan(["det", "seg"], ["0110"], ["0010+deformable"], 2, "mini")
    assert len(runs) == 2 * 3 * 2 and len({r.run_id for r in runs}) == len(runs)
    assert {r.variant for r in runs} == {"baseline", "0110", "0010+deformable"}
    assert runs[0].run_id == build_plan(["det"], ["0110"], [], 2, "mini")[0].run_id
    assert [r.seed for r in runs] == [0] * 6 + [1] * 6  # seed by seed: a stopped sweep leaves whole seeds


@pytest.mark.parametrize("jobs, threads, expected", [(1, None, "1"), (2, None, "1"), (2, 3, "3"), (1, 3, "3")])
def test_local_runs_get_the_threads_their_config_fixes_whatever_the_jobs(tmp_path, monkeypatch, jobs, threads,
                                                                         expected):
    """A run's threads are the config's cpu_threads (1 on the mini presets) or --threads, never --jobs' share;
    another thread count is another run (its own id)."""
    import attnbench.sweep.launch as launch

    seen = []

    class FakeServer:  # the fork server's side: what it was started with and sent
        def __init__(self, worker, threads, log):
            self.threads, self.log, self.process = threads, log, subprocess.Popen(["true"])

        def run(self, request):
            seen.append((self.threads, request["threads"]))
            Path(request["result"]).write_text(json.dumps({"status": "ok", "metric": "m", "value": 1.0}))
            return 0

        def close(self):
            self.process.wait()

    monkeypatch.setattr(launch, "ForkServer", FakeServer)
    store = ResultsStore(tmp_path / "results")
    runs = build_plan(["det"], [], [], 2, "mini", threads=threads)
    rows = list(SweepRunner(store, jobs=jobs).run_all(runs))
    assert [row["status"] for row in rows] == ["ok", "ok"]
    assert seen == [(int(expected), int(expected))] * 2
    assert (runs[0].run_id == build_plan(["det"], [], [], 1, "mini")[0].run_id) == (threads is None)


def test_a_run_whose_fork_server_died_is_recorded_failed_and_the_next_run_gets_a_new_server(tmp_path, monkeypatch):
    import attnbench.sweep.launch as launch

    started = []

    class DyingFirstServer:  # the first server dies during its run; the ones after run theirs
        def __init__(self, worker, threads, log):
            self.threads, self.log, self.process = threads, log, subprocess.Popen(["true"])
            started.append(self)

        def run(self, request):
            if len(started) == 1:
                return None
            Path(request["result"]).write_text(json.dumps({"status": "ok", "metric": "m", "value": 1.0}))
            return 0

        def close(self):
            self.process.wait()

    monkeypatch.setattr(launch, "ForkServer", DyingFirstServer)
    rows = list(SweepRunner(ResultsStore(tmp_path / "results"), snapshot=False).run_all(
        build_plan(["det"], [], [], 2, "mini")))
    assert [row["status"] for row in rows] == ["failed", "ok"] and "fork server died" in rows[0]["error"]
    assert len(started) == 2


def test_with_cuda_each_run_starts_a_fresh_interpreter(tmp_path, monkeypatch):
    """A process forked after the server's imports asked CUDA for its devices cannot use CUDA."""
    import attnbench.sweep.launch as launch

    seen, real_run = [], subprocess.run

    def fake_run(command, **kwargs):  # the worker's launch; git (the commit of the row) runs for real
        if "env" not in kwargs:
            return real_run(command, **kwargs)
        seen.append((command[-4:-2], kwargs["env"]["OMP_NUM_THREADS"], kwargs["env"].get("CUDA_VISIBLE_DEVICES")))
        Path(command[-1]).write_text(json.dumps({"status": "ok", "metric": "m", "value": 1.0}))
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(launch.subprocess, "run", fake_run)
    monkeypatch.setattr(launch.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(launch.torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(launch, "ForkServer", None)  # never started
    rows = list(SweepRunner(ResultsStore(tmp_path / "results"), snapshot=False, jobs=2).run_all(
        build_plan(["det"], [], [], 1, "mini")))
    assert [row["status"] for row in rows] == ["ok"]
    assert seen[0][:2] == (["-m", "attnbench.sweep.worker"], "1") and seen[0][2] in ("0", "1")  # a GPU of its own


def test_configs_without_a_thread_count_share_the_cores_between_jobs(tmp_path):
    run = Run("det", "full", "baseline", 0, None, str(vision_config_path("det", "full", "baseline")), {})
    assert run.cpu_threads is None
    assert SweepRunner(ResultsStore(tmp_path), jobs=2).threads(run) == max(1, os.cpu_count() // 2)


def test_rows_record_the_commit_and_whether_the_code_differs_from_it(tmp_path, monkeypatch):
    import attnbench
    import attnbench.sweep.launch as launch

    def git(*args):
        return subprocess.run(["git", "-C", str(tmp_path), *args], capture_output=True, text=True, check=True).stdout

    (tmp_path / "attnbench").mkdir()
    (tmp_path / "results").mkdir()
    for path in ("attnbench/__init__.py", "results/results.csv"):
        (tmp_path / path).write_text("x\n")
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c")
    commit = git("rev-parse", "--short", "HEAD").strip()
    monkeypatch.setattr(attnbench, "__file__", str(tmp_path / "attnbench/__init__.py"))
    assert launch._git_commit() == commit
    (tmp_path / "results/results.csv").write_text("y\n")  # the sweep's own output does not count
    assert launch._git_commit() == commit
    (tmp_path / "attnbench/__init__.py").write_text("y\n")
    assert launch._git_commit() == commit + "+dirty"


@pytest.mark.parametrize("text,seeds", [("3", [0, 1, 2]), ("12-14", [12, 13, 14]), ("0,3,7", [0, 3, 7]),
                                        ("0,12-13", [0, 12, 13]), ("5-5", [5]), ("2,2-3", [2, 3])])
def test_seeds_as_a_count_a_range_or_a_list(text, seeds):
    assert parse_seeds(text) == seeds
    assert sorted({r.seed for r in build_plan(["det"], [], [], parse_seeds(text), "mini")}) == sorted(seeds)


@pytest.mark.parametrize("text", ["0", "5-3", "a", "1,", "-2", "1-2-3", "3.5"])
def test_bad_seeds_are_refused(text):
    with pytest.raises(ValueError, match="--seeds"):
        parse_seeds(text)


def test_a_descending_range_is_refused_with_its_reading():
    with pytest.raises(ValueError, match=r"A <= B \(3-5\?\)"):
        seed_list("5-3")


def test_fresh_seeds_keep_the_run_ids_of_a_count():
    """--seeds 2-3 plans the very runs --seeds 4 plans at seeds 2 and 3: a store resumes either way."""
    by_count = {(r.variant, r.seed): r.run_id for r in build_plan(["det"], ["0010"], [], 4, "mini")}
    fresh = build_plan(["det"], ["0010"], [], [2, 3], "mini")
    assert len(fresh) == 4 and all(by_count[r.variant, r.seed] == r.run_id for r in fresh)


def test_bad_thread_count_is_refused():
    with pytest.raises(ValueError, match="--threads"):
        build_plan(["det"], [], [], 1, "mini", threads=0)


@pytest.mark.slow
def test_submitit_launcher_runs_and_records(tmp_path):
    """The slurm path, through submitit's local executor."""
    store = ResultsStore(tmp_path / "results")
    store.check_writable()
    run = tiny_run(tmp_path, "0010", seed=1)
    (row,) = SweepRunner(store, launcher="submitit-local").run_all([run])
    assert row["status"] == "ok", row.get("error")
    assert store.completed() == {run.run_id}


def test_nmt_plan_and_shared_baseline():
    runs = build_plan(["nmt"], ["1000"], ["dynamic"], 1, "mini")
    assert [(r.variant, r.slot) for r in runs] == [
        ("baseline", None), ("1000", "enc-self"), ("1000", "dec-self"), ("1000", "enc-dec"),
        ("dynamic", "enc-self"), ("dynamic", "dec-self")]  # a convolution cannot attend to a memory
    assert runs[3].cfg_options == {"model.cross_attention": {"type": "generalized", "attention_type": "1000"}}
    with pytest.raises(ValueError, match="cannot fill the enc-dec slot"):
        build_plan(["nmt"], [], ["dynamic"], 1, "mini", slot="enc-dec")
    rows = [dict(run_id=r.run_id, task="nmt", preset="mini", slot=r.slot, variant=r.variant, seed=r.seed,
                 metric="translation/BLEU", value=v, macs_model=1, macs_modules=1, params_model=1, status="ok")
            for r, v in zip(runs[:4], [30.0, 29.0, 28.0, 31.0])]
    summary = summarize(pd.DataFrame(rows)).set_index(["slot", "variant"])
    assert summary.loc[("enc-dec", "1000"), "delta"] == pytest.approx(1.0)
    assert summary.loc[("enc-self", "baseline"), "mean"] == 30.0


@pytest.mark.parametrize("task, variant", [("det-near-far", "1111"), ("seg-marker", "0010+deformable"),
                                           ("det-same-different", "gc")])
def test_a_diagnostic_task_trains_the_study_model_on_its_rule(task, variant):
    """The same model as the study's mini config of the variant; only the data (rule, data_root) differ."""
    from mmengine.config import Config

    (run,) = build_plan([task], [], [variant], 1, "mini", baseline=False)
    cfg = Config.fromfile(run.config)
    cfg.merge_from_dict(run.cfg_options)
    study = Config.fromfile(vision_config_path(task[:3], "mini", variant))
    assert cfg.model.to_dict() == study.model.to_dict()
    rule = task[4:]
    for split in ("train", "val", "test"):
        dataset = cfg[f"{split}_dataloader"].dataset
        assert dataset.generate == dict(rule=rule) and dataset.data_root == f"data/mini_shapes_{rule}/"
        assert {k: v for k, v in dataset.items() if k not in ("generate", "data_root")} == {
            k: v for k, v in study[f"{split}_dataloader"].dataset.items() if k != "data_root"}
    (baseline,) = build_plan([task], [], [], 1, "mini")
    assert baseline.cfg_options == {} and baseline.config == run.config


def test_the_fcn_family_swaps_only_the_decode_head():
    """fcn-RULE: the DeepLabV3 diagnostic's model and data with an FCN head (no image pooling) in place of ASPP."""
    from mmengine.config import Config

    from attnbench.data.mini_shapes import DEFAULT_RULE, RULES

    assert {t for t in TASKS if t.startswith("fcn-")} == {f"fcn-{r}" for r in RULES if r != DEFAULT_RULE}
    (fcn,) = build_plan(["fcn-flag"], [], ["0010:gate=1"], 1, "mini", baseline=False)
    (seg,) = build_plan(["seg-flag"], [], ["0010:gate=1"], 1, "mini", baseline=False)
    fcn_cfg, seg_cfg = Config.fromfile(fcn.config), Config.fromfile(seg.config)
    for cfg, run in ((fcn_cfg, fcn), (seg_cfg, seg)):
        cfg.merge_from_dict(run.cfg_options)
    assert fcn_cfg.model.decode_head.type == "FCNHead" and seg_cfg.model.decode_head.type == "ASPPHead"
    assert {k: v for k, v in fcn_cfg.model.items() if k != "decode_head"} == {
        k: v for k, v in seg_cfg.model.items() if k != "decode_head"}
    for split in ("train", "val", "test"):
        assert fcn_cfg[f"{split}_dataloader"] == seg_cfg[f"{split}_dataloader"]
    assert fcn_cfg.val_evaluator == seg_cfg.val_evaluator


def test_diagnostic_tasks_refuse_full_scale_and_decode_heads():
    with pytest.raises(ValueError, match="task det-marker has no full preset; its presets: mini, smoke, long"):
        build_plan(["det-marker"], ["1111"], [], 1, "full")
    with pytest.raises(ValueError, match="varies the backbone only"):
        build_plan(["seg-near-far"], [], ["ocr"], 1, "mini")
    smoke = build_plan(["seg-marker"], ["1111"], [], 1, "smoke", baseline=False)[0]
    assert smoke.cfg_options["train_cfg.max_iters"] == 4 and "model.backbone.plugins" in smoke.cfg_options


def tiny_config_file(tmp_path, variant: str) -> Path:
    """A det mini config of ``variant`` on 16 generated images, one epoch of 2 iterations, as a file (so that
    ``tools/train.py`` and the sweep read the very same config)."""
    data_root = str(tmp_path / "data") + "/"
    ann_file = data_root + "annotations/instances_val.json"
    path = tmp_path / f"tiny-{variant}.py"
    path.write_text(f"""_base_ = {str(vision_config_path("det", "mini", variant))!r}
dataset = dict(data_root={data_root!r}, generate=dict(num_train=16, num_val=4))
train_dataloader = dict(batch_size=8, dataset=dataset)
val_dataloader = dict(dataset=dataset)
test_dataloader = val_dataloader
val_evaluator = [dict(type='CocoMetric', ann_file={ann_file!r}, metric='bbox'),
                 dict(type='attnbench.ClassAgnosticCocoMetric', ann_file={ann_file!r})]
test_evaluator = val_evaluator
train_cfg = dict(max_epochs=1, val_interval=1)
param_scheduler = []
""")
    return path


def test_the_cpu_model_names_the_processor_and_the_vector_instructions_torch_uses():
    """What the store records as ``cpu``: the first processor of /proc/cpuinfo and torch's dispatch level."""
    described = cpu_model()
    assert described.endswith(" " + torch.backends.cpu.get_cpu_capability())
    first = Path("/proc/cpuinfo").read_text().split("\n\n")[0] if Path("/proc/cpuinfo").exists() else ""
    info = {key.strip(): value.strip() for key, _, value in (line.partition(":") for line in first.splitlines())}
    if "vendor_id" in info:  # x86 Linux, as here
        assert described == (f"{info['vendor_id']} {info['cpu family']}/{info['model']}/{info['stepping']} "
                             f"{torch.backends.cpu.get_cpu_capability()}")


@pytest.mark.slow
def test_a_run_is_reproducible_to_the_bit_whichever_entry_point_starts_it(tmp_path):
    """Two sweeps of one run (at --jobs 1 and 2) and tools/train.py with the same seed end with the same
    weights, bit for bit, and the sweeps with the same metrics; the rows record the run's protocol."""
    config = tiny_config_file(tmp_path, "0010")
    run = Run("det", "mini", "0010", 3, None, str(config), {})
    rows = [next(SweepRunner(ResultsStore(tmp_path / f"sweep{jobs}"), jobs=jobs, snapshot=False).run_all([run]))
            for jobs in (1, 2)]
    assert [row["status"] for row in rows] == ["ok", "ok"], rows
    assert rows[0]["value"] == rows[1]["value"] and rows[0]["value_class_agnostic"] == rows[1]["value_class_agnostic"]
    assert rows[0]["threads"] == 1 and rows[0]["device"] == "cpu"
    assert rows[0]["torch_version"] == torch.__version__ and rows[0]["mmcv_version"] == "2.1.0"
    assert rows[0]["cpu"] == rows[1]["cpu"] == cpu_model()
    work_dir = tmp_path / "train_py"
    subprocess.run([sys.executable, str(ROOT / "tools/train.py"), str(config), "--work-dir", str(work_dir),
                    "--cfg-options", "randomness.seed=3"], check=True, capture_output=True, cwd=tmp_path)
    checkpoints = [tmp_path / f"sweep{jobs}/runs" / run.run_id / "epoch_1.pth" for jobs in (1, 2)]
    states = [torch.load(p, map_location="cpu", weights_only=False)["state_dict"]
              for p in [*checkpoints, work_dir / "epoch_1.pth"]]
    for other in states[1:]:
        assert other.keys() == states[0].keys()
        different = [k for k in states[0] if not torch.equal(states[0][k], other[k])]
        assert not different, f"{len(different)} tensors differ, e.g. {different[:3]}"


def test_long_preset_stretches_the_mini_schedules_four_times():
    from mmengine.config import Config

    for task, loop_key, length, scheduler in (("det-marker", "max_epochs", 24, 1), ("seg", "max_iters", 3200, 0)):
        (run,) = build_plan([task], ["1111"], [], 1, "long", baseline=False)
        (mini,) = build_plan([task], ["1111"], [], 1, "mini", baseline=False)
        cfg, short = Config.fromfile(run.config), Config.fromfile(mini.config)
        cfg.merge_from_dict(run.cfg_options)
        short.merge_from_dict(mini.cfg_options)
        assert cfg.train_cfg[loop_key] == 4 * short.train_cfg[loop_key] == length
        assert cfg.param_scheduler[scheduler].end == cfg.train_cfg.val_interval == length
        assert cfg.model.to_dict() == short.model.to_dict() and run.run_id != mini.run_id
    with pytest.raises(ValueError, match="task nmt has no long preset"):
        build_plan(["nmt"], ["1111"], [], 1, "long")


def test_each_task_names_the_presets_it_runs_and_refuses_the_others():
    from attnbench.sweep.tasks import TASKS, user_task

    ade20k = user_task(str(ROOT / "configs/segmentation/deeplabv3_r50-d8_4xb4-80k_ade20k-512x512.py"))
    assert [TASKS[t].presets for t in ("det", "seg", "det-marker", "nmt", "nmt-l10n")] + [ade20k.presets] == [
        ("mini", "full", "smoke", "long"), ("mini", "full", "smoke", "long"), ("mini", "smoke", "long"),
        ("mini", "full", "smoke"), ("mini", "small", "smoke"), ("mini", "full", "smoke")]
    # det-marker's refusal of full: test_diagnostic_tasks_refuse_full_scale_and_decode_heads
    with pytest.raises(ValueError, match="task nmt-l10n has no full preset; its presets: mini, small, smoke"):
        TASKS["nmt-l10n"].config("full", "1111", "enc-self")
    with pytest.raises(ValueError, match="has no long preset"):  # det's long schedule is the mini config's, x4
        ade20k.config("long", "0010", None)
    assert ade20k.config("smoke", "0010", None)[1]["train_cfg.max_iters"] == 4


def write_l10n_like_corpus(root: Path, pairs: int = 300) -> str:
    """A tiny corpus laid out as the committed l10n one (four splits, a manifest with its digest); its digest."""
    import hashlib

    from attnbench.data.l10n_corpus import corpus_digest

    words = [("file", "Datei"), ("window", "Fenster"), ("page", "Seite"), ("disc", "Disk"), ("printer", "Drucker")]
    verbs = [("Open", "öffnen"), ("Close", "schließen"), ("Print", "drucken"), ("Burn", "brennen")]
    lines = [(f"{v} the {w} {i}", f"{wd} {i} {vd}") for i in range(pairs // 20 + 1)
             for v, vd in verbs for w, wd in words][:pairs]
    root.mkdir(parents=True)
    files = {}
    for split, rows in dict(train=lines, valid=lines[:12], test=lines[12:24], heldout=lines[24:36]).items():
        for side, suffix in enumerate(("en", "de")):
            path = root / f"{split}.{suffix}"
            path.write_text("".join(f"{row[side]}\n" for row in rows))
            files[path.name] = hashlib.sha256(path.read_bytes()).hexdigest()
    digest = corpus_digest(files)
    (root / "manifest.json").write_text(json.dumps(dict(corpus=digest, files=files)))
    return digest


@pytest.mark.slow
def test_a_small_preset_run_records_chrf_its_heldout_scores_and_its_corpus(tmp_path):
    """nmt-l10n's small preset: validation BLEU and chrF, then a test on the held-out split, and the corpus digest."""
    digest = write_l10n_like_corpus(tmp_path / "corpus")
    task = TASKS["nmt-l10n"]
    config, options = task.config("small", "baseline", None)
    tokenizer = dict(train_files=["train.en", "train.de"], vocab_size=60, model_type="bpe")
    options |= {f"{split}_dataloader.dataset.{key}": value for split in ("train", "val", "test")
                for key, value in dict(data_root=str(tmp_path / "corpus"), tokenizer=tokenizer).items()}
    options |= {"model.vocab_size": 60, "model.embed_dim": 16, "model.ffn_dim": 32, "model.num_encoder_layers": 1,
                "model.num_decoder_layers": 1, "model.decode_cfg.max_len_b": 3, "train_cfg.max_iters": 2,
                "train_cfg.val_interval": 2, "param_scheduler": []}
    assert "small" in task.heldout and "mini" not in task.heldout
    run = Run("nmt-l10n", "small", "baseline", 0, None, config, options)
    row, = SweepRunner(ResultsStore(tmp_path / "results"), wandb=None).run_all([run])
    assert row["status"] == "ok", row.get("error")
    assert row["metric"] == "translation/BLEU" and 0 <= row["value"] <= 100
    assert 0 < row["value_chrf"] <= 100 and 0 <= row["heldout_bleu"] <= 100 and 0 < row["heldout_chrf"] <= 100
    assert row["corpus"] == digest
    stored = ResultsStore(tmp_path / "results").read().iloc[0]
    assert stored["corpus"] == digest and stored["heldout_chrf"] == pytest.approx(row["heldout_chrf"])


@pytest.mark.slow
def test_two_sweeps_on_one_store_train_each_run_once(tmp_path):
    """The same sweep started twice, two seconds apart, on one store: each run trains in one of them (one
    training folder in its run folder); the other waits for it and reports the recorded row."""
    command = [sys.executable, str(ROOT / "tools/sweep.py"), "--tasks", "nmt", "--slot", "enc-dec", "--factors", "0010",
               "--preset", "smoke", "--results", str(tmp_path / "results"), "--no-wandb", "--no-plot", "--no-snapshot"]
    first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    time.sleep(2)
    second = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=900)
    output = first.communicate(timeout=900)[0]
    assert first.returncode == second.returncode == 0, output + second.stdout + second.stderr
    rows = ResultsStore(tmp_path / "results").read()
    assert len(rows) == 2 and (rows["status"] == "ok").all()
    for run_dir in (p for p in (tmp_path / "results" / "runs").iterdir() if p.is_dir()):  # beside fork-server logs
        trainings = [p for p in run_dir.iterdir() if p.is_dir() and (p / "vis_data").is_dir()]
        assert len(trainings) == 1, f"{run_dir.name} trained {len(trainings)} times"


def descendants(pid: int) -> set[int]:
    """The processes below ``pid`` (from /proc)."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = set(), [pid]
    while todo:
        children = parents.get(todo.pop(), [])
        found.update(children)
        todo += children
    return found


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has ended
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.parametrize("procs", ["1", "2"])
def test_a_sweep_killed_mid_run_ends_its_workers_and_the_next_sweep_takes_the_run_up(tmp_path, procs):
    """SIGKILL to a sweep while its run trains (in a forked worker, or under torchrun on two ranks): the run's
    processes end with it (none left training beside the next sweep), its claim is free, and the same command
    trains the run, resuming, and records it once."""
    command = [sys.executable, str(ROOT / "tools/sweep.py"), "--tasks", "nmt", "--slot", "enc-dec", "--factors", "0010",
               "--no-baseline", "--preset", "smoke", "--procs-per-run", procs, "--cfg-options",
               "train_cfg.max_iters=120", "train_cfg.val_interval=120", "default_hooks.checkpoint.interval=10",
               "--results", str(tmp_path), "--no-wandb", "--no-plot", "--no-snapshot"]
    first = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    deadline = time.time() + 600
    while not list(tmp_path.glob("runs/*/last_checkpoint")):  # training, past its first checkpoint
        assert first.poll() is None and time.time() < deadline, "the first sweep ended or never checkpointed"
        time.sleep(0.5)
    workers = descendants(first.pid)
    assert workers
    first.kill()
    first.wait()
    deadline = time.time() + 30
    while any(alive(pid) for pid in workers):
        assert time.time() < deadline, f"processes of the killed sweep still run: {workers}"
        time.sleep(0.2)
    second = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=900)
    assert second.returncode == 0, second.stdout + second.stderr
    rows = ResultsStore(tmp_path).read()
    assert len(rows) == 1 and rows.loc[0, "status"] == "ok" and rows.loc[0, "train_iters"] == 120
    logs = "".join(p.read_text() for p in tmp_path.glob("runs/*/*/*.log"))
    assert "resumed" in logs.lower()
