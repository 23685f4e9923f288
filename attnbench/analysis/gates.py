"""How far a run's attention left its start: the gates' final |gamma| read from a store or a checkpoint, where
weight decay alone takes a gate under a config's optimizer and schedule (the gate a loss never moved), and
whether the loss moved the gates of exactly the runs that learnt their diagnostic rule, and whether a run's
start (its first loss, its attention mass after one step) foretells that it learnt it (tools/gates.py)."""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import torch

from attnbench.mm.hooks import DecayOnlyGate, gate_magnitudes
from attnbench.sweep.runs import last_checkpoint
from attnbench.analysis.stats import holm
from attnbench.analysis.summary import range_text, successful_runs


def checkpoint_gate_max(run_dir: Path) -> float | None:
    """The largest |gamma| in a run's last checkpoint (NaN without gates), None without a checkpoint."""
    checkpoint = last_checkpoint(run_dir)
    if checkpoint is None:
        return None
    gates = gate_magnitudes(torch.load(checkpoint, map_location="cpu", weights_only=False)["state_dict"])
    return max(gates) if gates else math.nan


def decay_only_gate(config, iters_per_epoch: int | None = None, start: float = 1.0,
                    name: str = "gamma") -> tuple[float, int]:
    """Where CONFIG's optimizer (its ``paramwise_cfg`` included) and learning-rate schedule take a
    parameter named ``name`` (a dotted module path: what ``custom_keys`` match) started at ``start``
    whose gradient is always 0 (:class:`~attnbench.mm.hooks.DecayOnlyGate`, the copy a run's hook keeps);
    and the iterations. CONFIG is a path or an mmengine ``Config``; one
    that trains by epoch needs ``iters_per_epoch``."""
    from mmengine.config import Config
    from mmengine.optim import build_optim_wrapper
    from mmengine.registry import PARAM_SCHEDULERS, init_default_scope

    cfg = config if isinstance(config, Config) else Config.fromfile(config)
    if "max_iters" in cfg.train_cfg:
        epochs, iters_per_epoch = 1, cfg.train_cfg.max_iters
    elif iters_per_epoch is None:
        raise ValueError(f"{cfg.filename} trains by epoch; give --iters-per-epoch (training images / batch size)")
    else:
        epochs = cfg.train_cfg.max_epochs
    init_default_scope(cfg.get("default_scope", "mmengine"))
    holder = module = torch.nn.Module()
    *path, leaf = name.split(".")
    for part in path:
        module.add_module(part, torch.nn.Module())
        module = getattr(module, part)
    gate = torch.nn.Parameter(torch.tensor(float(start)))
    module.register_parameter(leaf, gate)
    optim_wrapper = build_optim_wrapper(holder, cfg.optim_wrapper)
    schedulers = [PARAM_SCHEDULERS.build(dict(s, optimizer=optim_wrapper)) for s in cfg.get("param_scheduler") or []]
    gate.grad = torch.zeros_like(gate)  # stepped like a run's gate, by the copy OpeningHook keeps of it
    decay_only = DecayOnlyGate(gate, optim_wrapper.optimizer)
    for _ in range(epochs):  # as mmengine's loop and ParamSchedulerHook: the step, then the schedulers
        for _ in range(iters_per_epoch):
            decay_only.step()
            for scheduler in schedulers:
                if not scheduler.by_epoch:
                    scheduler.step()
        for scheduler in schedulers:
            if scheduler.by_epoch:
                scheduler.step()
    return float(decay_only.copy.detach()), epochs * iters_per_epoch


def run_gates(task_name: str, preset: str, variant: str) -> tuple[object, list[tuple[str, str, float]]]:
    """The config a sweep run of VARIANT on TASK at PRESET trains (its file with the run's overrides)
    and, per gated token, ``(token, gate parameter path, initial value)``: the path under the plugin's
    mmcv name (``gen_attention_block.gamma``), so that the variant's ``lr`` multiplier applies to it."""
    from mmcv.cnn.bricks.plugin import infer_abbr
    from mmengine.config import Config

    from attnbench.sweep.tasks import TASKS, VisionTask
    from attnbench.variants import mechanism_of

    task = TASKS.get(task_name)
    if not isinstance(task, VisionTask):
        vision = sorted(name for name, t in TASKS.items() if isinstance(t, VisionTask))
        raise ValueError(f"{task_name!r} is not a vision task; one of {', '.join(vision)}")
    name = task.validate_variant(variant)
    path, options = task.config(preset, name, None)
    cfg = Config.fromfile(path)
    cfg.merge_from_dict(options)
    trained = task.variant(preset, name)
    gates = [(token, f"{infer_abbr(mechanism_of(token).module)}.gamma", float(trained.params_of(token)["gate"]))
             for token in trained.tokens if "gate" in trained.params_of(token)]
    if not gates:
        raise ValueError(f"{name} at the {preset} preset has no residual gate that starts open")
    return cfg, gates


def opening(results: pd.DataFrame, root: Path) -> tuple[pd.DataFrame, int]:
    """One row per finished run with a gate or an offset (``gate_max``, ``gate_loss_max``, ``gate_loss_opened``,
    ``offset_mean_px``, ``learnt``: NaN off the diagnostic rules), and how many attention runs record neither
    and have no checkpoint left to read their gates from."""
    rows, missing = [], 0
    for run in successful_runs(results).to_dict("records"):  # the columns NaN where the store has none
        gate, offset = run["gate_max"], run["offset_mean_px"]
        if math.isnan(gate) and math.isnan(offset):  # a row from before the columns, or no attention
            from_checkpoint = checkpoint_gate_max(root / "runs" / run["run_id"])
            missing += from_checkpoint is None and run["variant"] != "baseline"
            gate = math.nan if from_checkpoint is None else from_checkpoint
        if not (math.isnan(gate) and math.isnan(offset)):
            rows.append(dict(task=run["task"], preset=run["preset"], variant=run["variant"], seed=int(run["seed"]),
                             gate_max=gate, gate_loss_max=run["gate_loss_max"],
                             gate_loss_opened=run["gate_loss_opened"], offset_mean_px=offset,
                             learnt=math.nan if math.isnan(run["value_context"]) else float(run["learnt"])))
    return pd.DataFrame(rows), missing


def opened_count(opened: pd.Series) -> str | float:
    """``k/n``: of the n runs that record ``gate_loss_opened``, the k whose loss opened their most-moved gate
    (held it further open than weight decay alone); NaN where none records it."""
    recorded = opened.dropna()
    return f"{int((recorded > 0).sum())}/{len(recorded)}" if len(recorded) else math.nan


def moved_against_learnt(table: pd.DataFrame, threshold: float) -> pd.DataFrame:
    """Per variant of the diagnostic runs that record ``gate_loss_max``: how many runs learnt their rule
    with the gates moved by ``threshold`` or more and without, how many did not learn it with and without,
    and ``agree``: the runs where learnt and moved coincide; a row ``all`` after each task's sums them."""
    runs = table.dropna(subset=["learnt", "gate_loss_max"])
    if runs.empty:
        raise ValueError("--moved-by-loss needs runs on a diagnostic rule that record gate_loss_max")
    cell = [f"{'' if learnt else 'not '}learnt, {'' if moved else 'not '}moved"
            for learnt, moved in zip(runs["learnt"] == 1, runs["gate_loss_max"] >= threshold)]
    cells = ["learnt, moved", "learnt, not moved", "not learnt, moved", "not learnt, not moved"]
    counts = pd.crosstab([runs["task"], runs["preset"], runs["variant"]], pd.Series(cell, index=runs.index))
    counts = counts.reindex(columns=cells, fill_value=0)
    parts = []
    for (task, preset), part in counts.groupby(level=["task", "preset"], sort=False):
        parts += [part, part.sum().to_frame((task, preset, "all")).T]
    counts = pd.concat(parts).rename_axis(index=["task", "preset", "variant"], columns=None).reset_index()
    counts.insert(3, "runs", counts[cells].sum(axis=1))
    counts["agree"] = [f"{a + d}/{n}" for a, d, n in
                       zip(counts["learnt, moved"], counts["not learnt, not moved"], counts["runs"])]
    return counts


#: What a run's one-iteration start records (``--cfg-options train_cfg.max_iters=1``): the loss of its
#: initial weights on its first batch, and its attention mass on the deciding context after that one step.
START_COLUMNS = ("loss_first", "mass_context")


def start_against_learnt(finals: pd.DataFrame, starts: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Whether a diagnostic run's start foretells that it learnt its rule. ``starts`` holds one-iteration
    runs of the same task, preset, variant and seed as runs in ``finals``. Returns one row per run
    (``learnt`` from ``finals``; :data:`START_COLUMNS` from ``starts``) and, per task, preset and variant,
    one row per start column: its mean among the runs that learnt the rule and among those that did not,
    each group's range, the exact two-sided Mann-Whitney p of the two groups (NaN where a group is empty) and
    ``p_holm``, Holm's adjustment over a variant's start columns."""
    from scipy.stats import mannwhitneyu

    key = ["task", "preset", "variant", "seed"]
    learnt = successful_runs(finals).dropna(subset=["value_context"])[[*key, "learnt"]].drop_duplicates()
    if learnt.duplicated(key).any():
        raise ValueError("the final stores disagree on whether a run learnt its rule: "
                         + ", ".join(map(str, learnt[learnt.duplicated(key, keep=False)][key].values.tolist())))
    start = successful_runs(starts)
    missing = [column for column in START_COLUMNS if column not in start or start[column].isna().all()]
    if missing:
        raise ValueError(f"the start store records no {', '.join(missing)}: runs written before the column")
    runs = learnt.merge(start[[*key, *START_COLUMNS]].drop_duplicates(key, keep="last"), on=key)
    if runs.empty:
        raise ValueError("no start matches a finished diagnostic run (same task, preset, variant and seed)")
    runs = runs.sort_values(key).reset_index(drop=True)
    rows = []
    for (task, preset, variant), group in runs.groupby(["task", "preset", "variant"], sort=False):
        yes, no, first = group[group["learnt"]], group[~group["learnt"]], len(rows)
        for column in START_COLUMNS:
            p = (mannwhitneyu(yes[column], no[column], alternative="two-sided", method="exact").pvalue
                 if len(yes) and len(no) else math.nan)
            rows.append(dict(task=task, preset=preset, variant=variant, start=column,
                             learnt=f"{len(yes)}/{len(group)}", mean_learnt=yes[column].mean(),
                             range_learnt=range_text(yes[column].min(), yes[column].max()),
                             mean_not_learnt=no[column].mean(),
                             range_not_learnt=range_text(no[column].min(), no[column].max()), p_mann_whitney=p))
        for row, adjusted in zip(rows[first:], holm([row["p_mann_whitney"] for row in rows[first:]])):
            row["p_holm"] = adjusted
    return runs, pd.DataFrame(rows)
