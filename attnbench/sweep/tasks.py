"""The benchmark's tasks: where their configs are, what they measure, how their FLOPs are counted."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from attnbench.config_files import vision_config_path
from attnbench.variants import Variant

PRESETS = ("mini", "full")


@dataclass(frozen=True)
class VisionTask:
    """Detection (mmdet) or segmentation (mmseg) with the mechanisms in the backbone."""

    name: str
    metric: str          # key of Runner.test()'s result
    metric_label: str
    input_sizes: dict = field(default_factory=dict)  # preset -> (H, W)

    def validate_variant(self, variant: str) -> str:
        return Variant.parse(variant).name

    def slots(self, slot: str | None) -> list[str | None]:
        return [None]

    def config(self, preset: str, variant: str, slot: str | None) -> tuple[str, dict]:
        """Config path and ``--cfg-options`` overrides of one run."""
        return str(vision_config_path(self.name, preset, variant)), {}

    def count(self, model: torch.nn.Module, preset: str) -> dict:
        from .flops import count_model

        height, width = self.input_sizes[preset]
        inputs = torch.randn(1, 3, height, width, device=next(model.parameters()).device)
        if self.name == "det":
            from mmdet.structures import DetDataSample

            meta = dict(img_shape=(height, width), ori_shape=(height, width), pad_shape=(height, width),
                        batch_input_shape=(height, width), scale_factor=(1.0, 1.0))
            samples = [DetDataSample(metainfo=meta)]
            forward = lambda: model(inputs, samples, mode="tensor")  # noqa: E731
        else:
            forward = lambda: model(inputs, mode="tensor")  # noqa: E731
        row = count_model(model, forward, lambda m, args, kwargs: m.macs(tuple(args[0].shape)))
        return row | {"input_size": f"{height}x{width}"}


TASKS: dict[str, VisionTask] = {
    "det": VisionTask("det", "coco/bbox_mAP", "bbox mAP", {"mini": (128, 128), "full": (800, 1333)}),
    "seg": VisionTask("seg", "mIoU", "mIoU", {"mini": (128, 128), "full": (512, 1024)}),
}
