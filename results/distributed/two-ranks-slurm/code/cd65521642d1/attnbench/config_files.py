"""Where each (task, preset, variant) config lives, and how variant configs are written.

One hand-written base config per task and preset; every other variant is a short generated file
that inherits from it and adds the variant's backbone overrides (``tools/generate_configs.py``).
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from .variants import SURVEY_VARIANTS, VISION_VARIANTS, Variant

CONFIG_ROOT = Path(__file__).resolve().parent.parent / "configs"


def repository_path(path: str | Path) -> str:
    """``path`` relative to the repository root when it lies inside it (``configs/...``), as the
    results store records it: rows mean the same on every checkout. Other paths stay as given."""
    resolved = Path(path).resolve()
    root = CONFIG_ROOT.parent
    return str(resolved.relative_to(root)) if resolved.is_relative_to(root) else str(path)


def missing_data(cfg) -> list[tuple[str, dict]]:
    """``(split, dataset config)`` of a config's train, val and test dataloaders (inside a dataset
    wrapper) whose ``data_root`` does not exist."""
    missing = []
    for split in DATALOADERS:
        dataset = (cfg.get(split) or {}).get("dataset", {})
        dataset = dataset.get("dataset", dataset)  # RepeatDataset and other wrappers
        if dataset.get("data_root") and not Path(dataset["data_root"]).is_dir():
            missing.append((split, dataset))
    return missing

DATALOADERS = ("train_dataloader", "val_dataloader", "test_dataloader")


def data_root_options(cfg, data_root: str) -> dict:
    """``--cfg-options`` that point every dataloader's dataset of ``cfg`` (inside a dataset wrapper) at
    ``data_root``, and the evaluators' annotation files under the old root (mmdet's COCO metric) with them."""
    options, old_roots = {}, set()
    for split in DATALOADERS:
        dataset = (cfg.get(split) or {}).get("dataset")
        if dataset is not None:
            key = f"{split}.dataset.dataset" if "dataset" in dataset else f"{split}.dataset"
            old_roots.add(str((dataset.get("dataset", dataset)).get("data_root") or ""))
            options[f"{key}.data_root"] = data_root
    for name in ("val_evaluator", "test_evaluator"):
        evaluators = cfg.get(name)
        listed = isinstance(evaluators, (list, tuple))
        for index, evaluator in enumerate(evaluators if listed else [evaluators] if evaluators else []):
            ann_file = str(evaluator.get("ann_file") or "")
            old = next((root for root in old_roots if root and ann_file.startswith(root)), None)
            if old:
                key = f"{name}.{index}.ann_file" if listed else f"{name}.ann_file"
                options[key] = os.path.join(data_root, ann_file[len(old):].lstrip("/"))
    return options


#: (task, preset) -> (folder, base file, variant file pattern with {slug}).
VISION_CONFIGS: dict[tuple[str, str], tuple[str, str, str]] = {
    ("det", "full"): ("detection", "faster-rcnn_r50_fpn_1x_coco.py", "faster-rcnn_r50-{slug}_fpn_1x_coco.py"),
    ("det", "mini"): ("detection", "faster-rcnn_r50w8_fpn_mini-shapes.py",
                      "faster-rcnn_r50w8-{slug}_fpn_mini-shapes.py"),
    ("seg", "full"): ("segmentation", "deeplabv3_r50-d8_4xb2-80k_cityscapes-512x1024.py",
                      "deeplabv3_r50-d8-{slug}_4xb2-80k_cityscapes-512x1024.py"),
    ("seg", "mini"): ("segmentation", "deeplabv3_r50w8-d8_mini-shapes-128x128.py",
                      "deeplabv3_r50w8-d8-{slug}_mini-shapes-128x128.py"),
}

#: preset -> the parameters each vision token takes from it unless its variant sets its own
#: (``Variant.with_defaults``; ``1111:gate=0`` is mmcv's block at any preset). The mini configs train
#: for a few hundred SGD steps, in which a block behind mmcv's closed gate hardly trains: their rows
#: start with the gate open and carry their plugins from conv3 on (the study's: conv4 and conv5), so
#: that the context reaches the FPN level the mini objects' RoIs read; the protocol chosen on the flag
#: rule (docs/diagnostics.md, "The protocol screen"). The full configs keep mmcv's initialisation, under which
#: mmdet's published APs were measured.
PRESET_PARAMETERS: dict[str, dict] = {"mini": dict(gate=1.0, stages=(3, 5)), "full": {}}


def preset_variant(preset: str, variant: str | Variant) -> Variant:
    """The variant a vision row trains at ``preset`` (mini or full): its own parameters, then the preset's."""
    return Variant.parse(variant).with_defaults(PRESET_PARAMETERS[preset])


#: (task, preset, head token) -> hand-written config of a decode-head variant (in the task's folder).
HEAD_CONFIGS: dict[tuple[str, str, str], str] = {
    ("seg", "full", "ocr"): "ocrnet_r50-d8_4xb2-80k_cityscapes-512x1024.py",
    ("seg", "mini", "ocr"): "ocrnet_r50w8-d8_mini-shapes-128x128.py",
}


#: diagnostic family -> (study task it varies, folder, base config of a diagnostic rule of mini shapes,
#: with {rule}); each inherits the family's mini base and changes only the data
#: (``attnbench.data.mini_shapes.RULES``). ``fcn`` is the mini segmentor with an FCN head in place
#: of DeepLabV3's ASPP, whose image pooling gives every pixel a global context of its own.
DIAGNOSTIC_CONFIGS: dict[str, tuple[str, str, str]] = {
    "det": ("det", "detection", "faster-rcnn_r50w8_fpn_mini-shapes-{rule}.py"),
    "seg": ("seg", "segmentation", "deeplabv3_r50w8-d8_mini-shapes-{rule}-128x128.py"),
    "fcn": ("seg", "segmentation", "fcn_r50w8-d8_mini-shapes-{rule}-128x128.py"),
}


def diagnostic_config_path(family: str, rule: str) -> Path:
    """Base config of the diagnostic ``family`` (det, seg or fcn) on ``rule``, e.g.
    ``configs/detection/faster-rcnn_r50w8_fpn_mini-shapes-near-far.py``."""
    _, folder, pattern = DIAGNOSTIC_CONFIGS[family]
    return CONFIG_ROOT / folder / pattern.format(rule=rule)


def vision_config_path(task: str, preset: str, variant: str | Variant) -> Path:
    """Config file of a vision variant, e.g. ``configs/detection/faster-rcnn_r50-attn0010_fpn_1x_coco.py``."""
    if (task, preset) not in VISION_CONFIGS:
        raise ValueError(f"no vision config for task {task!r} and preset {preset!r}; "
                         f"known: {sorted(VISION_CONFIGS)}")
    folder, base, pattern = VISION_CONFIGS[task, preset]
    variant = Variant.parse(variant)
    if variant.head:
        if (task, preset, variant.head) not in HEAD_CONFIGS:
            raise ValueError(f"variant {variant.name!r} replaces the segmentation decode head; "
                             f"there is no {task} config for it")
        return CONFIG_ROOT / folder / HEAD_CONFIGS[task, preset, variant.head]
    return CONFIG_ROOT / folder / (pattern.format(slug=variant.slug) if variant.slug else base)


def _format(value, indent: int = 0) -> str:
    """OpenMMLab config style: ``dict(key=value)`` with one key per line for nested dicts."""
    pad = " " * (indent + 4)
    if isinstance(value, dict):
        items = [f"{k}={_format(v, indent + 4)}" for k, v in value.items()]
        flat = f"dict({', '.join(items)})"
        if len(flat) + indent <= 90 and not any(isinstance(v, (dict, list)) for v in value.values()):
            return flat
        return "dict(\n" + ",\n".join(pad + item for item in items) + ")"
    if isinstance(value, list):
        return "[\n" + ",\n".join(pad + _format(v, indent + 4) for v in value) + ",\n" + " " * indent + "]"
    return repr(value)


def render_vision_config(task: str, preset: str, variant: str | Variant) -> str:
    """Text of a generated variant config (inherits the task's base config)."""
    name, variant = Variant.parse(variant).name, preset_variant(preset, variant)
    base = VISION_CONFIGS[task, preset][1]
    text = (f"# Generated by tools/generate_configs.py from attnbench.variants: variant '{name}'"
            + (f" (at the {preset} preset: '{variant.name}')" if variant.name != name else "")
            + f".\n# Edit the base config or the variant spec, then regenerate.\n"
            f"_base_ = './{base}'\n"
            f"model = {_format(dict(backbone=variant.backbone_overrides()))}\n")
    optimizer = variant.optimizer_overrides()
    if optimizer:
        text += f"optim_wrapper = {_format(optimizer)}\n"
    return text


def generated_vision_configs(variants: Sequence[str] | None = None) -> dict[Path, str]:
    """Generated vision configs: path -> text, for every task and preset (default: the benchmark's
    rows, survey rows included; any variant with parameters can be added, e.g. ``0100:range=7``
    -> ``...-attn0100-range7_...``). The baseline and decode heads have hand-written files."""
    parsed = [Variant.parse(v) for v in (variants or (*VISION_VARIANTS, *SURVEY_VARIANTS))]
    return {vision_config_path(task, preset, v): render_vision_config(task, preset, v)
            for task, preset in VISION_CONFIGS for v in parsed if v.tokens and not v.head}
