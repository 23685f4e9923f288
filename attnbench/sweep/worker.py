"""Train, evaluate and count one run; called in its own process by the sweep.

    python -m attnbench.sweep.worker RUN_JSON RESULT_JSON

Writes the result row (status ``ok`` or ``failed`` with the error) to RESULT_JSON. A fresh process
per run keeps runs independent (mmengine's W&B backend mutates the config it is given) and makes
the peak resident memory a per-run number.
"""
from __future__ import annotations

import json
import math
import os
import resource
import sys
import time
import traceback
from datetime import datetime, timezone


def _peak_memory_mb() -> float:
    import torch

    if torch.cuda.is_available():
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def utc_now() -> str:
    """The time now, UTC, ISO 8601 to the second: the store's ``started_at`` and ``finished_at``."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _cost(row: dict, run_seconds: float) -> dict:
    """``run_seconds``, the worker's wall time (imports and set-up, FLOPs count, training, validation,
    logging), and ``outside_seconds``, the part not spent in training steps: ``run_seconds -
    (train_seconds - val_seconds)`` (a resumed run's train_seconds spans its attempts, this attempt's
    run_seconds not)."""
    cost = {"run_seconds": round(run_seconds, 1)}
    if "train_seconds" in row:
        cost["outside_seconds"] = round(run_seconds - row["train_seconds"] + row["val_seconds"], 1)
    return cost


def _wandb_backend(run: dict) -> dict:
    wandb = run["wandb"]
    return dict(type="attnbench.WandbVisBackend", save_dir=os.path.join(run["work_dir"], "wandb"), init_kwargs=dict(
        project=wandb["project"], group=wandb["group"], name=run["run_id"], job_type=run["task"],
        mode=wandb["mode"], tags=[run["task"], run["preset"], run["variant"]]))


def execute(run: dict) -> dict:
    """Run one training + evaluation; return the measured part of its result row."""
    import torch
    from mmengine.runner import Runner

    from attnbench.mm.attention_mass import AttentionMassHook
    from attnbench.mm.hooks import OpeningHook, RunSummaryHook, unwrapped_model
    from attnbench.mm.run_setup import apply_run_protocol, format_configs_once, load_config, resumable_checkpoints

    from .tasks import TASKS

    task = TASKS[run["task"]]
    cfg = load_config(run["config"], run["work_dir"], run["cfg_options"])
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
    if run.get("wandb"):
        visualizer = cfg.get("visualizer") or dict(type="Visualizer", vis_backends=[dict(type="LocalVisBackend")])
        visualizer["vis_backends"] = [*visualizer.get("vis_backends", []), _wandb_backend(run)]
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
    with resumable_checkpoints():
        runner.train()  # ends with a validation of the final weights
    if task.metric not in recorder.metrics:
        raise KeyError(f"validation reported {sorted(recorder.metrics)}, not {task.metric!r}")
    value = float(recorder.metrics[task.metric])
    if not math.isfinite(value):
        raise FloatingPointError(f"{task.metric} is {value}: the run diverged")
    row = dict(metric=task.metric, value=value, train_seconds=recorder.train_seconds,
               val_seconds=round(recorder.val_seconds, 1),
               peak_memory_mb=round(_peak_memory_mb(), 1), **protocol, **recorder.extra)
    for column, key in (("value_class_agnostic", task.class_agnostic_metric), ("value_context", task.context_metric)):
        if key:
            row[column] = float(recorder.metrics[key])
    return row


def main() -> None:
    import attnbench

    run_path, result_path = sys.argv[1:3]
    started, clock = utc_now(), time.perf_counter()
    print(f"attnbench {attnbench.__version__} from {os.path.dirname(attnbench.__file__)}", flush=True)
    with open(run_path) as f:
        run = json.load(f)
    try:
        row = execute(run) | {"status": "ok"}
        code = 0
    except Exception as e:  # recorded in the results store; the sweep goes on
        traceback.print_exc()
        row, code = {"status": "failed", "error": f"{type(e).__name__}: {e}"[:500]}, 1
    row |= _cost(row, time.perf_counter() - clock) | {"started_at": started, "finished_at": utc_now()}
    with open(result_path, "w") as f:
        json.dump(row, f)
    sys.exit(code)


if __name__ == "__main__":
    main()
