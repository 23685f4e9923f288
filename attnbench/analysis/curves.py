"""Learning curves: validation metrics against training CPU-minutes, one folder a run.

A curve folder holds ``curve.jsonl`` (one line a validation: ``iter``, ``train_minutes``, the metrics;
written by :class:`attnbench.mm.hooks.LearningCurveHook`, ``tools/train.py --curve``) and the run's
dumped config (``*.py``), from which the shape is read. ``tools/learning_curves.py`` tabulates and plots
every folder under a root.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

#: the model and schedule keys a curve's row names, as (column, config path)
SHAPE_KEYS = (("width", "model.embed_dim"), ("layers", "model.num_encoder_layers"), ("heads", "model.num_heads"),
              ("ffn", "model.ffn_dim"), ("vocab", "model.vocab_size"), ("tokens", "train_dataloader.batch_sampler.max_tokens"),
              ("lr", "optim_wrapper.optimizer.lr"), ("dropout", "model.dropout"), ("iters", "train_cfg.max_iters"))


def _lookup(cfg, dotted: str):
    value = cfg
    for key in dotted.split("."):
        value = value.get(key) if hasattr(value, "get") else None
    return value


def curve_shape(folder: str | Path) -> dict:
    """The shape of the run in ``folder``, from its dumped config (the one ``*.py`` file there)."""
    from mmengine.config import Config

    configs = sorted(Path(folder).glob("*.py"))
    if len(configs) != 1:
        raise ValueError(f"{folder}: expected one dumped config (*.py), found {len(configs)}")
    cfg = Config.fromfile(str(configs[0]))
    return {column: _lookup(cfg, key) for column, key in SHAPE_KEYS}


def read_curves(root: str | Path) -> pd.DataFrame:
    """Every validation of every curve folder under ``root``: one row each, with the folder's name (``curve``),
    its shape, ``iter``, ``train_minutes`` and the metrics (``BLEU``, ``chrF``: their ``translation/`` prefix
    dropped)."""
    rows = []
    for path in sorted(Path(root).glob("*/curve.jsonl")):
        shape = curve_shape(path.parent)
        for line in path.read_text().splitlines():
            point = {key.removeprefix("translation/"): value for key, value in json.loads(line).items()}
            rows.append(dict(curve=path.parent.name, **shape, **point))
    if not rows:
        raise ValueError(f"no learning curves (*/curve.jsonl) under {root}")
    return pd.DataFrame(rows)


def curve_table(curves: pd.DataFrame, metrics: tuple[str, ...] = ("BLEU", "chrF")) -> pd.DataFrame:
    """One row a curve: its shape, each validation's ``minutes: BLEU / chrF`` in order, and its best point."""
    table = []
    for name, points in curves.groupby("curve", sort=False):
        first = points.iloc[0]
        row = {column: first[column] for column, _ in SHAPE_KEYS} | {"curve": name}
        row["points (minutes: " + " / ".join(metrics) + ")"] = "; ".join(
            f"{p['train_minutes']:.1f}: " + " / ".join(f"{p[m]:.1f}" for m in metrics) for _, p in points.iterrows())
        best = points.loc[points[metrics[0]].idxmax()]
        row[f"best {metrics[0]}"] = round(float(best[metrics[0]]), 2)
        row["at minutes"] = round(float(best["train_minutes"]), 1)
        table.append(row)
    return pd.DataFrame(table)


def plot_curves(curves: pd.DataFrame, out_stem: str | Path, metrics: tuple[str, ...] = ("BLEU", "chrF"),
                references: dict[str, float] | None = None) -> list[Path]:
    """One panel a metric: each curve's metric against training CPU-minutes; ``references`` (label ->
    value of the first metric, e.g. copying the source) as horizontal lines on the first panel."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .plots import save_figure

    fig, axes = plt.subplots(1, len(metrics), figsize=(6 * len(metrics), 4.2), squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        for name, points in curves.groupby("curve", sort=False):
            ax.plot(points["train_minutes"], points[metric], marker="o", label=name)
        ax.set_xlabel("training CPU-minutes (one thread)")
        ax.set_ylabel(f"validation {metric}")
        ax.grid(alpha=0.3)
    for label, value in (references or {}).items():
        axes[0][0].axhline(value, color="grey", linestyle="--", linewidth=1)
        axes[0][0].annotate(label, (0.01, value), xycoords=("axes fraction", "data"), xytext=(0, 2),
                            textcoords="offset points", fontsize=8, color="grey")
    axes[0][0].legend(fontsize=7)
    return save_figure(fig, out_stem)


def copy_scores(data_root: str | Path, split: str, source: str = "en", target: str = "de") -> dict[str, float]:
    """BLEU and chrF (sacreBLEU, as :class:`attnbench.mm.nmt.CorpusBLEU`) of copying the source side of
    ``split`` as its translation: what a model must beat on text that shares names, placeholders and
    numbers with its translation."""
    import sacrebleu

    root = Path(data_root)
    hypotheses = (root / f"{split}.{source}").read_text(encoding="utf-8").splitlines()
    references = [(root / f"{split}.{target}").read_text(encoding="utf-8").splitlines()]
    return dict(BLEU=sacrebleu.corpus_bleu(hypotheses, references).score,
                chrF=sacrebleu.corpus_chrf(hypotheses, references).score)
