"""tools/gates.py: how far a store's runs opened their gates, from the store's columns or old runs' checkpoints."""
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from attnbench.attention import GeneralizedAttention, SqueezeExcite
from attnbench.analysis import gates
from attnbench.sweep.store import COLUMNS
from reference import sgd_without_gradient

ROOT = Path(__file__).resolve().parent.parent


def add_run(store: Path, rows: list, run_id: str, variant: str, seed: int, model: torch.nn.Module | None) -> None:
    rows.append(dict(run_id=run_id, task="det", preset="mini", variant=variant, seed=seed, metric="coco/bbox_mAP",
                     value=0.3, status="ok"))
    if model is not None:
        run_dir = store / "runs" / run_id
        run_dir.mkdir(parents=True)
        torch.save({"state_dict": model.state_dict(), "meta": {}}, run_dir / "epoch_6.pth")
        (run_dir / "last_checkpoint").write_text(str(run_dir / "epoch_6.pth"))  # mmengine writes absolute paths


def gated(*gammas: float) -> torch.nn.Module:
    blocks = torch.nn.Sequential(*(GeneralizedAttention(8, num_heads=2, gamma_init=g) for g in gammas))
    return torch.nn.Sequential(blocks, SqueezeExcite(8, reduction=2))  # an ungated block is not counted


@pytest.mark.slow
def test_gates_per_run_and_per_variant(tmp_path):
    store, rows = tmp_path / "store", []
    add_run(store, rows, "a0", "0010", 0, gated(0.01, -0.03))
    add_run(store, rows, "a1", "0010", 1, gated(0.002, 0.001))
    add_run(store, rows, "b0", "baseline", 0, torch.nn.Conv2d(3, 8, 3))  # no gate: not listed
    add_run(store, rows, "a2", "0010", 2, None)  # checkpoint gone: counted as missing
    pd.DataFrame(rows).reindex(columns=list(COLUMNS)).to_csv(store / "results.csv", index=False)

    def gates(*flags: str) -> str:
        return subprocess.run([sys.executable, str(ROOT / "tools/gates.py"), "--results", str(store), *flags],
                              capture_output=True, text=True, check=True).stdout

    per_run = gates("--runs")
    assert "0.0300" in per_run and "0.0020" in per_run and "baseline" not in per_run
    (line,) = [l for l in gates().splitlines() if "0010" in l]
    assert line.split()[3:] == ["2", "0.0160", "0.0020", "0.0300"]  # runs, mean of maxima, range
    assert "1 finished attention runs record no gate or offset" in gates()


@pytest.mark.slow
def test_the_store_columns_come_first_and_offsets_are_shown(tmp_path):
    store, rows = tmp_path / "store", []
    add_run(store, rows, "a0", "0010", 0, gated(0.5))  # the store's value wins over the checkpoint
    add_run(store, rows, "d0", "deformable", 0, None)
    add_run(store, rows, "a1", "0010", 1, None)
    add_run(store, rows, "a2", "0010", 2, None)  # from before gate_loss_opened
    rows[0].update(gate_max=0.25, gate_loss_max=0.125, gate_loss_opened=-0.0625)
    rows[1].update(offset_mean_px=0.75)
    rows[2].update(gate_max=0.75, gate_loss_max=0.5, gate_loss_opened=0.5)
    rows[3].update(gate_max=0.75, gate_loss_max=0.5)
    pd.DataFrame(rows).reindex(columns=list(COLUMNS)).to_csv(store / "results.csv", index=False)

    def gates(*flags: str) -> str:
        return subprocess.run([sys.executable, str(ROOT / "tools/gates.py"), "--results", str(store), *flags],
                              capture_output=True, text=True, check=True).stdout

    out = gates("--runs")
    (gate_line, *_) = [l for l in out.splitlines() if "0010" in l]
    (offset_line,) = [l for l in out.splitlines() if "deformable" in l]
    assert "0.2500" in gate_line and "0.5000" not in gate_line and "0.7500" in offset_line
    assert "0.1250" in gate_line and "-0.0625" in gate_line  # how far the loss moved the gate, and which way
    assert "record no gate" not in out
    (variant_line,) = [l for l in gates().splitlines() if "0010" in l]
    assert "1/2" in variant_line  # of the two runs that record the sign, one's loss opened its gate


@pytest.mark.slow
def test_moved_by_loss_counts_runs_against_the_rule_learnt(tmp_path):
    store, rows = tmp_path / "store", []
    # (variant, context accuracy, gate_loss_max): learnt at >= 0.9, moved at >= 0.01
    runs = [("1111", 0.99, 0.02), ("1111", 0.95, 0.005), ("1111", 0.50, 0.0), ("0010", 0.52, 0.011),
            ("0010", 0.51, float("nan"))]  # no gate_loss_max recorded: not counted
    for seed, (variant, context, moved) in enumerate(runs):
        add_run(store, rows, f"r{seed}", variant, seed, None)
        rows[-1].update(task="det-flag", value_context=context, gate_max=1.0, gate_loss_max=moved)
    add_run(store, rows, "k0", "1111", 0, None)  # another task, filtered out by --tasks
    rows[-1].update(gate_max=1.0, gate_loss_max=0.5)
    store.mkdir()
    pd.DataFrame(rows).reindex(columns=list(COLUMNS)).to_csv(store / "results.csv", index=False)

    def gates(*flags: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(ROOT / "tools/gates.py"), "--results", str(store), *flags],
                              capture_output=True, text=True)

    out = gates("--tasks", "det-flag", "--moved-by-loss", "0.01").stdout
    # runs, learnt moved, learnt not moved, not learnt moved, not learnt not moved, agree
    assert [l.split()[3:] for l in out.splitlines()[1:]] == [
        ["1", "0", "0", "1", "0", "0/1"], ["3", "1", "1", "0", "1", "2/3"], ["4", "1", "1", "1", "1", "2/4"]]
    assert [l.split()[2] for l in out.splitlines()[1:]] == ["0010", "1111", "all"]
    assert "learnt" in gates("--runs").stdout
    unknown = gates("--tasks", "fcn-flag")
    assert unknown.returncode == 2 and "--tasks fcn-flag: no runs in" in unknown.stderr and "det-flag" in unknown.stderr
    without_rule = gates("--tasks", "det", "--moved-by-loss", "0.01")
    assert without_rule.returncode != 0 and "diagnostic rule" in without_rule.stderr


def test_start_asks_whether_a_runs_start_foretells_the_rule_learnt(tmp_path):
    """Runs of two final stores against their one-iteration starts; the exact two-sided Mann-Whitney p of
    3 against 3 runs is 2/20 where the groups do not overlap, and 14/20 where the learnt runs exceed the
    others in 3 of the 9 pairs (U = 3: P(U <= 3) = (1 + 1 + 2 + 3)/20 under the null, doubled); Holm
    doubles the smaller and keeps the larger."""
    finals, starts = [[], []], []
    # seed: (learnt, first loss, mass after one step)
    runs = {0: (True, 1.0, 0.05), 1: (True, 1.1, 0.03), 2: (False, 2.0, 0.04), 3: (True, 1.2, 0.07),
            4: (False, 2.1, 0.06), 5: (False, 2.2, 0.08)}
    for seed, (learnt, loss, mass) in runs.items():
        rows = finals[seed // 3]
        add_run(tmp_path, rows, f"f{seed}", "1111", seed, None)
        rows[-1].update(task="fcn-flag", value_context=0.99 if learnt else 0.55)
        add_run(tmp_path, starts, f"s{seed}", "1111", seed, None)
        starts[-1].update(task="fcn-flag", value_context=0.5, loss_first=loss, mass_context=mass)
    add_run(tmp_path, starts, "s9", "1111", 9, None)  # no final run of its own: left out
    starts[-1].update(task="fcn-flag", loss_first=9.0, mass_context=0.5)
    for name, rows in (("a", finals[0]), ("b", finals[1]), ("start", starts)):
        (tmp_path / name).mkdir()
        pd.DataFrame(rows).reindex(columns=list(COLUMNS)).to_csv(tmp_path / name / "results.csv", index=False)

    def gates(*flags: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(ROOT / "tools/gates.py"), "--results",
                               f"{tmp_path / 'a'},{tmp_path / 'b'}", *flags], capture_output=True, text=True)

    table = gates("--start", str(tmp_path / "start")).stdout.splitlines()
    loss, mass = (line.split() for line in table[1:])
    assert loss[3:6] == ["loss_first", "3/6", "1.1000"] and loss[-2:] == ["0.1000", "0.2000"]  # p, Holm's p
    assert mass[3] == "mass_context" and mass[-2:] == ["0.7000", "0.7000"]
    per_run = gates("--start", str(tmp_path / "start"), "--runs").stdout
    assert len(per_run.splitlines()) == 1 + 6 and "9.0" not in per_run
    old = gates("--start", str(tmp_path / "a"))  # a store from before the columns
    assert old.returncode != 0 and "records no loss_first, mass_context" in old.stderr


def test_a_store_without_gated_checkpoints_says_so(tmp_path):
    store, rows = tmp_path / "store", []
    add_run(store, rows, "b0", "baseline", 0, torch.nn.Conv2d(3, 8, 3))
    pd.DataFrame(rows).reindex(columns=list(COLUMNS)).to_csv(store / "results.csv", index=False)
    result = subprocess.run([sys.executable, str(ROOT / "tools/gates.py"), "--results", str(store)],
                            capture_output=True, text=True)
    assert result.returncode != 0 and "no run of" in result.stderr and "records a residual gate" in result.stderr


def test_decay_only_replays_the_configs_schedule_in_float64(tmp_path):
    config = tmp_path / "sgd_poly.py"
    config.write_text("optim_wrapper = dict(type='OptimWrapper', optimizer=dict(type='SGD', lr=0.1, momentum=0.9, "
                      "weight_decay=0.05))\nparam_scheduler = [dict(type='PolyLR', power=1.0, eta_min=0.0, begin=0, "
                      "end=12, by_epoch=False)]\ntrain_cfg = dict(type='IterBasedTrainLoop', max_iters=12)\n")
    p = sgd_without_gradient(1.0, [0.1 * (1 - t / 11) for t in range(12)], 0.9, 0.05)  # PolyLR reaches 0 at t = 11
    assert gates.decay_only_gate(str(config)) == (pytest.approx(p, abs=1e-6), 12)
    assert p < 0.9  # the decay is visible

    epochs = tmp_path / "epochs.py"  # 3 epochs of 4 iterations, lr x 0.5 after epoch 1 and iteration-based warmup
    epochs.write_text(config.read_text().split("param_scheduler")[0]
                      + "param_scheduler = [dict(type='LinearLR', start_factor=0.5, by_epoch=False, begin=0, end=2), "
                        "dict(type='MultiStepLR', by_epoch=True, begin=0, end=3, milestones=[1], gamma=0.5)]\n"
                        "train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=3)\n")
    lrs = [0.05, 0.1, 0.1, 0.1] + [0.05] * 8  # LinearLR reaches the full rate at iteration 1; halved from epoch 1 on
    p = sgd_without_gradient(1.0, lrs, 0.9, 0.05)
    assert gates.decay_only_gate(str(epochs), iters_per_epoch=4) == (pytest.approx(p, abs=1e-6), 12)
    result = subprocess.run([sys.executable, str(ROOT / "tools/gates.py"), "--decay-only", str(epochs)],
                            capture_output=True, text=True)
    assert result.returncode != 0 and "trains by epoch; give --iters-per-epoch" in result.stderr


def test_decay_only_of_a_sweep_run_applies_its_preset_and_lr_multiplier():
    cfg, run = gates.run_gates("det-flag", "long", "1111:lr=10")
    assert run == [("1111", "gen_attention_block.gamma", 1.0)]  # the protocol's gate=1, under mmcv's plugin name
    assert cfg.train_cfg.max_epochs == 24  # the long preset
    scaled = cfg.copy()
    scaled.optim_wrapper = dict(cfg.optim_wrapper, paramwise_cfg=None,
                                optimizer=dict(cfg.optim_wrapper.optimizer, lr=10 * cfg.optim_wrapper.optimizer.lr))
    value, iterations = gates.decay_only_gate(cfg, 50, 1.0, "gen_attention_block.gamma")
    assert iterations == 1200
    assert value == pytest.approx(gates.decay_only_gate(scaled, 50, 1.0, "gamma")[0], abs=1e-6)
    assert value < gates.decay_only_gate(cfg, 50, 1.0, "gamma")[0] - 0.1  # the multiplier reached the gate
    result = subprocess.run([sys.executable, str(ROOT / "tools/gates.py"), "--decay-only", "nmt"],
                            capture_output=True, text=True)
    assert result.returncode != 0 and "not a vision task" in result.stderr
