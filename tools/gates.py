"""How far the residual gates of a store's vision runs opened: the final |gamma| of every gated block.

    python tools/gates.py --results results/flags [--runs] [--format text|markdown]

Gated blocks (generalized attention, dynamic convolution, area, criss-cross and dual attention) add
``gamma * branch(x)`` to their input with ``gamma`` at 0 at init (mmcv's, unless the variant sets
``gate``), so a gate that stays near 0 means the block barely took part in the run. Reads each run's
last checkpoint under RESULTS/runs/<run id>/ (runs whose checkpoint is gone are skipped and
counted). Per variant: the runs read, the mean of the largest |gamma| of each run and the smallest
and largest of those; ``--runs`` lists every run.
"""
import argparse
from pathlib import Path

import pandas as pd
import torch

from attnbench.sweep.store import read_store_or_exit


def gate_magnitudes(checkpoint: Path) -> list[float]:
    """|gamma| of every residual gate (a parameter named ``gamma`` or ``gamma_*``) in a checkpoint."""
    state = torch.load(checkpoint, map_location="cpu", weights_only=False)["state_dict"]
    return [float(v.abs().max()) for k, v in state.items() if k.rsplit(".", 1)[-1].split("_")[0] == "gamma"]


def last_checkpoint(run_dir: Path) -> Path | None:
    """The checkpoint mmengine's ``last_checkpoint`` file names, if it is still there."""
    pointer = run_dir / "last_checkpoint"
    if not pointer.is_file():
        return None
    path = run_dir / Path(pointer.read_text().strip()).name
    return path if path.is_file() else None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results", default="results/sweep", help="results folder (default: results/sweep)")
    p.add_argument("--runs", action="store_true", help="one line per run instead of per variant")
    p.add_argument("--format", choices=("text", "markdown"), default="text")
    args = p.parse_args()

    df = read_store_or_exit(args.results, "gates.py")
    rows, missing = [], 0
    for run in df[df["status"] == "ok"].itertuples():
        checkpoint = last_checkpoint(Path(args.results) / "runs" / run.run_id)
        if checkpoint is None:
            missing += 1
            continue
        gates = gate_magnitudes(checkpoint)
        if gates:
            rows.append(dict(task=run.task, preset=run.preset, variant=run.variant, seed=int(run.seed),
                             gates=len(gates), max_abs_gamma=max(gates)))
    if not rows:
        raise SystemExit(f"gates.py: no run of {args.results} has a checkpoint with a residual gate "
                         f"({missing} runs without a checkpoint)")
    table = pd.DataFrame(rows).sort_values(["task", "preset", "variant", "seed"])
    if not args.runs:
        table = table.groupby(["task", "preset", "variant"], sort=False).agg(
            runs=("seed", "size"), gates=("gates", "first"), mean_max_abs_gamma=("max_abs_gamma", "mean"),
            lowest=("max_abs_gamma", "min"), highest=("max_abs_gamma", "max")).reset_index()
    print(table.to_markdown(index=False, floatfmt=".4f") if args.format == "markdown"
          else table.to_string(index=False, float_format="%.4f"))
    if missing:
        print(f"\n{missing} finished runs have no checkpoint left and are not counted")


if __name__ == "__main__":
    main()
