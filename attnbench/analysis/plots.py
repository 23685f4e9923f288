"""Accuracy-versus-FLOPs plots from a results store (the study's Figure 2) and the window plot (its Figure 4)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from attnbench.attention.factors import ALL_FACTORS
from attnbench.analysis.published import PUBLISHED
from attnbench.analysis.summary import ROW_KEY, range_text, successful_runs, summarize
from attnbench.variants import SURVEY_VARIANTS, Variant

def pareto_front(points: pd.DataFrame, cost: str = "macs_model") -> pd.DataFrame:
    """Variants no other variant beats with fewer (or equal) ``cost`` and a higher mean."""
    ordered = points.sort_values([cost, "mean"], ascending=[True, False])
    best, keep = float("-inf"), []
    for idx, row in ordered.iterrows():
        if row["mean"] > best:
            keep.append(idx)
            best = row["mean"]
    return ordered.loc[keep]


#: What a trade-off plot's x axis can be: the store's MAC column and the axis label ({} takes the unit's prefix).
COSTS = {"model": ("macs_model", "model {}MACs (multiply-adds) at the task's input size"),
         "attention": ("macs_modules", "attention {}MACs (the added modules' multiply-adds) at the task's input size")}

#: An axis's MAC units, largest first: (divisor, prefix).
MAC_UNITS = ((1e9, "G"), (1e6, "M"), (1e3, "K"), (1.0, ""))


def mac_unit(macs) -> tuple[float, str]:
    """The largest unit in which the largest of ``macs`` is at least 1 (GMACs where all are zero): a mini
    model's 0.00448 GMACs reads 4.48 MMACs."""
    top = max(macs, default=0)
    return next((unit for unit in MAC_UNITS if top >= unit[0]), MAC_UNITS[0])


#: Plot style of each kind of row: (legend label, marker, colour).
ROW_KINDS = {
    "baseline": ("baseline", "*", "tab:red"),
    "factors": ("generalized attention (E1..E4)", "o", "tab:blue"),
    "study": ("deformable, dynamic, lightweight, area", "s", "tab:orange"),
    "combination": ("combination (+)", "D", "tab:purple"),
    "survey": ("survey module", "^", "tab:gray"),
}


def row_kind(variant: str) -> str:
    """Which of :data:`ROW_KINDS` a variant is (parameters aside)."""
    tokens = Variant.parse(variant).tokens
    if not tokens:
        return "baseline"
    if len(tokens) > 1:
        return "combination"
    if tokens[0] in ALL_FACTORS:
        return "factors"
    return "survey" if tokens[0] in SURVEY_VARIANTS else "study"


#: Colours of the windowed mechanisms of a window plot, in turn (red is the baseline's).
WINDOW_COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan")
#: ``--rows``: the study's rows (the factor sets, its other mechanisms and their combinations) or the survey's.
ROW_GROUPS = ("study", "survey")


def select_rows(results: pd.DataFrame, group: str, reference: str = "baseline") -> pd.DataFrame:
    """The runs of one of :data:`ROW_GROUPS`, with those of the ``reference`` row they are compared with."""
    if group not in ROW_GROUPS:
        raise ValueError(f"rows must be one of {ROW_GROUPS}, got {group!r}")
    survey = results["variant"].map(row_kind) == "survey"
    return results[(survey == (group == "survey")) | (results["variant"] == reference)]


#: adjustText's steps at most to move a panel's labels apart: a count, not its default one second, so that a
#: store draws the same plot on any machine and under any load; enough, with the forces below, that the study's
#: crowded panels (fifteen factor sets within a few MACs) show every label clear of the others.
LABEL_ITERATIONS = 1000


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


def gate_note(runs: pd.DataFrame) -> str:
    """A panel's caption: the range over its gated runs of each run's largest final |gamma| (``gate_max``; 0
    would be a closed gate) and, where runs record it, of how far the loss moved their gates
    (``gate_loss_max``); empty where no run records a gate."""
    gates = runs["gate_max"].dropna()
    if gates.empty:
        return ""
    note = f"largest final gate |γ| per gated run: {range_text(gates.min(), gates.max())} ({_runs_text(gates)})"
    moved = runs.get("gate_loss_max", pd.Series(dtype=float)).dropna()
    if not moved.empty:
        note += (f"\ngate moved by the loss (not weight decay): {range_text(moved.min(), moved.max())} "
                 f"({_runs_text(moved)})")
    return note


def _runs_text(values: pd.Series) -> str:
    return f"{len(values)} run{'s' if len(values) > 1 else ''}"


def grid_columns(panels: int) -> int:
    """Columns of a grid of ``panels`` (at most three): the most that leave at most one cell spare, which
    then holds the legend."""
    return next(c for c in (3, 2, 1) if c <= max(panels, 1) and -(-panels // c) * c - panels <= 1)


def plot_tradeoffs(results: pd.DataFrame, out_stem: str | Path, published: bool = True,
                   cost: str = "model") -> list[Path]:
    """Metric vs MACs (``cost``: the model's or the attention's, :data:`COSTS`; each panel in its
    :func:`mac_unit`), one panel per task (and NMT slot; survey rows apart): per row its mean ± std over
    seeds and each seed's run as a small dot (rules learnt or not show as two clusters), one marker per
    kind of row, every point named (labels moved apart by adjustText, :data:`LABEL_ITERATIONS` steps at
    most). A one-line title per panel; the gates' range (:func:`gate_note`) in its
    caption. The Pareto frontier of the means only where every row has two seeds or more; a panel of
    single-seed rows says so and draws no line. One legend, in the grid's spare cell if there is one.
    PNG and SVG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from adjustText import adjust_text
    from matplotlib.ticker import MaxNLocator

    column, xlabel = COSTS[cost]
    panels = plot_panels(summarize(results))
    if not panels:
        raise ValueError("no successful runs to plot")
    runs = successful_runs(results)
    columns = grid_columns(len(panels))
    rows = -(-len(panels) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(6.5 * columns, 5.5 * rows), squeeze=False)
    legend = {}
    for ax, (title, points) in zip(axes.flat, panels):
        scale, prefix = mac_unit(points[column])
        x = points[column] / scale
        if points["seeds"].min() >= 2:
            front = pareto_front(points, column)
            ax.plot(front[column] / scale, front["mean"], "--", color="tab:green", zorder=1,
                    label="Pareto frontier of the means (differences untested)")
        seeds = points[ROW_KEY + ["kind", column]].merge(runs[ROW_KEY + ["value", "gate_max", "gate_loss_max"]], on=ROW_KEY)
        for kind, (label, marker, color) in ROW_KINDS.items():
            mine = points["kind"] == kind
            if mine.any():
                ax.errorbar(x[mine], points["mean"][mine], yerr=points["std"][mine], fmt=marker, color=color,
                            ecolor=matplotlib.colors.to_rgba(color, 0.35), ms=12 if kind == "baseline" else 6,
                            capsize=2, elinewidth=1, label=label, zorder=3 if kind == "baseline" else 2)
                dots = seeds[seeds["kind"] == kind]
                ax.scatter(dots[column] / scale, dots["value"], s=6, color=color, alpha=0.4, linewidths=0, zorder=2)
        task, preset = points["task"].iloc[0], points["preset"].iloc[0]
        if published and cost == "model" and task == "det" and preset == "full":
            ref = points[[("det", v) in PUBLISHED for v in points["variant"]]]
            ax.scatter(ref["macs_model"] / scale, [PUBLISHED["det", v][0] / 100 for v in ref["variant"]],
                       marker="x", color="black", label="published (mmdet model zoo), not measured")
        labels = [ax.text(xi, yi, name, fontsize=7) for xi, yi, name in zip(x, points["mean"], points["variant"])]
        ax.xaxis.set_major_locator(MaxNLocator(5))  # MACs that differ in the 4th digit
        ax.ticklabel_format(useOffset=False)
        note = gate_note(seeds)
        ax.set_xlabel(xlabel.format(prefix) + (f"\n{note}" if note else ""), fontsize=9)
        one_seed = points["seeds"].max() == 1
        ax.set_ylabel(f"{points['metric'].iloc[0]} ({'one seed' if one_seed else 'mean ± std over seeds, dots: seeds'})")
        ax.set_title(title + (": one seed, differences untested" if one_seed else ""), fontsize=10)
        ax.grid(alpha=0.3)
        legend.update({label: handle for handle, label in zip(*ax.get_legend_handles_labels())})
        adjust_text(labels, x=x.to_numpy(), y=points["mean"].to_numpy(), ax=ax, expand=(1.6, 2.2),
                    force_text=(0.3, 0.6), force_static=(0.3, 0.6), iter_lim=LABEL_ITERATIONS,
                    arrowprops=dict(arrowstyle="-", color="0.5", lw=0.5))
    spare = axes.flat[len(panels):]
    for ax in spare:
        ax.axis("off")
    (spare[0] if len(spare) else axes.flat[0]).legend(legend.values(), legend.keys(), fontsize=8 if len(spare) else 7,
                                                      loc="center" if len(spare) else "best")
    return save_figure(fig, out_stem)


def window_size(variant: str, slot: str | None) -> int | None:
    """Keys a one-token row's window spans on one axis: a kernel's ``k``; E2's ``2r + 1`` for
    ``range=r`` (``r + 1`` in the causal decoder, ``dec-self``); None for a row without a window."""
    parsed = Variant.parse(variant)
    if len(parsed.tokens) != 1:
        return None
    params = parsed.params_of(parsed.tokens[0])
    if "kernel" in params:
        return params["kernel"]
    if "range" in params:
        return params["range"] + 1 if slot == "dec-self" else 2 * params["range"] + 1
    return None


def plot_windows(results: pd.DataFrame, out_stem: str | Path) -> list[Path]:
    """The study's Figure 4: per task (and NMT slot), the metric and the attention modules' MACs
    against the window size, one line per mechanism; the same mechanisms without a window (and the
    baseline's metric) as horizontal lines. PNG and SVG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = summarize(results)
    summary = summary.assign(window=[window_size(v, s) for v, s in zip(summary["variant"], summary["slot"])],
                             token=[(Variant.parse(v).tokens or ("baseline",))[0] for v in summary["variant"]])
    groups = [(key, points) for key, points in summary.groupby(["task", "preset", "slot"], sort=True)
              if points["window"].notna().any()]
    if not groups:
        raise ValueError("no rows with a window (kernel= or range=) to plot")
    fig, axes = plt.subplots(len(groups), 2, figsize=(11, 4.2 * len(groups)), squeeze=False)
    for row, ((task, preset, slot), points) in zip(axes, groups):
        windowed = points[points["window"].notna()].sort_values("window")
        if windowed["token"].nunique() > len(WINDOW_COLORS):
            raise ValueError(f"{windowed['token'].nunique()} windowed mechanisms on {task}, more than the "
                             f"{len(WINDOW_COLORS)} colours of a window plot")
        scale, prefix = mac_unit(points["macs_modules"])
        for (token, line), color in zip(windowed.groupby("token", sort=True), WINDOW_COLORS):
            label = f"E2 ({token}) in a window" if token in ALL_FACTORS else f"{token} convolution"
            row[0].errorbar(line["window"], line["mean"], yerr=line["std"], fmt="o-", color=color, capsize=2,
                            label=label)
            row[1].plot(line["window"], line["macs_modules"] / scale, "o-", color=color, label=label)
            free = points[(points["token"] == token) & points["window"].isna()]
            for value, macs in zip(free["mean"], free["macs_modules"]):
                row[0].axhline(value, ls="--", color=color, label=f"{token}, no window")
                row[1].axhline(macs / scale, ls="--", color=color, label=f"{token}, no window")
        for value in points.loc[points["token"] == "baseline", "mean"]:  # summarize() spreads NMT's into each slot
            row[0].axhline(value, ls=":", color="tab:red", label="baseline")
        title = f"{task}{'/' + slot if slot else ''} ({preset})"
        row[0].set_ylabel(f"{points['metric'].iloc[0]} (mean ± std over seeds)")
        row[1].set_ylabel(f"attention {prefix}MACs at the task's input size")
        for ax, what in zip(row, ("accuracy", "cost")):
            ax.set_xticks(sorted(windowed["window"].unique()))
            ax.set_xlabel("window size (keys along one axis)")
            ax.set_title(f"{title}: {what}")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
    return save_figure(fig, out_stem)


def save_figure(fig, out_stem: str | Path, bbox_inches: str | None = None) -> list[Path]:
    """Write ``fig`` as OUT_STEM.png and OUT_STEM.svg (their folder made where missing), byte for byte the same
    for the same figure, and close it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    paths = [Path(out_stem).with_suffix(".png"), Path(out_stem).with_suffix(".svg")]
    paths[0].parent.mkdir(parents=True, exist_ok=True)
    with plt.rc_context({"svg.hashsalt": "attnbench"}):  # the SVG's element ids fixed and no date (PNGs have none)
        for path in paths:
            fig.savefig(path, dpi=120, bbox_inches=bbox_inches, metadata={"Date": None} if path.suffix == ".svg" else None)
    plt.close(fig)
    return paths
