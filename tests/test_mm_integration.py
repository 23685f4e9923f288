"""attnbench inside mmdet and mmseg: every variant trains a step; plain OpenMMLab entry points work."""
import subprocess
import sys
import textwrap

import pytest
import torch
from mmengine.dataset import pseudo_collate
from mmengine.optim import OptimWrapper
from mmengine.registry import DATASETS, MODELS, init_default_scope

import attnbench.mm  # noqa: F401
from attnbench.attention import GlobalContext, NonLocal2d
from attnbench.config_files import PRESET_PARAMETERS, vision_config_path
from attnbench.mm.run_setup import format_configs_once, load_config
from attnbench.mm.plugins import PLUGINS
from attnbench.variants import SURVEY_VARIANTS, VISION_VARIANTS, Variant, mechanism_of, vision_rows

TINY = dict(num_train=8, num_val=4)
#: Bottleneck blocks of a ResNet-50's conv2 to conv5.
RESNET50_BLOCKS = (3, 4, 6, 3)
#: ``_abbr_`` of every ResNet plugin: the backbone's submodule names end with one of them.
PLUGIN_ABBRS = tuple(cls._abbr_ for cls in PLUGINS.values())


def zero_init_parameter(module):
    """The parameter a residual block starts at zero (gamma or its last conv); None for gating blocks."""
    if hasattr(module, "gamma"):
        return module.gamma
    if isinstance(module, NonLocal2d):
        return module.out_conv.weight
    if isinstance(module, GlobalContext):
        return module.transform[-1].weight
    return None


def tiny_config(task, variant, data_root):
    cfg = load_config(str(vision_config_path(task, "mini", variant)))
    for split in ("train_dataloader", "val_dataloader", "test_dataloader"):
        cfg[split].dataset.data_root = str(data_root) + "/"
        cfg[split].dataset.generate = TINY
    if task == "det":  # the bbox AP and the class-agnostic AP
        for metric in (*cfg.val_evaluator, *cfg.test_evaluator):
            metric.ann_file = f"{data_root}/annotations/instances_val.json"
    return cfg


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    return tmp_path_factory.mktemp("mini_shapes")


#: Every (task, variant) of the benchmark; decode-head variants are segmentation-only.
TASK_VARIANTS = [(task, v) for task in ("det", "seg") for v in vision_rows(task)]


@pytest.mark.parametrize("task,variant", TASK_VARIANTS)
def test_every_variant_trains_a_step(task, variant, data_root):
    cfg = tiny_config(task, variant, data_root)
    init_default_scope(cfg.default_scope)
    model = MODELS.build(cfg.model)
    dataset = DATASETS.build(cfg.train_dataloader.dataset)
    batch = pseudo_collate([dataset[0], dataset[1]])
    wrapper = OptimWrapper(torch.optim.SGD(model.parameters(), lr=0.01))
    attention = [m for name, m in model.backbone.named_modules() if name.endswith(PLUGIN_ABBRS)]
    gates = [p for p in map(zero_init_parameter, attention) if p is not None]
    gate_grads = {}  # a gate's gradient can be too small to move its float32 value off 1 in one step
    for gate in gates:
        gate.register_hook(lambda grad, gate=gate: gate_grads.setdefault(gate, grad.detach().clone()))
    parsed = Variant.parse(variant)
    classes = tuple(mechanism_of(token).module for token in parsed.tokens)
    mechanisms = [m for m in model.modules() if isinstance(m, classes)]
    reached = set()  # the blocks whose parameters got a gradient: plugins, conv2 replacements and heads alike
    for mechanism in mechanisms:
        for parameter in mechanism.parameters():
            parameter.register_hook(lambda grad, m=mechanism: reached.add(m) if grad.abs().sum() > 0 else None)
    log_vars = model.train_step(batch, wrapper)
    assert torch.isfinite(log_vars["loss"])
    assert {type(m) for m in reached} == set(classes)  # not every block: spa's 1-unit ReLU bottleneck can be dead
    first, last = PRESET_PARAMETERS["mini"]["stages"]  # the mini protocol's stages: every block of them
    assert len(attention) == (sum(RESNET50_BLOCKS[first - 2:last - 1]) if parsed.factors or parsed.plugins else 0)
    for gate in gates:  # the step reached the attention branch
        assert gate in gate_grads and gate_grads[gate].abs().sum() > 0


USER_CONFIG = """
_base_ = {base!r}
custom_imports = dict(imports=['attnbench.mm'], allow_failed_imports=False)
{data}
train_cfg = dict(_delete_=True, type='IterBasedTrainLoop', max_iters=2, val_interval=2)
param_scheduler = []
work_dir = {work_dir!r}
"""


@pytest.mark.slow
@pytest.mark.parametrize("task,metric", [("det", "coco/bbox_mAP"), ("seg", "mIoU")])
def test_openmmlab_runner_with_only_custom_imports(task, metric, data_root, tmp_path):
    """A user's config trained by mmengine's Runner in a process that never imports attnbench itself."""
    data = "\n".join(f"{split} = dict(dataset=dict(data_root={str(data_root) + '/'!r}, generate={TINY!r}))"
                     for split in ("train_dataloader", "val_dataloader", "test_dataloader"))
    if task == "det":
        ann_file = str(data_root) + "/annotations/instances_val.json"
        data += (f"\nval_evaluator = [dict(type='CocoMetric', ann_file={ann_file!r}, metric='bbox'), "
                 f"dict(type='attnbench.ClassAgnosticCocoMetric', ann_file={ann_file!r})]")
    if task == "seg":
        data += "\ntrain_dataloader.update(sampler=dict(type='DefaultSampler', shuffle=True))"
    path = tmp_path / "user_config.py"
    path.write_text(USER_CONFIG.format(base=str(vision_config_path(task, "mini", "1111")), data=data,
                                       work_dir=str(tmp_path / "work")))
    code = textwrap.dedent(f"""
        from mmengine.config import Config
        from mmengine.runner import Runner
        runner = Runner.from_cfg(Config.fromfile({str(path)!r}))
        runner.train()
        print('METRICS', runner.message_hub.log_scalars.keys())
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"val/{metric}" in proc.stdout


def test_bad_configs_fail_with_one_clear_message(data_root):
    cfg = tiny_config("det", "0110", data_root)
    cfg.model.backbone.plugins[0].cfg.attention_type = "0120"
    init_default_scope("mmdet")
    with pytest.raises(Exception, match="attention_type must be four characters"):
        MODELS.build(cfg.model)
    with pytest.raises(ValueError, match="BasicBlocks, which take no plugins"):
        load_config(str(vision_config_path("det", "mini", "0110")), cfg_options={"model.backbone.depth": 18})
    with pytest.raises(FileNotFoundError, match="data_root 'data/coco/' does not exist"):
        load_config(str(vision_config_path("det", "full", "0110")))


def test_configs_of_generated_data_load_before_the_data_exists(tmp_path, monkeypatch):
    """The mini datasets write their data_root on first use: no config of theirs is refused for it."""
    from attnbench.config_files import CONFIG_ROOT

    monkeypatch.chdir(tmp_path)  # a fresh clone: no data/ yet
    for config in (vision_config_path("det", "mini", "baseline"), vision_config_path("seg", "mini", "baseline"),
                   CONFIG_ROOT / "translation/transformer-mini_mini-corpus.py"):
        load_config(str(config))
    assert not (tmp_path / "data").exists()


def test_configs_are_formatted_once_to_the_text_yapf_gives(monkeypatch, tmp_path):
    import mmengine.config.config as config_module

    yapf = config_module.FormatCode
    yapf = getattr(yapf, "__wrapped__", yapf) if getattr(yapf, "formats_once", False) else yapf
    formatted = []

    def format_code(source, **options):
        formatted.append(source)
        return yapf(source, **options)

    monkeypatch.setattr(config_module, "FormatCode", format_code)  # restored after the test
    cfg = load_config(str(vision_config_path("det", "mini", "0010")), str(tmp_path))
    expected = cfg.pretty_text
    format_configs_once()
    format_configs_once()  # a second call leaves the one cache in place
    assert [cfg.pretty_text for _ in range(5)] == [expected] * 5
    assert len(formatted) == 2  # the text before the cache, then once into it
    cfg.merge_from_dict({"randomness.seed": 7})
    assert "seed=7" in cfg.pretty_text and len(formatted) == 3  # another text is formatted anew


def test_generated_configs_are_in_sync():
    from attnbench.config_files import generated_vision_configs

    stale = [str(p) for p, text in generated_vision_configs().items() if not p.exists() or p.read_text() != text]
    assert not stale, f"run tools/generate_configs.py: {stale}"


def test_a_detectors_flops_do_not_depend_on_its_weights():
    """A run is counted before training: the RoI head is counted on the RPN's ``max_per_img`` proposals even
    where the weights leave none after NMS and the size filter (iau's detector, unscaled, did: 0.134 GMACs
    recorded against the baseline's 0.218), and the RPN's test config is as it was afterwards."""
    from attnbench.sweep.tasks import task_of

    init_default_scope("mmdet")
    model = MODELS.build(load_config(str(vision_config_path("det", "mini", Variant())), check_data=False).model)
    regions = []
    model.roi_head.bbox_roi_extractor.register_forward_hook(lambda m, args, out: regions.append(len(out)))
    test_cfg = model.rpn_head.test_cfg
    counted = task_of("det", None).count(model, "mini")
    with torch.no_grad():
        model.rpn_head.rpn_reg.bias.fill_(-50.0)  # every box shrinks to nothing: no proposal would survive
    assert task_of("det", None).count(model, "mini") == counted
    assert regions == [test_cfg.max_per_img] * 2 and model.rpn_head.test_cfg is test_cfg
    assert test_cfg.nms.iou_threshold == 0.7 and test_cfg.min_bbox_size == 0


@pytest.mark.slow
@pytest.mark.parametrize("task", ["det", "seg"])
def test_full_scale_configs_build_and_run_forward(task):
    """Every full-scale variant builds; the heaviest one runs a forward pass (at a reduced size)."""
    init_default_scope("mmdet" if task == "det" else "mmseg")
    survey = [v for t, v in TASK_VARIANTS if t == task and v in SURVEY_VARIANTS]
    for variant in survey + list(VISION_VARIANTS):
        cfg = load_config(str(vision_config_path(task, "full", variant)), check_data=False)
        model = MODELS.build(cfg.model)
    model.eval()  # the last one: 1111+deformable
    x = torch.randn(1, 3, 160, 256)
    with torch.no_grad():
        if task == "det":
            from mmdet.structures import DetDataSample

            meta = dict(img_shape=(160, 256), ori_shape=(160, 256), scale_factor=(1.0, 1.0),
                        pad_shape=(160, 256), batch_input_shape=(160, 256))
            (result,) = model(x, [DetDataSample(metainfo=meta)], mode="predict")
            assert result.pred_instances.bboxes.shape[1] == 4
        else:
            assert model(x, mode="tensor").shape == (1, 19, 20, 32)  # 19 Cityscapes classes, stride 8


@pytest.mark.slow
def test_two_process_cpu_distributed_training(data_root, tmp_path):
    """tools/train.py --launcher pytorch on a CPU-only machine: gloo, DDP without device_ids."""
    root = str(data_root) + "/"
    options = [f"{split}.dataset.data_root={root}" for split in ("train_dataloader", "val_dataloader")]
    options += [f"{split}.dataset.generate.{k}={v}" for split in ("train_dataloader", "val_dataloader")
                for k, v in TINY.items()]
    options += ["train_cfg.max_iters=2", "train_cfg.val_interval=2", "train_dataloader.batch_size=2"]
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
               str(vision_config_path("seg", "mini", "0010").parents[2] / "tools" / "train.py"),
               str(vision_config_path("seg", "mini", "0010")), "--launcher", "pytorch",
               "--work-dir", str(tmp_path / "work"), "--cfg-options", *options]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0 and "terminate called without an active exception" in proc.stderr:
        # gloo's threads abort a rank now and then: 1 run in 50 here, inside the full suite only
        proc = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    assert "mIoU" in proc.stdout + proc.stderr


def initial_weights(task, variant, data_root, tmp_path, seed=3) -> dict:
    """The model's weights when training starts: built, initialised and paired as the Runner does."""
    from mmengine.runner import Runner

    cfg = tiny_config(task, variant, data_root)
    cfg.work_dir = str(tmp_path / f"{task}-{variant}")
    cfg.randomness = dict(seed=seed)
    runner = Runner.from_cfg(cfg)
    runner._init_model_weights()
    for hook in runner.hooks:
        if type(hook).__name__ == "PairedInitHook":
            hook.before_train(runner)
    return {k: v.clone() for k, v in runner.model.state_dict().items()}


@pytest.mark.parametrize("task,variant", [("det", "1111"), ("det", "0010+deformable"), ("seg", "1111"), ("seg", "se")])
def test_a_variant_starts_from_its_baselines_weights_at_the_same_seed(task, variant, data_root, tmp_path):
    """Every tensor a variant shares with the baseline (name and shape) starts equal to the baseline's at
    that seed, though the variant's own modules drew from the random stream; another seed starts elsewhere."""
    baseline = initial_weights(task, "baseline", data_root, tmp_path)
    other = initial_weights(task, variant, data_root, tmp_path)
    shared = [k for k in baseline if k in other and other[k].shape == baseline[k].shape]
    assert len(shared) > 0.8 * len(baseline)
    assert not [k for k in shared if not torch.equal(baseline[k], other[k])]
    assert len(other) > len(baseline)  # the variant's own modules
    reseeded = initial_weights(task, "baseline", data_root, tmp_path, seed=4)
    convs = [k for k in baseline if k.endswith("conv1.weight")]
    assert not torch.equal(baseline[convs[0]], reseeded[convs[0]])
