"""A missing, empty, foreign or damaged results store: one error line and exit status 1 from every tool,
and the file left as it was."""
import subprocess
import sys
from pathlib import Path

import pytest

from attnbench.sweep.store import ResultsStore, ResultsStoreError

ROOT = Path(__file__).resolve().parent.parent


def good_store(root: Path) -> Path:
    store = ResultsStore(root)
    for seed, value in enumerate([0.31, 0.33]):
        store.record(dict(run_id=f"det_mini_baseline_seed{seed}", task="det", preset="mini", variant="baseline",
                          seed=seed, metric="coco/bbox_mAP", value=value, macs_model=1e9, macs_modules=0,
                          params_model=1, status="ok"))
    return store.path


def damage(root: Path, how: str) -> None:
    path = root / "results.csv"
    if how == "missing directory":
        return
    root.mkdir(parents=True)
    if how == "empty":
        path.write_text("")
    elif how == "foreign":
        path.write_text("name,score\nalice,3\nbob,4\n")
    elif how == "truncated":
        text = good_store(root).read_text()
        path.write_text(text[:-40])  # cut in the middle of the last row
    elif how == "binary":
        path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe")


CASES = {"missing directory": "no results store", "empty": "is empty", "foreign": "not an attnbench results store",
         "truncated": "is damaged: line 3", "binary": "not a readable CSV"}


@pytest.mark.parametrize("how", CASES)
@pytest.mark.parametrize("tool", [["compare.py", "--power"], ["plot.py"]])
def test_reading_tools_say_what_is_wrong_in_one_line(tmp_path, how, tool):
    root = tmp_path / "store"
    damage(root, how)
    before = (root / "results.csv").read_bytes() if (root / "results.csv").exists() else None
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / tool[0]), "--results", str(root), *tool[1:]],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith(f"{tool[0]}: error: ") and CASES[how] in proc.stderr, proc.stderr
    assert before == ((root / "results.csv").read_bytes() if before is not None else None)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["empty", "foreign", "truncated", "binary"])
def test_a_sweep_refuses_a_store_it_did_not_write_and_leaves_it_alone(tmp_path, how):
    root = tmp_path / "store"
    damage(root, how)
    before = (root / "results.csv").read_bytes()
    proc = subprocess.run([sys.executable, str(ROOT / "tools/sweep.py"), "--factors", "0010", "--tasks", "det",
                           "--results", str(root), "--no-wandb"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and proc.stderr.startswith("sweep.py: error: ") and CASES[how] in proc.stderr
    assert proc.stderr.strip().count("\n") == 0, proc.stderr
    assert (root / "results.csv").read_bytes() == before
    with pytest.raises(ResultsStoreError):
        ResultsStore(root).record(dict(run_id="x", task="det", status="ok"))
    assert (root / "results.csv").read_bytes() == before


def test_plot_of_a_store_without_successful_runs_is_one_line(tmp_path):
    ResultsStore(tmp_path).record(dict(run_id="x", task="det", preset="mini", variant="baseline", seed=0,
                                       status="failed", error="boom"))
    proc = subprocess.run([sys.executable, str(ROOT / "tools/plot.py"), "--results", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and proc.stderr.strip() == (
        f"plot.py: error: no successful runs to plot in {tmp_path} (1 rows, none 'ok')")


def test_old_stores_read_with_the_new_columns_empty():
    df = ResultsStore(ROOT / "results/mini-sweep").read()
    assert {"threads", "value_class_agnostic"} <= set(df.columns) and df["threads"].isna().all()
    assert df["config"].str.startswith("configs/").all()  # repository-relative, as new rows are written


def test_text_that_looks_like_a_number_stays_text(tmp_path):
    """A store whose only row is ``0010`` reads its variant as text and writes it back so, whatever
    order the runs finish in (it once came back as the number 10 and broke the report)."""
    store = ResultsStore(tmp_path)
    for run_id, variant in [("det_mini_0010_seed0", "0010"), ("det_mini_baseline_seed0", "baseline")]:
        store.record(dict(run_id=run_id, task="det", preset="mini", variant=variant, factors=variant, seed=0,
                          metric="coco/bbox_mAP", value=0.3, config_hash="0123456789", status="ok"))
    df = store.read()
    assert df["variant"].tolist() == ["0010", "baseline"] and df["factors"].tolist()[0] == "0010"
    assert (df["config_hash"] == "0123456789").all()
