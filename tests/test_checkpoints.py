"""mmdet's released empirical-attention detectors load into attnbench's configs, key for key.

The real checkpoints cannot be downloaded here; a checkpoint is made from the mmcv-based model
that mmdet's own configs build (mmcv GeneralizedAttention and DCN), with random weights.
"""
import pytest
import torch
from mmengine.config import Config
from mmengine.hub import get_config
from mmengine.registry import init_default_scope
from mmengine.runner import load_checkpoint

import attnbench.mm  # noqa: F401
from attnbench.config_files import vision_config_path


def build(config_path):
    cfg = get_config(config_path) if "::" in config_path else Config.fromfile(config_path)
    cfg.model.backbone.init_cfg = None
    init_default_scope("mmdet")
    from mmdet.registry import MODELS

    return MODELS.build(cfg.model).eval()


@pytest.mark.parametrize("variant", ["1111", "0010", "1111+deformable", "0010+deformable"])
def test_released_empirical_attention_checkpoint_loads_strictly(variant, tmp_path):
    slug = variant.replace("+deformable", "-dcn").replace(variant[:4], f"attn{variant[:4]}", 1)
    reference = build(f"mmdet::empirical_attention/faster-rcnn_r50-{slug}_fpn_1x_coco.py")
    with torch.no_grad():
        for name, p in reference.named_parameters():
            if name.endswith("gamma") or "conv_offset" in name:  # zero at init would hide the modules
                p.normal_(std=0.1)
    path = tmp_path / "checkpoint.pth"
    torch.save({"state_dict": reference.state_dict(), "meta": {"mmdet_version": "2.0"}}, path)

    ours = build(str(vision_config_path("det", "full", variant)))
    load_checkpoint(ours, str(path), strict=True)
    assert list(ours.state_dict()) == list(reference.state_dict())
    x = torch.randn(1, 3, 96, 160)
    with torch.no_grad():
        for a, b in zip(ours.backbone(x), reference.backbone(x)):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
