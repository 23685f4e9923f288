"""Decode heads whose attention is one of attnbench's mechanisms.

``attnbench.OCRHead`` is mmseg's ``OCRHead`` (OCRNet, the second stage of a
``CascadeEncoderDecoder`` after an ``FCNHead`` that predicts the soft object regions) with its
region gathering and object attention computed by :class:`attnbench.attention.object_context.ObjectContext`,
so the benchmark's counters see the mechanism. Its state dict has mmseg's keys: mmseg OCRNet
checkpoints load into it strictly, and its checkpoints into mmseg's head.
"""
from __future__ import annotations

from mmcv.cnn import build_activation_layer, build_norm_layer
from mmseg.models.decode_heads.ocr_head import OCRHead as MMSegOCRHead

from attnbench.attention.object_context import ObjectContext

from .registry import MODELS


@MODELS.register_module()
class OCRHead(MMSegOCRHead):
    """mmseg's ``OCRHead`` (same arguments, 3x3 bottleneck, classifier and losses) around an
    :class:`ObjectContext` under mmseg's name ``object_context_block``.

    ``scale`` is the factor on the region logits before their softmax over positions (mmseg also
    max-pools the query when ``scale > 1``, a path that fails there; see ``object_context.py``).
    ``norm_cfg`` must be a batch norm (``BN``, ``SyncBN``) or ``None``, ``conv_cfg`` ``None``: the
    units are plain 1x1 convs whose norm is named ``bn``, as mmcv names a batch norm.
    """

    def __init__(self, ocr_channels: int, scale: float = 1, **kwargs):
        super().__init__(ocr_channels, scale=scale, **kwargs)
        if self.conv_cfg is not None:
            raise ValueError(f"attnbench.OCRHead builds plain 1x1 convs: conv_cfg must be None, "
                             f"got {self.conv_cfg}")
        if self.norm_cfg is not None and build_norm_layer(self.norm_cfg, self.channels)[0] != "bn":
            raise ValueError(f"attnbench.OCRHead needs a batch norm (BN, SyncBN) or None as norm_cfg, "
                             f"got {self.norm_cfg}")
        del self.spatial_gather_module  # mmseg's Eq. 1; ObjectContext gathers the regions itself
        self.object_context_block = ObjectContext(
            self.channels, ocr_channels, scale=scale,
            norm_layer=None if self.norm_cfg is None else lambda c: build_norm_layer(self.norm_cfg, c)[1],
            act_layer=None if self.act_cfg is None else lambda: build_activation_layer(self.act_cfg))

    def forward(self, inputs, prev_output):
        """Class logits from the backbone features and the previous stage's region logits."""
        feats = self.bottleneck(self._transform_inputs(inputs))
        return self.cls_seg(self.object_context_block(feats, prev_output))
