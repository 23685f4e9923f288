import json
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from itertools import product
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from pycocotools.coco import COCO

from attnbench.data.mini_shapes import (
    CLASSES, FAR, FLAG_COLOURS, MARKER, MARKER_COLOUR, NEAR, PALETTE, RULES, SHAPES, SPLITS, ensure_mini_shapes,
    flag_size, key_mask, key_width, make_mini_shapes, marker_mask, shape_mask)

GENERATE = dict(num_train=48, num_val=12, image_size=128, seed=0)
SMALL = dict(num_train=3, num_val=2, image_size=64)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return ensure_mini_shapes(tmp_path_factory.mktemp("mini") / "shapes", **GENERATE)


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.is_symlink() and "img_dir" not in p.parts}


def coco(root: Path, split: str) -> COCO:
    return COCO(str(root / "annotations" / f"instances_{split}.json"))


def nearest_colour(rgb: np.ndarray) -> str:
    return min(PALETTE, key=lambda c: np.linalg.norm(rgb - np.asarray(PALETTE[c])))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("size", [3, 12, 13, 56])
def test_shape_fills_exactly_its_square(shape, size):
    mask = shape_mask(shape, 5, 7, size, 64)
    ys, xs = np.nonzero(mask)
    assert (xs.min(), xs.max() + 1, ys.min(), ys.max() + 1) == (5, 5 + size, 7, 7 + size)
    centre_filled = mask[7 + size // 2, 5 + size // 2]
    assert centre_filled == (shape == "disc" or size < 5)  # thickness max(2, size / 5) closes the smallest ones


def test_same_seed_same_files_and_other_seed_other_images(tmp_path):
    make_mini_shapes(tmp_path / "a", seed=0, **SMALL)
    make_mini_shapes(tmp_path / "b", seed=0, **SMALL)
    make_mini_shapes(tmp_path / "c", seed=1, **SMALL)
    a, b, c = (files(tmp_path / n) for n in "abc")
    assert a == b
    images = [k for k in a if k.startswith("images/")]
    assert len(images) == 5 and all(a[k] != c[k] for k in images)


def test_more_images_leave_the_first_ones_unchanged(tmp_path):
    make_mini_shapes(tmp_path / "few", **SMALL)
    make_mini_shapes(tmp_path / "more", **{**SMALL, "num_train": 5})
    few, more = files(tmp_path / "few"), files(tmp_path / "more")
    for name in ("images/train/000002.png", "ann_dir/train/000002.png", "images/val/000001.png"):
        assert few[name] == more[name]


@pytest.mark.parametrize("split", SPLITS)
def test_coco_annotations_are_valid_and_agree_with_label_maps(root, split):
    data = coco(root, split)
    assert [c["name"] for c in data.loadCats(data.getCatIds())] == list(CLASSES)
    assert len(data.getImgIds()) == GENERATE[f"num_{split}"]
    for image_id in data.getImgIds():
        info = data.loadImgs(image_id)[0]
        labels = np.asarray(Image.open(root / "ann_dir" / split / info["file_name"]))
        size = GENERATE["image_size"]
        assert Image.open(root / "images" / split / info["file_name"]).size == (info["width"], info["height"])
        assert labels.shape == (info["height"], info["width"]) == (size, size)
        anns = data.loadAnns(data.getAnnIds(imgIds=image_id))
        assert 1 <= len(anns) <= 4
        painted = np.zeros_like(labels)
        for ann in anns:
            x, y, w, h = ann["bbox"]
            assert 0 <= x and 0 <= y and x + w <= size and y + h <= size and ann["iscrowd"] == 0
            mask = data.annToMask(ann).astype(bool)
            ys, xs = np.nonzero(mask)
            assert [xs.min(), ys.min(), xs.max() + 1 - xs.min(), ys.max() + 1 - ys.min()] == ann["bbox"]
            assert mask.sum() == ann["area"] and np.all(labels[mask] == ann["category_id"])
            assert not painted[mask].any(), "instance masks overlap"
            painted[mask] = ann["category_id"]
        np.testing.assert_array_equal(painted, labels)  # no labelled pixel without an object


def test_class_is_decided_by_the_key_not_by_the_object(root):
    data = coco(root, "train")
    seen = set()
    size = GENERATE["image_size"]
    for info in data.loadImgs(data.getImgIds()):
        image = np.asarray(Image.open(root / "images" / "train" / info["file_name"]), dtype=float)
        labels = np.asarray(Image.open(root / "ann_dir" / "train" / info["file_name"]))
        key = key_mask(info["key_side"], size)
        assert nearest_colour(image[key].mean(0)) == info["key_colour"]
        margin = 2 * key_width(size)
        assert not labels[:margin].any() and not labels[-margin:].any()
        assert not labels[:, :margin].any() and not labels[:, -margin:].any()
        for ann in data.loadAnns(data.getAnnIds(imgIds=info["id"])):
            assert nearest_colour(image[data.annToMask(ann).astype(bool)].mean(0)) == ann["colour"]
            matches = ann["colour"] == info["key_colour"]
            assert CLASSES[ann["category_id"] - 1] == ("match" if matches else "other")
            seen.add((ann["shape"], ann["colour"], ann["category_id"]))
    # every shape in every colour occurs as both classes: its own pixels cannot tell the class
    assert seen == set(product(SHAPES, PALETTE, (1, 2)))


# ---- the diagnostic rules ------------------------------------------------------------------------

@pytest.fixture(scope="module", params=[r for r in RULES if r != "key-stripe"])
def rule_data(request, tmp_path_factory):
    """(rule, COCO of its train split, root): 150 images of each diagnostic rule."""
    root = ensure_mini_shapes(tmp_path_factory.mktemp(request.param) / "shapes", num_train=150, num_val=4,
                              rule=request.param)
    return request.param, coco(root, "train"), root


def gap(a: list[int], b: list[int]) -> float:
    """Euclidean distance between two boxes [x, y, w, h], 0 when they overlap."""
    dx = max(a[0] - (b[0] + b[2]), b[0] - (a[0] + a[2]), 0)
    dy = max(a[1] - (b[1] + b[3]), b[1] - (a[1] + a[3]), 0)
    return float(np.hypot(dx, dy))


def test_every_rule_names_its_classes_and_its_label_maps_agree(rule_data):
    rule, data, root = rule_data
    assert [c["name"] for c in data.loadCats(data.getCatIds())] == list(RULES[rule].classes)
    for info in data.loadImgs(data.getImgIds()):
        labels = np.asarray(Image.open(root / "ann_dir" / "train" / info["file_name"]))
        painted = np.zeros_like(labels)
        for ann in data.loadAnns(data.getAnnIds(imgIds=info["id"])):
            painted[data.annToMask(ann).astype(bool)] = ann["category_id"]
        np.testing.assert_array_equal(painted, labels)


def test_each_rule_decides_the_class_by_its_context(rule_data):
    rule, data, root = rule_data
    size = 128
    for info in data.loadImgs(data.getImgIds()):
        image = np.asarray(Image.open(root / "images" / "train" / info["file_name"]), dtype=float)
        anns = data.loadAnns(data.getAnnIds(imgIds=info["id"]))
        assert anns, "every image holds an object"
        signs = []  # (where, colour) of each sign, drawn where recorded
        if rule in ("marker", "near-far"):
            signs = [(marker_mask(info["marker"], *info["marker_box"][:3], size), MARKER_COLOUR, info["marker_box"])]
        elif rule in ("flag", "nearest-flag", "flag-side"):
            boxes = info["flag_boxes"] if rule == "nearest-flag" else {info["flag"]: info["flag_box"]}
            for colour, box in boxes.items():
                flag = np.zeros((size, size), dtype=bool)
                flag[box[1]:box[1] + box[3], box[0]:box[0] + box[2]] = True
                signs.append((flag, FLAG_COLOURS[colour], box))
        for mask, colour, (x, y, w, h) in signs:
            assert np.abs(image[mask].mean(0) - colour).max() < 25
            rim = np.zeros((size, size), dtype=bool)
            rim[max(0, y - 2):y + h + 2, max(0, x - 2):x + w + 2] = True
            assert not any((data.annToMask(a).astype(bool) & rim).any() for a in anns)  # 2 px clear of every object
        if rule == "marker":
            assert {a["category_id"] for a in anns} == {1 if info["marker"] == "plus" else 2}
        elif rule == "flag":
            assert {a["category_id"] for a in anns} == {list(FLAG_COLOURS).index(info["flag"]) + 1}
        elif rule == "nearest-flag":
            (x0, y0, _, _), (x1, y1, _, _) = boxes.values()
            assert max(abs(x0 - x1), abs(y0 - y1)) - flag_size(size) >= FAR * size  # the flags FAR apart
            for ann in anns:
                centre = np.add(ann["square"][:2], np.divide(ann["square"][2:], 2))
                distance = {c: np.hypot(*(centre - np.add(b[:2], np.divide(b[2:], 2)))) for c, b in boxes.items()}
                assert abs(distance["yellow"] - distance["cyan"]) >= NEAR * size
                assert RULES[rule].classes[ann["category_id"] - 1] == f"{min(distance, key=distance.get)}-nearer"
        elif rule == "flag-side":
            (fx, _, fw, _), gap_px = info["flag_box"], NEAR * size
            for ann in anns:
                x, _, w, _ = ann["square"]
                assert fx + fw + gap_px <= x or x + w + gap_px <= fx  # wholly left or right, NEAR apart
                flag_on_left = fx + fw <= x
                agrees = flag_on_left == (info["flag"] == "yellow")  # yellow says left, cyan right
                assert RULES[rule].classes[ann["category_id"] - 1] == ("agree" if agrees else "disagree")
        elif rule == "same-different":
            identities = [(a["shape"], a["colour"], a["square"][2]) for a in anns]
            assert [a["category_id"] for a in anns] == [1 if identities.count(i) > 1 else 2 for i in identities]
        else:
            (ann,) = anns
            distance = gap(ann["square"], info["marker_box"])
            assert distance <= NEAR * size if ann["category_id"] == 1 else distance >= FAR * size


def test_no_rule_lets_the_object_tell_its_class(rule_data):
    """Look (shape and colour), size and place of an object are each balanced between the two classes,
    up to sampling noise. The first near-far design (1 to 4 objects around a plus placed first) failed
    it: on 150 images, central objects were near in 65 %, outer ones in 26 % (4.6 standard deviations)."""
    rule, data, _ = rule_data
    anns = data.loadAnns(data.getAnnIds())
    first = np.array([a["category_id"] == 1 for a in anns])
    assert 0.4 <= first.mean() <= 0.6
    looks = {(a["shape"], a["colour"]) for a in anns}
    assert looks == set(product(SHAPES, PALETTE))
    squares = np.array([a["square"] for a in anns], dtype=float)
    sizes, centres = squares[:, 2], squares[:, :2] + squares[:, 2:] / 2
    radius = np.hypot(*(centres - 64).T)
    groups = {f"look {look}": [(a["shape"], a["colour"]) == look for a in anns] for look in looks} | {
        "small": sizes < np.median(sizes), "large": sizes >= np.median(sizes),
        "left": centres[:, 0] < 64, "top": centres[:, 1] < 64,
        "central": radius < np.median(radius), "outer": radius >= np.median(radius)}
    for name, members in groups.items():  # within 4 binomial standard deviations of the overall share
        members = np.asarray(members)
        share, spread = first[members].mean(), np.sqrt(first.mean() * (1 - first.mean()) / members.sum())
        assert abs(share - first.mean()) < 4 * spread, f"{rule}: {name} objects are class 1 in {share:.2f}"


def test_flag_side_needs_the_colour_and_the_side_together(tmp_path):
    """Neither the flag's colour (what a context shared by every query carries) nor its side alone
    tells an object's class: each leaves both classes about equally often."""
    data = coco(ensure_mini_shapes(tmp_path / "shapes", num_train=150, num_val=1, rule="flag-side"), "train")
    colour, left, agree = [], [], []
    for ann in data.loadAnns(data.getAnnIds()):
        info = data.loadImgs(ann["image_id"])[0]
        colour.append(info["flag"] == "yellow")
        left.append(info["flag_box"][0] < ann["square"][0])
        agree.append(ann["category_id"] == 1)
    colour, left, agree = map(np.asarray, (colour, left, agree))
    for name, members in {"yellow": colour, "cyan": ~colour, "flag left": left, "flag right": ~left}.items():
        spread = np.sqrt(0.25 / members.sum())
        assert abs(agree[members].mean() - 0.5) < 4 * spread, f"{name}: agree in {agree[members].mean():.2f}"
    assert (agree == (colour == left)).all()


def test_rule_datasets_carry_their_class_names(tmp_path):
    import attnbench.mm  # noqa: F401
    from mmdet.registry import DATASETS as DET
    from mmseg.registry import DATASETS as SEG

    generate = dict(num_train=2, num_val=2, image_size=64, rule="near-far")
    det = DET.build(dict(type="attnbench.MiniShapesDetDataset", data_root=str(tmp_path / "d"), generate=generate,
                         ann_file="annotations/instances_val.json", data_prefix=dict(img="images/val/")))
    seg = SEG.build(dict(type="attnbench.MiniShapesSegDataset", data_root=str(tmp_path / "d"), generate=generate,
                         data_prefix=dict(img_path="img_dir/val", seg_map_path="ann_dir/val")))
    assert det.metainfo["classes"] == ("near", "far") and seg.metainfo["classes"] == ("background", "near", "far")
    assert [i["bbox_label"] for i in det.get_data_info(0)["instances"]] == [
        a["category_id"] - 1 for a in coco(tmp_path / "d", "val").loadAnns(coco(tmp_path / "d", "val").getAnnIds(imgIds=1))]


def test_data_written_before_rules_is_read_as_key_stripe(tmp_path):
    root = ensure_mini_shapes(tmp_path / "shapes", **SMALL)
    params = json.loads((root / MARKER).read_text())
    (root / MARKER).write_text(json.dumps({k: v for k, v in params.items() if k != "rule"}))
    assert ensure_mini_shapes(root, **SMALL) == root
    with pytest.raises(ValueError, match="delete that folder"):
        ensure_mini_shapes(root, **SMALL, rule="marker")


def test_ensure_is_idempotent_and_refuses_other_parameters(tmp_path):
    root = tmp_path / "shapes"
    assert ensure_mini_shapes(root, **SMALL) == root
    stamps = {p: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}
    ensure_mini_shapes(root, **SMALL)
    assert {p: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()} == stamps
    assert json.loads((root / MARKER).read_text())["num_train"] == SMALL["num_train"]
    with pytest.raises(ValueError, match="delete that folder"):
        ensure_mini_shapes(root, **{**SMALL, "seed": 1})
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("not mini shapes")
    with pytest.raises(FileExistsError, match="no mini_shapes.json"):
        ensure_mini_shapes(tmp_path / "other", **SMALL)


def test_ensure_from_concurrent_processes_generates_once(tmp_path):
    root = tmp_path / "shapes"
    with ProcessPoolExecutor(3, mp_context=multiprocessing.get_context("spawn")) as pool:
        done = [pool.submit(ensure_mini_shapes, root, **SMALL) for _ in range(3)]
        assert [f.result() for f in done] == [root] * 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shapes", "shapes.lock"]  # no temporary folder left
    make_mini_shapes(tmp_path / "reference", **SMALL)
    assert files(root) == files(tmp_path / "reference")


@pytest.mark.parametrize("bad, message", [
    (dict(num_train=0), "num_train must be an integer >= 1, got 0"),
    (dict(num_val=2.5), "num_val must be an integer >= 1, got 2.5"),
    (dict(image_size=31), "image_size must be an integer >= 32, got 31"),
    (dict(seed=-1), "seed must be an integer >= 0, got -1"),
    (dict(rule="stripes"), "unknown rule 'stripes'; choose from"),
])
def test_bad_arguments_are_refused(tmp_path, bad, message):
    with pytest.raises(ValueError, match=message):
        make_mini_shapes(tmp_path / "x", **{**SMALL, **bad})
    with pytest.raises(ValueError, match=message):
        ensure_mini_shapes(tmp_path / "y", **{**SMALL, **bad})


def test_make_refuses_a_non_empty_folder(tmp_path):
    (tmp_path / "keep.txt").write_text("")
    with pytest.raises(FileExistsError, match="not empty"):
        make_mini_shapes(tmp_path, **SMALL)


# ---- read by mmdet and mmseg --------------------------------------------------------------------

def det_dataset(root: Path, split: str = "val"):
    import attnbench.mm  # noqa: F401  (registers the datasets)
    from mmdet.registry import DATASETS

    return DATASETS.build(dict(
        type="attnbench.MiniShapesDetDataset", data_root=str(root), generate=GENERATE,
        ann_file=f"annotations/instances_{split}.json", data_prefix=dict(img=f"images/{split}/"),
        pipeline=[dict(type="LoadImageFromFile"), dict(type="mmdet.LoadAnnotations", with_bbox=True),
                  dict(type="mmdet.Resize", scale=(256, 256), keep_ratio=True), dict(type="mmdet.PackDetInputs")]))


def seg_dataset(root: Path, split: str = "val"):
    import attnbench.mm  # noqa: F401
    from mmseg.registry import DATASETS

    return DATASETS.build(dict(
        type="attnbench.MiniShapesSegDataset", data_root=str(root), generate=GENERATE,
        data_prefix=dict(img_path=f"img_dir/{split}", seg_map_path=f"ann_dir/{split}"),
        pipeline=[dict(type="LoadImageFromFile"), dict(type="mmseg.LoadAnnotations"),
                  dict(type="mmseg.PackSegInputs")]))


def test_mmdet_pipeline_loads_boxes_in_resized_coordinates(root):
    ds = det_dataset(root)
    assert len(ds) == GENERATE["num_val"] and ds.metainfo["classes"] == CLASSES
    sample = ds[0]
    info = ds.get_data_info(0)
    assert sample["inputs"].shape == (3, 256, 256)
    gt = sample["data_samples"].gt_instances
    torch.testing.assert_close(gt.bboxes.tensor, 2 * torch.tensor([i["bbox"] for i in info["instances"]]).float())
    assert gt.labels.tolist() == [i["bbox_label"] for i in info["instances"]]


def test_mmseg_pipeline_loads_label_maps(root):
    ds = seg_dataset(root)
    assert len(ds) == GENERATE["num_val"] and ds.metainfo["classes"] == ("background", *CLASSES)
    sample = ds[0]
    labels = np.asarray(Image.open(root / "ann_dir" / "val" / "000000.png"))
    assert sample["inputs"].shape == (3, 128, 128)
    np.testing.assert_array_equal(sample["data_samples"].gt_sem_seg.data[0].numpy(), labels)


def test_coco_metric_is_perfect_on_ground_truth_and_zero_with_swapped_classes(root):
    from mmdet.evaluation import CocoMetric

    ds = det_dataset(root)

    def bbox_map(swap: bool) -> float:
        metric = CocoMetric(ann_file=str(root / "annotations" / "instances_val.json"), metric="bbox")
        metric.dataset_meta = ds.metainfo
        for i in range(len(ds)):
            info = ds.get_data_info(i)
            labels = torch.tensor([inst["bbox_label"] for inst in info["instances"]])
            metric.process({}, [dict(img_id=info["img_id"], ori_shape=(info["height"], info["width"]),
                                     pred_instances=dict(
                                         bboxes=torch.tensor([inst["bbox"] for inst in info["instances"]]).float(),
                                         scores=torch.ones(len(labels)), labels=1 - labels if swap else labels))])
        return metric.evaluate(len(ds))["coco/bbox_mAP"]

    assert bbox_map(swap=False) == 1.0
    assert bbox_map(swap=True) == 0.0


def test_iou_metric_is_perfect_on_ground_truth(root):
    from mmseg.evaluation import IoUMetric

    ds = seg_dataset(root)
    metric = IoUMetric(iou_metrics=["mIoU"])
    metric.dataset_meta = ds.metainfo
    for i in range(len(ds)):
        gt = ds[i]["data_samples"].gt_sem_seg.data
        metric.process({}, [dict(pred_sem_seg=dict(data=gt), gt_sem_seg=dict(data=gt))])
    assert metric.evaluate(len(ds))["mIoU"] == 100.0


def test_context_accuracy_counts_the_right_class_among_the_objects_found(root):
    from attnbench.mm.metrics import ContextAccuracyMetric

    ds = det_dataset(root)

    def context(labels_of, keep=lambda i: True) -> dict:
        metric = ContextAccuracyMetric(ann_file=str(root / "annotations" / "instances_val.json"))
        metric.dataset_meta = ds.metainfo
        for i in range(len(ds)):
            info = ds.get_data_info(i)
            kept = [inst for j, inst in enumerate(info["instances"]) if keep(j)]
            labels = torch.tensor([labels_of(inst["bbox_label"]) for inst in kept], dtype=torch.long)
            boxes = torch.tensor([inst["bbox"] for inst in kept], dtype=torch.float32).reshape(-1, 4)
            metric.process({}, [dict(img_id=info["img_id"], pred_instances=dict(
                bboxes=boxes, scores=torch.ones(len(kept)), labels=labels))])
        return metric.evaluate(len(ds))

    assert context(lambda label: label) == {"context/accuracy": 1.0, "context/found": 1.0}
    assert context(lambda label: 1 - label)["context/accuracy"] == 0.0
    first_only = context(lambda label: label, keep=lambda j: j == 0)
    boxes = sum(len(ds.get_data_info(i)["instances"]) for i in range(len(ds)))
    assert first_only == {"context/accuracy": 1.0, "context/found": pytest.approx(len(ds) / boxes)}


def test_segmentation_context_accuracy_is_by_object_pixels(root):
    from attnbench.mm.metrics import SegContextAccuracyMetric

    ds = seg_dataset(root)

    def context(predict) -> dict:
        metric = SegContextAccuracyMetric()
        metric.dataset_meta = ds.metainfo
        for i in range(len(ds)):
            gt = ds[i]["data_samples"].gt_sem_seg.data
            metric.process({}, [dict(gt_sem_seg=dict(data=gt), pred_sem_seg=dict(data=predict(gt)))])
        return metric.evaluate(len(ds))

    assert context(lambda gt: gt) == {"context/accuracy": 1.0, "context/found": 1.0}
    assert context(lambda gt: torch.where(gt > 0, 3 - gt, gt))["context/accuracy"] == 0.0
    half = context(lambda gt: torch.where((gt > 0) & (torch.arange(gt.shape[-1]) < 64), gt, 0))
    assert half["context/accuracy"] == 1.0 and 0 < half["context/found"] < 1
