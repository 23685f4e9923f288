"""``--dry-run``: the plan with each config's FLOPs and parameters, without training."""
from __future__ import annotations

import os
from collections.abc import Iterator

from .plan import Run
from .tasks import task_of


def build_model(config: str, cfg_options: dict):
    from mmengine.registry import MODELS, init_default_scope

    from attnbench.mm.run_setup import load_config

    cfg = load_config(config, cfg_options=cfg_options, check_data=False)
    init_default_scope(cfg.get("default_scope", "attnbench"))
    return MODELS.build(cfg.model)


def count_runs(runs: list[Run]) -> Iterator[tuple[Run, dict]]:
    """Each run with its model's counts (its task's ``count``); runs sharing a config are counted once."""
    counted: dict[tuple, dict] = {}
    for run in runs:
        if run.config_key not in counted:
            counted[run.config_key] = task_of(run.task, run.config).count(build_model(run.config, run.cfg_options),
                                                                          run.preset)
        yield run, counted[run.config_key]


def analytic_check(counts: dict) -> str:
    """'ok' when the attention modules' measured MACs agree with their analytic counts within 2 %."""
    measured, analytic = counts["macs_modules"], counts["macs_modules_analytic"]
    return "ok" if abs(measured - analytic) <= 0.02 * max(measured, 1) else "DIFF"


def print_plan(runs: list[Run]) -> None:
    print(f"{'run id':60} {'GMACs model':>11} {'GMACs attn':>10} {'check':>6} {'params M':>8}  config")
    for run, c in count_runs(runs):
        print(f"{run.run_id:60} {c['macs_model'] / 1e9:11.3f} {c['macs_modules'] / 1e9:10.3f} "
              f"{analytic_check(c):>6} {c['params_model'] / 1e6:8.2f}  {os.path.relpath(run.config)}")
    print(f"{len(runs)} runs; MACs at the task's input size ({', '.join(sorted({r.task for r in runs}))}); "
          "'check' compares the attention modules' measured MACs with their analytic counts")
