"""Peak memory and time of one full-scale training step, for the study's main rows.

    python tools/benchmark_training_step.py --device cuda --out results/gpu-h200/training_step.md
    python tools/benchmark_training_step.py --device cpu --smoke     # small inputs, fewer rows (a test runs it)
    python tools/benchmark_training_step.py --device cuda --models det --variants 0010 --precisions amp

Faster R-CNN R-50-FPN at 800x1333 (det) and DeepLabV3 R-50-D8 at 512x1024 (seg), 2 images, built
from the full-scale configs with random weights; the images are random, with random boxes (det) or
label maps (seg). A step is forward, loss, backward and an SGD step (momentum 0.9, weight decay 1e-4,
as mmdet's config; its cost does not depend on the values), in fp32 or under autocast (``amp``: fp16
with a GradScaler on CUDA, bf16 on the CPU). Rows: the baseline (always), mmcv's
GeneralizedAttention (``--mmcv-variants``: the attnbench config with the plugin's type changed to
mmcv's, nothing else) and attnbench's variants (``--variants``). Each row runs in a fresh process:
the warm-up steps, then the median time of the repeats.

Peak memory: on CUDA, torch.cuda.max_memory_allocated over the warm-up and timed steps, weights,
gradients, optimizer state, inputs and activations included (the ``memory`` mmengine logs, which
mmdetection's tables report); on the CPU, the growth of the process's peak resident memory over the
steps. "published GB" is mmdetection's training memory for the fp32 rows that have one: 4.0 GB for
Faster R-CNN R-50-FPN 1x, 8.0 GB with attention 1111 (configs/empirical_attention; images of up to
1333x800 there, exactly 800x1333 here).

Scope (``--scope``): ``detector`` measures the whole ``model.loss()`` (RPN and RoI head, with mmcv's
compiled NMS and RoIAlign); ``backbone-neck`` the ResNet and FPN alone (every variant differs there
only), with the mean square of the FPN outputs as the loss; ``auto`` tries the detector and, when an
op of mmcv.ops fails (mmcv built without its CUDA ops, or an op without the autocast dtype), measures
that row and the later detection rows of the same precision as backbone-neck, and says so in the
notes. Without mmcv's compiled ops a stand-in lets mmdet and mmseg import and fails each op when it
is called (``--no-mmcv-ops`` forces that where the ops exist). DeepLabV3 needs no compiled op: seg
rows are the whole segmentor.

Time: the default run, 24 rows (and one rerun a precision where the detector falls back), is planned
for under 8 minutes on one H200, at about 10 s a row to start a process and build the model plus 13
steps; not yet measured there. ``--out`` keeps the rows done if a run is cut short. ``--smoke`` on
the CPU: 12 rows in about 2 minutes on 2 busy cores.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.machinery
import importlib.metadata
import json
import platform
import resource
import statistics
import subprocess
import sys
import time
import traceback
import types
from pathlib import Path

MODELS = {"det": "Faster R-CNN R-50-FPN", "seg": "DeepLabV3 R-50-D8"}
SMOKE_SIZES = {"det": (64, 96), "seg": (64, 128)}
DEFAULT_VARIANTS = "1111,0010,0010+deformable,1111+deformable"
SMOKE_VARIANTS = "1111+deformable"
#: mmdetection's training memory (fp32, 2 images a GPU): faster_rcnn and empirical_attention READMEs.
PUBLISHED_MEMORY_GB = {("det", "baseline"): 4.0, ("det", "1111"): 8.0}
BOXES_PER_IMAGE = 8


class UsageError(ValueError):
    """Bad command-line input: one line on stderr, exit code 2."""


def mmcv_ops_status(disabled: bool) -> str:
    """'loaded' when mmcv's compiled ops (``mmcv._ext``) load, else why not."""
    if disabled:
        return "disabled (--no-mmcv-ops)"
    try:
        importlib.import_module("mmcv._ext")
    except ImportError as error:
        return f"missing ({type(error).__name__}: {str(error).splitlines()[0][:80]})"
    return "loaded"


class MissingMMCVOps(types.ModuleType):
    """Stands in for ``mmcv._ext`` so that mmcv.ops, mmdet and mmseg import; each op raises when called."""

    def __init__(self, reason: str):
        super().__init__("mmcv._ext")
        self.__spec__ = importlib.machinery.ModuleSpec("mmcv._ext", loader=None)
        self.reason = reason

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)

        def missing(*args, **kwargs):
            raise RuntimeError(f"mmcv's compiled op {name} is {self.reason}")
        return missing


def compiled_op_failure(error: BaseException) -> str | None:
    """Where in mmcv.ops ``error`` was raised (``'nms.forward: RuntimeError: ...'``); None elsewhere."""
    import mmcv

    ops = Path(mmcv.__file__).parent / "ops"
    frames = [f for f in traceback.extract_tb(error.__traceback__) if Path(f.filename).is_relative_to(ops)]
    if not frames:
        return None
    message = ": " + str(error).splitlines()[0][:100] if str(error) else ""
    return f"{Path(frames[-1].filename).stem}.{frames[-1].name}: {type(error).__name__}{message}"


def mmcv_plugins(config: str) -> list[dict]:
    """The config's backbone plugins with each attnbench GeneralizedAttention made mmcv's (type only)."""
    from mmengine.config import Config

    plugins = Config.fromfile(config).model.backbone.get("plugins") or []
    mmcv = [dict(p, cfg=dict(p["cfg"], type="GeneralizedAttention")) for p in plugins
            if p["cfg"]["type"] == "attnbench.GeneralizedAttention"]
    if len(mmcv) != len(plugins) or not mmcv:
        raise UsageError(f"{config}: mmcv rows need a config whose plugins are all GeneralizedAttention")
    return mmcv


def build(model: str, variant: str, implementation: str, size: tuple[int, int]):
    """The full-scale model of a row, without pretrained weights, its SyncBN made BN (one process)."""
    from mmengine.model import revert_sync_batchnorm

    from attnbench.config_files import vision_config_path
    from attnbench.sweep.dry_run import build_model

    config = str(vision_config_path(model, "full", variant))
    options = {"model.backbone.init_cfg": None}
    if model == "seg":
        options |= {"model.pretrained": None, "model.data_preprocessor.size": size}
    if implementation == "mmcv":
        options["model.backbone.plugins"] = mmcv_plugins(config)
    return revert_sync_batchnorm(build_model(config, options))


def implementation_of(model) -> str:
    """Which package the backbone's mechanisms come from ('mmcv', 'attnbench'; '-' for none)."""
    packages = {type(m).__module__.split(".")[0] for m in model.backbone.modules()}
    return ",".join(sorted(packages & {"mmcv", "attnbench"})) or "-"


def random_batch(model: str, num_classes: int, batch: int, size: tuple[int, int]) -> dict:
    """Random uint8 images with random boxes and labels (det) or label maps (seg), as a data loader gives them."""
    import torch

    height, width = size
    images = [torch.randint(0, 256, (3, height, width), dtype=torch.uint8) for _ in range(batch)]
    meta = dict(img_shape=size, ori_shape=size, scale_factor=(1.0, 1.0))
    if model == "det":
        from mmdet.structures import DetDataSample
        from mmengine.structures import InstanceData

        samples = []
        for _ in range(batch):
            scale = torch.tensor([width, height, width, height])
            corner = torch.rand(BOXES_PER_IMAGE, 2) * 0.7
            extent = 0.05 + torch.rand(BOXES_PER_IMAGE, 2) * 0.25
            boxes = torch.cat([corner, corner + extent], dim=1) * scale
            sample = DetDataSample(metainfo=meta)
            sample.gt_instances = InstanceData(bboxes=boxes, labels=torch.randint(0, num_classes, (BOXES_PER_IMAGE,)))
            samples.append(sample)
    else:
        from mmengine.structures import PixelData
        from mmseg.structures import SegDataSample

        samples = [SegDataSample(metainfo=meta, gt_sem_seg=PixelData(data=torch.randint(0, num_classes, (1, *size))))
                   for _ in range(batch)]
    return dict(inputs=images, data_samples=samples)


def measure(args) -> dict:
    """One row in this process: the model and batch on the device, warm-up, timed steps."""
    import torch

    torch.manual_seed(0)
    if args.threads:
        torch.set_num_threads(args.threads)
    ops = mmcv_ops_status(args.no_mmcv_ops)
    if ops != "loaded":
        sys.modules["mmcv._ext"] = MissingMMCVOps(ops)
    device = torch.device(args.device)
    model = build(args.model, args.variant, args.implementation, tuple(args.size))
    head = model.roi_head.bbox_head if args.model == "det" else model.decode_head
    batch = random_batch(args.model, head.num_classes, args.batch, tuple(args.size))
    if args.row_scope == "backbone-neck":
        trained = torch.nn.ModuleList([model.backbone, model.neck]).to(device)

        def loss_of(inputs, data_samples):
            return sum(level.float().square().mean() for level in model.neck(model.backbone(inputs)))
    else:
        trained = model.to(device)

        def loss_of(inputs, data_samples):
            return model.parse_losses(model.loss(inputs, data_samples))[0]
    data = model.data_preprocessor.to(device)(batch, training=True)
    optimizer = torch.optim.SGD(trained.parameters(), lr=0.02, momentum=0.9, weight_decay=1e-4)
    amp = {"fp32": None, "amp": torch.float16 if device.type == "cuda" else torch.bfloat16}[args.precision]
    scaler = torch.amp.GradScaler(device.type, enabled=amp == torch.float16)

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=amp, enabled=amp is not None):
            loss = loss_of(data["inputs"], data["data_samples"])
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    else:
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    times = []
    try:
        for _ in range(args.warmup + args.repeats):
            start = time.perf_counter()
            step()
            times.append(time.perf_counter() - start)
    except Exception as error:
        where = compiled_op_failure(error)
        if where is None:
            raise
        return {"compiled_op_failure": where}
    if device.type == "cuda":
        peak = torch.cuda.max_memory_allocated(device)
    else:
        peak = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) * 1024  # ru_maxrss: KiB
    return {"ms": 1000 * statistics.median(times[args.warmup:]), "peak_gb": peak / 2**30,
            "implementation": implementation_of(model)}


def run_row(row: dict, scope: str, argv: list[str]) -> dict:
    """``measure`` in a fresh process; ``{'error': ...}`` with its last line of stderr when it fails."""
    cmd = [sys.executable, __file__, "--worker", "--model", row["model"], "--variant", row["variant"],
           "--implementation", row["implementation"], "--precision", row["precision"], "--row-scope", scope, *argv]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        lines = proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"]
        return {"error": lines[-1][:120]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def plan_rows(models: list[str], variants: list[str], mmcv_variants: list[str], precisions: list[str]) -> list[dict]:
    """The rows in the order they run: per model and precision, the baseline, mmcv's, attnbench's."""
    from attnbench.config_files import vision_config_path
    from attnbench.variants import Variant

    for name, allowed in (("--models", MODELS), ("--precisions", ("fp32", "amp"))):
        unknown = [v for v in (models if name == "--models" else precisions) if v not in allowed]
        if unknown:
            raise UsageError(f"{name}: unknown {unknown}; choose from {', '.join(allowed)}")
    try:
        variants = [Variant.parse(v).name for v in variants]
        mmcv_variants = [Variant.parse(v).name for v in mmcv_variants]
    except ValueError as error:
        raise UsageError(f"--variants: {error}") from None
    for v in mmcv_variants:
        parsed = Variant.parse(v)
        if parsed.tokens != (parsed.factors,):
            raise UsageError(f"--mmcv-variants: {v!r} is not a factor string such as 1111 (mmcv has the "
                             "generalized attention only)")
    rows = []
    for model in models:
        for v in {*variants, *mmcv_variants}:
            if not vision_config_path(model, "full", v).is_file():
                raise UsageError(f"--variants: no full-scale {model} config for {v!r} "
                                 f"({vision_config_path(model, 'full', v).name})")
        for precision in precisions:
            rows += [dict(model=model, variant=v, implementation=impl, precision=precision)
                     for v, impl in [("baseline", "-"), *[(v, "mmcv") for v in mmcv_variants],
                                     *[(v, "attnbench") for v in variants if v != "baseline"]]]
    return rows


def table_line(row: dict, result: dict, baseline: dict | None, note: str) -> str:
    """One markdown row: the measurement, its growth over the baseline of the same model, precision, scope."""
    published = PUBLISHED_MEMORY_GB.get((row["model"], row["variant"])) if row["precision"] == "fp32" else None
    published = "" if published is None else f"{published:.1f}"
    cells = [row["model"], result["scope"], row["variant"], result.get("implementation", row["implementation"]),
             row["precision"]]
    if "error" in result:
        return "| " + " | ".join(cells + ["", "", "", published, f"failed: {result['error']}"]) + " |"
    comparable = baseline is not None and row["variant"] != "baseline"
    added = f"{result['peak_gb'] - baseline['peak_gb']:+.2f}" if comparable else "-"
    cells += [f"{result['peak_gb']:.2f}", added, f"{result['ms']:.0f}", published, note]
    return "| " + " | ".join(cells) + " |"


def table_lines(rows: list[dict], args, sizes: dict, warmup: int, repeats: int):
    """Run the rows one by one (progress on stderr) and yield each one's table line.

    ``--scope auto``: a det row whose detector fails in mmcv.ops is run again as backbone-neck, and so
    are the later det rows of that precision (their heads, where the compiled ops are, are the same).
    """
    argv = ["--device", args.device, "--batch", str(args.batch), "--warmup", str(warmup), "--repeats", str(repeats),
            *(["--threads", str(args.threads)] if args.threads else []),
            *(["--no-mmcv-ops"] if args.no_mmcv_ops else [])]
    fallen_back: set[tuple] = set()  # (model, precision) measured as backbone-neck after an mmcv.ops failure
    baselines: dict[tuple, dict] = {}  # (model, precision, scope) -> the baseline's result
    start = time.time()
    for i, row in enumerate(rows, 1):
        key, size = (row["model"], row["precision"]), ["--size", *map(str, sizes[row["model"]])]
        scope = "segmentor" if row["model"] == "seg" else (
            "backbone-neck" if key in fallen_back or args.scope == "backbone-neck" else "detector")
        note = "backbone + neck: the detector failed in mmcv.ops above" if key in fallen_back else ""
        result = run_row(row, scope, argv + size)
        if "compiled_op_failure" in result and args.scope == "auto":
            fallen_back.add(key)
            note = f"the detector failed in mmcv.ops ({result['compiled_op_failure']}): backbone + neck measured"
            scope = "backbone-neck"
            result = run_row(row, scope, argv + size)
        if "compiled_op_failure" in result:
            result = {"error": f"mmcv.ops {result['compiled_op_failure']}"}
        result["scope"] = scope
        if row["variant"] == "baseline" and "error" not in result:
            baselines[key + (scope,)] = result
        outcome = result.get("error") or f"{result['ms']:.0f} ms, {result['peak_gb']:.2f} GB"
        print(f"[{i}/{len(rows)} {time.time() - start:4.0f} s] {row['model']} {row['variant']} {row['implementation']} "
              f"{row['precision']} {scope}: {outcome}", file=sys.stderr, flush=True)
        yield table_line(row, result, baselines.get(key + (scope,)), note)


def split(text: str) -> list[str]:
    return [v.strip() for v in text.split(",") if v.strip()]


def device_description(device: str, threads: int | None) -> str:
    import torch

    if device.startswith("cuda"):
        return f"{torch.cuda.get_device_name(device)} ({device})"
    return f"{platform.processor() or platform.machine()}, threads: {threads or torch.get_num_threads()}"


def check_device(device: str) -> None:
    import torch

    if device != "cpu" and not device.startswith("cuda"):
        raise UsageError(f"--device {device!r}: cpu or cuda[:N]")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise UsageError(f"--device {device}: CUDA is not available here (torch {torch.__version__}); use --device cpu")


def header_lines(args, sizes: dict, warmup: int, repeats: int) -> list[str]:
    """What was run, where, and what the columns mean; then the table's head."""
    import torch

    cuda = args.device != "cpu"
    versions = ", ".join(f"{name} {importlib.metadata.version(name)}" for name in ("mmcv", "mmdet", "mmsegmentation"))
    models = "; ".join(f"{m} = {MODELS[m]} at {sizes[m][0]}x{sizes[m][1]}" for m in split(args.models))
    return [
        f"Training step (forward, loss, backward, SGD step), {args.batch} images: {models}; "
        f"median of {repeats} steps after {warmup} warm-up",
        f"{device_description(args.device, args.threads)}; torch {torch.__version__}, {versions}; "
        f"mmcv's compiled ops: {mmcv_ops_status(args.no_mmcv_ops)}",
        "peak GB: " + ("torch.cuda.max_memory_allocated over the steps, weights included" if cuda
                       else "growth of the process's peak resident memory over the steps")
        + "; amp: " + ("fp16 autocast with a GradScaler" if cuda else "bf16 autocast")
        + "; published GB: mmdetection's training memory (fp32)",
        "",
        "| model | scope | variant | implementation | precision | peak GB | added vs baseline GB "
        "| median step ms | published GB | notes |",
        "|" + "---|" * 10,
    ]


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda", help="cpu or cuda[:N] (default: %(default)s)")
    p.add_argument("--smoke", action="store_true", help="small inputs (det 64x96, seg 64x128), 1 warm-up, "
                   f"2 repeats, 1 thread, variants {SMOKE_VARIANTS} unless the options say otherwise")
    p.add_argument("--models", default="det,seg", help="comma-separated: det, seg (default: %(default)s)")
    p.add_argument("--variants", help=f"attnbench rows besides the baseline (default: {DEFAULT_VARIANTS})")
    p.add_argument("--mmcv-variants", default="1111", help="factor sets also run with mmcv's GeneralizedAttention "
                   "('' for none; default: %(default)s)")
    p.add_argument("--precisions", default="fp32,amp", help="comma-separated: fp32, amp (default: %(default)s)")
    p.add_argument("--scope", choices=["auto", "detector", "backbone-neck"], default="auto",
                   help="what a det row trains (see above; default: %(default)s)")
    p.add_argument("--batch", type=int, default=2, help="images a step (default: %(default)s)")
    p.add_argument("--warmup", type=int, help="untimed steps first (default: 3, --smoke 1)")
    p.add_argument("--repeats", type=int, help="timed steps (default: 10, --smoke 2)")
    p.add_argument("--threads", type=int, help="CPU threads of each row (default: torch's, --smoke 1)")
    p.add_argument("--no-mmcv-ops", action="store_true", help="run as if mmcv had no compiled ops")
    p.add_argument("--out", help="also write the table to this file (rewritten after each row)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    for hidden in ("--model", "--variant", "--implementation", "--precision", "--row-scope"):
        p.add_argument(hidden, help=argparse.SUPPRESS)
    p.add_argument("--size", type=int, nargs=2, help=argparse.SUPPRESS)
    return p.parse_args()


def main() -> int:
    args = parse_args()
    if args.worker:
        print(json.dumps(measure(args)))
        return 0
    warmup = args.warmup if args.warmup is not None else 1 if args.smoke else 3
    repeats = args.repeats if args.repeats is not None else 2 if args.smoke else 10
    from attnbench.sweep.tasks import STUDY_TASKS

    sizes = SMOKE_SIZES if args.smoke else {model: STUDY_TASKS[model].input_sizes["full"] for model in MODELS}
    args.threads = args.threads or (1 if args.smoke else None)
    variants = args.variants or (SMOKE_VARIANTS if args.smoke else DEFAULT_VARIANTS)
    try:
        check_device(args.device)
        rows = plan_rows(split(args.models), split(variants), split(args.mmcv_variants), split(args.precisions))
    except UsageError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    lines = header_lines(args, sizes, warmup, repeats)
    print("\n".join(lines), flush=True)
    for line in table_lines(rows, args, sizes, warmup, repeats):
        lines.append(line)
        print(line, flush=True)
        if args.out:
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
