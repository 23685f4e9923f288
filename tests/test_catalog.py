"""The mechanism listing (tools/list_modules.py, sweep.py --list) and the survey rows of the plan."""
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from attnbench.attention import ObjectContext
from attnbench.attention.factors import ALL_FACTORS
from attnbench.flops import count_macs
from attnbench.sweep.catalog import REFERENCE_REGIONS, build_mechanism, mechanism_table
from attnbench.sweep.plan import build_plan
from attnbench.variants import SURVEY_VARIANTS, VISION_TOKENS, VISION_VARIANTS, Variant, vision_rows

ROOT = Path(__file__).resolve().parents[1]
SHAPE = (1, 32, 6, 7)


@pytest.fixture(scope="module")
def table():
    return mechanism_table(SHAPE).set_index("token")


def test_every_token_is_listed_with_family_and_paper(table):
    assert list(table.index) == [*ALL_FACTORS, *VISION_TOKENS]
    assert (table["family"] != "").all() and table["paper"].str.contains(r"\d{4}").all()
    assert set(table.loc[list(SURVEY_VARIANTS), "family"]) == {"channel", "mixed", "self-attention", "category"}
    assert (table["params"] > 0).all()


@pytest.mark.parametrize("token", ["0110", "deformable", "sk", "da", "ann"])
def test_listed_macs_are_what_the_counter_measures(table, token):
    measured = count_macs(build_mechanism(token, 32).eval(), torch.randn(SHAPE))
    assert abs(table.loc[token, "mmacs"] * 1e6 - measured) <= 0.02 * measured


def test_head_row_counts_the_object_context(table):
    measured = count_macs(ObjectContext(32).eval(), torch.randn(SHAPE), torch.randn(1, REFERENCE_REGIONS, 6, 7))
    assert abs(table.loc["ocr", "mmacs"] * 1e6 - measured) <= 0.02 * measured


@pytest.mark.slow
def test_list_modules_and_sweep_list_print_every_token():
    for argv in (["tools/list_modules.py", "--shape", "1,32,6,7"], ["tools/sweep.py", "--list"]):
        proc = subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        listed = {line.split()[0] for line in proc.stdout.splitlines()[1:-1]}
        assert listed == {*ALL_FACTORS, *VISION_TOKENS}
    proc = subprocess.run([sys.executable, "tools/list_modules.py", "--shape", "1,32,6"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "--shape must be four positive integers N,C,H,W" in proc.stderr


def test_survey_rows_plan_on_both_tasks_and_ocr_on_segmentation_only():
    vision = [v for v in SURVEY_VARIANTS if not Variant.parse(v).head]
    runs = build_plan(["det", "seg"], [], vision, seeds=1, preset="mini")
    assert {(r.task, r.variant) for r in runs} == {(t, v) for t in ("det", "seg") for v in ["baseline", *vision]}
    assert vision_rows("seg") == (*VISION_VARIANTS, *SURVEY_VARIANTS)
    assert vision_rows("det") == (*VISION_VARIANTS, *(v for v in SURVEY_VARIANTS if v != "ocr"))
    with pytest.raises(ValueError, match="vision task must be 'det' or 'seg', got 'nmt'"):
        vision_rows("nmt")
    (ocr,) = build_plan(["seg"], [], ["ocr"], seeds=1, preset="mini", baseline=False)
    assert Path(ocr.config).name == "ocrnet_r50w8-d8_mini-shapes-128x128.py"


@pytest.mark.slow
def test_flops_table_counts_full_scale_rows(tmp_path):
    """tools/flops_table.py on Transformer-base: every slot of one variant, the baseline, published BLEU."""
    import pandas as pd

    proc = subprocess.run([sys.executable, "tools/flops_table.py", "--tasks", "nmt", "--variants", "0010",
                           "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    table = pd.read_csv(tmp_path / "flops.csv")
    assert list(zip(table["slot"].fillna(""), table["variant"])) == [
        ("", "baseline"), ("enc-self", "0010"), ("dec-self", "0010"), ("enc-dec", "0010")]
    assert (table["analytic_check"] == "ok").all() and (table["input_size"] == "50 tokens").all()
    assert table.loc[0, "published"] == 27.3 and table["published"].iloc[1:].isna().all()
    assert (table["gmacs_attention"] > 0).all() and (tmp_path / "flops.md").exists()
    for variant, error in [("0120", "four characters of 0/1"), ("ocr", "--variants ['ocr'] are not rows of ['det']")]:
        proc = subprocess.run([sys.executable, "tools/flops_table.py", "--tasks", "det", "--variants", variant],
                              cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 2 and error in proc.stderr


def test_listing_mechanisms_imports_no_openmmlab():
    """The mechanism table is plain PyTorch: listing it loads neither mmengine, mmcv, mmdet nor mmseg."""
    code = ("import sys; from attnbench.sweep.catalog import mechanism_table; mechanism_table(); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mmengine', 'mmcv', 'mmdet', 'mmseg')))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]"


@pytest.mark.slow
def test_flops_table_update_recounts_some_rows_in_place(tmp_path):
    """--update replaces the recounted rows of an existing table and keeps the others, in their order;
    a new row goes after its task's last row."""
    import pandas as pd

    table = pd.DataFrame(dict(task=["nmt", "nmt", "nmt", "nmt", "seg"], slot=["", "enc-self", "enc-self", "dec-self", ""],
                              variant=["baseline", "1111", "0010", "0010", "baseline"], input_size="50 tokens",
                              gmacs_model=[0.0, 1.0, 2.0, 3.0, 4.0], gmacs_attention=-1.0, analytic_check="ok",
                              params_model_m=1.0, published=[27.3, None, None, None, None], published_source=""))
    table.to_csv(tmp_path / "flops.csv", index=False)
    proc = subprocess.run([sys.executable, "tools/flops_table.py", "--tasks", "nmt", "--variants", "0010",
                           "--out", str(tmp_path), "--update"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    updated = pd.read_csv(tmp_path / "flops.csv")
    assert list(zip(updated["slot"].fillna(""), updated["variant"])) == [
        ("", "baseline"), ("enc-self", "1111"), ("enc-self", "0010"), ("dec-self", "0010"), ("enc-dec", "0010"),
        ("", "baseline")]
    assert updated["task"].tolist() == ["nmt"] * 5 + ["seg"]
    assert updated["gmacs_attention"].tolist()[1] == updated["gmacs_attention"].tolist()[5] == -1.0  # kept as they were
    assert (updated["gmacs_attention"].drop(index=[1, 5]) >= 0).all() and updated.loc[0, "published"] == 27.3


def test_every_mechanism_counts_its_macs_from_its_forward_arguments():
    """One FLOPs protocol: each mechanism's macs() takes forward()'s arguments, and the counting hook
    calls it with those of the call it counts."""
    import inspect

    from attnbench.variants import ALL_MECHANISMS

    classes = {c for m in ALL_MECHANISMS for c in (m.module, m.sequence_module) if c is not None}
    for cls in classes:
        assert list(inspect.signature(cls.macs).parameters) == list(inspect.signature(cls.forward).parameters), cls
