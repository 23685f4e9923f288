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


@pytest.mark.slow
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


USER_CONFIG = """# A user's own detector: mmdet's CocoDataset on a COCO-format folder of their own, on the mini Faster R-CNN
_base_ = '{base}'
data_root = '{data}/'
metainfo = dict(classes=('match', 'other'))
model = dict(roi_head=dict(bbox_head=dict(num_classes=2)))
dataset = dict(type='CocoDataset', data_root=data_root, metainfo=metainfo)
train_dataloader = dict(dataset=dict(_delete_=True, **dataset, ann_file='annotations/instances_train.json',
                                     data_prefix=dict(img='images/train/'), filter_cfg=dict(filter_empty_gt=True),
                                     pipeline={{{{_base_.train_pipeline}}}}))
val_dataloader = dict(dataset=dict(_delete_=True, **dataset, ann_file='annotations/instances_val.json',
                                   data_prefix=dict(img='images/val/'), test_mode=True,
                                   pipeline={{{{_base_.test_pipeline}}}}))
test_dataloader = val_dataloader
val_evaluator = dict(_delete_=True, type='CocoMetric', ann_file=data_root + 'annotations/instances_val.json',
                     metric='bbox')
test_evaluator = val_evaluator
"""


@pytest.mark.slow
def test_the_sweep_runs_its_variants_on_a_users_own_config(tmp_path):
    data = tmp_path / "my_coco"
    subprocess.run([sys.executable, "tools/make_mini_data.py", "--root", str(data)], cwd=ROOT, check=True,
                   capture_output=True)
    config = tmp_path / "my_faster_rcnn.py"
    config.write_text(USER_CONFIG.format(base=ROOT / "configs/detection/faster-rcnn_r50w8_fpn_mini-shapes.py",
                                         data=data))
    results = tmp_path / "results"
    done = sweep(results, "--config", str(config), "--factors", "0010", "--preset", "smoke")
    assert done.returncode == 0, done.stdout + done.stderr
    rows = pd.read_csv(results / "results.csv")
    assert sorted(rows["variant"]) == ["0010", "baseline"] and set(rows["task"]) == {"my_faster_rcnn"}
    assert (rows["status"] == "ok").all() and (rows["metric"] == "coco/bbox_mAP").all()
    assert set(rows["input_size"]) == {"128x128"}  # the config's test-time scale
    assert rows.set_index("variant").loc["0010", "macs_modules"] > 0 == rows.set_index("variant").loc["baseline", "macs_modules"]
    compare = subprocess.run([sys.executable, "tools/compare.py", "--results", str(results)], cwd=ROOT,
                             capture_output=True, text=True)
    assert compare.returncode == 0 and "my_faster_rcnn" in compare.stdout, compare.stderr
    plot = subprocess.run([sys.executable, "tools/plot.py", "--results", str(results)], cwd=ROOT,
                          capture_output=True, text=True)
    assert plot.returncode == 0 and (results / "tradeoff.png").is_file(), plot.stderr


def test_a_config_without_a_resnet_backbone_is_refused_with_what_it_needs(tmp_path):
    config = tmp_path / "my_swin.py"
    config.write_text("default_scope = 'mmdet'\nmodel = dict(type='FasterRCNN', backbone=dict(type='SwinTransformer'))\n")
    done = sweep(tmp_path, "--config", str(config), "--factors", "0010", "--dry-run")
    assert done.returncode == 2 and "ResNet-style backbone with Bottleneck blocks" in done.stderr
    assert "'SwinTransformer'" in done.stderr


def test_two_configs_of_one_name_are_refused(tmp_path):
    from attnbench.sweep.plan import build_plan

    config = ROOT / "configs/segmentation/deeplabv3_r50-d8_4xb4-80k_ade20k-512x512.py"
    (tmp_path / config.name).write_text(f"_base_ = '{config}'\n")
    with pytest.raises(ValueError, match="two files of one name would be one task"):
        build_plan([], ["0010"], [], 1, "mini", user_configs=[str(config), str(tmp_path / config.name)])


@pytest.mark.slow
def test_the_ade20k_config_takes_every_backbone_row_and_counts_flops_at_its_crop():
    """configs/segmentation/deeplabv3_r50-d8_4xb4-80k_ade20k-512x512.py as ``--config`` takes: every row of the
    segmentor's backbone builds into it (150 classes), and FLOPs are counted at its 512x512 crop; here at 64x64."""
    from dataclasses import replace

    from mmengine.registry import init_default_scope
    from mmseg.registry import MODELS

    from attnbench.mm.run_setup import load_config
    from attnbench.sweep.tasks import user_task
    from attnbench.variants import MECHANISMS, vision_rows

    task = user_task(str(ROOT / "configs/segmentation/deeplabv3_r50-d8_4xb4-80k_ade20k-512x512.py"))
    assert (task.name, task.kind, task.input_sizes) == ("deeplabv3_r50-d8_4xb4-80k_ade20k-512x512", "seg",
                                                      {"full": (512, 512)})
    small = replace(task, input_sizes={"full": (64, 64)})
    init_default_scope("mmseg")
    rows = [v for v in vision_rows("seg") if v not in MECHANISMS or MECHANISMS[v].placement != "head"]
    counted = {}
    for variant in rows:
        path, options = task.config("full", task.validate_variant(variant), None)
        cfg = load_config(path, cfg_options=options, check_data=False)
        assert cfg.model.decode_head.num_classes == 150 and cfg.train_dataloader.dataset.type == "ADE20KDataset"
        model = MODELS.build(cfg.model)
        if variant in ("baseline", "1111", "0010+deformable", "dynamic"):
            model.eval()
            counted[variant] = small.count(model, "full")
    assert counted["baseline"]["input_size"] == "64x64" and counted["baseline"]["macs_modules"] == 0
    assert all(counted[v]["macs_modules"] > 0 and counted[v]["macs_model"] > counted["baseline"]["macs_model"]
               for v in ("1111", "dynamic"))
