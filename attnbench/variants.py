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

from dataclasses import dataclass

from .attention.factors import ALL_FACTORS, AttentionFactors

#: Plugin tokens -> (config type, keyword arguments) of the module placed after conv2.
PLUGIN_MODULES: dict[str, tuple[str, dict]] = {
    "dynamic": ("attnbench.DynamicConv2d", dict(kernel_size=3, num_heads=8)),
    "area": ("attnbench.AreaAttention2d", dict(num_heads=8, max_area_width=3, max_area_height=3, kv_stride=2)),
    "se": ("attnbench.SqueezeExcite", dict(reduction=16)),
    "cbam": ("attnbench.CBAM", dict(reduction=16, spatial_kernel=7)),
    "gc": ("attnbench.GlobalContext", dict(ratio=1 / 4)),
    "nonlocal": ("attnbench.NonLocal2d", dict(reduction=2, mode="embedded_gaussian")),
}
#: Conv tokens -> config type of the conv2 replacement.
CONV_MODULES: dict[str, str] = {"deformable": "attnbench.DCN", "deformable_v2": "attnbench.DCNv2"}
#: Short names used in config file names (mmdet's ``-attn0010-dcn`` convention).
_SLUGS = {"deformable": "dcn", "deformable_v2": "dcnv2", "dynamic": "dynconv", "area": "area",
          "se": "se", "cbam": "cbam", "gc": "gc", "nonlocal": "nonlocal"}

#: The vision rows of the study: baseline, the 15 factor sets, the other mechanisms, combinations.
VISION_VARIANTS: tuple[str, ...] = (
    "baseline", *ALL_FACTORS, "deformable", "dynamic", "area", "0010+deformable", "1111+deformable")
#: Survey rows (issue #7): other attention add-ons in the same blocks as the generalized attention.
SURVEY_VARIANTS: tuple[str, ...] = ("se", "cbam", "gc", "nonlocal")


@dataclass(frozen=True)
class Variant:
    """One benchmark row: optional generalized-attention factors, plugins and a conv2 replacement."""

    factors: str | None = None
    plugins: tuple[str, ...] = ()
    conv: str | None = None

    @classmethod
    def parse(cls, spec: str) -> "Variant":
        if not isinstance(spec, str) or not spec.strip():
            raise ValueError(f"variant must be a non-empty string, got {spec!r}")
        if spec.strip() == "baseline":
            return cls()
        factors, plugins, conv = None, [], None
        for token in (t.strip() for t in spec.split("+")):
            if token in PLUGIN_MODULES:
                if token in plugins:
                    raise ValueError(f"variant {spec!r} names {token!r} twice")
                plugins.append(token)
            elif token in CONV_MODULES:
                if conv is not None:
                    raise ValueError(f"variant {spec!r} names two conv2 replacements ({conv}, {token})")
                conv = token
            elif len(token) == 4 and set(token) <= {"0", "1"}:
                if factors is not None:
                    raise ValueError(f"variant {spec!r} names two factor strings ({factors}, {token})")
                factors = str(AttentionFactors.parse(token))
            else:
                raise ValueError(
                    f"unknown token {token!r} in variant {spec!r}; expected 'baseline', a factor string "
                    f"E1E2E3E4 such as '0110', or one of {sorted({**PLUGIN_MODULES, **CONV_MODULES})}")
        return cls(factors, tuple(plugins), conv)

    @property
    def name(self) -> str:
        """Canonical spec string, e.g. ``'0010+deformable'``."""
        tokens = ([self.factors] if self.factors else []) + list(self.plugins) + ([self.conv] if self.conv else [])
        return "+".join(tokens) or "baseline"

    @property
    def slug(self) -> str:
        """File-name part, e.g. ``'attn0010-dcn'``; empty for the baseline."""
        tokens = ([f"attn{self.factors}"] if self.factors else []) + [_SLUGS[p] for p in self.plugins]
        return "-".join(tokens + ([_SLUGS[self.conv]] if self.conv else []))

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
            type_, kwargs = PLUGIN_MODULES[token]
            # ``num_heads`` overrides only the modules that have heads (their defaults name it).
            heads = {"num_heads": num_heads} if "num_heads" in kwargs else {}
            plugin_cfgs.append(dict(type=type_, **(kwargs | heads)))
        overrides: dict = {}
        if plugin_cfgs:
            overrides["plugins"] = [dict(cfg=cfg, stages=attention_stages, position="after_conv2")
                                    for cfg in plugin_cfgs]
        if self.conv:
            overrides["dcn"] = dict(type=CONV_MODULES[self.conv], deform_groups=1, fallback_on_stride=False)
            overrides["stage_with_dcn"] = conv_stages
        return overrides
