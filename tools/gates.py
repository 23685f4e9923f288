"""How far the attention of a store's vision runs left its start: the final |gamma| of every gated block
and the mean length of the deformable convolutions' offsets.

    python tools/gates.py --results results/flags [--runs] [--tasks det-flag] [--format text|markdown]
    python tools/gates.py --results results/claims --tasks fcn-flag --moved-by-loss 0.01
    python tools/gates.py --decay-only configs/segmentation/deeplabv3_r50w8-d8-attn1111_mini-shapes-128x128.py
    python tools/gates.py --decay-only configs/detection/faster-rcnn_r50w8-attn1111_fpn_mini-shapes.py --iters-per-epoch 50

Gated blocks add ``gamma * branch(x)`` to their input with ``gamma`` at 0 at init (mmcv's, unless the
variant sets ``gate``), so a gate that stays near 0 means the block barely took part in the run;
deformable convolutions start with zero offsets. Each run's store row records both since they were
added (``gate_max``, ``offset_mean_px``: attnbench.mm.hooks.OpeningHook), and later how far the loss,
not weight decay, moved the gates (``gate_loss_max``); for rows from before the first two the gates
are read from the run's last checkpoint under RESULTS/runs/<run id>/ (runs with neither are skipped
and counted). Per variant: the runs read, the mean of the largest |gamma| of each run and the
smallest and largest of those, the mean and largest ``gate_loss_max`` where recorded, how many runs'
loss opened the gate it moved most (``gate_loss_opened`` > 0: held it further open than weight decay
alone) out of those that record it, and the mean offset length in pixels; ``--runs`` lists every run
(with ``learnt`` on a diagnostic rule).
``--moved-by-loss T`` asks of the diagnostic runs whether a run learnt its rule exactly when the loss
moved its gates by T or more (``gate_loss_max >= T``): per variant, the runs in each of the four cells
and how many agree. ``--decay-only CONFIG`` prints where weight decay
alone takes a gate under CONFIG's optimizer and learning-rate schedule (its gradient always 0): the
value a gate ends at when the loss never moves it (``--iters-per-epoch`` for a config that trains by
epoch: its training images over the batch size).
"""
import argparse
import math
from pathlib import Path

import pandas as pd
import torch

from attnbench.mm.hooks import gate_magnitudes
from attnbench.sweep.runs import last_checkpoint
from attnbench.sweep.summary import successful_runs
from attnbench.sweep.store import read_store_or_exit


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
    whose gradient is always 0; and the iterations. CONFIG is a path or an mmengine ``Config``; one
    that trains by epoch needs ``iters_per_epoch``."""
    from mmengine.config import Config
    from mmengine.optim import build_optim_wrapper
    from mmengine.registry import PARAM_SCHEDULERS, init_default_scope

    cfg = config if isinstance(config, Config) else Config.fromfile(config)
    if "max_iters" in cfg.train_cfg:
        epochs, iters_per_epoch = 1, cfg.train_cfg.max_iters
    elif iters_per_epoch is None:
        raise SystemExit(f"gates.py: {cfg.filename} trains by epoch; give --iters-per-epoch "
                         "(training images / batch size)")
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
    for _ in range(epochs):  # as mmengine's loop and ParamSchedulerHook: the step, then the schedulers
        for _ in range(iters_per_epoch):
            gate.grad = torch.zeros_like(gate)
            optim_wrapper.step()
            for scheduler in schedulers:
                if not scheduler.by_epoch:
                    scheduler.step()
        for scheduler in schedulers:
            if scheduler.by_epoch:
                scheduler.step()
    return gate.item(), epochs * iters_per_epoch


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
        raise SystemExit(f"gates.py: {task_name!r} is not a vision task; one of {', '.join(vision)}")
    try:
        name = task.validate_variant(variant)
        path, options = task.config(preset, name, None)
    except ValueError as error:
        raise SystemExit(f"gates.py: {error}") from None
    cfg = Config.fromfile(path)
    cfg.merge_from_dict(options)
    trained = task.variant(preset, name)
    gates = [(token, f"{infer_abbr(mechanism_of(token).module)}.gamma", float(trained.params_of(token)["gate"]))
             for token in trained.tokens if "gate" in trained.params_of(token)]
    if not gates:
        raise SystemExit(f"gates.py: {name} at the {preset} preset has no residual gate that starts open")
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
        raise SystemExit("gates.py: --moved-by-loss needs runs on a diagnostic rule that record gate_loss_max")
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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results", default="results/sweep", help="results folder (default: results/sweep)")
    p.add_argument("--runs", action="store_true", help="one line per run instead of per variant")
    p.add_argument("--tasks", help="only these tasks (comma-separated, e.g. det-flag,fcn-flag)")
    p.add_argument("--moved-by-loss", type=float, metavar="T",
                   help="per variant of the diagnostic runs: learnt or not against gate_loss_max >= T or not")
    p.add_argument("--format", choices=("text", "markdown"), default="text")
    p.add_argument("--decay-only", metavar="CONFIG|TASK",
                   help="print where weight decay alone takes a gate started at 1 under CONFIG's schedule; or "
                        "a sweep task's run, with --preset and --variant (its gate's start and lr multiplier)")
    p.add_argument("--preset", default="mini", help="with --decay-only TASK: the run's preset (default: mini)")
    p.add_argument("--variant", default="1111", help="with --decay-only TASK: the run's variant (default: 1111)")
    p.add_argument("--iters-per-epoch", type=int, metavar="N",
                   help="with --decay-only, for a config that trains by epoch: its iterations per epoch")
    args = p.parse_args()
    if args.iters_per_epoch is not None and not args.decay_only:
        p.error("--iters-per-epoch goes with --decay-only")
    if args.decay_only and Path(args.decay_only).suffix != ".py":
        cfg, gates = run_gates(args.decay_only, args.preset, args.variant)
        for token, name, start in gates:
            value, iterations = decay_only_gate(cfg, args.iters_per_epoch, start, name)
            print(f"weight decay alone takes {token}'s gate started at {start:g} to {value:.4f} in {iterations} "
                  f"iterations of {args.decay_only}'s {args.preset} run of {args.variant}")
        return
    if args.decay_only:
        value, iterations = decay_only_gate(args.decay_only, args.iters_per_epoch)
        print(f"weight decay alone takes a gate started at 1 to {value:.4f} in {iterations} iterations "
              f"of {args.decay_only}'s optimizer and schedule")
        return

    if args.moved_by_loss is not None and args.runs:
        p.error("--moved-by-loss counts runs per variant; --runs lists them")
    results = read_store_or_exit(args.results, "gates.py")
    if args.tasks:
        tasks = args.tasks.split(",")
        unknown = sorted(set(tasks) - set(results["task"]))
        if unknown:
            p.error(f"no run of {args.results} on {', '.join(unknown)} (its tasks: {', '.join(sorted(set(results['task'])))})")
        results = results[results["task"].isin(tasks)]
    table, missing = opening(results, Path(args.results))
    if table.empty:
        raise SystemExit(f"gates.py: no run of {args.results} records a residual gate or an offset "
                         f"({missing} attention runs record neither and have no checkpoint)")
    table = table.sort_values(["task", "preset", "variant", "seed"])
    if args.moved_by_loss is not None:
        table = moved_against_learnt(table, args.moved_by_loss)
    elif not args.runs:
        table = table.groupby(["task", "preset", "variant"], sort=False).agg(
            runs=("seed", "size"), mean_gate_max=("gate_max", "mean"), lowest=("gate_max", "min"),
            highest=("gate_max", "max"), mean_gate_loss_max=("gate_loss_max", "mean"),
            highest_gate_loss_max=("gate_loss_max", "max"), opened_by_loss=("gate_loss_opened", opened_count),
            mean_offset_px=("offset_mean_px", "mean")).reset_index()
    table = table.dropna(axis=1, how="all")
    print(table.to_markdown(index=False, floatfmt=".4f") if args.format == "markdown"
          else table.to_string(index=False, float_format="%.4f"))
    if missing:
        print(f"\n{missing} finished attention runs record no gate or offset and have no checkpoint left: not counted")


if __name__ == "__main__":
    main()
