"""Attention mass on the deciding context: the context masks, the image-to-grid mapping, the hook's mass
against a hand computation, and a smoke sweep whose row records it."""
import json
import math
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from attnbench.attention import GeneralizedAttention
from attnbench.data.deciding_context import context_mask, deciding_contexts, object_centre, split_contexts
from attnbench.data.mini_shapes import FLAG_COLOURS, RULES, box_mask, ensure_mini_shapes, flag_size, key_mask
from attnbench.mm.attention_mass import MASS_KEYS, AttentionMassHook, object_attention
from attnbench.mm.feature_grids import InputFrame, input_mask, key_coverage, key_tile, query_indices
from attnbench.sweep.tasks import DIAGNOSTIC_TASKS, TASKS

ROOT = Path(__file__).resolve().parent.parent


def test_every_rule_has_a_context():
    assert all(callable(rule.context) for rule in RULES.values())
    with pytest.raises(ValueError, match="unknown rule 'chess'"):
        context_mask({"height": 8, "width": 8}, {}, [], "chess")


def test_box_mask_and_object_centre():
    mask = box_mask([[2, 3, 4, 5], [0, 0, 1, 1]], 10, 12)
    expected = np.zeros((10, 12), dtype=bool)
    expected[3:8, 2:6] = expected[0, 0] = True
    assert (mask == expected).all()
    assert object_centre({"bbox": [4, 6, 10, 2]}) == (7.0, 9.0)


def annotation(id_, bbox, category_id=1, shape="disc", colour="red", size=None):
    return {"id": id_, "bbox": bbox, "category_id": category_id, "shape": shape, "colour": colour,
            "square": [*bbox[:2], size or bbox[2], size or bbox[2]]}


IMAGE = {"id": 1, "height": 32, "width": 32, "key_side": "left", "marker_box": [4, 5, 3, 3], "flag_box": [20, 1, 6, 6],
         "flag_boxes": {"yellow": [1, 1, 6, 6], "cyan": [24, 24, 6, 6]}}


@pytest.mark.parametrize("rule, category_id, boxes", [
    ("marker", 1, [[4, 5, 3, 3]]), ("near-far", 2, [[4, 5, 3, 3]]), ("flag", 2, [[20, 1, 6, 6]]),
    ("flag-side", 1, [[20, 1, 6, 6]]), ("flag-side", 2, [[20, 1, 6, 6]]),
    ("nearest-flag", 1, [[1, 1, 6, 6]]), ("nearest-flag", 2, [[24, 24, 6, 6]])])
def test_sign_and_flag_contexts_are_their_boxes(rule, category_id, boxes):
    """nearest-flag: the flag of the object's class, the nearer one."""
    obj = annotation(7, [10, 10, 4, 4], category_id)
    assert (context_mask(IMAGE, obj, [obj], rule) == box_mask(boxes, 32, 32)).all()


def test_key_stripe_context_is_the_stripe():
    obj = annotation(7, [10, 10, 4, 4])
    assert (context_mask(IMAGE, obj, [obj], "key-stripe") == key_mask("left", 32)).all()


def test_same_different_context_is_the_twins_or_else_every_other_object():
    twin_a = annotation(1, [2, 2, 6, 6], size=6)
    twin_b = annotation(2, [20, 2, 5, 6], size=6)  # partly hidden: its box is smaller, its square the same
    other = annotation(3, [2, 20, 6, 6], shape="ring", size=6)
    bigger = annotation(4, [20, 20, 8, 8], size=8)  # same shape and colour, other size: not a twin
    objects = [twin_a, twin_b, other, bigger]
    contexts = deciding_contexts(IMAGE, objects, "same-different")
    assert (contexts[0].mask == box_mask([twin_b["bbox"]], 32, 32)).all()
    assert (contexts[1].mask == box_mask([twin_a["bbox"]], 32, 32)).all()
    assert (contexts[2].mask == box_mask([twin_a["bbox"], twin_b["bbox"], bigger["bbox"]], 32, 32)).all()
    assert contexts[3].centre == (24.0, 24.0)


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    root = tmp_path_factory.mktemp("shapes")
    return {rule: ensure_mini_shapes(root / rule, num_train=1, num_val=6, image_size=64, rule=rule) for rule in RULES}


@pytest.mark.parametrize("rule", RULES)
def test_generated_splits_give_every_object_a_context(generated, rule):
    coco = json.loads((generated[rule] / "annotations" / "instances_val.json").read_text())
    contexts = split_contexts(generated[rule], "val")
    assert sorted(contexts) == sorted(image["file_name"] for image in coco["images"])
    assert sum(map(len, contexts.values())) == len(coco["annotations"])
    assert all(o.mask.shape == (64, 64) and o.mask.any() for objects in contexts.values() for o in objects)


def test_the_nearest_flag_context_is_the_flag_nearer_to_the_object(generated):
    """Checked against the generator's own rule: the flag whose centre is nearer to the object's square's."""
    coco = json.loads((generated["nearest-flag"] / "annotations" / "instances_val.json").read_text())
    contexts = split_contexts(generated["nearest-flag"], "val")
    for image in coco["images"]:
        objects = [a for a in coco["annotations"] if a["image_id"] == image["id"]]
        for obj, context in zip(objects, contexts[image["file_name"]]):
            x, y, w, _ = obj["square"]
            distance = {c: math.dist((x + w / 2, y + w / 2), (bx + bw / 2, by + bw / 2))
                        for c, (bx, by, bw, _) in image["flag_boxes"].items()}
            assert (context.mask == box_mask([image["flag_boxes"][min(distance, key=distance.get)]], 64, 64)).all()
            assert context.mask.sum() == flag_size(64) ** 2 and list(FLAG_COLOURS)[obj["category_id"] - 1] in distance


def test_queries_fall_in_the_feature_cell_of_their_point():
    frame = InputFrame((1.0, 1.0), (128, 128), (128, 128))
    points = [(7.9, 8.0), (127.5, 0.0), (64.0, 64.0), (128.0, 130.0)]  # the last one on the border: clipped
    assert query_indices(points, frame, (16, 16), 1).tolist() == [1, 240, 8 * 16 + 8, 255]
    # q_stride 2: the 8 x 8 query grid, feature cell (8, 9) -> query (4, 4)
    assert query_indices([(64.0, 72.0)], frame, (16, 16), 2).tolist() == [4 * 8 + 4]
    # resized to half, padded from 64 to 96 rows: stride 8 px of the input, 16 px of the image
    resized = InputFrame((0.5, 0.5), (64, 64), (96, 80))
    assert query_indices([(100.0, 20.0)], resized, (12, 10), 1).tolist() == [6 * 10 + 1]


def test_metainfo_gives_the_frame():
    frame = InputFrame.of({"scale_factor": (0.5, 0.25), "img_shape": (32, 64)}, (64, 64))
    assert frame == InputFrame((0.25, 0.5), (32, 64), (64, 64))
    assert InputFrame.of({}, (128, 96)) == InputFrame((1.0, 1.0), (128, 96), (128, 96))  # mmseg without a Resize


def test_input_mask_is_resized_like_the_image_and_padded():
    mask = np.zeros((8, 8), dtype=bool)
    mask[:4, 2:4] = True
    resized = input_mask(mask, InputFrame((0.5, 0.5), (4, 4), (6, 5)))
    expected = torch.zeros(6, 5)
    expected[:2, 1] = 1.0
    assert torch.equal(resized, expected)


def test_key_coverage_is_the_share_of_each_key_tile_in_the_mask():
    mask = torch.zeros(32, 32)
    mask[:16, :8] = 1.0
    mask[0, 8:10] = 1.0  # two pixels of the tile of key (0, 1)
    coverage = key_coverage(mask, (8, 8), 2).view(4, 4)  # stride 4, tiles of 8 x 8 px
    expected = torch.zeros(4, 4)
    expected[:2, 0], expected[0, 1] = 1.0, 2 / 64
    assert torch.allclose(coverage, expected)
    assert coverage.mean() == pytest.approx(mask.mean().item())  # the tiles partition the input: chance = share
    assert key_tile(InputFrame((1.0, 1.0), (32, 32), (32, 32)), (8, 8), 2) == (8.0, 8.0)


def test_partial_key_tiles_count_only_their_own_pixels():
    mask = torch.zeros(20, 20)
    mask[16:, 16:] = 1.0  # the last key's tile is the 4 x 4 corner (one feature cell)
    coverage = key_coverage(mask, (5, 5), 2).view(3, 3)
    assert coverage[2, 2] == 1.0 and coverage.sum() == 1.0


class TinyModel(torch.nn.Module):
    """Features of stride 4 (the image average-pooled) into one E3-only block: key logits ``b_m x0``."""

    def __init__(self, biases):
        super().__init__()
        self.block = GeneralizedAttention(3, num_heads=3, kv_stride=2, attention_type="0010", gamma_init=1.0)
        with torch.no_grad():
            self.block.key_conv.weight.zero_()
            self.block.key_conv.weight[:, 0] = 1.0  # every head's key: channel 0 of the input
            self.block.appr_bias.copy_(torch.tensor(biases))

    def forward(self, inputs, data_samples, mode="predict"):
        return self.block(F.avg_pool2d(inputs, 4))


class NoAttention(torch.nn.Module):
    def forward(self, inputs, data_samples, mode="predict"):
        return inputs


def hand_made_flag_folder(root: Path) -> Path:
    """A 32 x 32 'flag' image: flag box at the corner (8 x 8 px), one object whose centre is (24, 24)."""
    (root / "annotations").mkdir(parents=True)
    (root / "mini_shapes.json").write_text(json.dumps({"rule": "flag"}))
    image = {"id": 1, "file_name": "000000.png", "height": 32, "width": 32, "flag": "cyan", "flag_box": [0, 0, 8, 8]}
    coco = {"images": [image], "annotations": [annotation(1, [20, 20, 8, 8], 2) | {"image_id": 1}], "categories": []}
    (root / "annotations" / "instances_val.json").write_text(json.dumps(coco))
    return root


def validate(hook, model, root, inputs, iteration=10):
    runner = SimpleNamespace(iter=iteration, max_iters=10, model=model,
                             val_dataloader=SimpleNamespace(dataset=SimpleNamespace(data_root=str(root))))
    sample = SimpleNamespace(metainfo={"img_shape": (32, 32)}, img_path=str(root / "images" / "val" / "000000.png"))
    hook.before_val_epoch(runner)
    with torch.no_grad():
        model(inputs=inputs, data_samples=[sample], mode="predict")
    hook.after_val_epoch(runner)


def test_the_hook_measures_the_mass_a_hand_computation_gives(tmp_path):
    """Channel 0 is 1 on the flag: the 4 x 4 keys (tiles of 8 x 8 px) see x0 = 1 at key (0, 0) only, whose
    tile is the flag, so head m puts e^b_m / (e^b_m + 15) on it; chance is 64 / 1024."""
    root = hand_made_flag_folder(tmp_path / "data")
    biases = [0.0, 2.0, -1.0]
    image = torch.zeros(1, 3, 32, 32)
    image[:, 0, :8, :8] = 1.0
    image[:, 1] = torch.rand(32, 32)  # not read by the keys
    summary = {}
    validate(AttentionMassHook(summary), TinyModel(biases), root, image)
    expected = np.mean([math.exp(b) / (math.exp(b) + 15) for b in biases])
    assert summary["mass_context"] == pytest.approx(expected, rel=1e-6)
    assert summary["mass_context_E3"] == pytest.approx(expected, rel=1e-6)
    assert all(math.isnan(summary[f"mass_context_{t}"]) for t in ("E1", "E2", "E4"))
    assert summary["mass_context_chance"] == pytest.approx(64 / 1024)
    assert set(summary) == set(MASS_KEYS.values())


def test_the_hook_measures_only_the_final_validation_and_nan_without_attention(tmp_path):
    root = hand_made_flag_folder(tmp_path / "data")
    model, summary = TinyModel([1.0, 1.0, 1.0]), {}
    hook = AttentionMassHook(summary)
    validate(hook, model, root, torch.rand(1, 3, 32, 32), iteration=5)
    assert summary == {} and not model.block._forward_pre_hooks
    validate(hook, NoAttention(), root, torch.rand(1, 3, 32, 32))
    assert set(summary) == set(MASS_KEYS.values()) and all(math.isnan(v) for v in summary.values())


def test_object_attention_takes_each_object_s_query_and_context_from_its_own_image():
    """A batch of two images at stride 8: each object's weights are its image's row of the query at its
    centre's cell, its coverage the key tiles of its own mask."""
    block = GeneralizedAttention(8, num_heads=2, kv_stride=2, attention_type="1111")
    x = torch.randn(2, 8, 4, 4)
    frame = InputFrame((1.0, 1.0), (32, 32), (32, 32))
    corner, far = box_mask([[0, 0, 16, 16]], 32, 32), box_mask([[16, 16, 16, 16]], 32, 32)
    objects = [[SimpleNamespace(centre=(4.0, 28.0), mask=corner), SimpleNamespace(centre=(20.0, 9.0), mask=far)],
               [SimpleNamespace(centre=(20.0, 9.0), mask=corner)]]
    found = object_attention(block, x, [frame, frame], objects)
    full = block.attention_maps(x).weights
    for name in ("all", "E1", "E2", "E3", "E4"):
        expected = torch.stack([full[name][0, :, 3], full[name][0, :, 9], full[name][1, :, 9]])
        assert torch.allclose(found.weights[name], expected)
    assert found.coverage.tolist() == [[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0], [1.0, 0.0, 0.0, 0.0]]
    mass = found.mass()
    assert set(mass) == {"all", "E1", "E2", "E3", "E4", "chance"} and found.key_grid == (2, 2)
    assert torch.allclose(mass["all"], torch.stack([full["all"][0, :, 3, 0].mean(), full["all"][0, :, 9, 3].mean(),
                                                    full["all"][1, :, 9, 0].mean()]))
    assert mass["chance"].tolist() == [0.25, 0.25, 0.25]


def test_only_the_diagnostic_tasks_have_a_rule():
    """The worker measures the mass where its task has a rule: every task answers, the diagnostic ones only yes."""
    assert {name for name, task in TASKS.items() if task.rule} == set(DIAGNOSTIC_TASKS)


@pytest.mark.slow
def test_a_smoke_sweep_records_the_mass_on_the_context(tmp_path):
    """det-flag, 1111: the row carries a mass in [0, 1] per term and the flag's share of the image as chance
    (24 x 24 of 128 x 128 px: every block's key tiles partition the input)."""
    results = tmp_path / "results"
    proc = subprocess.run([sys.executable, str(ROOT / "tools/sweep.py"), "--tasks", "det-flag", "--factors", "1111",
                           "--no-baseline", "--preset", "smoke", "--results", str(results), "--no-wandb", "--no-plot"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (row,) = pd.read_csv(results / "results.csv").to_dict("records")
    assert row["status"] == "ok", row["error"]
    for key in ("mass_context", "mass_context_E1", "mass_context_E2", "mass_context_E3", "mass_context_E4"):
        assert 0.0 <= row[key] <= 1.0
    assert row["mass_context_chance"] == pytest.approx(24 ** 2 / 128 ** 2)
    table = subprocess.run([sys.executable, str(ROOT / "tools/compare.py"), "--results", str(results)],
                           capture_output=True, text=True, check=True).stdout
    assert "context mass (chance)" in table and f"{row['mass_context']:.3f} (0.035)" in table
