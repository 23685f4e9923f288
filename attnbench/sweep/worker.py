"""Train, evaluate and count one run, each in a process of its own.

    python -m attnbench.sweep.worker RUN_JSON RESULT_JSON    # one run (Slurm, submitit)
    python -m attnbench.sweep.worker --serve                 # a fork server (the local launcher)
    python -m attnbench.sweep.worker --exec COMMAND ...      # COMMAND (torchrun's), ending with its parent
    torchrun --standalone --nproc_per_node N -m attnbench.sweep.worker RUN_JSON RESULT_JSON   # on N ranks
    srun -n N python -m attnbench.sweep.worker RUN_JSON RESULT_JSON                          # the same

A run on N processes (torchrun's ranks, or the tasks of a Slurm job step: :func:`distributed_world`
gives both one form) trains with mmengine's ``pytorch`` launcher (gloo on CPUs, NCCL on GPUs); the
total batch is N times the config's per-process batch, and the learning rate follows mmengine's
``auto_scale_lr`` from the config's ``base_batch_size`` (the per-process batch where it states none).
Rank 0 alone writes the result.

Writes the result row (status ``ok`` or ``failed`` with the error) to RESULT_JSON. A process per run
keeps runs independent (mmengine's W&B backend mutates the config it is given) and makes the peak
resident memory a per-run number. The fork server imports what every run imports (torch, mmengine,
mmdet, mmseg, attnbench's plugins: about 5 s of a mini run on a busy 2-core machine) once, then forks
a process per run it is sent, so that a sweep's runs spend their own time training, not importing
(on CPUs: attnbench.sweep.launch starts a fresh interpreter per run where CUDA is visible).
"""
from __future__ import annotations

import atexit
import gc
import json
import math
import os
import resource
import sys
import time
import traceback
import uuid
from datetime import datetime, timezone


def _peak_memory_mb() -> float:
    import torch

    if torch.cuda.is_available():
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def utc_now() -> str:
    """The time now, UTC, ISO 8601 to the second: the store's ``started_at`` and ``finished_at``."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _cost(row: dict, run_seconds: float, attempt_train_seconds: float | None) -> dict:
    """``run_seconds``, this attempt's wall time in the worker (imports and set-up, FLOPs count, training,
    validation, logging), and ``outside_seconds``, the part of it not spent in training steps: ``run_seconds -
    (attempt_train_seconds - val_seconds)``, where ``attempt_train_seconds`` is this attempt's share of the
    run's ``train_seconds`` (a resumed run's spans its attempts); none for a run that did not finish."""
    cost = {"run_seconds": round(run_seconds, 1)}
    if attempt_train_seconds is not None:
        cost["outside_seconds"] = round(run_seconds - attempt_train_seconds + row["val_seconds"], 1)
    return cost


def _output_path() -> str:
    """The file this process's standard output goes to (a scheduler's log), or ``"stdout"``."""
    try:
        return os.readlink("/proc/self/fd/1")
    except OSError:
        return "stdout"


def distributed_world() -> tuple[int, int]:
    """``(rank, world size)`` of this process's run. Under ``srun`` with several tasks and no torchrun,
    Slurm's variables are translated into torchrun's (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
    ``MASTER_ADDR``: the job's first node, ``MASTER_PORT``: from the job id), so that one path serves both."""
    tasks = int(os.environ.get("SLURM_NTASKS", os.environ.get("SLURM_NPROCS", "1")))
    if "WORLD_SIZE" not in os.environ and tasks > 1 and "SLURM_PROCID" in os.environ:
        import subprocess

        nodes = os.environ.get("SLURM_STEP_NODELIST") or os.environ.get("SLURM_JOB_NODELIST", "localhost")
        try:
            hosts = subprocess.run(["scontrol", "show", "hostnames", nodes], capture_output=True,
                                   text=True).stdout.split()
        except OSError:  # no scontrol here: a one-node list is its own host name
            hosts = []
        job = int(os.environ.get("SLURM_ARRAY_JOB_ID", os.environ.get("SLURM_JOB_ID", "0")))
        task = int(os.environ.get("SLURM_ARRAY_TASK_ID", "0"))
        os.environ.update(RANK=os.environ["SLURM_PROCID"], WORLD_SIZE=str(tasks),
                          LOCAL_RANK=os.environ.get("SLURM_LOCALID", "0"), MASTER_ADDR=(hosts or [nodes])[0],
                          MASTER_PORT=os.environ.get("MASTER_PORT", str(20000 + (job * 101 + task) % 20000)))
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


def scale_learning_rate(cfg, config_file: str) -> None:
    """mmengine's ``auto_scale_lr`` for a run on several processes: the learning rate times the total batch
    over ``base_batch_size``: the config's, else the per-process batch its file gives (before any
    ``--cfg-options``), so that the config trained on one process is the reference."""
    from mmengine.config import Config

    base = (cfg.get("auto_scale_lr") or {}).get("base_batch_size") or \
        Config.fromfile(config_file).train_dataloader.batch_size
    cfg.auto_scale_lr = dict(enable=True, base_batch_size=base)


def _wandb_backend(run: dict, wandb_id: str) -> dict:
    wandb = run["wandb"]
    return dict(type="attnbench.WandbVisBackend", save_dir=os.path.join(run["work_dir"], "wandb"), init_kwargs=dict(
        project=wandb["project"], group=wandb["group"], name=run["run_id"], id=wandb_id, job_type=run["task"],
        mode=wandb["mode"], tags=[run["task"], run["preset"], run["variant"]]))


def execute(run: dict) -> tuple[dict, float]:
    """Run one training + evaluation; return the measured part of its result row, and this attempt's share
    of its ``train_seconds`` (which spans every attempt of a resumed run)."""
    import torch
    from mmengine.runner import Runner

    from attnbench.data.l10n_corpus import corpus_of
    from attnbench.mm.attention_mass import AttentionMassHook
    from attnbench.mm.hooks import OpeningHook, RunSummaryHook, unwrapped_model
    from attnbench.mm.run_setup import (apply_run_protocol, closing_process_group, format_configs_once, load_config,
                                        resumable_checkpoints, setup_cpu_distributed)

    from .tasks import TranslationTask, task_of

    task = task_of(run["task"], run["config"])
    _, world_size = distributed_world()
    cfg = load_config(run["config"], run["work_dir"], run["cfg_options"], "pytorch" if world_size > 1 else "none")
    if world_size > 1:
        scale_learning_rate(cfg, run["config"])
        cfg.find_unused_parameters = True  # a variant's switched-off terms leave parameters without gradients
        setup_cpu_distributed(cfg)
    cfg.randomness = dict(cfg.get("randomness") or {}, seed=run["seed"])  # as --cfg-options randomness.seed=S
    protocol = apply_run_protocol(cfg)
    format_configs_once()
    # the run's identity travels in the config: in the dumped config and W&B's config table
    # and the row it trains as fields W&B filters and groups on (E1..E4, each token, each parameter, the
    # preset's included: Variant.fields)
    cfg.attnbench_run = {k: run[k] for k in ("run_id", "task", "preset", "slot", "variant", "params", "seed")} | \
        task.variant(run["preset"], run["variant"]).fields
    cfg.custom_hooks = [*cfg.get("custom_hooks", []), dict(type="attnbench.StopOnInvalidLossHook")]
    cfg.resume = os.path.exists(os.path.join(run["work_dir"], "last_checkpoint"))  # a killed run goes on
    wandb_id = None
    if run.get("wandb"):  # a fresh W&B id, recorded in the row: the store leads to the run's W&B page
        wandb_id = uuid.uuid4().hex[:12]
        visualizer = cfg.get("visualizer") or dict(type="Visualizer", vis_backends=[dict(type="LocalVisBackend")])
        visualizer["vis_backends"] = [*visualizer.get("vis_backends", []), _wandb_backend(run, wandb_id)]
        cfg.visualizer = visualizer
    runner = Runner.from_cfg(cfg)
    model = unwrapped_model(runner)
    with torch.random.fork_rng(devices=[]):  # counting draws inputs: leave training's random stream alone
        counts = task.count(model, run["preset"])  # FLOPs do not depend on the weights: count first
    recorder = RunSummaryHook(extra=counts)
    opening = OpeningHook(summary=recorder.extra)  # its values reach the W&B summary and the row
    mass = [AttentionMassHook(summary=recorder.extra)] if task.rule else []  # diagnostic tasks: where attention looks
    for hook in (recorder, opening, *mass):
        runner.register_hook(hook, priority=hook.priority)
    with resumable_checkpoints(), closing_process_group():
        runner.train()  # ends with a validation of the final weights
    if task.metric not in recorder.metrics:
        raise KeyError(f"validation reported {sorted(recorder.metrics)}, not {task.metric!r}")
    value = float(recorder.metrics[task.metric])
    if not math.isfinite(value):
        raise FloatingPointError(f"{task.metric} is {value}: the run diverged")
    row = dict(metric=task.metric, value=value, gate_start=task.gate_start(run["preset"], run["variant"]),
               train_seconds=recorder.train_seconds,
               val_seconds=round(recorder.val_seconds, 1),
               peak_memory_mb=round(_peak_memory_mb(), 1), world_size=world_size, train_iters=runner.iter,
               **protocol, **recorder.extra)
    if wandb_id:
        row["wandb_id"] = wandb_id
    for column, key in (("value_class_agnostic", task.class_agnostic_metric), ("value_context", task.context_metric),
                        ("value_chrf", task.chrf_metric)):
        if key:
            row[column] = float(recorder.metrics[key])
    if run["preset"] in task.heldout:  # the config's test split is the held-out one
        metrics = runner.test()
        row |= dict(heldout_bleu=float(metrics[task.metric]), heldout_chrf=float(metrics[task.chrf_metric]))
    if isinstance(task, TranslationTask):
        row["corpus"] = corpus_of(cfg.train_dataloader.dataset.get("data_root", ""))
    return row, recorder.train_seconds - recorder.earlier_seconds


def work(run_path: str, result_path: str) -> int:
    """Execute the run of ``run_path``, write its row to ``result_path`` (rank 0 of a distributed run) and,
    where the spec names a store (``record``: the Slurm launcher's jobs), record it there; the exit code (0: ok)."""
    import attnbench

    started, clock = utc_now(), time.perf_counter()
    rank, _ = distributed_world()
    print(f"attnbench {attnbench.__version__} from {os.path.dirname(attnbench.__file__)}", flush=True)
    with open(run_path) as f:
        run = json.load(f)
    try:
        row, attempt_seconds = execute(run)
        row, code = row | {"status": "ok"}, 0
    except Exception as e:  # recorded in the results store; the sweep goes on
        traceback.print_exc()
        row, code, attempt_seconds = {"status": "failed", "error": f"{type(e).__name__}: {e}"[:500]}, 1, None
    row |= _cost(row, time.perf_counter() - clock, attempt_seconds) | {"started_at": started, "finished_at": utc_now()}
    if code and "SLURM_JOB_ID" in os.environ:  # where to look: the job and the file this process writes to
        row["error"] += f" (Slurm job {os.environ['SLURM_JOB_ID']}, log {_output_path()})"
    if rank == 0:
        with open(result_path, "w") as f:
            json.dump(row, f)
        if run.get("record"):  # the job records its own row: a sweep submitted with --no-wait need not be there
            from .store import ResultsStore

            ResultsStore(run["record"]["store"]).record(run["record"]["row"] | row)
    return code


#: What every run imports, imported once by the fork server: the registries' locations included, which
#: mmengine would otherwise import in each run as it builds the first module of a scope.
PRELOAD = ("torch", "mmengine.runner", "attnbench.mm", "attnbench.flops", "attnbench.sweep.tasks",
           "mmdet.datasets", "mmdet.engine", "mmdet.evaluation", "mmdet.models",
           "mmdet.visualization", "mmseg.datasets", "mmseg.engine", "mmseg.evaluation", "mmseg.models",
           "mmseg.visualization", "wandb")


def die_with_parent() -> None:
    """Have Linux kill this process when the thread that started it ends (``PR_SET_PDEATHSIG``; nothing on other
    systems): a run's processes end with the sweep that started them, so a sweep killed with SIGKILL leaves no run
    training beside the next sweep that takes the run up."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG


def _fork_run(request: dict) -> int:
    """Fork a process that runs ``request`` (``run``, ``result``, ``log``, ``threads``); its exit code."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    code = 1
    try:  # the run's process: its output to its log, the threads its config fixes, nothing of the server's stdin
        die_with_parent()
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        for fd in (1, 2):
            os.dup2(log, fd)
        os.close(log)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        import torch

        os.environ["OMP_NUM_THREADS"] = str(request["threads"])
        torch.set_num_threads(request["threads"])
        code = work(request["run"], request["result"])
    except BaseException:
        traceback.print_exc()
    finally:  # as the process of one run ends (its exit handlers, W&B's among them), never the server's loop
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def serve() -> None:
    """The fork server: import :data:`PRELOAD`, then for each request read from stdin (a JSON line), run
    it in a forked process and answer its exit code on a line of stdout; end at the end of stdin.

    The server itself runs no tensor operation, so no thread pool (OpenMP's is not fork-safe) exists
    when it forks; each run's process starts its own, of the size its request says."""
    import importlib

    from attnbench.mm.run_setup import format_configs_once

    for module in PRELOAD:
        importlib.import_module(module)
    format_configs_once()
    gc.freeze()  # what the imports made is permanent: a run's gc.collect (mmengine's datasets') skips it
    print("ready", flush=True)
    for line in sys.stdin:
        print(_fork_run(json.loads(line)), flush=True)


def main() -> None:
    die_with_parent()
    if sys.argv[1:2] == ["--exec"]:  # the signal stays set through exec
        os.execvp(sys.argv[2], sys.argv[2:])
    if sys.argv[1:] == ["--serve"]:
        serve()
    else:
        sys.exit(work(*sys.argv[1:3]))


if __name__ == "__main__":
    main()
