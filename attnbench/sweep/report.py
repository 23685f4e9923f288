"""Tables and accuracy-versus-FLOPs plots from the results store (the study's Figure 2)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from attnbench.attention.factors import ALL_FACTORS
from attnbench.variants import SURVEY_VARIANTS

#: Published accuracy of the full-scale configs, (task, variant) -> (value, source): COCO val bbox AP
#: of mmdet's model zoo (Faster R-CNN R-50-FPN 1x: configs/faster_rcnn, empirical_attention, dcn) and
#: Cityscapes val mIoU of mmseg's (DeepLabV3 R-50-D8 512x1024 80k), WMT14 en-de newstest2014 BLEU
#: of Transformer-base (Vaswani et al. 2017, Table 2).
PUBLISHED = {
    ("det", "baseline"): (37.4, "mmdet model zoo"),
    ("det", "1111"): (40.0, "mmdet model zoo (empirical_attention)"),
    ("det", "0010"): (39.1, "mmdet model zoo (empirical_attention)"),
    ("det", "1111+deformable"): (42.1, "mmdet model zoo (empirical_attention)"),
    ("det", "0010+deformable"): (42.0, "mmdet model zoo (empirical_attention)"),
    ("det", "deformable"): (41.3, "mmdet model zoo (dcn, dconv c3-c5)"),
    ("det", "deformable_v2"): (41.4, "mmdet model zoo (dcn, mdconv c3-c5)"),
    ("seg", "baseline"): (79.32, "mmseg model zoo"),
    ("nmt", "baseline"): (27.3, "Vaswani et al. 2017"),
}

_GROUP = ["task", "preset", "slot", "variant"]


def summarize(results: pd.DataFrame) -> pd.DataFrame:
    """Mean, std and count over seeds per variant, with the delta against the baseline.

    ``delta_t`` is Welch's t of that delta, ``delta / sqrt(std^2/seeds + std_baseline^2/seeds_baseline)``,
    where both rows have two seeds or more (NaN otherwise): beyond about 2 (3 seeds each: 2.8 for
    p < 0.05, two-sided) the difference is larger than the seed noise.
    """
    ok = results[results["status"] == "ok"].copy()
    ok["slot"] = ok["slot"].fillna("")
    summary = ok.groupby(_GROUP, dropna=False).agg(
        metric=("metric", "first"), mean=("value", "mean"), std=("value", "std"), seeds=("value", "count"),
        macs_model=("macs_model", "mean"), macs_modules=("macs_modules", "mean"),
        params_model=("params_model", "mean")).reset_index()
    summary["std"] = summary["std"].fillna(0.0)
    summary = _spread_shared_baselines(summary)
    keys = ["task", "preset", "slot"]
    baseline = summary.loc[summary["variant"] == "baseline", [*keys, "mean", "std", "seeds"]]
    reference = summary[keys].merge(baseline, on=keys, how="left")  # row for row: a left merge keeps the order
    summary["delta"] = summary["mean"] - reference["mean"]
    error = (summary["std"] ** 2 / summary["seeds"] + reference["std"] ** 2 / reference["seeds"]) ** 0.5
    repeated = (summary["seeds"] > 1) & (reference["seeds"] > 1) & (error > 0) & (summary["variant"] != "baseline")
    summary["delta_t"] = (summary["delta"] / error).where(repeated)
    return summary.sort_values(["task", "preset", "slot", "macs_model"]).reset_index(drop=True)


def _spread_shared_baselines(summary: pd.DataFrame) -> pd.DataFrame:
    """An NMT baseline (standard attention in every slot) is one run: show it in each slot's rows."""
    copies, drop = [], []
    for _, group in summary.groupby(["task", "preset"]):
        shared = group[(group["variant"] == "baseline") & (group["slot"] == "")]
        slots = sorted(set(group["slot"]) - {""})
        if len(shared) and slots:
            copies += [shared.assign(slot=slot) for slot in slots]
            drop += list(shared.index)
    return pd.concat([summary.drop(index=drop), *copies], ignore_index=True)


def comparison_table(results: pd.DataFrame, fmt: str = "markdown") -> str:
    s = summarize(results)
    table = pd.DataFrame({
        "task": s["task"] + s["slot"].map(lambda x: f"/{x}" if x else ""), "preset": s["preset"],
        "variant": s["variant"], "metric": s["metric"],
        "mean ± std": [f"{m:.4f} ± {d:.4f}" for m, d in zip(s["mean"], s["std"])], "seeds": s["seeds"],
        "delta vs baseline": s["delta"].map(lambda d: "" if pd.isna(d) else f"{d:+.4f}"),
        "t": s["delta_t"].map(lambda t: "" if pd.isna(t) else f"{t:+.1f}"),
        "GMACs model": (s["macs_model"] / 1e9).round(3), "GMACs attention": (s["macs_modules"] / 1e9).round(4)})
    if fmt == "csv":
        return table.to_csv(index=False)
    if fmt == "markdown":
        numeric = {"seeds", "delta vs baseline", "t", "GMACs model", "GMACs attention"}
        return table.to_markdown(index=False, disable_numparse=True,  # keeps the signs of the deltas
                                 colalign=["right" if c in numeric else "left" for c in table.columns])
    if fmt == "text":
        return table.to_string(index=False)
    raise ValueError(f"unknown format {fmt!r}; choose from text, markdown, csv")


TERMS = ("E1", "E2", "E3", "E4")


def factor_effects(results: pd.DataFrame) -> pd.DataFrame:
    """Main effect of each term of the generalized attention, per task (and slot).

    For term ``Ek`` every factor set with ``Ek`` on is paired with the same set without it (on the
    vision tasks the baseline is the empty set ``0000``; on translation the baseline is standard
    attention everywhere and is left out); the effect is the change of the seed-mean metric over
    those pairs: up to 8 pairs per term, fewer when rows are missing. ``seed_std`` is the pooled
    standard deviation over seeds of the task's variants run with two seeds or more (NaN without),
    the noise an effect is to be compared with; ``effect_se`` the standard error it gives the
    effect, ``seed_std * sqrt(sum over pairs of 1/n_on + 1/n_off) / pairs`` with ``n`` the seeds
    of each row (the pairs share no row), and ``z = effect / effect_se``.

    On the vision tasks a last row, term ``any``, compares attention of any kind with none: the
    mean over the factor sets of each set's delta against the baseline (``pairs`` = factor sets),
    with ``effect_se = seed_std * sqrt(sum_v 1/n_v / K^2 + 1/n_baseline)`` over the K sets.
    """
    s = summarize(results)
    rows = []
    for (task, preset, slot), group in s.groupby(["task", "preset", "slot"]):
        means = {v: m for v, m in zip(group["variant"], group["mean"]) if v in ALL_FACTORS}
        seeds = dict(zip(group["variant"], group["seeds"]))
        if task != "nmt" and "baseline" in set(group["variant"]):
            means["0000"] = group.loc[group["variant"] == "baseline", "mean"].iloc[0]
            seeds["0000"] = seeds["baseline"]
        repeated = group[group["seeds"] > 1]
        seed_std = (((repeated["std"] ** 2) * (repeated["seeds"] - 1)).sum() / (repeated["seeds"] - 1).sum()) ** 0.5 \
            if len(repeated) else float("nan")

        def add(term, diffs, effect_se):
            diffs = pd.Series(diffs, dtype=float)
            rows.append(dict(task=task, preset=preset, slot=slot, term=term, pairs=len(diffs), effect=diffs.mean(),
                             effect_std=diffs.std() if len(diffs) > 1 else float("nan"), min=diffs.min(),
                             max=diffs.max(), seed_std=seed_std, effect_se=effect_se, z=diffs.mean() / effect_se))

        for k, term in enumerate(TERMS):
            pairs = [(v, v[:k] + "0" + v[k + 1:]) for v in means if v[k] == "1" and v[:k] + "0" + v[k + 1:] in means]
            if pairs:
                add(term, [means[on] - means[off] for on, off in pairs],
                    seed_std * sum(1 / seeds[on] + 1 / seeds[off] for on, off in pairs) ** 0.5 / len(pairs))
        sets = [v for v in means if v != "0000"]
        if "0000" in means and sets:
            add("any", [means[v] - means["0000"] for v in sets],
                seed_std * (sum(1 / seeds[v] for v in sets) / len(sets) ** 2 + 1 / seeds["0000"]) ** 0.5)
    return pd.DataFrame(rows, columns=["task", "preset", "slot", "term", "pairs", "effect", "effect_std",
                                       "min", "max", "seed_std", "effect_se", "z"])


def pareto_front(points: pd.DataFrame) -> pd.DataFrame:
    """Variants no other variant beats with fewer (or equal) MACs and a higher mean."""
    ordered = points.sort_values(["macs_model", "mean"], ascending=[True, False])
    best, keep = float("-inf"), []
    for idx, row in ordered.iterrows():
        if row["mean"] > best:
            keep.append(idx)
            best = row["mean"]
    return ordered.loc[keep]


#: Plot style of each kind of row: (legend label, marker, colour).
ROW_KINDS = {
    "baseline": ("baseline", "*", "tab:red"),
    "factors": ("generalized attention (E1..E4)", "o", "tab:blue"),
    "study": ("deformable, dynamic, lightweight, area", "s", "tab:orange"),
    "combination": ("combination (+)", "D", "tab:purple"),
    "survey": ("survey module", "^", "tab:gray"),
}


def row_kind(variant: str) -> str:
    """Which of :data:`ROW_KINDS` a variant is."""
    if variant == "baseline":
        return "baseline"
    if "+" in variant:
        return "combination"
    if variant in ALL_FACTORS:
        return "factors"
    return "survey" if variant in SURVEY_VARIANTS else "study"


def plot_panels(summary: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """(title, points) per task (and NMT slot), the points with their :func:`row_kind` in ``kind``;
    where a task has survey rows besides the study's, they get a panel of their own, with the
    baseline, so that neither crowds the other."""
    panels = []
    for (task, preset, slot), points in summary.groupby(["task", "preset", "slot"], sort=True):
        title = f"{task}{'/' + slot if slot else ''} ({preset})"
        points = points.assign(kind=points["variant"].map(row_kind))
        kinds = points["kind"]
        survey, study = kinds == "survey", ~kinds.isin(["survey", "baseline"])
        if survey.any() and study.any():
            panels += [(f"{title}: the study's rows", points[~survey]),
                       (f"{title}: survey modules", points[survey | (kinds == "baseline")])]
        else:
            panels.append((title, points))
    return panels


def plot_tradeoffs(results: pd.DataFrame, out_stem: str | Path, published: bool = True) -> list[Path]:
    """Metric vs model GMACs, one panel per task (and NMT slot; survey rows apart), three to a row,
    one marker per kind of row, every point named (labels moved apart by adjustText); PNG and SVG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from adjustText import adjust_text

    panels = plot_panels(summarize(results))
    if not panels:
        raise ValueError("no successful runs to plot")
    columns = min(len(panels), 3)
    rows = -(-len(panels) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(6.5 * columns, 5.5 * rows), squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    for ax, (title, points) in zip(axes.flat, panels):
        x = points["macs_model"] / 1e9
        front = pareto_front(points)
        ax.plot(front["macs_model"] / 1e9, front["mean"], "--", color="tab:green", label="Pareto frontier", zorder=1)
        for kind, (label, marker, color) in ROW_KINDS.items():
            mine = points["kind"] == kind
            if mine.any():
                ax.errorbar(x[mine], points["mean"][mine], yerr=points["std"][mine], fmt=marker, color=color,
                            ecolor=matplotlib.colors.to_rgba(color, 0.35), ms=12 if kind == "baseline" else 6,
                            capsize=2, elinewidth=1, label=label, zorder=3 if kind == "baseline" else 2)
        task, preset = points["task"].iloc[0], points["preset"].iloc[0]
        if published and task == "det" and preset == "full":
            ref = points[[("det", v) in PUBLISHED for v in points["variant"]]]
            ax.scatter(ref["macs_model"] / 1e9, [PUBLISHED["det", v][0] / 100 for v in ref["variant"]],
                       marker="x", color="black", label="published (mmdet model zoo), not measured")
        labels = [ax.text(xi, yi, name, fontsize=7) for xi, yi, name in zip(x, points["mean"], points["variant"])]
        ax.set_xlabel("model GMACs (multiply-adds) at the task's input size")
        ax.set_ylabel(f"{points['metric'].iloc[0]} (mean ± std over seeds)")
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        adjust_text(labels, x=x.to_numpy(), y=points["mean"].to_numpy(), ax=ax,
                    arrowprops=dict(arrowstyle="-", color="0.5", lw=0.5))
    fig.tight_layout()
    out_stem = Path(out_stem)
    paths = [out_stem.with_suffix(".png"), out_stem.with_suffix(".svg")]
    for path in paths:
        fig.savefig(path, dpi=120)
    plt.close(fig)
    return paths
