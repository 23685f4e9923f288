"""Benchmark variants: which mechanisms one row of the benchmark puts into a model.

A variant is written as ``+``-joined tokens, parsed here and nowhere else:

    baseline              no attention module
    0110                  generalized attention with factors E2+E3 (any of the 15 strings)
    deformable            deformable convolution v1 replacing the 3x3 conv2 (``dcn``)
    deformable_v2         modulated deformable convolution (v2)
    dynamic               dynamic convolution block (plugin)
    area                  area attention block (plugin)
    se, cbam, gc, nonlocal  squeeze-excite, CBAM, global context, non-local blocks (plugins)
    0010+deformable       several mechanisms stacked in the same blocks

For vision backbones (mmdet / mmseg ResNets) a variant becomes the backbone overrides of the
study's setting: attention plugins after conv2 of every block in conv4 and conv5, deformable
conv2 in conv3 to conv5.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .attention.factors import ALL_FACTORS, AttentionFactors

GENERALIZED_ATTENTION_PAPER = ("Zhu, Cheng, Zhang, Dai, Lin, Wang: An Empirical Study of Spatial Attention "
                               "Mechanisms in Deep Networks, ICCV 2019")


@dataclass(frozen=True)
class Mechanism:
    """How the vision benchmark places one mechanism token in a ResNet.

    ``placement`` is ``'plugin'`` (a block after conv2, built by mmcv's ``build_plugin_layer``),
    ``'conv2'`` (a replacement of the 3x3 conv2, built by ``build_conv_layer``) or ``'head'`` (a
    segmentation decode head, with a hand-written config per preset: see attnbench.config_files).
    """

    type: str        # registered OpenMMLab type, scope attnbench
    slug: str        # config file-name part
    family: str
    paper: str
    placement: str = "plugin"
    kwargs: dict = field(default_factory=dict)


#: Every mechanism token but the generalized attention's factor strings.
MECHANISMS: dict[str, Mechanism] = {
    "deformable": Mechanism(
        "attnbench.DCN", "dcn", "spatial attention (study)",
        "Dai et al.: Deformable Convolutional Networks, ICCV 2017", "conv2", dict(deform_groups=1)),
    "deformable_v2": Mechanism(
        "attnbench.DCNv2", "dcnv2", "spatial attention (study)",
        "Zhu et al.: Deformable ConvNets v2, CVPR 2019", "conv2", dict(deform_groups=1)),
    "dynamic": Mechanism(
        "attnbench.DynamicConv2d", "dynconv", "spatial attention (study)",
        "Wu et al.: Pay Less Attention with Lightweight and Dynamic Convolutions, ICLR 2019",
        kwargs=dict(kernel_size=3, num_heads=8)),
    "area": Mechanism(
        "attnbench.AreaAttention2d", "area", "spatial attention (study)",
        "Li et al.: Area Attention, ICML 2019",
        kwargs=dict(num_heads=8, max_area_width=3, max_area_height=3, kv_stride=2)),
    "se": Mechanism(
        "attnbench.SqueezeExcite", "se", "channel", "Hu et al.: Squeeze-and-Excitation Networks, CVPR 2018",
        kwargs=dict(reduction=16)),
    "cbam": Mechanism(
        "attnbench.CBAM", "cbam", "mixed", "Woo et al.: CBAM: Convolutional Block Attention Module, ECCV 2018",
        kwargs=dict(reduction=16, spatial_kernel=7)),
    "gc": Mechanism(
        "attnbench.GlobalContext", "gc", "self-attention",
        "Cao et al.: GCNet: Non-local Networks Meet Squeeze-Excitation Networks and Beyond, ICCVW 2019",
        kwargs=dict(ratio=1 / 4)),
    "nonlocal": Mechanism(
        "attnbench.NonLocal2d", "nonlocal", "self-attention", "Wang et al.: Non-local Neural Networks, CVPR 2018",
        kwargs=dict(reduction=2, mode="embedded_gaussian")),
    "ge": Mechanism(
        "attnbench.GatherExcite", "ge", "channel",
        "Hu et al.: Gather-Excite: Exploiting Feature Context in Convolutional Neural Networks, NeurIPS 2018",
        kwargs=dict(extent=8, parametric=True)),
    "sk": Mechanism(
        "attnbench.SelectiveKernelConv2d", "sk", "channel", "Li et al.: Selective Kernel Networks, CVPR 2019",
        "conv2", dict(num_paths=2, reduction=16, min_hidden=32)),
    "spa": Mechanism(
        "attnbench.SpatialPyramidAttention", "spa", "channel",
        "Guo et al.: Spatial Pyramid Attention Network for Enhanced Image Recognition, ICME 2020",
        kwargs=dict(pool_sizes=(1, 2, 4), reduction=16)),
    "fca": Mechanism(
        "attnbench.FrequencyChannelAttention", "fca", "channel",
        "Qin et al.: FcaNet: Frequency Channel Attention Networks, ICCV 2021",
        kwargs=dict(reduction=16, frequency_selection="top16", dct_size=7)),
    "bam": Mechanism(
        "attnbench.BAM", "bam", "mixed", "Park et al.: BAM: Bottleneck Attention Module, BMVC 2018",
        kwargs=dict(reduction=16, dilation=4)),
    "scse": Mechanism(
        "attnbench.SpatialChannelSqueezeExcite", "scse", "mixed",
        "Roy et al.: Concurrent Spatial and Channel Squeeze & Excitation in Fully Convolutional Networks, "
        "MICCAI 2018", kwargs=dict(reduction=2, aggregation="max")),
    "a2": Mechanism(
        "attnbench.DoubleAttention", "a2", "mixed", "Chen et al.: A2-Nets: Double Attention Networks, NeurIPS 2018",
        kwargs=dict(reduction=4)),
    "ran": Mechanism(
        "attnbench.ResidualAttention", "ran", "mixed",
        "Wang et al.: Residual Attention Network for Image Classification, CVPR 2017",
        kwargs=dict(reduction=4, depth=2)),
    "da": Mechanism(
        "attnbench.DualAttention", "da", "self-attention",
        "Fu et al.: Dual Attention Network for Scene Segmentation, CVPR 2019", kwargs=dict(reduction=8)),
    "ann": Mechanism(
        "attnbench.AsymmetricNonLocal2d", "ann", "self-attention",
        "Zhu et al.: Asymmetric Non-local Neural Networks for Semantic Segmentation, ICCV 2019",
        kwargs=dict(reduction=2, pool_sizes=(1, 3, 6, 8))),
    "iau": Mechanism(
        "attnbench.InteractionAggregation2d", "iau", "self-attention",
        "Hou et al.: IAUnet: Global Context-Aware Feature Learning for Person Reidentification, TNNLS 2021",
        kwargs=dict(mode="both", reduction=2, num_parts=4)),
    "ocr": Mechanism(
        "attnbench.OCRHead", "ocr", "category",
        "Yuan et al.: Object-Contextual Representations for Semantic Segmentation, ECCV 2020", "head"),
}

#: The vision rows of the study: baseline, the 15 factor sets, the other mechanisms, combinations.
VISION_VARIANTS: tuple[str, ...] = (
    "baseline", *ALL_FACTORS, "deformable", "dynamic", "area", "0010+deformable", "1111+deformable")
#: Survey rows (issue #7): the survey's attention modules, in the same blocks as the generalized
#: attention (plugins), as conv2 (sk) or as the decode head (ocr, segmentation only).
SURVEY_VARIANTS: tuple[str, ...] = tuple(
    token for token, m in MECHANISMS.items() if m.family in ("channel", "mixed", "self-attention", "category"))


def vision_rows(task: str) -> tuple[str, ...]:
    """Every row of a vision task (``'det'`` or ``'seg'``): the study's, then the survey's; decode
    heads replace a segmentation head, so they are rows of ``'seg'`` only."""
    if task not in ("det", "seg"):
        raise ValueError(f"vision task must be 'det' or 'seg', got {task!r}")
    return tuple(v for v in (*VISION_VARIANTS, *SURVEY_VARIANTS)
                 if task == "seg" or v not in MECHANISMS or MECHANISMS[v].placement != "head")


@dataclass(frozen=True)
class Variant:
    """One benchmark row: optional generalized-attention factors, plugins, a conv2 replacement, or a
    decode head (alone)."""

    factors: str | None = None
    plugins: tuple[str, ...] = ()
    conv: str | None = None
    head: str | None = None

    @classmethod
    def parse(cls, spec: str) -> "Variant":
        if not isinstance(spec, str) or not spec.strip():
            raise ValueError(f"variant must be a non-empty string, got {spec!r}")
        if spec.strip() == "baseline":
            return cls()
        factors, plugins, conv = None, [], None
        for token in (t.strip() for t in spec.split("+")):
            mechanism = MECHANISMS.get(token)
            if mechanism is not None and mechanism.placement == "plugin":
                if token in plugins:
                    raise ValueError(f"variant {spec!r} names {token!r} twice")
                plugins.append(token)
            elif mechanism is not None and mechanism.placement == "conv2":
                if conv is not None:
                    raise ValueError(f"variant {spec!r} names two conv2 replacements ({conv}, {token})")
                conv = token
            elif mechanism is not None and mechanism.placement == "head":
                if spec.strip() != token:
                    raise ValueError(f"variant {spec!r}: {token!r} replaces the decode head and is run alone")
                return cls(head=token)
            elif len(token) == 4 and set(token) <= {"0", "1"}:
                if factors is not None:
                    raise ValueError(f"variant {spec!r} names two factor strings ({factors}, {token})")
                factors = str(AttentionFactors.parse(token))
            else:
                raise ValueError(
                    f"unknown token {token!r} in variant {spec!r}; expected 'baseline', a factor string "
                    f"E1E2E3E4 such as '0110', or one of {sorted(MECHANISMS)}")
        return cls(factors, tuple(plugins), conv)

    @property
    def name(self) -> str:
        """Canonical spec string, e.g. ``'0010+deformable'``."""
        tokens = ([self.factors] if self.factors else []) + list(self.plugins) + ([self.conv] if self.conv else [])
        return "+".join(tokens) or self.head or "baseline"

    @property
    def slug(self) -> str:
        """File-name part, e.g. ``'attn0010-dcn'``; empty for the baseline."""
        tokens = ([f"attn{self.factors}"] if self.factors else []) + [MECHANISMS[p].slug for p in self.plugins]
        tokens += [MECHANISMS[t].slug for t in (self.conv, self.head) if t]
        return "-".join(tokens)

    #: The backbone keys a variant sets (:meth:`backbone_overrides`); without them a backbone is the baseline's.
    BACKBONE_KEYS = ("plugins", "dcn", "stage_with_dcn")

    def backbone_overrides(
        self,
        attention_stages: tuple[bool, ...] = (False, False, True, True),
        conv_stages: tuple[bool, ...] = (False, True, True, True),
        num_heads: int = 8,
        kv_stride: int = 2,
    ) -> dict:
        """``model.backbone`` keys for an mmdet/mmseg ResNet with Bottleneck blocks."""
        plugin_cfgs = []
        if self.factors:
            plugin_cfgs.append(dict(type="attnbench.GeneralizedAttention", spatial_range=-1, num_heads=num_heads,
                                    attention_type=self.factors, kv_stride=kv_stride))
        for token in self.plugins:
            mechanism = MECHANISMS[token]
            # ``num_heads`` overrides only the modules that have heads (their defaults name it).
            heads = {"num_heads": num_heads} if "num_heads" in mechanism.kwargs else {}
            plugin_cfgs.append(dict(type=mechanism.type, **(mechanism.kwargs | heads)))
        overrides: dict = {}
        if plugin_cfgs:
            overrides["plugins"] = [dict(cfg=cfg, stages=attention_stages, position="after_conv2")
                                    for cfg in plugin_cfgs]
        if self.conv:
            overrides["dcn"] = dict(type=MECHANISMS[self.conv].type, **MECHANISMS[self.conv].kwargs,
                                    fallback_on_stride=False)
            overrides["stage_with_dcn"] = conv_stages
        return overrides
