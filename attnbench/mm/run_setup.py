"""What runs before mmengine's Runner, shared by ``tools/train.py``, ``tools/test.py`` and the sweep:
config loading and checks, the run protocol, the config formatting cache, the checkpoint allow-list
and CPU distributed set-up."""
from __future__ import annotations

import functools
import os
import os.path as osp
import platform
import re
from contextlib import contextmanager

import torch
from mmengine.config import Config

from attnbench.config_files import missing_data


def load_config(path: str, work_dir: str | None = None, cfg_options: dict | None = None,
                launcher: str = "none", check_data: bool = True) -> Config:
    """Read a config, apply ``--cfg-options`` overrides, fix its launcher and work_dir (default
    ``work_dirs/<config name>``) and check it (:func:`check_config`)."""
    if not osp.isfile(path):
        raise FileNotFoundError(f"config file not found: {path}")
    cfg = Config.fromfile(path)
    cfg.launcher = launcher
    if cfg_options:
        cfg.merge_from_dict(cfg_options)
    cfg.work_dir = work_dir or cfg.get("work_dir") or osp.join(
        "work_dirs", osp.splitext(osp.basename(path))[0])
    check_config(cfg, check_data)
    return cfg


def generating_dataset(dataset_type):
    """The class of a dataset type that writes its own ``data_root`` on first use (it has
    ``generate_data(data_root, generate)``: the mini-shapes and mini-corpus datasets), so there is no
    data to check for; None for other types."""
    from mmengine.registry import DATASETS

    from . import datasets, nmt  # noqa: F401  registers attnbench's datasets

    try:
        cls = DATASETS.get(dataset_type) if isinstance(dataset_type, str) else dataset_type
    except KeyError:  # a scope whose package is not installed: nothing generates that data
        cls = None
    return cls if hasattr(cls, "generate_data") else None


def check_config(cfg: Config, check_data: bool = True) -> None:
    """Fail early, with one clear message, on configs OpenMMLab would reject obscurely or late."""
    backbone = cfg.get("model", {}).get("backbone", {})
    if (backbone.get("plugins") or backbone.get("dcn")) and backbone.get("depth") in (18, 34):
        raise ValueError(
            f"model.backbone: ResNet-{backbone['depth']} is built of BasicBlocks, which take no plugins or DCN; "
            "attention plugins and deformable conv2 need Bottleneck blocks (depth 50, 101 or 152)")
    for split, dataset in (missing_data(cfg) if check_data else []):
        if not generating_dataset(dataset.get("type")):
            raise FileNotFoundError(
                f"{split}.dataset.data_root {dataset['data_root']!r} does not exist: put the "
                f"{dataset.get('type', 'dataset')} data there, or point data_root at it (--cfg-options)")


def generate_missing_data(cfg: Config) -> None:
    """Generate now each missing ``data_root`` that the config's datasets would write on first use.

    The sweep calls it before its runs, so that the first runs on a fresh checkout do not count the
    data's generation as their own time (nor wait on each other's, one generating, others locked out).
    """
    for _, dataset in missing_data(cfg):
        if cls := generating_dataset(dataset.get("type")):
            cls.generate_data(dataset["data_root"], dataset.get("generate"))


def apply_run_protocol(cfg: Config) -> dict:
    """Fix what, besides the config, seed, code and stack, decides a run's numbers; return it.

    CPU results depend on the number of intra-op threads (reductions are split differently), so a
    config fixes it with ``cpu_threads`` (the mini presets: 1), whichever entry point starts the run
    (``tools/train.py``, ``tools/test.py`` or the sweep) and however many runs share the machine.
    Deterministic algorithms are requested where torch has them (``warn_only``: an op without one
    warns instead of failing, as several CUDA ops of mmdet would). Returns the protocol the results
    store records: ``threads``, ``device``, ``torch_version``, ``mmcv_version``, and the ``cpu``
    (:func:`cpu_model`), which the float kernels also depend on.
    """
    import mmcv

    if cfg.get("cpu_threads") is not None:
        torch.set_num_threads(int(cfg.cpu_threads))
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS (CUDA >= 10.2)
    torch.use_deterministic_algorithms(True, warn_only=True)
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    return dict(threads=torch.get_num_threads(), device=device, torch_version=torch.__version__,
                mmcv_version=mmcv.__version__, cpu=cpu_model())


def cpu_model() -> str:
    """The CPU a run computes on, as its float kernels see it: vendor, family/model/stepping (Linux's
    ``/proc/cpuinfo``; the platform's processor string elsewhere) and the vector instructions torch
    dispatches to, e.g. ``GenuineIntel 6/207/2 AVX512``.

    oneDNN and MKL choose their kernels, and so the order of each sum, by instruction set and cache
    sizes: one config and seed train to other numbers on another CPU model (docs/sweep.md).
    """
    fields = {}
    if osp.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as f:
            first_processor = f.read().split("\n\n")[0]
        fields = dict(re.findall(r"^([^:\n]*?)\s*:[ \t]*(.*)$", first_processor, re.MULTILINE))
    ids = "/".join(fields.get(key, "?") for key in ("cpu family", "model", "stepping"))
    name = f"{fields['vendor_id']} {ids}" if "vendor_id" in fields else platform.processor() or platform.machine()
    return f"{name} {torch.backends.cpu.get_cpu_capability()}"


def format_configs_once() -> None:
    """Let mmengine format each config text with yapf once per process, not at every use.

    ``Config.pretty_text`` runs yapf's ``FormatCode`` on the same text five times a run (the log,
    the dumped config, the local visualizer's config, the message hub's meta before the run, every
    checkpoint's meta), 0.1-0.5 s each on a mini config. ``FormatCode`` is a pure function of its
    arguments, so its cached result is the text it would return.
    """
    import mmengine.config.config as config_module

    if not getattr(config_module.FormatCode, "formats_once", False):
        config_module.FormatCode = _memoised(config_module.FormatCode)


def _memoised(format_code):
    results = {}

    @functools.wraps(format_code)
    def format_once(source: str, **options):
        key = (source, repr(sorted(options.items())))  # options hold a dict (the style): not hashable
        if key not in results:
            results[key] = format_code(source, **options)
        return results[key]
    format_once.formats_once = True
    return format_once


def checkpoint_safe_globals() -> list:
    """What mmengine 0.10.7 pickles into its checkpoints besides tensors.

    mmengine calls ``torch.load`` without ``weights_only``; since torch 2.6 that means
    ``weights_only=True``, which refuses the message hub's ``HistoryBuffer`` (numpy arrays and
    scalars inside), so resuming a run fails. These are the globals its checkpoints contain
    (found with ``torch.serialization.get_unsafe_globals_in_checkpoint``); ``getattr`` is how
    numpy's scalar types are pickled.
    """
    import numpy as np
    from mmengine.logging.history_buffer import HistoryBuffer

    numpy_dtypes = [type(np.dtype(t)) for t in (np.float64, np.float32, np.float16, np.int64, np.int32, np.bool_)]
    return [HistoryBuffer, np.ndarray, np.dtype, np._core.multiarray.scalar, np._core.multiarray._reconstruct,
            getattr, *numpy_dtypes]


@contextmanager
def resumable_checkpoints():
    """Within this block torch.load (weights_only) accepts mmengine's own checkpoints."""
    with torch.serialization.safe_globals(checkpoint_safe_globals()):
        yield


@contextmanager
def closing_process_group():
    """Destroy the process group of a distributed run at the end of this block.

    Left to process exit, gloo's threads can abort a rank ("terminate called without an active
    exception", exit code -6) after the run itself has finished; the barrier keeps one rank from
    tearing down while another still talks to it.
    """
    import torch.distributed as dist

    yield
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def setup_cpu_distributed(cfg: Config) -> None:
    """Make ``--launcher pytorch`` work on CPU-only machines (gloo).

    mmengine 0.10.7 always calls ``torch.cuda.set_device`` when it initialises the process group
    and wraps the model with ``device_ids=[local rank]``, which CPU modules refuse. Without CUDA this
    initialises the gloo process group from torchrun's environment first (mmengine then skips its
    own initialisation) and wraps the model with ``device_ids=None``.
    """
    import torch.distributed as dist

    if cfg.launcher != "pytorch" or torch.cuda.is_available():
        return
    if not dist.is_initialized():
        dist.init_process_group("gloo", rank=int(os.environ["RANK"]), world_size=int(os.environ["WORLD_SIZE"]))
    cfg.model_wrapper_cfg = dict(type="MMDistributedDataParallel", device_ids=None, broadcast_buffers=False,
                                 find_unused_parameters=cfg.get("find_unused_parameters", False))


def add_config_args(parser) -> None:
    """The arguments ``tools/train.py`` and ``tools/test.py`` share (OpenMMLab's conventions)."""
    from mmengine.config import DictAction

    parser.add_argument("config", help="config file path")
    parser.add_argument("--work-dir", help="where logs and checkpoints go (default: work_dirs/<config name>)")
    parser.add_argument("--cfg-options", nargs="+", action=DictAction, help="override config keys: key=value")
    parser.add_argument("--launcher", choices=["none", "pytorch", "slurm", "mpi"], default="none")
    parser.add_argument("--local_rank", "--local-rank", type=int, default=0)


def config_from_args(args) -> Config:
    """The config of :func:`add_config_args`' arguments, ready for ``Runner.from_cfg``."""
    os.environ.setdefault("LOCAL_RANK", str(args.local_rank))
    cfg = load_config(args.config, args.work_dir, args.cfg_options, args.launcher)
    apply_run_protocol(cfg)
    format_configs_once()
    setup_cpu_distributed(cfg)
    return cfg
