"""Cost card: what one module of each mechanism costs where the benchmark puts it, and how that grows.

For every row of the catalogue (the 15 factor sets of the generalized attention, every token of
:data:`attnbench.variants.MECHANISMS`, and the plain 3x3 conv that ``conv2`` rows replace, for reference),
built as a preset builds it (:func:`build_module`), on inputs of the ResNet-50 stage shapes the module sees
(:func:`stage_shapes`) and on square maps of growing side (:func:`scaling_shapes`):

* **params**: its parameters;
* **MACs, analytic**: its ``macs()`` (the formula the FLOPs tables use);
* **MACs, counted**: :func:`attnbench.flops.count_forward` (``torch.utils.flop_counter``), with the operators
  of matrix work that torch's counter has no formula for (``counter_misses``);
* **time**: the median wall time of ``repeats`` forward + backward passes (the module in training mode, a
  random output gradient; after one warm-up pass);
* **peak memory**: on the CPU the peak of the bytes torch's CPU allocator holds during one forward +
  backward above what it held before (``torch.profiler``'s allocation events: activations kept for the
  backward, temporaries, kernels' work buffers, the gradients of the input and the weights; not the input,
  the weights or the output gradient, which exist before); on CUDA ``torch.cuda.max_memory_allocated``
  during the pass less ``memory_allocated`` before it, the same quantity;
* **growth**: the exponents ``k`` of ``time ~ tokens^k`` and ``memory ~ tokens^k`` fitted by least squares
  on log-log axes over the square maps (:func:`fit_exponent`), tokens = H x W (so 2k against the side).

Before a cell runs, the module runs once on fake tensors (``torch._subclasses.FakeTensorMode``: shapes only,
nothing allocated) to count its MACs and estimate its peak memory (:class:`TensorBytes`); a cell whose
estimate passes ``max_gib``, or whose time extrapolated from the mechanism's smaller cells passes
``max_seconds``, is marked and not run.

Imports torch, pandas and matplotlib, and of attnbench only the attention modules, the vocabulary
(``attnbench.variants``, ``attnbench.config_files``) and ``attnbench.flops``: no OpenMMLab.
"""
from __future__ import annotations

import contextlib
import math
import os
import platform
import re
import statistics
import sys
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import torch
import torch.nn as nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from attnbench.attention.factors import ALL_FACTORS
from attnbench.config_files import preset_variant
from attnbench.flops import count_forward
from attnbench.attention.user_module import check_contract
from attnbench.user_modules import is_user_token, locate, make_importable
from attnbench.variants import MECHANISMS, mechanism_of

#: The reference row: the Bottleneck's plain 3x3 conv2, which the ``conv2`` rows replace.
REFERENCE = "conv3x3"
GIB = 2 ** 30
MIB = 2 ** 20


def card_rows() -> tuple[str, ...]:
    """Every row of the card: the reference conv, the paper's 15 factor sets, every mechanism token."""
    return (REFERENCE, *ALL_FACTORS, *MECHANISMS)


@dataclass(frozen=True)
class Preset:
    """Where a preset's ResNet-50 puts its mechanisms, as its configs build it.

    ``width`` is conv2's width in the first stage (conv2): a Bottleneck of stage ``s`` (conv2..conv5) is
    ``width * 2^(s - 2)`` wide inside (conv2's in and out, what a plugin after conv2 sees) and four times that
    at its output. The detector's ResNet has strides 8/16/32 at conv3/conv4/conv5 on its input padded to a
    multiple of 32 (mmdet's ``pad_size_divisor``); the segmentor's ResNetV1c-D8 keeps stride 8 from conv3 on
    (dilations 2 and 4 in conv4, conv5).
    """

    batch: int                     # images per step (per GPU at full scale)
    width: int
    det_input: tuple[int, int]     # the detector's padded input
    seg_input: tuple[int, int]     # the segmentor's crop
    classes: int                   # segmentation classes: the object regions of ``ocr``'s object context
    scaling_sides: tuple[int, ...]  # square maps of the growth fit, at conv4's width
    note: str


PRESETS: dict[str, Preset] = {
    "full": Preset(2, 64, (800, 1344), (512, 1024), 19, (16, 32, 64, 128),
                   "Faster R-CNN R-50-FPN at 800x1333 (padded to 800x1344), DeepLabV3 R-50-D8 on 512x1024 "
                   "Cityscapes crops; 2 images per GPU"),
    "mini": Preset(8, 8, (128, 128), (128, 128), 3, (8, 12, 16, 24, 32),
                   "the mini presets' ResNet-50 of width 8 on 128x128 mini-shapes images, batch 8"),
}


@dataclass(frozen=True)
class Shape:
    """One input of a module: ``(n, channels, height, width)``; ``regions`` object regions for ``ocr``."""

    preset: str
    part: str      # 'stage' (where the preset's models put modules) or 'scaling' (the growth fit's maps)
    label: str     # e.g. 'det conv3', 'seg conv5', '32x32'
    n: int
    channels: int
    height: int
    width: int
    regions: int
    task: str = ""
    stage: int = 0

    @property
    def tokens(self) -> int:
        return self.height * self.width

    @property
    def text(self) -> str:
        return f"{self.label} (N={self.n}, C={self.channels}, {self.height}x{self.width})"


def stage_shapes(preset: str) -> tuple[Shape, ...]:
    """The inputs of a module in conv3, conv4 and conv5 of the preset's detector and segmentor."""
    p = PRESETS[preset]
    shapes = []
    for task, (height, width) in (("det", p.det_input), ("seg", p.seg_input)):
        for stage in (3, 4, 5):
            stride = 2 ** stage if task == "det" else 8
            shapes.append(Shape(preset, "stage", f"{task} conv{stage}", p.batch, p.width * 2 ** (stage - 2),
                                height // stride, width // stride, p.classes, task, stage))
    return tuple(shapes)


def scaling_shapes(preset: str, sides: tuple[int, ...] | None = None) -> tuple[Shape, ...]:
    """Square maps of growing side at conv4's width: the growth fit's inputs."""
    p = PRESETS[preset]
    return tuple(Shape(preset, "scaling", f"{side}x{side}", p.batch, p.width * 4, side, side, p.classes)
                 for side in sorted(set(sides or p.scaling_sides)))


def summary_shape(preset: str) -> Shape:
    """The card's one-size summary: full, conv4 of the detector (50x84, the shape tools/list_modules.py uses);
    mini, conv4 of the segmentor (16x16, 256 tokens, the shape nearest the public benchmark's 196)."""
    label = "det conv4" if preset == "full" else "seg conv4"
    return next(s for s in stage_shapes(preset) if s.label == label)


def is_placed(token: str, shape: Shape) -> bool | None:
    """Whether the preset's model carries ``token`` at this stage (None for the growth maps)."""
    if shape.part != "stage":
        return None
    if token == REFERENCE:
        return True
    placement = mechanism_of(token).placement
    if placement == "head":  # OCR's object context runs once, on the stride-8 features of conv5 (width as conv5's)
        return shape.task == "seg" and shape.stage == 5
    if placement == "sequence":
        return False
    overrides = preset_variant(shape.preset, token).backbone_overrides()
    stages = overrides["plugins"][0]["stages"] if placement == "plugin" else overrides["stage_with_dcn"]
    return stages[shape.stage - 2]


def build_module(token: str, channels: int, preset: str = "full") -> nn.Module | None:
    """The module ``token`` adds at a place of ``channels`` channels, as the preset's configs build it (its
    table arguments, the preset's own parameters such as the mini presets' open gate); stride 1 for the
    ``conv2`` rows (the first block of conv3..conv5 strides its conv2 by 2); None for a translation-only
    token."""
    if token == REFERENCE:
        return nn.Conv2d(channels, channels, 3, padding=1, bias=False)
    mechanism = mechanism_of(token)
    if mechanism.placement == "sequence":
        return None
    if mechanism.placement == "head":
        return mechanism.module(channels)
    overrides = preset_variant(preset, token).backbone_overrides()
    if mechanism.placement == "conv2":
        kwargs = {k: v for k, v in overrides["dcn"].items() if k not in ("type", "fallback_on_stride")}
        return mechanism.module(channels, channels, 3, stride=1, padding=1, dilation=1, bias=False, **kwargs)
    (plugin,) = overrides["plugins"]
    return mechanism.module(channels, **{k: v for k, v in plugin["cfg"].items() if k != "type"})


def module_inputs(token: str, shape: Shape, device: str | torch.device = "cpu") -> list[torch.Tensor]:
    """Random inputs of ``shape`` that need gradients, as in a network: the feature map, and for ``ocr`` the
    soft object regions."""
    inputs = [torch.randn(shape.n, shape.channels, shape.height, shape.width, device=device)]
    if token != REFERENCE and mechanism_of(token).placement == "head":
        inputs.append(torch.randn(shape.n, shape.regions, shape.height, shape.width, device=device).softmax(1))
    return [x.requires_grad_() for x in inputs]


class TensorBytes(TorchDispatchMode):
    """Peak bytes of the tensor storages that operators create and that are alive at once, over the
    operators run inside it; storages that existed before (weights, inputs) are not counted. On fake tensors
    it estimates a pass's memory without allocating it; work buffers inside a kernel are not seen."""

    def __init__(self, existing: list[torch.Tensor] = ()):
        super().__init__()
        self.live = self.peak = 0
        self._sizes: dict[int, int] = {}
        self._existing = {t.untyped_storage()._cdata for t in existing}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for tensor in tree_flatten(out)[0]:
            if isinstance(tensor, torch.Tensor):
                storage = tensor.untyped_storage()
                key = storage._cdata
                if key in self._sizes or key in self._existing:
                    continue
                self._sizes[key] = storage.nbytes()
                self.live += storage.nbytes()
                self.peak = max(self.peak, self.live)
                weakref.finalize(storage, self._free, key)
        return out

    def _free(self, key: int) -> None:
        self.live -= self._sizes.pop(key)


@dataclass(frozen=True)
class Options:
    """How the card measures: device, timed passes per cell, the caps on a cell's memory and time."""

    device: str = "cpu"
    repeats: int = 5
    max_gib: float = 8.0
    max_seconds: float = 60.0
    threads: int = 1  # torch's intra-op CPU threads (the sweep's runs use 1)


def _tensor_bytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


@dataclass
class _Plan:
    """What the fake pass of a cell found."""

    params: int = 0
    analytic: float = math.nan
    counted: float = math.nan
    misses: str = ""
    estimate: float = math.nan      # bytes of the forward + backward above the inputs and weights
    held: int = 0                    # bytes of the weights, inputs and output gradient
    output_shape: tuple = ()
    error: str = ""


def plan_cell(token: str, shape: Shape, device: str = "cpu") -> _Plan:
    """The fake pass: parameters, analytic and counted MACs, the operators the counter misses, the
    estimated peak memory and the output's shape; nothing is allocated."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    plan = _Plan()
    try:
        with FakeTensorMode(), torch.device(device):  # built on the device: fake weights do not move
            module = build_module(token, shape.channels, shape.preset).train()
            inputs = module_inputs(token, shape, device)
            plan.params = sum(p.numel() for p in module.parameters())
            if token == REFERENCE:  # a 3x3 conv, C in and out, stride 1
                plan.analytic = float(shape.n * shape.tokens * shape.channels ** 2 * 9)
            elif (macs := module.macs(*inputs)) is not None:  # a user's module may have no macs(): counted only
                plan.analytic = float(macs)
            count = count_forward(module, *inputs)
            plan.counted = float(count.macs)
            plan.misses = "; ".join(op + (" (uncounted)" if op in count.uncounted else " (attnbench formula)")
                                    for op in count.torch_misses)
            tracker = TensorBytes([*module.parameters(), *module.buffers(), *inputs])
            with tracker:
                out = module(*inputs)
                grad = torch.empty_like(out)
                out.backward(grad)
            plan.estimate = float(tracker.peak)
            plan.output_shape = tuple(out.shape)
            plan.held = _tensor_bytes([*module.parameters(), *inputs, grad])
    except Exception as error:  # a module that cannot run on fake tensors is measured without an estimate
        plan.error = f"{type(error).__name__}: {str(error).splitlines()[0][:120] if str(error) else ''}"
    return plan


@contextlib.contextmanager
def _quiet_stderr():
    """The C++ profiler writes its start and stop lines straight to file descriptor 2: silence them."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _profiled_cpu_peak(step: Callable[[], None]) -> int:
    """Peak bytes held by torch's CPU allocator during ``step()`` above the level before it, from
    ``torch.profiler``'s allocation events (each carries the allocator's running total)."""
    from torch._C._profiler import _EventType
    from torch.profiler import ProfilerActivity, profile

    with _quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    events, stack = [], list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        event = stack.pop()
        stack.extend(event.children)
        if event.tag == _EventType.Allocation and event.extra_fields.device.type == "cpu":
            events.append(event)
    if not events:
        return 0
    events.sort(key=lambda e: e.start_time_ns)
    before = events[0].extra_fields.total_allocated - events[0].extra_fields.alloc_size
    return max(e.extra_fields.total_allocated for e in events) - before


def peak_memory(step: Callable[[], None], device: str) -> tuple[int, str]:
    """Peak bytes allocated by ``step()`` above those held before it, and how they were measured."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        step()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - before, "cuda max_memory_allocated"
    try:
        return _profiled_cpu_peak(step), "cpu allocator (torch.profiler)"
    except (ImportError, AttributeError):  # the profiler's event tree is not public API: count tensors instead
        tracker = TensorBytes()
        with tracker:
            step()
        return tracker.peak, "tensor storages (dispatch)"


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def measure_cell(token: str, shape: Shape, options: Options, plan: _Plan) -> dict:
    """Time and peak memory of forward + backward passes of the real module on random inputs."""
    torch.manual_seed(0)
    module = build_module(token, shape.channels, shape.preset).to(options.device).train()
    inputs = module_inputs(token, shape, options.device)
    with torch.no_grad():
        grad = torch.randn(plan.output_shape or tuple(module(*inputs).shape), device=options.device)

    def clear() -> None:
        for tensor in (*module.parameters(), *inputs):
            tensor.grad = None

    def step() -> None:
        module(*inputs).backward(grad)
        clear()  # inside the measured call: the gradients it made are freed where they were counted

    def timed() -> float:
        _sync(options.device)
        start = time.perf_counter()
        module(*inputs).backward(grad)
        _sync(options.device)
        seconds = time.perf_counter() - start
        clear()
        return seconds

    first = timed()  # warm-up
    if first > options.max_seconds:
        return dict(status=f"over time cap: one pass took {first:.3g} s", seconds=first, repeats=1)
    peak, measure = peak_memory(step, options.device)
    times = [timed() for _ in range(options.repeats)]
    return dict(status="ok", seconds=statistics.median(times), repeats=len(times), peak_bytes=float(peak),
                memory_measure=measure)


def _work(plan: _Plan) -> float:
    """What a cell's time is extrapolated by: its counted MACs, or its estimated bytes where they grow more."""
    return max(plan.counted if plan.counted == plan.counted else 0.0, 1.0)


def _predicted_seconds(plan: _Plan, done: list[tuple[_Plan, float]]) -> float | None:
    """The time of a cell extrapolated from the mechanism's largest measured cell: in proportion to MACs or
    to estimated bytes, whichever grows more."""
    if not done:
        return None
    ref, seconds = max(done, key=lambda d: (_work(d[0]), d[0].estimate))
    ratios = [_work(plan) / _work(ref)]
    if plan.estimate == plan.estimate and ref.estimate and ref.estimate == ref.estimate:
        ratios.append(plan.estimate / ref.estimate)
    return seconds * max(ratios)


def measure_mechanism(token: str, shapes: list[Shape], options: Options) -> list[dict]:
    """The card's cells of one row: every shape planned on fake tensors, then measured from the cheapest up,
    each guarded by the memory cap and by the time extrapolated from the cells measured before it."""
    mechanism = None if token == REFERENCE else mechanism_of(token)
    base = dict(mechanism=token, family="reference" if mechanism is None else mechanism.family,
                placement="conv2" if mechanism is None else mechanism.placement)
    rows = []
    if mechanism is not None and mechanism.placement == "sequence":
        for shape in shapes:
            rows.append(dict(**base, **_shape_fields(shape), placed=is_placed(token, shape),
                             status="n/a: translation only (a 1D module, no feature map)"))
        return rows
    plans = [(shape, plan_cell(token, shape, options.device)) for shape in shapes]
    done: list[tuple[_Plan, float]] = []
    results = {}
    for shape, plan in sorted(plans, key=lambda sp: (_work(sp[1]), sp[1].estimate if sp[1].estimate == sp[1].estimate
                                                                   else 0)):
        total = plan.estimate + plan.held
        predicted = _predicted_seconds(plan, done)
        if total == total and total > options.max_gib * GIB:
            result = dict(status=f"over memory cap: est. {total / GIB:.1f} GiB > {options.max_gib:g} GiB")
        elif predicted is not None and predicted > options.max_seconds:
            result = dict(status=f"over time cap: est. {predicted:.3g} s > {options.max_seconds:g} s")
        else:
            try:
                result = measure_cell(token, shape, options, plan)
            except (RuntimeError, MemoryError) as error:  # torch.OutOfMemoryError is a RuntimeError
                result = dict(status=f"error: {type(error).__name__}: {str(error).splitlines()[0][:100]}")
            if result.get("status") == "ok" or "seconds" in result:
                done.append((plan, result["seconds"]))
        results[shape] = result
    for shape, plan in plans:
        rows.append(dict(**base, **_shape_fields(shape), placed=is_placed(token, shape), params=plan.params,
                         macs_analytic=plan.analytic, macs_counted=plan.counted, counter_misses=plan.misses,
                         estimated_bytes=plan.estimate, **results[shape],
                         **({"plan_error": plan.error} if plan.error else {})))
    return rows


def _shape_fields(shape: Shape) -> dict:
    return dict(preset=shape.preset, part=shape.part, shape=shape.label, task=shape.task, stage=shape.stage,
                n=shape.n, channels=shape.channels, height=shape.height, width=shape.width, tokens=shape.tokens)


#: The card's columns, in order (a cell not measured leaves its measurements empty).
COLUMNS = ("mechanism", "family", "placement", "preset", "part", "shape", "task", "stage", "n", "channels", "height",
           "width", "tokens", "placed", "params", "macs_analytic", "macs_counted", "counter_misses", "estimated_bytes",
           "status", "seconds", "repeats", "peak_bytes", "memory_measure", "plan_error")


def fit_exponent(tokens, values) -> float:
    """The slope ``k`` of ``log(value) = k log(tokens) + c`` by least squares: ``value ~ tokens^k``."""
    x, y = np.log(np.asarray(tokens, dtype=float)), np.log(np.asarray(values, dtype=float))
    return float(np.polyfit(x, y, 1)[0])


#: Fewest sizes an exponent is fitted over.
MIN_FIT_SIZES = 4


def growth_table(cells: pd.DataFrame) -> pd.DataFrame:
    """Per row and preset, the exponents of time and peak memory against tokens over the square maps measured
    (empty where fewer than :data:`MIN_FIT_SIZES` were)."""
    rows = []
    scaling = cells[cells["part"] == "scaling"]
    for (token, preset), group in scaling.groupby(["mechanism", "preset"], sort=False):
        ok = group[group["status"] == "ok"]
        timed = ok[ok["seconds"] > 0]
        sized = ok[ok["peak_bytes"] > 0]
        rows.append(dict(
            mechanism=token, preset=preset, sizes_measured=len(ok), sizes=len(group),
            time_exponent=fit_exponent(timed["tokens"], timed["seconds"]) if len(timed) >= MIN_FIT_SIZES else math.nan,
            memory_exponent=(fit_exponent(sized["tokens"], sized["peak_bytes"]) if len(sized) >= MIN_FIT_SIZES
                             else math.nan),
            tokens=f"{group['tokens'].min()}-{group['tokens'].max()}"))
    return pd.DataFrame(rows, columns=["mechanism", "preset", "sizes_measured", "sizes", "time_exponent",
                                       "memory_exponent", "tokens"])


def environment(options: Options) -> dict:
    """Where the card was measured."""
    threads = torch.get_num_threads()
    if options.device.startswith("cuda"):
        where = torch.cuda.get_device_name(options.device)
    else:
        where = f"{_cpu_name()}, {threads} thread{'s' if threads != 1 else ''} of {os.cpu_count()} cores"
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else math.nan
    return dict(device=options.device, where=where, torch=torch.__version__, repeats=options.repeats,
                max_gib=options.max_gib, max_seconds=options.max_seconds, load=load,
                date=time.strftime("%Y-%m-%d", time.gmtime()))


def _cpu_name() -> str:
    try:
        found = re.search(r"^model name\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text(), re.MULTILINE)
        if found:
            return found.group(1).strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@dataclass
class Card:
    """A measured card: one row a cell, the growth fits, and where it was measured."""

    cells: pd.DataFrame
    growth: pd.DataFrame
    env: dict = field(default_factory=dict)


def run_card(tokens: tuple[str, ...], presets: tuple[str, ...], options: Options, sides: tuple[int, ...] | None = None,
             progress: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
             partial: Callable[[pd.DataFrame], None] | None = None) -> Card:
    """Measure ``tokens`` (rows of :func:`card_rows`, or a user's module by its import path, checked as the sweep
    checks it) at the stage shapes and square maps of ``presets``; ``progress`` gets a line per row, ``partial`` the
    cells measured so far after each row (a run cut short keeps them)."""
    unknown = [t for t in tokens if t not in card_rows() and not is_user_token(t)]
    if unknown:
        raise ValueError(f"unknown mechanisms {unknown}; the card's rows are {list(card_rows())} or your module's "
                         "import path MODULE.CLASS")
    for token in filter(is_user_token, tokens):
        make_importable(locate(token))
        check_contract(token, {})
    shapes = [s for preset in presets for s in (*stage_shapes(preset), *scaling_shapes(preset, sides))]
    threads = torch.get_num_threads()
    torch.set_num_threads(options.threads)
    try:
        cells, start = [], time.time()
        for i, token in enumerate(tokens, 1):
            t0 = time.time()
            rows = measure_mechanism(token, shapes, options)
            cells += rows
            marked = [r for r in rows if r["status"] != "ok"]
            progress(f"[{i}/{len(tokens)} {time.time() - start:5.0f} s] {token}: {len(rows) - len(marked)} cells in "
                     f"{time.time() - t0:.1f} s" + (f"; {len(marked)} marked: {marked[0]['status']}" if marked else ""))
            if partial is not None:
                partial(pd.DataFrame(cells).reindex(columns=COLUMNS))
        env = environment(options)
    finally:
        torch.set_num_threads(threads)
    table = pd.DataFrame(cells).reindex(columns=COLUMNS)
    return Card(table, growth_table(table), env)


# --- writing -------------------------------------------------------------------------------------------------

def _number(value: float, digits: int = 3) -> str:
    """``value`` to ``digits`` significant digits, without an exponent below a million."""
    if value != value:
        return ""
    if value == 0:
        return "0"
    decimals = max(digits - 1 - math.floor(math.log10(abs(value))), 0)
    return f"{value:,.{decimals}f}"


def _mark(row) -> str:
    """A cell's short mark where it was not measured (its status says why, in full)."""
    status = str(row["status"])
    if status == "ok":
        return ""
    for start, mark in (("n/a", "n/a"), ("over memory cap", "> mem cap"), ("over time cap", "> time cap")):
        if status.startswith(start):
            return mark
    return "error"


def _cell_text(row, column: str) -> str:
    mark = _mark(row)
    if column == "ms":
        return mark or _number(row["seconds"] * 1e3)
    if column == "MiB":
        return mark or _number(row["peak_bytes"] / MIB)
    if column == "MMACs":
        return "n/a" if mark == "n/a" else _number(row["macs_analytic"] / 1e6, 4)
    if column == "MMACs counted":
        return "n/a" if mark == "n/a" else _number(row["macs_counted"] / 1e6, 4)
    if column == "params":
        return "n/a" if mark == "n/a" else f"{int(row['params']):,}"
    raise ValueError(column)


def _markdown(header: list[str], rows: list[list[str]], right: int = 1) -> str:
    """A pipe table: the first ``right`` columns left-aligned, the rest right-aligned."""
    align = ["---"] * right + ["---:"] * (len(header) - right)
    return "\n".join("| " + " | ".join(cells) + " |" for cells in (header, align, *rows))


def summary_table(card: Card, preset: str) -> str:
    """One row a mechanism at the preset's :func:`summary_shape`, with its growth exponents."""
    shape = summary_shape(preset)
    cells = card.cells[(card.cells["preset"] == preset) & (card.cells["shape"] == shape.label)]
    growth = card.growth[card.growth["preset"] == preset].set_index("mechanism")
    rows = []
    for _, row in cells.iterrows():
        fit = growth.loc[row["mechanism"]] if row["mechanism"] in growth.index else None
        exponent = (lambda name: _number(fit[name], 2) if fit is not None and fit[name] == fit[name] else
                    ("n/a" if _mark(row) == "n/a" else ""))
        unplaced = " °" if row["placed"] is False or row["placed"] == "False" else ""
        rows.append([f"`{row['mechanism']}`{unplaced}", row["family"], row["placement"], _cell_text(row, "params"),
                     _cell_text(row, "MMACs"), _cell_text(row, "MMACs counted"), _cell_text(row, "ms"),
                     _cell_text(row, "MiB"), exponent("time_exponent"), exponent("memory_exponent")])
    return _markdown(["mechanism", "family", "placement", "params", "MMACs", "MMACs counted", "fwd+bwd ms",
                      "peak MiB", "time exp.", "memory exp."], rows, right=3)


def shape_table(card: Card, preset: str, column: str, part: str = "stage") -> str:
    """One row a mechanism, one column a shape of ``part``: ``column`` (ms, MiB, MMACs, MMACs counted, params)."""
    cells = card.cells[(card.cells["preset"] == preset) & (card.cells["part"] == part)]
    labels = list(dict.fromkeys(cells["shape"]))
    rows = []
    for token, group in cells.groupby("mechanism", sort=False):
        by_shape = {row["shape"]: row for _, row in group.iterrows()}
        rows.append([f"`{token}`", *(_cell_text(by_shape[label], column) + ("" if part != "stage" or
                     by_shape[label]["placed"] in (True, None) or _mark(by_shape[label]) == "n/a" else " °")
                     for label in labels)])
    return _markdown(["mechanism", *labels], rows)


def misses_table(card: Card) -> str:
    """The operators of matrix work torch's counter has no formula for, and the rows that ran them."""
    found: dict[str, list[str]] = {}
    for _, row in card.cells.iterrows():
        for op in filter(None, str(row["counter_misses"] if row["counter_misses"] == row["counter_misses"] else "")
                         .split("; ")):
            found.setdefault(op, [])
            if row["mechanism"] not in found[op]:
                found[op].append(row["mechanism"])
    if not found:
        return "torch's counter had a formula for every operator of matrix work these rows ran."
    return _markdown(["operator (torch's counter has no formula)", "rows"],
                     [[f"`{op}`", ", ".join(f"`{t}`" for t in tokens)] for op, tokens in found.items()], right=2)


def differences(card: Card) -> str:
    """Where the counted MACs differ from the analytic ones."""
    cells = card.cells[card.cells["macs_analytic"].notna() & card.cells["macs_counted"].notna()]
    differ = cells[cells["macs_analytic"] != cells["macs_counted"]]
    if differ.empty:
        return f"The counted MACs equal the analytic ones in every cell ({len(cells)})."
    worst = differ.assign(ratio=differ["macs_counted"] / differ["macs_analytic"])
    lines = [f"The counted MACs differ from the analytic ones in {len(differ)} of {len(cells)} cells:"]
    for token, group in worst.groupby("mechanism", sort=False):
        lines.append(f"- `{token}`: counted / analytic {group['ratio'].min():.4g} to {group['ratio'].max():.4g}")
    return "\n".join(lines)


def render_markdown(card: Card, command: str = "") -> str:
    env = card.env
    presets = list(dict.fromkeys(card.cells["preset"]))
    lines = ["# Cost card", "",
             f"`{command}`" if command else "",
             "",
             f"Measured {env.get('date', '')} on {env.get('device', '')} ({env.get('where', '')}), torch "
             f"{env.get('torch', '')}, load average {_number(env.get('load', math.nan), 2)} at the start; forward + "
             f"backward of one module in training mode, median of {env.get('repeats', '')} passes after a warm-up; "
             f"peak memory of one pass ({', '.join(sorted(set(card.cells['memory_measure'].dropna())))}), above "
             f"the input and the weights. Caps: {env.get('max_gib', '')} GiB estimated, {env.get('max_seconds', '')} "
             "s extrapolated per pass. MACs of one forward pass: `MMACs` its `macs()`, `MMACs counted` "
             "torch.utils.flop_counter's (attnbench.flops.count_forward). Time and memory exponents: `k` of "
             "`~ tokens^k` over the square maps (least squares on log-log axes). ° marks a stage the preset's "
             "models do not put the row in (measured all the same). Columns: docs/mechanisms.md#cost-card.", ""]
    for preset in presets:
        shape = summary_shape(preset)
        scaling = card.cells[(card.cells["preset"] == preset) & (card.cells["part"] == "scaling")]
        sides = ", ".join(dict.fromkeys(scaling["shape"]))
        lines += [f"## {preset}: {PRESETS[preset].note}", "",
                  f"### Summary at {shape.text}, {shape.tokens} tokens", "",
                  f"<!-- cost card summary: {preset} -->", summary_table(card, preset),
                  "<!-- end cost card summary -->",
                  "", f"Exponents over the square maps {sides} at N={PRESETS[preset].batch}, "
                  f"C={PRESETS[preset].width * 4}.", ""]
        stage = card.cells[(card.cells["preset"] == preset) & (card.cells["part"] == "stage")]
        shapes = ", ".join(f"{s.label}: C={s.channels}, {s.height}x{s.width}" for s in stage_shapes(preset)
                           if s.label in set(stage["shape"]))
        for title, column in (("forward + backward, ms", "ms"), ("peak memory, MiB", "MiB"),
                              ("MMACs, analytic (`macs()`)", "MMACs"), ("MMACs, counted", "MMACs counted"),
                              ("parameters", "params")):
            lines += [f"### {title}: stage shapes", "", f"N={PRESETS[preset].batch}; {shapes}.", "",
                      shape_table(card, preset, column), ""]
        for title, column in (("forward + backward, ms", "ms"), ("peak memory, MiB", "MiB")):
            lines += [f"### {title}: square maps (C={PRESETS[preset].width * 4})", "",
                      shape_table(card, preset, column, "scaling"), ""]
    lines += ["## What the counter misses", "", misses_table(card), "", differences(card), ""]
    marked = card.cells[~card.cells["status"].isin(["ok"]) & ~card.cells["status"].str.startswith("n/a")]
    if not marked.empty:
        lines += ["## Cells not measured", "", _markdown(["mechanism", "shape", "status"], right=3, rows=[
            [f"`{r['mechanism']}`", f"{r['preset']} {r['shape']}", r["status"]] for _, r in marked.iterrows()]), ""]
    return "\n".join(lines)


def plot_scaling(card: Card, path: Path) -> list[Path]:
    """Time against tokens on log-log axes, one line per row, one panel per preset: ``path`` as PNG and SVG."""
    import matplotlib
    from matplotlib.figure import Figure  # no pyplot: no backend or window

    presets = list(dict.fromkeys(card.cells["preset"]))
    scaling = card.cells[(card.cells["part"] == "scaling") & (card.cells["status"] == "ok")]
    tokens = list(dict.fromkeys(card.cells["mechanism"]))
    colours = [matplotlib.colormaps["tab20"](i % 20) for i in range(len(tokens))]
    styles = {"reference": "-", "generalized attention (study)": "-", "spatial attention (study)": "--",
              "channel": "-.", "mixed": ":", "self-attention": (0, (5, 1, 1, 1)), "category": (0, (1, 2))}
    fig = Figure(figsize=(7 * len(presets) + 2.2, 7.5))
    axes = fig.subplots(1, len(presets), squeeze=False)[0]
    growth = card.growth.set_index(["mechanism", "preset"])
    for ax, preset in zip(axes, presets):
        for token, colour in zip(tokens, colours):
            points = scaling[(scaling["mechanism"] == token) & (scaling["preset"] == preset)].sort_values("tokens")
            if points.empty:
                continue
            family = points["family"].iloc[0]
            exponent = growth["time_exponent"].get((token, preset), math.nan)
            label = f"{token} (k={exponent:.2f})" if exponent == exponent else token
            ax.plot(points["tokens"], points["seconds"] * 1e3, marker="o", ms=3, color="black" if
                    token == REFERENCE else colour, lw=2 if token == REFERENCE else 1.2,
                    linestyle=styles.get(family, "-"), label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("tokens (H x W of a square map)")
        ax.set_ylabel("forward + backward, ms")
        ax.set_title(f"{preset}: N={PRESETS[preset].batch}, C={PRESETS[preset].width * 4}, "
                     f"{card.env.get('device', '')}", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    right = 1 - 2.2 / fig.get_figwidth()  # 2.2 inches of legend on the right
    fig.subplots_adjust(left=0.08, right=right, bottom=0.08, top=0.94, wspace=0.25)
    fig.legend(handles, labels, loc="center left", bbox_to_anchor=(right + 0.01, 0.5), fontsize=7, frameon=False)
    written = []
    with matplotlib.rc_context({"svg.hashsalt": "attnbench"}):  # the SVG's ids fixed and no date
        for suffix in (".png", ".svg"):
            target = path.with_suffix(suffix)
            fig.savefig(target, dpi=120, metadata={"Date": None} if suffix == ".svg" else None)
            written.append(target)
    return written


def write_card(card: Card, out: Path, command: str = "") -> list[Path]:
    """card.csv (the cells), growth.csv (the exponents), card.md and scaling.png/.svg under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    card.cells.to_csv(out / "card.csv", index=False)
    card.growth.to_csv(out / "growth.csv", index=False)
    (out / "card.md").write_text(render_markdown(card, command))
    return [out / "card.csv", out / "growth.csv", out / "card.md", *plot_scaling(card, out / "scaling")]
