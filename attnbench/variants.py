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
    lightweight           lightweight convolution (translation only)
    my_attention.MyAttention  a user's own module, by its import path (attnbench.user_modules)

A token may carry parameters, ``:name=value`` each (no quoting needed in bash or zsh):

    0100:range=7                      E2 with keys within 7 positions (pixels) of the query
    dynamic:kernel=7                  dynamic convolution with kernel size 7
    1111:heads=4:kv_stride=1:stages=3-5
    0010+deformable:groups=4
    1000:score=additive:hard=top1     E1 scored additively, hard attention to the best key (translation)

:data:`PARAMETERS` lists them; each mechanism takes the ones its ``params`` name, and
translation the ones of :data:`TRANSLATION_PARAMETERS`. A variant's name writes its parameters in
that table's order, so ``Variant.parse(v.name) == v``.

For vision backbones (mmdet / mmseg ResNets) a variant becomes the backbone overrides of the
study's setting: attention plugins after conv2 of every block in conv4 and conv5, deformable
conv2 in conv3 to conv5.
"""
from __future__ import annotations

import importlib
import keyword
import re
from dataclasses import dataclass, field, replace
from typing import Callable

from .attention.factors import ALL_FACTORS, SCORES, AttentionFactors
from .user_modules import USER_FAMILY, is_user_token, parse_value

GENERALIZED_ATTENTION_PAPER = ("Zhu, Cheng, Zhang, Dai, Lin, Wang: An Empirical Study of Spatial Attention "
                               "Mechanisms in Deep Networks, ICCV 2019")


def _integer(low: int, odd: bool = False) -> Callable[[str], int]:
    def parse(text: str) -> int:
        if not re.fullmatch(r"\d+", text) or int(text) < low or (odd and int(text) % 2 == 0):
            raise ValueError(f"expected {'an odd' if odd else 'an'} integer >= {low}")
        return int(text)
    return parse


def _choice(*choices: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in choices:
            raise ValueError(f"expected one of {list(choices)}")
        return text
    return parse


def _number(text: str) -> float:
    """``'1'``, ``'0.5'``, ``'-1e-3'`` -> a finite float."""
    if not re.fullmatch(r"-?(\d+\.?\d*|\.\d+)(e-?\d+)?", text):
        raise ValueError("expected a number, e.g. 1 or 0.1")
    return float(text)


def _write_number(value: float) -> str:
    """``value`` as text that reads back to it exactly and holds no ``+`` (the grammar's separator): ``1e06``."""
    text = format(value, "g")
    return (text if float(text) == value else repr(value)).replace("e+", "e")


def _top(text: str) -> int:
    """``'top2'`` -> 2 (hard attention to the 2 keys of highest logit)."""
    if not re.fullmatch(r"top[1-9]\d*", text):
        raise ValueError("expected topK with K >= 1, e.g. top1")
    return int(text[3:])


def _stages(text: str) -> tuple[int, int]:
    """``'3-5'`` (conv3 to conv5) or ``'4'`` -> (first, last) ResNet stage, conv2 to conv5."""
    match = re.fullmatch(r"([2-5])(?:-([2-5]))?", text)
    if not match or int(match[2] or match[1]) < int(match[1]):
        raise ValueError("expected stages 'A-B' or 'A' with 2 <= A <= B <= 5 (conv2 to conv5)")
    return int(match[1]), int(match[2] or match[1])


@dataclass(frozen=True)
class Parameter:
    """One ``:name=value`` of a token: what it means, how its value is read and written back."""

    meaning: str
    parse: Callable[[str], object]
    write: Callable[[object], str] = str


def _write_stages(stages: tuple[int, int]) -> str:
    return f"{stages[0]}-{stages[1]}" if stages[0] != stages[1] else str(stages[0])


PARAMETERS: dict[str, Parameter] = {
    "range": Parameter("keys within this many positions (pixels on each axis) of the query", _integer(0)),
    "kernel": Parameter("convolution kernel size", _integer(1, odd=True)),
    "heads": Parameter("attention heads (kernels of a dynamic convolution)", _integer(1)),
    "kv_stride": Parameter("stride of the keys and values (generalized attention)", _integer(1)),
    "groups": Parameter("deformable groups (offset fields)", _integer(1)),
    "stages": Parameter("ResNet stages that carry the module, e.g. 3-5 for conv3 to conv5", _stages, _write_stages),
    "score": Parameter("E1's score function", _choice(*SCORES)),
    "hard": Parameter("hard attention to the K keys of highest logit (topK)", _top, lambda k: f"top{k}"),
    "gate": Parameter("how open a branch that starts at zero starts: the residual gate gamma in y = x + gamma * "
                      "attention (0 in mmcv), or the gain of a zero-initialised last layer (docs/mechanisms.md)",
                      _number, _write_number),
    "lr": Parameter("learning-rate multiplier of the module's parameters (mmengine paramwise_cfg.custom_keys)",
                    _number, _write_number),
}
#: Parameters a translation slot takes: grammar name -> argument of the slot's mechanism builder.
TRANSLATION_PARAMETERS: dict[str, str] = {"range": "window", "kernel": "kernel_size", "score": "score", "hard": "hard"}


@dataclass(frozen=True)
class Slot:
    """An attention slot of the translation Transformer (attnbench.models.transformer_nmt)."""

    argument: str  # the TransformerNMT argument (and config key under ``model``) that configures it
    needs: str     # what it asks of a mechanism


#: Translation's attention slots, under the names the model, the sweep, the store and the reports use.
SLOTS: dict[str, Slot] = {
    "enc-self": Slot("encoder_self_attention", "bidirectional self-attention over the source"),
    "dec-self": Slot("decoder_self_attention", "causal self-attention over the target prefix"),
    "enc-dec": Slot("cross_attention", "attention from the target to the encoder output (a memory input)"),
}

#: The translation tasks: the synthetic mini corpus and Debian's English-German catalogues (real text).
TRANSLATION_TASKS: tuple[str, ...] = ("nmt", "nmt-l10n")


def _attention_class(name: str) -> type:
    """``attnbench.attention.<name>``, imported when first asked for."""
    return getattr(importlib.import_module("attnbench.attention"), name)


@dataclass(frozen=True)
class Mechanism:
    """One mechanism token: its module, how the vision benchmark places it in a ResNet, and the 1D
    module translation uses (``sequence_module``; None where translation has none).

    ``placement`` is ``'plugin'`` (a block after conv2, built by mmcv's ``build_plugin_layer``),
    ``'conv2'`` (a replacement of the 3x3 conv2, built by ``build_conv_layer``), ``'head'`` (a
    segmentation decode head, with a hand-written config per preset: see attnbench.config_files) or
    ``'sequence'`` (translation only); ``slots`` are the translation slots it fills (the model's builders,
    attnbench.models.transformer_nmt, read them here). ``params`` maps the :data:`PARAMETERS` a token takes to the
    module argument each sets (``stages`` sets where the module goes; every plugin also takes ``lr``, how
    fast its parameters learn: :meth:`Variant.optimizer_overrides`). Registration
    (attnbench.mm.plugins), listing (attnbench.sweep.catalog) and FLOPs counting
    (attnbench.flops) read the modules from this table.
    """

    class_name: str  # its nn.Module in attnbench.attention (an object context for a decode head)
    slug: str        # config file-name part
    family: str
    paper: str
    placement: str = "plugin"
    kwargs: dict = field(default_factory=dict)
    params: dict = field(default_factory=lambda: {"stages": None})
    name: str | None = None  # registered OpenMMLab name (scope attnbench), if not the module's class name
    sequence_class_name: str | None = None
    slots: frozenset = frozenset()  # the translation slots (:data:`SLOTS`) its sequence module fills

    def __post_init__(self):
        if self.placement == "plugin":  # every plugin is a named block of its own: its parameters can learn faster
            self.params.setdefault("lr", None)

    @property
    def module(self) -> type:
        """The nn.Module class, imported on first use (the table itself imports no torch)."""
        return _attention_class(self.class_name)

    @property
    def sequence_module(self) -> type | None:
        """Translation's 1D module, imported on first use; None where translation has none."""
        return _attention_class(self.sequence_class_name) if self.sequence_class_name else None

    @property
    def registered_name(self) -> str:
        """The name OpenMMLab registers the module under (scope attnbench), e.g. ``'DCN'``."""
        return self.name or self.class_name

    @property
    def type(self) -> str:
        """The registered OpenMMLab type, e.g. ``'attnbench.DCN'``."""
        return f"attnbench.{self.registered_name}"


#: The generalized attention, written as its factor string E1E2E3E4.
GENERALIZED_ATTENTION = Mechanism(
    "GeneralizedAttention", "attn", "generalized attention (study)", GENERALIZED_ATTENTION_PAPER,
    "plugin", dict(spatial_range=-1, num_heads=8, attention_type="1111", kv_stride=2),
    {"range": "spatial_range", "heads": "num_heads", "kv_stride": "kv_stride", "stages": None, "score": "score",
     "hard": "hard", "gate": "gamma_init"}, sequence_class_name="GeneralizedAttention1d", slots=frozenset(SLOTS))
#: Translation's self-attention slots: what a mechanism without a memory input (a convolution) fills.
SELF_ATTENTION_SLOTS = frozenset({"enc-self", "dec-self"})
_DEFORMABLE_PARAMS = {"groups": "deform_groups", "stages": None}


#: Every mechanism token but the generalized attention's factor strings.
MECHANISMS: dict[str, Mechanism] = {
    "deformable": Mechanism(
        "DeformConv2d", "dcn", "spatial attention (study)",
        "Dai et al.: Deformable Convolutional Networks, ICCV 2017", "conv2", dict(deform_groups=1),
        _DEFORMABLE_PARAMS, name="DCN", sequence_class_name="DeformConv1d", slots=SELF_ATTENTION_SLOTS),
    "deformable_v2": Mechanism(
        "ModulatedDeformConv2d", "dcnv2", "spatial attention (study)",
        "Zhu et al.: Deformable ConvNets v2, CVPR 2019", "conv2", dict(deform_groups=1), _DEFORMABLE_PARAMS,
        name="DCNv2"),
    "dynamic": Mechanism(
        "DynamicConv2d", "dynconv", "spatial attention (study)",
        "Wu et al.: Pay Less Attention with Lightweight and Dynamic Convolutions, ICLR 2019",
        kwargs=dict(kernel_size=3, num_heads=8),
        params={"kernel": "kernel_size", "heads": "num_heads", "stages": None, "gate": "gamma_init"},
        sequence_class_name="DynamicConv1d", slots=SELF_ATTENTION_SLOTS),
    "lightweight": Mechanism(
        "LightweightConv1d", "lightconv", "spatial attention (study)",
        "Wu et al.: Pay Less Attention with Lightweight and Dynamic Convolutions, ICLR 2019", "sequence",
        params={"kernel": "kernel_size"}, sequence_class_name="LightweightConv1d", slots=SELF_ATTENTION_SLOTS),
    "area": Mechanism(
        "AreaAttention2d", "area", "spatial attention (study)",
        "Li et al.: Area Attention, ICML 2019",
        kwargs=dict(num_heads=8, max_area_width=3, max_area_height=3, kv_stride=2),
        params={"heads": "num_heads", "stages": None, "gate": "gamma_init"}, sequence_class_name="AreaAttention1d",
        slots=frozenset(SLOTS)),
    "se": Mechanism(
        "SqueezeExcite", "se", "channel", "Hu et al.: Squeeze-and-Excitation Networks, CVPR 2018",
        kwargs=dict(reduction=16)),
    "cbam": Mechanism(
        "CBAM", "cbam", "mixed", "Woo et al.: CBAM: Convolutional Block Attention Module, ECCV 2018",
        kwargs=dict(reduction=16, spatial_kernel=7)),
    "gc": Mechanism(
        "GlobalContext", "gc", "self-attention",
        "Cao et al.: GCNet: Non-local Networks Meet Squeeze-Excitation Networks and Beyond, ICCVW 2019",
        kwargs=dict(ratio=1 / 4), params={"stages": None, "gate": "out_gain"}),
    "nonlocal": Mechanism(
        "NonLocal2d", "nonlocal", "self-attention", "Wang et al.: Non-local Neural Networks, CVPR 2018",
        kwargs=dict(reduction=2, mode="embedded_gaussian"), params={"stages": None, "gate": "out_gain"}),
    "ge": Mechanism(
        "GatherExcite", "ge", "channel",
        "Hu et al.: Gather-Excite: Exploiting Feature Context in Convolutional Neural Networks, NeurIPS 2018",
        kwargs=dict(extent=8, parametric=True)),
    "sk": Mechanism(
        "SelectiveKernelConv2d", "sk", "channel", "Li et al.: Selective Kernel Networks, CVPR 2019",
        "conv2", dict(num_paths=2, reduction=16, min_hidden=32)),
    "spa": Mechanism(
        "SpatialPyramidAttention", "spa", "channel",
        "Guo et al.: Spatial Pyramid Attention Network for Enhanced Image Recognition, ICME 2020",
        kwargs=dict(pool_sizes=(1, 2, 4), reduction=16)),
    "fca": Mechanism(
        "FrequencyChannelAttention", "fca", "channel",
        "Qin et al.: FcaNet: Frequency Channel Attention Networks, ICCV 2021",
        kwargs=dict(reduction=16, frequency_selection="top16", dct_size=7)),
    "bam": Mechanism(
        "BAM", "bam", "mixed", "Park et al.: BAM: Bottleneck Attention Module, BMVC 2018",
        kwargs=dict(reduction=16, dilation=4)),
    "scse": Mechanism(
        "SpatialChannelSqueezeExcite", "scse", "mixed",
        "Roy et al.: Concurrent Spatial and Channel Squeeze & Excitation in Fully Convolutional Networks, "
        "MICCAI 2018", kwargs=dict(reduction=2, aggregation="max")),
    "a2": Mechanism(
        "DoubleAttention", "a2", "mixed", "Chen et al.: A2-Nets: Double Attention Networks, NeurIPS 2018",
        kwargs=dict(reduction=4), params={"stages": None, "gate": "out_gain"}),
    "ran": Mechanism(
        "ResidualAttention", "ran", "mixed",
        "Wang et al.: Residual Attention Network for Image Classification, CVPR 2017",
        kwargs=dict(reduction=4, depth=2)),
    "da": Mechanism(
        "DualAttention", "da", "self-attention",
        "Fu et al.: Dual Attention Network for Scene Segmentation, CVPR 2019", kwargs=dict(reduction=8),
        params={"stages": None, "gate": "gamma_init"}),
    "ann": Mechanism(
        "AsymmetricNonLocal2d", "ann", "self-attention",
        "Zhu et al.: Asymmetric Non-local Neural Networks for Semantic Segmentation, ICCV 2019",
        kwargs=dict(reduction=2, pool_sizes=(1, 3, 6, 8)), params={"stages": None, "gate": "out_gain"}),
    "iau": Mechanism(
        "InteractionAggregation2d", "iau", "self-attention",
        "Hou et al.: IAUnet: Global Context-Aware Feature Learning for Person Reidentification, TNNLS 2021",
        kwargs=dict(mode="both", reduction=2, num_parts=4), params={"stages": None, "gate": "out_gain"}),
    "cc": Mechanism(
        "CrissCrossAttention", "cc", "self-attention",
        "Huang et al.: CCNet: Criss-Cross Attention for Semantic Segmentation, ICCV 2019",
        kwargs=dict(reduction=8, recurrence=2), params={"stages": None, "gate": "gamma_init"}),
    "ocr": Mechanism(
        "ObjectContext", "ocr", "category",
        "Yuan et al.: Object-Contextual Representations for Semantic Segmentation, ECCV 2020", "head", params={},
        name="OCRHead"),
}
#: Tokens of translation's slots (``attnbench.models.transformer_nmt.MECHANISMS`` names them alike).
TRANSLATION_MECHANISMS: tuple[str, ...] = tuple(t for t, m in MECHANISMS.items() if m.slots)
#: The tokens of images (all but translation's own).
VISION_TOKENS: tuple[str, ...] = tuple(t for t, m in MECHANISMS.items() if m.placement != "sequence")
#: Every mechanism of the benchmark, the generalized attention first.
ALL_MECHANISMS: tuple[Mechanism, ...] = (GENERALIZED_ATTENTION, *MECHANISMS.values())

#: The vision rows of the study: baseline, the 15 factor sets, the other mechanisms, combinations.
VISION_VARIANTS: tuple[str, ...] = (
    "baseline", *ALL_FACTORS, "deformable", "dynamic", "area", "0010+deformable", "1111+deformable")
#: Survey rows: the survey's attention modules, in the same blocks as the generalized
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


def user_mechanism(import_path: str) -> Mechanism:
    """The entry of a user's module (attnbench.user_modules): a plugin after conv2, built by the registered
    adapter ``UserModule`` (attnbench.mm.user_module) from its import path; it takes ``stages`` and ``lr`` as every
    plugin does, and any other ``name=value`` as a keyword argument of its class."""
    return Mechanism("UserModule", "user-" + import_path.replace(".", "-"), USER_FAMILY, import_path,
                     kwargs=dict(import_path=import_path))


def mechanism_of(token: str) -> Mechanism:
    """The table entry of a token without parameters: a factor string, a :data:`MECHANISMS` key or a user's
    module by its import path."""
    if token in MECHANISMS:
        return MECHANISMS[token]
    if is_user_token(token):
        return user_mechanism(token)
    if len(token) == 4 and token.isdigit():
        AttentionFactors.parse(token)  # raises for '0120' and for '0000' (the baseline, not a factor set)
        return GENERALIZED_ATTENTION
    raise ValueError(f"unknown token {token!r}; expected 'baseline', a factor string E1E2E3E4 such as '0110', "
                     f"one of {sorted(MECHANISMS)}, or your module's import path MODULE.CLASS")


def _parse_token(text: str, spec: str) -> tuple[str, tuple]:
    """``'0100:range=7'`` -> ``('0100', (('range', 7),))``, parameters in :data:`PARAMETERS` order (a user's
    module: any keyword argument of its class after them, in the order given, its value an int, float or text)."""
    token, *assignments = text.strip().split(":")
    mechanism = mechanism_of(token)
    params = {}
    for assignment in assignments:
        name, _, value = assignment.partition("=")
        if mechanism.family == USER_FAMILY and name not in mechanism.params:
            if not name.isidentifier() or name in params or not value:
                raise ValueError(f"variant {spec!r}: {assignment!r} is not NAME=VALUE once per name")
            params[name] = parse_value(value)
            continue
        if name not in PARAMETERS:
            raise ValueError(f"variant {spec!r}: unknown parameter {name!r}; known: {list(PARAMETERS)}")
        if name not in mechanism.params:
            raise ValueError(f"variant {spec!r}: {token} takes {list(mechanism.params) or 'no parameters'}, "
                             f"not {name!r}")
        if name in params:
            raise ValueError(f"variant {spec!r}: {token} sets {name!r} twice")
        try:
            params[name] = PARAMETERS[name].parse(value)
        except ValueError as error:
            raise ValueError(f"variant {spec!r}: {name}={value!r}: {error}") from None
    order = dict.fromkeys([*(name for name in PARAMETERS if name in params), *params])
    return token, tuple((name, params[name]) for name in order)


@dataclass(frozen=True)
class Variant:
    """One benchmark row: optional generalized-attention factors, plugins, a conv2 replacement, or a
    decode head (alone); ``params`` holds the parameters of the tokens that carry any,
    ``((token, ((name, value), ...)), ...)``."""

    factors: str | None = None
    plugins: tuple[str, ...] = ()
    conv: str | None = None
    head: str | None = None
    params: tuple = ()

    @classmethod
    def parse(cls, spec: "str | Variant") -> "Variant":
        if isinstance(spec, Variant):
            return spec
        if not isinstance(spec, str) or not spec.strip():
            raise ValueError(f"variant must be a non-empty string, got {spec!r}")
        if spec.strip() == "baseline":
            return cls()
        if "baseline" in (t.strip().split(":")[0] for t in spec.split("+")):
            raise ValueError(f"variant {spec!r}: 'baseline' (no mechanism) is a row alone, not a token to join")
        factors, plugins, conv, head, params = None, [], None, None, []
        for token, token_params in (_parse_token(t, spec) for t in spec.split("+")):
            placement = mechanism_of(token).placement
            if token in ALL_FACTORS:
                if factors is not None:
                    raise ValueError(f"variant {spec!r} names two factor strings ({factors}, {token})")
                factors = token
            elif token in plugins or token in (conv, head):
                raise ValueError(f"variant {spec!r} names {token!r} twice")
            elif placement in ("plugin", "sequence"):
                plugins.append(token)
            elif placement == "conv2":
                if conv is not None:
                    raise ValueError(f"variant {spec!r} names two conv2 replacements ({conv}, {token})")
                conv = token
            else:
                head = token
            if token_params:
                params.append((token, token_params))
        if head and (factors or plugins or conv):
            raise ValueError(f"variant {spec!r}: {head!r} replaces the decode head and is run alone")
        tokens, params = (factors, *plugins, conv, head), dict(params)
        return cls(factors, tuple(plugins), conv, head, tuple((t, params[t]) for t in tokens if t in params))

    @property
    def tokens(self) -> tuple[str, ...]:
        """The mechanism tokens, without parameters, in canonical order."""
        return tuple(t for t in (self.factors, *self.plugins, self.conv, self.head) if t)

    @property
    def user_tokens(self) -> tuple[str, ...]:
        """The tokens that name a user's module by its import path."""
        return tuple(t for t in self.tokens if mechanism_of(t).family == USER_FAMILY)

    def token_spec(self, token: str) -> str:
        """One token with its parameters, e.g. ``'0100:range=7'``."""
        return self._written(token, token, ":", "=")

    def params_of(self, token: str) -> dict:
        """The parameters ``token`` carries in this variant, ``{name: value}``."""
        return dict(dict(self.params).get(token, ()))

    def _written(self, token: str, prefix: str, separator: str, assign: str) -> str:
        """``prefix`` then ``token``'s parameters, each ``separator name assign value``."""
        return prefix + "".join(f"{separator}{name}{assign}{_write(name, value)}"
                              for name, value in self.params_of(token).items())

    @property
    def name(self) -> str:
        """Canonical spec string, e.g. ``'0010+deformable'``, ``'0100:range=7'``."""
        return "+".join(map(self.token_spec, self.tokens)) or "baseline"

    @property
    def slug(self) -> str:
        """File-name part, e.g. ``'attn0010-dcn'``, ``'attn0100-range7'``; empty for the baseline."""
        return "-".join(self._written(t, f"attn{t}" if t == self.factors else mechanism_of(t).slug, "-", "")
                        for t in self.tokens)

    @property
    def parameter_text(self) -> str:
        """The parameters alone, e.g. ``'0100:range=7'`` -> ``'range=7'``; empty without any."""
        return " ".join(f"{name}={_write(name, value)}" for _, token_params in self.params for name, value in token_params)
    #: The backbone keys a variant sets (:meth:`backbone_overrides`); without them a backbone is the baseline's.
    BACKBONE_KEYS = ("plugins", "dcn", "stage_with_dcn")

    #: The ResNet stages (conv2 to conv5) a token without ``stages=`` goes in: the study's setting.
    DEFAULT_STAGES = {"plugin": (False, False, True, True), "conv2": (False, True, True, True)}

    def backbone_overrides(self) -> dict:
        """``model.backbone`` keys for an mmdet/mmseg ResNet with Bottleneck blocks: each token's module with
        its table ``kwargs`` (:data:`MECHANISMS`), its parameters over them, in :attr:`DEFAULT_STAGES`
        unless ``stages=`` says otherwise."""
        overrides: dict = {}
        for token in self.tokens:
            mechanism, params = mechanism_of(token), self.params_of(token)
            if mechanism.placement not in ("plugin", "conv2"):
                if mechanism.placement == "sequence":
                    raise ValueError(f"{token!r} is a translation mechanism; it has no place in a ResNet")
                continue  # a decode head: its own config file
            kwargs = dict(mechanism.kwargs)
            if token == self.factors:
                kwargs["attention_type"] = token
            kwargs.update({mechanism.params.get(n, n): value for n, value in params.items() if mechanism.params.get(n, n)})
            stages = _stage_mask(*params["stages"]) if "stages" in params else self.DEFAULT_STAGES[mechanism.placement]
            if mechanism.placement == "plugin":
                overrides.setdefault("plugins", []).append(
                    dict(cfg=dict(type=mechanism.type, **kwargs), stages=stages, position="after_conv2"))
            else:
                overrides["dcn"] = dict(type=mechanism.type, **kwargs, fallback_on_stride=False)
                overrides["stage_with_dcn"] = stages
        return overrides

    def with_defaults(self, defaults: dict) -> "Variant":
        """This variant with every parameter of ``defaults`` (``{'gate': 1.0}``) given to each of its
        tokens that takes it and sets none of its own: a preset's protocol (attnbench.config_files)."""
        params = []
        for token in self.tokens:
            taken = self.params_of(token) | {name: value for name, value in defaults.items()
                                             if name in mechanism_of(token).params and name not in self.params_of(token)}
            if taken:
                params.append((token, tuple((name, taken[name]) for name in PARAMETERS if name in taken)))
        return replace(self, params=tuple(params))

    @property
    def gate_start(self) -> float | None:
        """Where the most closed of its gated tokens' gates starts: the smallest ``gate`` among the tokens that
        take one (0, the zero start, where such a token sets none), None where no token takes it (docs/mechanisms.md:
        blocks that start at zero)."""
        gates = [self.params_of(token).get("gate", 0.0) for token in self.tokens
                 if "gate" in mechanism_of(token).params]
        return min(gates) if gates else None

    @property
    def fields(self) -> dict:
        """The row as flat fields a run table can filter, group and colour by (W&B's config): ``E1`` ..
        ``E4`` (booleans, all False without a factor string), each token present as ``True`` under its
        name (``deformable``, ``dynamic``, ...; a user's module's import path under ``user_module``), each
        parameter under its name (``gate``, ``range``, ...), or ``name_token`` where two tokens set the same one. A name that is a Python keyword ends in
        ``_`` (``nonlocal_``): mmengine writes a config's dicts as ``dict(name=value)``."""
        terms = self.factors or "0000"
        fields = {f"E{i + 1}": on == "1" for i, on in enumerate(terms)}
        fields |= {token: True for token in self.tokens if token != self.factors and token not in self.user_tokens}
        if self.user_tokens:  # an import path is no field name: W&B filters on ``user_module`` instead
            fields["user_module"] = "+".join(self.user_tokens)
        names = [name for _, token_params in self.params for name, _ in token_params]
        for token, token_params in self.params:
            fields |= {name if names.count(name) == 1 else f"{name}_{token}": value for name, value in token_params}
        return {f"{name}_" if keyword.iskeyword(name) else name: value for name, value in fields.items()}

    def optimizer_overrides(self) -> dict:
        """``optim_wrapper`` keys (``paramwise_cfg.custom_keys``) of the tokens that set ``lr``: each plugin's
        parameters, named after mmcv's plugin name (its ``_abbr_``), learn at ``lr`` times the rate."""
        from mmcv.cnn.bricks.plugin import infer_abbr

        keys = {infer_abbr(mechanism_of(t).module): dict(lr_mult=self.params_of(t)["lr"])
                for t in self.tokens if "lr" in self.params_of(t)}
        return dict(paramwise_cfg=dict(custom_keys=keys)) if keys else {}

    @property
    def translation_slots(self) -> frozenset:
        """The translation slots this row can fill (every one for the baseline); ValueError as
        :meth:`translation_config` for what translation cannot run."""
        self.translation_config()
        return mechanism_of(self.tokens[0]).slots if self.tokens else frozenset(SLOTS)

    def translation_config(self) -> dict | None:
        """The slot config of ``attnbench.models.transformer_nmt`` (``dict(type=..., **options)``),
        None for the baseline; raises ``ValueError`` for what translation cannot run."""
        if not self.tokens:
            return None
        if self.user_tokens and len(self.tokens) == 1:  # a user's class: every parameter is its own
            (token,) = self.tokens
            return dict(type="user", import_path=token, **{name: value for name, value in self.params_of(token).items()
                                                          if name not in mechanism_of(token).params})
        if len(self.tokens) > 1 or (self.factors is None and self.tokens[0] not in TRANSLATION_MECHANISMS):
            raise ValueError(f"unknown nmt variant {self.name!r}; expected 'baseline', a factor string such as "
                             f"'0110', or one of {list(TRANSLATION_MECHANISMS)} (no combinations)")
        (token,) = self.tokens
        options = {}
        for name, value in self.params_of(token).items():
            if name not in TRANSLATION_PARAMETERS:
                raise ValueError(f"nmt variant {self.name!r}: {name!r} applies to vision tasks only; "
                                 f"translation takes {list(TRANSLATION_PARAMETERS)}")
            options[TRANSLATION_PARAMETERS[name]] = value
        if token == self.factors:
            return dict(type="generalized", attention_type=token, **options)
        return dict(type=token, **options)


def _write(name: str, value) -> str:
    """A parameter's value as the grammar writes it (a user's module's own: as given)."""
    return PARAMETERS[name].write(value) if name in PARAMETERS else str(value).lower() if isinstance(value, bool) \
        else str(value)


def _stage_mask(first: int, last: int) -> tuple[bool, ...]:
    """ResNet stages conv2..conv5 that carry a module, from the first to the last."""
    return tuple(first <= stage <= last for stage in range(2, 6))
