"""The benchmark's tasks: where their configs are, what they measure, how their FLOPs are counted."""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from attnbench.config_files import DIAGNOSTIC_CONFIGS, diagnostic_config_path, preset_variant, vision_config_path
from attnbench.data.mini_shapes import DEFAULT_RULE, RULES
from attnbench.user_modules import USER_FAMILY, locate, make_importable
from attnbench.variants import SLOTS, Variant, mechanism_of

if TYPE_CHECKING:
    import torch

#: ``mini``: the CPU-sized configs; ``full``: the paper-scale ones; ``small``: real-language translation
#: (``nmt-l10n``) with a model that translates, 20 minutes a run on one CPU thread; ``smoke``: the mini configs
#: trained for a few iterations and evaluated on a few samples, to check a sweep end to end in a
#: minute (its rows are labelled ``smoke`` and say nothing); ``long``: the mini vision configs
#: trained four times longer (24 epochs of detection, 3,200 iterations of segmentation, the
#: schedules stretched alike). Each task's ``preset_options`` hold the overrides of the last two.
PRESETS = ("mini", "small", "full", "smoke", "long")


def config_preset(preset: str) -> str:
    """The preset whose config files a preset uses (``smoke`` and ``long`` train the mini configs)."""
    return "mini" if preset in ("smoke", "long") else preset


def preset_overrides(task, preset: str) -> dict:
    """The ``--cfg-options`` a preset adds to its config files (none for ``mini`` and ``full``); ValueError
    naming the task's presets for one it does not run."""
    if preset not in task.presets:
        raise ValueError(f"task {task.name} has no {preset} preset; its presets: {', '.join(task.presets)}")
    return dict(task.preset_options.get(preset, {}))


@dataclass(frozen=True)
class VisionTask:
    """Detection (mmdet) or segmentation (mmseg) with the mechanisms in the backbone.

    A task with a ``rule`` trains on that diagnostic rule of mini shapes (mini, smoke and long presets):
    its ``family``'s base config (``diagnostic_config_path``) with the variant's backbone keys as overrides.
    """

    name: str
    kind: str            # 'det' or 'seg'
    metric: str          # key of Runner.test()'s result
    metric_label: str
    input_sizes: dict = field(default_factory=dict)  # preset -> (H, W)
    class_agnostic_metric: str | None = None  # key of the class-agnostic AP (detection), recorded beside it
    context_metric: str | None = None  # key of the context accuracy (diagnostic tasks), recorded beside it
    chrf_metric: str | None = None  # translation's; none here
    heldout: tuple = ()  # translation's presets tested on a held-out split; none here
    preset_options: dict = field(default_factory=dict)  # preset -> its --cfg-options (smoke, long)
    rule: str | None = None
    family: str | None = None  # diagnostic family (attnbench.config_files.DIAGNOSTIC_CONFIGS)
    user_config: str | None = None  # a user's own mmdet/mmseg config (:func:`user_task`): every preset trains it

    @property
    def presets(self) -> tuple[str, ...]:
        """The presets it runs: ``mini`` (a user config's own schedule), ``full`` (not a diagnostic rule's:
        mini shapes only) and those of ``preset_options``."""
        return tuple(p for p in PRESETS if p == "mini" or p in self.preset_options or (p == "full" and not self.rule))

    def validate_variant(self, variant: str) -> str:
        """The canonical name of ``variant``; raises ``ValueError`` for what this task cannot run,
        its modules built once (at conv4's width of the full-scale ResNet) to check their arguments."""
        from .catalog import build_mechanism

        parsed = Variant.parse(variant)
        if self.user_config and parsed.head:
            raise ValueError(f"task {self.name} varies the backbone of {self.user_config}; {parsed.name!r} "
                             "replaces a decode head")
        if not self.user_config:
            vision_config_path(self.kind, "mini", parsed)  # a head variant the task has no config for raises
        if self.rule and parsed.head:
            raise ValueError(f"task {self.name} varies the backbone only; {parsed.name!r} replaces the decode head")
        parsed.backbone_overrides()  # raises for parameters images do not take
        for token in parsed.tokens:
            if mechanism_of(token).family == USER_FAMILY:  # built, run forward and backward once, before any run
                from attnbench.attention.user_module import check_contract

                make_importable(locate(token))
                check_contract(token, {name: value for name, value in parsed.params_of(token).items()
                                       if name not in mechanism_of(token).params})
                continue
            try:
                build_mechanism(parsed.token_spec(token), 256)
            except (ValueError, TypeError, AssertionError) as error:
                raise ValueError(f"variant {parsed.name!r} on {self.name}: {error}") from None
        return parsed.name

    def slots(self, slot: str | None, variant: str) -> list[str | None]:
        return [None]

    def config(self, preset: str, variant: str, slot: str | None) -> tuple[str, dict]:
        """Config path and ``--cfg-options`` overrides of one run.

        Variants with parameters, and every variant of a diagnostic task, train the base config with
        the variant's backbone keys as overrides; the study's rows have a generated file each.
        """
        options = preset_overrides(self, preset)
        parsed, trained = Variant.parse(variant), self.variant(preset, variant)
        if self.user_config:  # the user's file, the variant's keys as overrides
            base = self.user_config
        elif self.rule is None and not parsed.params and not parsed.user_tokens:  # a generated file: preset's in it
            return str(vision_config_path(self.kind, config_preset(preset), parsed)), options
        elif self.rule is None:
            base = vision_config_path(self.kind, config_preset(preset), Variant())
        else:
            base = diagnostic_config_path(self.family, self.rule)
        backbone = trained.backbone_overrides()
        for plugin in backbone.get("plugins", []):  # a user's module: its file's hash makes an edited file a new run
            if "import_path" in plugin["cfg"]:
                plugin["cfg"]["source_sha256"] = locate(plugin["cfg"]["import_path"]).sha256
        return str(base), options | {f"optim_wrapper.{key}": value for key, value in trained.optimizer_overrides().items()} \
            | {f"model.backbone.{key}": value for key, value in backbone.items()}

    def variant(self, preset: str, variant: str) -> Variant:
        """The variant a run trains: its own parameters, then its preset's (``PRESET_PARAMETERS``); a user's
        config takes the full preset's (mmcv's initialisation), whatever the preset."""
        return preset_variant("full" if self.user_config else config_preset(preset), variant)

    def gate_start(self, preset: str, variant: str) -> float | None:
        """Where the run's residual gates start (:attr:`Variant.gate_start`, the preset's protocol applied)."""
        return self.variant(preset, variant).gate_start

    def count(self, model: torch.nn.Module, preset: str) -> dict:
        import torch

        from attnbench.flops import count_model

        height, width = self.input_sizes["full" if self.user_config else config_preset(preset)]
        inputs = torch.randn(1, 3, height, width, device=next(model.parameters()).device)
        if self.kind == "det":
            from mmdet.structures import DetDataSample

            meta = dict(img_shape=(height, width), ori_shape=(height, width), pad_shape=(height, width),
                        batch_input_shape=(height, width), scale_factor=(1.0, 1.0))
            samples = [DetDataSample(metainfo=meta)]
            forward = lambda: model(inputs, samples, mode="tensor")  # noqa: E731
        else:
            forward = lambda: model(inputs, mode="tensor")  # noqa: E731
        from attnbench.attention.user_module import module_sources

        with every_proposal(model):
            row = count_model(model, forward)
        return row | {"input_size": f"{height}x{width}", "module_source": module_sources(model)}


@contextmanager
def every_proposal(model: torch.nn.Module):
    """A two-stage detector's RPN keeps its ``max_per_img`` proposals, whatever its weights: NMS (IoU
    threshold 1) and the box size filter are off inside the block, so the RoI head is counted on a fixed
    number of regions (how many survive NMS depends on the weights; a run is counted before training)."""
    rpn = getattr(model, "rpn_head", None)
    cfg = getattr(rpn, "test_cfg", None)
    if cfg is None:
        yield
        return
    rpn.test_cfg = type(cfg)(dict(cfg, nms=dict(cfg.get("nms") or {}, iou_threshold=1.0), min_bbox_size=-1))
    try:
        yield
    finally:
        rpn.test_cfg = cfg


@dataclass(frozen=True)
class TranslationTask:
    """Machine translation: one attention slot of the Transformer varies, the others stay standard."""

    name: str = "nmt"
    metric: str = "translation/BLEU"
    metric_label: str = "BLEU"
    class_agnostic_metric: str | None = None
    context_metric: str | None = None
    rule: str | None = None  # no diagnostic rule: translation has no deciding context to measure attention on
    preset_options: dict = field(default_factory=lambda: {"smoke": {
        "train_cfg.max_iters": 4, "train_cfg.val_interval": 4, "val_dataloader.dataset.indices": 16}})
    configs: dict = field(default_factory=lambda: {
        "mini": "configs/translation/transformer-mini_mini-corpus.py",
        "full": "configs/translation/transformer-base_wmt14-ende.py"})
    lengths: dict = field(default_factory=lambda: {"mini": 16, "small": 16, "full": 50})  # tokens per sentence
    chrf_metric: str = "translation/chrF"  # recorded beside the BLEU (value_chrf)
    heldout: tuple = ()  # presets whose config's test split is the corpus's held-out one: tested there after training

    @property
    def presets(self) -> tuple[str, ...]:
        """The presets it runs: those with a config file, and those of ``preset_options`` on one."""
        return tuple(p for p in PRESETS
                     if config_preset(p) in self.configs and (p in self.configs or p in self.preset_options))

    def validate_variant(self, variant: str) -> str:
        """The canonical name of ``variant``; raises ``ValueError`` for what translation cannot run,
        its slot module built once (small) to check its arguments."""
        from attnbench.models.transformer_nmt import build_slot

        parsed = Variant.parse(variant)
        config = parsed.translation_config()
        if parsed.user_tokens:  # built in each slot it fills, each call made once, before any run
            from attnbench.attention.user_module import check_slot_contract

            (token,) = parsed.user_tokens
            vision_only = sorted(set(parsed.params_of(token)) & set(mechanism_of(token).params))
            if vision_only:
                raise ValueError(f"nmt variant {parsed.name!r}: {vision_only} apply to vision tasks only")
            make_importable(locate(token))
            check_slot_contract(token, {k: v for k, v in config.items() if k not in ("type", "import_path")})
        elif config is not None:
            try:
                build_slot("enc-self", config, embed_dim=16, num_heads=4, dropout=0.0)
            except (ValueError, TypeError) as error:
                raise ValueError(f"nmt variant {parsed.name!r}: {error}") from None
        return parsed.name

    def slots(self, slot: str | None, variant: str) -> list[str | None]:
        """The baseline (standard attention everywhere) is one run; other variants run per slot."""
        if variant == "baseline":
            return [None]
        wanted = [slot] if slot else list(SLOTS)
        parsed = Variant.parse(variant)
        if parsed.user_tokens:  # a user's class fills the slots whose call it defines
            from attnbench.attention.user_module import load_class, slots_of

            allowed = slots_of(load_class(parsed.user_tokens[0]))
        else:
            allowed = parsed.translation_slots
        bad = [s for s in wanted if s not in allowed]
        if slot and bad:
            raise ValueError(f"nmt variant {variant!r} cannot fill the {slot} slot (it needs a memory input)")
        return [s for s in wanted if s not in bad]

    def variant(self, preset: str, variant: str) -> Variant:
        """The variant a run trains (translation's presets add no parameters)."""
        return Variant.parse(variant)

    def gate_start(self, preset: str, variant: str) -> None:
        """None: the translation model's attention has no residual gate."""
        return None

    def config(self, preset: str, variant: str, slot: str | None) -> tuple[str, dict]:
        from attnbench.config_files import CONFIG_ROOT

        options = preset_overrides(self, preset)
        path = str(CONFIG_ROOT.parent / self.configs[config_preset(preset)])
        if variant == "baseline":
            return path, options
        mechanism = Variant.parse(variant).translation_config()
        if mechanism["type"] == "user":  # its file's hash makes an edited file a new run
            mechanism["source_sha256"] = locate(mechanism["import_path"]).sha256
        return path, options | {f"model.{SLOTS[slot].argument}": mechanism}

    def count(self, model: torch.nn.Module, preset: str) -> dict:
        import torch

        from attnbench.flops import count_model

        length = self.lengths[config_preset(preset)]
        device = next(model.parameters()).device
        src = torch.randint(4, 8, (1, length), device=device)
        tgt = torch.randint(4, 8, (1, length + 1), device=device)
        from attnbench.attention.user_module import module_sources

        row = count_model(model, lambda: model(src, tgt, mode="tensor"))
        return row | {"input_size": f"{length} tokens", "module_source": module_sources(model)}


STUDY_TASKS: dict = {
    "det": VisionTask("det", "det", "coco/bbox_mAP", "bbox mAP", {"mini": (128, 128), "full": (800, 1333)},
                      class_agnostic_metric="coco_agnostic/bbox_mAP",
                      preset_options={
                          "smoke": {"train_cfg.max_epochs": 1, "train_dataloader.dataset.indices": 16,
                                    "val_dataloader.dataset.indices": 16},
                          "long": {"train_cfg.max_epochs": 24, "train_cfg.val_interval": 24,
                                   "param_scheduler.1.end": 24, "param_scheduler.1.milestones": [20],
                                   "default_hooks.checkpoint.interval": 24}}),
    "seg": VisionTask("seg", "seg", "mIoU", "mIoU", {"mini": (128, 128), "full": (512, 1024)},
                      preset_options={
                          "smoke": {"train_cfg.max_iters": 4, "train_cfg.val_interval": 4,
                                    "val_dataloader.dataset.indices": 16},
                          "long": {"train_cfg.max_iters": 3200, "train_cfg.val_interval": 3200,
                                   "param_scheduler.0.end": 3200, "default_hooks.checkpoint.interval": 3200}}),
    "nmt": TranslationTask(),
    "nmt-l10n": TranslationTask(
        name="nmt-l10n", configs={"mini": "configs/translation/transformer-mini_l10n-ende.py",
                                  "small": "configs/translation/transformer-small_l10n-ende.py"},
        heldout=("small",)),
}
#: ``det-<rule>``, ``seg-<rule>``, ``fcn-<rule>``: the diagnostic suite (docs/diagnostics.md), one task
#: per family and rule of mini shapes other than the study's own.
DIAGNOSTIC_TASKS: dict = {
    f"{family}-{rule}": replace(STUDY_TASKS[kind], name=f"{family}-{rule}", rule=rule, family=family,
                                context_metric="context/accuracy")
    for family, (kind, _, _) in DIAGNOSTIC_CONFIGS.items() for rule in RULES if rule != DEFAULT_RULE}
TASKS: dict = STUDY_TASKS | DIAGNOSTIC_TASKS

#: Backbones whose ``plugins`` and ``dcn`` keys take the variants (mmdet's and mmseg's ResNets).
RESNET_BACKBONES = ("ResNet", "ResNetV1c", "ResNetV1d", "ResNeXt", "mmdet.ResNet", "mmseg.ResNet",
                    "mmseg.ResNetV1c", "mmdet.ResNetV1d", "mmseg.ResNetV1d", "mmdet.ResNeXt", "mmseg.ResNeXt")


def _test_input_size(cfg, kind: str) -> tuple[int, int]:
    """(H, W) a user config's FLOPs are counted at: a segmentor's crop (mmseg's ``crop_size``, as the seg
    task counts Cityscapes at its 512x1024 crop), a detector's test-time Resize (mmdet writes
    ``scale=(W, H)``), else the study task's full-scale size."""
    crop = cfg.get("crop_size") or cfg.get("model", {}).get("data_preprocessor", {}).get("size")
    if kind == "seg" and isinstance(crop, (list, tuple)) and len(crop) == 2:
        return int(crop[0]), int(crop[1])
    pipeline = (cfg.get("test_dataloader") or {}).get("dataset", {}).get("pipeline") or cfg.get("test_pipeline") or []
    for step in pipeline:
        if str(step.get("type", "")).endswith("Resize") and isinstance(step.get("scale"), (list, tuple)):
            width, height = step["scale"]
            return int(height), int(width)
    return STUDY_TASKS[kind].input_sizes["full"]


def user_task(config: str) -> VisionTask:
    """The task of a user's own mmdet or mmseg config (``tools/sweep.py --config``), named after its file:
    the variants go into its ResNet backbone as into the study's (``plugins``, ``dcn``); its metric is
    COCO bbox mAP (detection) or mIoU (segmentation); FLOPs are counted at its input size (``_test_input_size``)."""
    from pathlib import Path

    from mmengine.config import Config

    path = Path(config)
    if not path.is_file():
        raise ValueError(f"--config {config}: no such file")
    cfg = Config.fromfile(str(path))
    kind = {"mmdet": "det", "mmseg": "seg"}.get(cfg.get("default_scope"))
    if kind is None:
        raise ValueError(f"--config {config}: default_scope is {cfg.get('default_scope')!r}; an mmdet or mmseg config "
                         "(default_scope 'mmdet' or 'mmseg', as their _base_ runtimes set) is needed")
    backbone = cfg.get("model", {}).get("backbone", {})
    if backbone.get("type") not in RESNET_BACKBONES or backbone.get("depth", 50) in (18, 34):
        raise ValueError(f"--config {config}: the variants go into a ResNet-style backbone with Bottleneck blocks "
                         f"(type ResNet, ResNetV1c, ResNetV1d or ResNeXt, depth 50 or more: it takes plugins and dcn); "
                         f"this config's backbone is {backbone.get('type')!r}, depth {backbone.get('depth')!r}")
    if path.stem in TASKS:
        raise ValueError(f"--config {config}: its name {path.stem!r} is a built-in task's; rename the file")
    size = _test_input_size(cfg, kind)
    template = STUDY_TASKS[kind]
    return replace(template, name=path.stem, input_sizes={"full": size}, class_agnostic_metric=None,
                   preset_options={"smoke": template.preset_options["smoke"]}, user_config=str(path.resolve()))


def task_of(name: str, config: str | None = None):
    """The task ``name``: a built-in one, or the user task of ``config`` (a run's config file)."""
    if name in TASKS:
        return TASKS[name]
    if config is None:
        raise ValueError(f"unknown task {name!r}; choose from {sorted(TASKS)} or give a config (--config)")
    return user_task(config)
