"""tools/attention_maps.py on the runs of a tiny smoke sweep: detection, segmentation (fcn) and translation
figures, the attention-mass table (--mass) against the row's, and the one line that names the re-training
command when a run's checkpoint is gone."""
import importlib.util
import shlex
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from attnbench.analysis.attention_figures import chosen, nmt_slot, stage
from attnbench.mm.attention_mass import MASS_KEYS
from attnbench.sweep.plan import build_plan
from attnbench.sweep.runs import find_run, retrain_command

ROOT = Path(__file__).resolve().parent.parent


def load_tool():
    spec = importlib.util.spec_from_file_location("attention_maps_tool", ROOT / "tools" / "attention_maps.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


def test_figures_are_named_by_stage_or_slot_and_keep_the_last_block_of_each():
    names = ["backbone.layer2.0.gen_attention_block", "backbone.layer2.1.gen_attention_block",
             "backbone.layer3.0.gen_attention_block"]
    assert chosen(names, stage, False, "block") == {"conv3": names[1], "conv4": names[2]}
    assert list(chosen(names, stage, True, "block")) == ["conv3_block0", "conv3_block1", "conv4_block0"]
    assert nmt_slot("decoder_layers.1.cross_attn.attention") == ("enc-dec", 1)
    assert nmt_slot("encoder_layers.0.self_attn.attention") == ("enc-self", 0)
    assert load_tool().query_point("40,64.5") == (40.0, 64.5)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """1111 on det-flag, fcn-flag and in nmt's enc-dec slot, a few iterations each; the folder it ran in
    (the diagnostic data is generated there, where the tool finds it again) and its store."""
    cwd = tmp_path_factory.mktemp("maps")
    proc = subprocess.run([sys.executable, str(ROOT / "tools/sweep.py"), "--tasks", "det-flag,fcn-flag,nmt",
                           "--factors", "1111", "--slot", "enc-dec", "--no-baseline", "--preset", "smoke",
                           "--results", "results", "--no-wandb", "--no-plot"],
                          capture_output=True, text=True, cwd=cwd, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return cwd, pd.read_csv(cwd / "results" / "results.csv")


def maps(cwd: Path, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "tools/attention_maps.py"), "--results", "results", *argv],
                          capture_output=True, text=True, cwd=cwd, timeout=600)


def assert_figures(cwd: Path, proc: subprocess.CompletedProcess, names: list[str], folder: Path) -> None:
    assert proc.returncode == 0, proc.stderr[-3000:]
    written = sorted(Path(line).name for line in proc.stdout.split() if line.endswith((".png", ".svg")))
    assert written == sorted(f"{name}.{ext}" for name in names for ext in ("png", "svg"))
    for name in names:
        assert (cwd / folder / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert "<svg" in (cwd / folder / f"{name}.svg").read_text()[:1000]


@pytest.mark.slow
def test_detection_maps_one_figure_per_stage(sweep):
    cwd, results = sweep
    (run_id,) = results.loc[results["task"] == "det-flag", "run_id"]
    proc = maps(cwd, "--task", "det-flag", "--variant", "1111", "--seed", "0")
    assert_figures(cwd, proc, ["conv3", "conv4", "conv5"], Path("results") / "maps" / run_id)


@pytest.mark.slow
def test_segmentation_maps_of_a_chosen_query_with_each_head(sweep):
    cwd, results = sweep
    (run_id,) = results.loc[results["task"] == "fcn-flag", "run_id"]
    proc = maps(cwd, "--run", run_id, "--image", "2", "--query", "40,64", "--heads", "--out", "fcn")
    assert_figures(cwd, proc, ["conv3", "conv4", "conv5"], Path("fcn"))


@pytest.mark.slow
def test_translation_maps_one_figure_per_slot_and_layer(sweep):
    cwd, results = sweep
    (run_id,) = results.loc[results["task"] == "nmt", "run_id"]
    proc = maps(cwd, "--task", "nmt", "--variant", "1111", "--slot", "enc-dec", "--seed", "0", "--sentence", "3",
                "--every-block")
    figures = [f"{slot}_layer{layer}" for slot in ("enc-self", "dec-self", "enc-dec") for layer in (0, 1)]
    assert_figures(cwd, proc, figures, Path("results") / "maps" / run_id)


@pytest.mark.slow
@pytest.mark.parametrize("task", ["det-flag", "fcn-flag"])
def test_the_mass_table_s_mean_row_is_the_row_s_mass(sweep, task):
    """--mass over the whole validation set: a row per block, each mass in [0, 1], and the mean over every
    (block, object) pair what AttentionMassHook recorded at the run's final validation."""
    cwd, results = sweep
    (row,) = results[results["task"] == task].to_dict("records")
    proc = maps(cwd, "--run", row["run_id"], "--mass", "--mass-csv", f"{task}.csv")
    assert proc.returncode == 0, proc.stderr[-3000:]
    table = pd.read_csv(cwd / f"{task}.csv", index_col="block")
    assert list(table.columns) == list(MASS_KEYS) and table.index[-1] == "mean"
    for name, key in MASS_KEYS.items():
        assert table.loc["mean", name] == pytest.approx(row[key], rel=1e-6)
    blocks = table.drop(index="mean")
    assert len(blocks) > 1 and blocks.index[0] == "conv3_block0" and ((blocks >= 0) & (blocks <= 1)).all(axis=None)
    (mean,) = [line for line in proc.stdout.splitlines() if line.startswith("| mean ")]
    assert [float(v) for v in mean.strip("|").split("|")[1:]] == [round(v, 4) for v in table.loc["mean"]]


@pytest.mark.slow
def test_a_run_without_its_checkpoint_names_the_command_that_trains_it_again(sweep, tmp_path):
    cwd, results = sweep
    store = tmp_path / "store"  # the det-flag row without its run folder, as the committed stores are
    store.mkdir()
    results[results["task"] == "det-flag"].to_csv(store / "results.csv", index=False)
    (row,) = results[results["task"] == "det-flag"].to_dict("records")
    proc = subprocess.run([sys.executable, str(ROOT / "tools/attention_maps.py"), "--results", str(store), "--run",
                           row["run_id"]], capture_output=True, text=True, cwd=cwd, timeout=300)
    assert proc.returncode == 1 and proc.stdout == ""
    (line,) = proc.stderr.splitlines()
    assert line.startswith(f"attention_maps.py: error: run {row['run_id']} has no checkpoint under {store}")
    command = shlex.split(line.split("runs reproduce by seed: ", 1)[1])
    assert command[:2] == ["python", "tools/sweep.py"] and "configs have changed" not in line
    def value(flag: str) -> str:
        return command[command.index(flag) + 1]

    assert (value("--tasks"), value("--factors"), value("--preset"), value("--seeds")) == ("det-flag", "1111", "smoke", "0-0")
    assert value("--results") == str(store) and "--force" in command and "--no-baseline" in command
    (run,) = build_plan(["det-flag"], ["1111"], [], [0], "smoke", baseline=False)
    assert run.run_id == row["run_id"]  # the command's run is the row's


@pytest.mark.slow
def test_a_run_the_store_does_not_hold_is_one_line(sweep):
    cwd, _ = sweep
    proc = maps(cwd, "--task", "det-flag", "--variant", "0010", "--seed", "0")
    assert proc.returncode == 1
    assert proc.stderr.strip() == ("attention_maps.py: error: the store has no finished run of task det-flag, "
                                   "variant 0010, seed 0 in results")


@pytest.mark.parametrize("row, plan, expected", [
    (dict(task="det-flag", variant="baseline", preset="mini", seed=4, slot=float("nan")), ([], [], None),
     "--tasks det-flag --preset mini --seeds 4-4"),
    (dict(task="seg-marker", variant="0010+deformable", preset="smoke", seed=0, slot=float("nan")),
     ([], ["0010+deformable"], None),
     "--tasks seg-marker --modules 0010+deformable --no-baseline --preset smoke --seeds 0-0"),
    (dict(task="nmt", variant="1111:score=bilinear", preset="mini", seed=2, slot="enc-dec"),
     (["1111:score=bilinear"], [], "enc-dec"),
     "--tasks nmt --factors 1111:score=bilinear --no-baseline --slot enc-dec --preset mini --seeds 2-2"),
])
def test_the_retrain_command_plans_the_row_s_run_alone(row, plan, expected):
    factors, modules, slot = plan
    (run,) = build_plan([row["task"]], factors, modules, [row["seed"]], row["preset"], slot,
                        baseline=not (factors or modules))
    assert retrain_command(row | {"run_id": run.run_id}, "results/x") == \
        f"python tools/sweep.py {expected} --results results/x --force --no-wandb"
    moved = retrain_command(row | {"run_id": "an-older-run"}, "results/x")
    assert moved.endswith(f"(this trains {run.run_id}: the configs have changed since the run, or it had "
                          "--cfg-options, --data-root or --threads, which the store does not keep)")


def test_the_retrain_command_of_a_user_config_run_names_its_file_and_processes():
    config = str(ROOT / "configs/segmentation/deeplabv3_r50-d8_4xb4-80k_ade20k-512x512.py")
    (run,) = build_plan([], ["0010"], [], [3], "full", baseline=False, procs=2, user_configs=[config])
    row = run.to_dict() | {"world_size": 2}
    assert retrain_command(row, "results/x") == f"python tools/sweep.py --config {config} --factors 0010 " \
        "--no-baseline --procs-per-run 2 --preset full --seeds 3-3 --results results/x --force --no-wandb"


def test_find_run_names_what_matches():
    results = pd.DataFrame([dict(run_id=f"r{i}", task="det-flag", variant="1111", seed=0, preset=preset, slot=None,
                                 status=status) for i, (preset, status) in
                            enumerate([("mini", "ok"), ("smoke", "ok"), ("long", "failed")])])
    assert find_run(results, "r1")["preset"] == "smoke"
    assert find_run(results, task="det-flag", variant="1111", seed=0, preset="mini")["run_id"] == "r0"
    with pytest.raises(ValueError, match="2 finished runs match the run of task det-flag, variant 1111, seed 0: "
                                         "r0, r1; name one with --run"):
        find_run(results, task="det-flag", variant="1111", seed=0)
    with pytest.raises(ValueError, match="no finished run r2"):
        find_run(results, "r2")
