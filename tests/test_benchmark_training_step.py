"""tools/benchmark_training_step.py on the CPU at smoke sizes: its table, the scope fallback, bad input."""
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import benchmark_training_step as bench  # noqa: E402  tools/benchmark_training_step.py

COLUMNS = ["model", "scope", "variant", "implementation", "precision", "peak GB", "added vs baseline GB",
           "median step ms", "published GB", "notes"]


def benchmark(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "tools/benchmark_training_step.py", "--device", "cpu", *argv],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)


def table(stdout: str) -> list[dict]:
    rows = [[cell.strip() for cell in line.split("|")[1:-1]]
            for line in stdout.splitlines() if line.startswith(("| det ", "| seg "))]
    return [dict(zip(COLUMNS, cells, strict=True)) for cells in rows]


def assert_measured(row: dict) -> None:
    assert row["notes"].startswith("failed") is False, row
    for column in ("peak GB", "median step ms"):
        assert math.isfinite(float(row[column])) and float(row[column]) > 0, row


@pytest.mark.slow
def test_smoke_rows_of_both_models(tmp_path):
    out = tmp_path / "table.md"
    proc = benchmark("--smoke", "--variants", "1111+deformable", "--mmcv-variants", "1111", "--precisions", "fp32",
                     "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = table(proc.stdout)
    assert [(r["model"], r["scope"], r["variant"], r["implementation"], r["precision"]) for r in rows] == [
        ("det", "detector", "baseline", "-", "fp32"),
        ("det", "detector", "1111", "mmcv", "fp32"),
        ("det", "detector", "1111+deformable", "attnbench", "fp32"),
        ("seg", "segmentor", "baseline", "-", "fp32"),
        ("seg", "segmentor", "1111", "mmcv", "fp32"),
        ("seg", "segmentor", "1111+deformable", "attnbench", "fp32"),
    ]
    for row in rows:
        assert_measured(row)
        baseline = next(r for r in rows if r["model"] == row["model"])
        if row is baseline:
            assert row["added vs baseline GB"] == "-"
        else:  # from the unrounded peaks
            added = float(row["peak GB"]) - float(baseline["peak GB"])
            assert float(row["added vs baseline GB"]) == pytest.approx(added, abs=0.011), row
    assert [r["published GB"] for r in rows] == ["4.0", "8.0", "", "", "", ""]
    assert "det = Faster R-CNN R-50-FPN at 64x96; seg = DeepLabV3 R-50-D8 at 64x128" in proc.stdout
    assert "mmcv's compiled ops: loaded" in proc.stdout
    assert out.read_text() == proc.stdout


@pytest.mark.slow
def test_auto_scope_falls_back_to_backbone_neck_without_compiled_ops():
    """Without mmcv's compiled ops the detector fails at the RPN's NMS: that row is measured again as
    backbone + neck, and the later detection row of the same precision is measured so at once."""
    proc = benchmark("--smoke", "--models", "det", "--variants", "0010", "--mmcv-variants", "", "--precisions", "amp",
                     "--no-mmcv-ops")
    assert proc.returncode == 0, proc.stderr[-3000:]
    first, second = table(proc.stdout)
    assert (first["scope"], first["variant"], second["scope"], second["variant"]) == (
        "backbone-neck", "baseline", "backbone-neck", "0010")
    assert "failed in mmcv.ops (nms.forward: RuntimeError: mmcv's compiled op nms is disabled" in first["notes"]
    assert second["notes"] == "backbone + neck: the detector failed in mmcv.ops above"
    assert_measured(first)
    assert_measured(second)
    assert proc.stderr.count(" detector: ") == 0 and proc.stderr.count(" backbone-neck: ") == 2, proc.stderr


def test_compiled_op_failure_names_the_mmcv_op_it_came_from():
    from mmcv.ops import nms

    with pytest.raises(RuntimeError) as in_mmcv_ops:  # mmcv's CPU kernel has no bf16
        nms(torch.zeros(3, 4, dtype=torch.bfloat16), torch.zeros(3, dtype=torch.bfloat16), iou_threshold=0.5)
    assert bench.compiled_op_failure(in_mmcv_ops.value) == (
        "nms.forward: RuntimeError: expected scalar type Float but found BFloat16")
    with pytest.raises(RuntimeError) as elsewhere:
        torch.nn.functional.conv2d(torch.zeros(1, 3, 8, 8), torch.zeros(4, 2, 3, 3))
    assert bench.compiled_op_failure(elsewhere.value) is None


@pytest.mark.parametrize("argv, message", [
    (["--variants", "0120"], "--variants: "),
    (["--models", "det,nmt"], "--models: unknown ['nmt']"),
    (["--precisions", "fp16"], "--precisions: unknown ['fp16']"),
    (["--mmcv-variants", "1111+deformable"], "--mmcv-variants: '1111+deformable' is not a factor string"),
    pytest.param(["--device", "cuda"], "--device cuda: CUDA is not available here",
                 marks=pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available")),
])
def test_bad_input_is_one_line_and_exit_code_2(argv, message):
    proc = benchmark("--smoke", *argv)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.startswith(f"error: {message}") and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stdout == ""
