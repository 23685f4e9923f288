"""A store's runs summarised per row: mean and spread over seeds, the pairing with the reference row seed by
seed, the paired tests, and the comparison table tools/compare.py prints."""
from __future__ import annotations

import math

import pandas as pd

from attnbench.analysis.stats import (LEARNT_THRESHOLD, fisher_exact_p, holm, mcnemar_exact_p, paired_statistics,
                                   welch_test, wilcoxon_p)
from attnbench.sweep.store import finished_runs

#: The columns that name a row of a store (a row is its runs over the seeds).
ROW_KEY = ["task", "preset", "slot", "variant"]

#: A run's protocol: two runs at one seed are paired only when they agree on all of these, none missing
#: (``world_size``, the processes a run trained on, reads as 1 for rows written before it was recorded).
PROTOCOL = ("threads", "world_size", "device", "torch_version", "mmcv_version")
#: What else two paired runs share: the corpus they trained on (its digest; ``""`` where none is recorded, which
#: pairs only with ``""``: translation rows written before 2026-12-07 and every image row).
SAME_DATA = ("corpus",)

_COMPARED_COLUMNS = ["paired_seeds", "paired_delta", "paired_std", "paired_t", "paired_p", "wilcoxon_p", "pairing",
                     "exact_p", "exact_paired"]


def successful_runs(results: pd.DataFrame) -> pd.DataFrame:
    """The runs with status ``ok``: slot ``""`` where none, each :data:`PROTOCOL` column as text (``""``
    where the store records none, ``threads`` read back as 2.0 as ``"2"``), ``value_class_agnostic``
    and ``value_context`` (and ``gate_max``, ``gate_loss_max``, ``gate_loss_opened``, ``offset_mean_px``,
    ``mass_context``, ``mass_context_chance``) NaN where the store has no such column, and ``learnt``:
    whether the run learnt its diagnostic rule (context accuracy at least
    :data:`~attnbench.analysis.stats.LEARNT_THRESHOLD`; False without one)."""
    ok = finished_runs(results).copy()
    ok["slot"] = ok["slot"].fillna("")
    world = ok["world_size"] if "world_size" in ok else pd.Series(math.nan, index=ok.index)
    recorded = ok["threads"].notna() if "threads" in ok else False
    ok["world_size"] = world.mask(world.isna() & recorded, 1)  # a protocol recorded before world_size: 1 rank
    for column in PROTOCOL:
        ok[column] = ok[column].map(_protocol_text) if column in ok else ""
    for column in SAME_DATA:
        ok[column] = ok[column].astype(object).fillna("").astype(str) if column in ok else ""
    for column in ("value_class_agnostic", "value_context", "gate_max", "gate_loss_max", "gate_loss_opened",
                   "offset_mean_px", "mass_context", "mass_context_chance"):
        ok[column] = pd.to_numeric(ok[column] if column in ok else math.nan, errors="coerce")
    ok["learnt"] = ok["value_context"] >= LEARNT_THRESHOLD
    return ok


def range_text(low: float, high: float) -> str:
    """``0.990-1.020``, one value where both are equal, blank where there is none."""
    return "" if pd.isna(low) else f"{low:.3f}" if low == high else f"{low:.3f}-{high:.3f}"


def _protocol_text(value) -> str:
    if pd.isna(value) or value == "":
        return ""
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def paired_differences(runs: pd.DataFrame, reference: pd.DataFrame) -> pd.Series:
    """``value - reference value`` per seed (the index), over the seeds at which both have a run with the
    same, fully recorded :data:`PROTOCOL` and the same :data:`SAME_DATA` (the mean where a seed has several
    such pairs of runs).

    The one pairing rule of the report: the table's paired statistics, the paired effects and the power
    analysis all take their differences from here. Both frames come from :func:`successful_runs`."""
    recorded = [frame.loc[(frame[list(PROTOCOL)] != "").all(axis=1), ["seed", *PROTOCOL, *SAME_DATA, "value"]]
                for frame in (runs, reference)]
    pairs = recorded[0].merge(recorded[1], on=["seed", *PROTOCOL, *SAME_DATA], suffixes=("", "_reference"))
    return (pairs["value"] - pairs["value_reference"]).groupby(pairs["seed"]).mean()


def runs_by_row(runs: pd.DataFrame) -> dict[tuple, pd.DataFrame]:
    """(task, preset, slot, variant) -> that row's runs."""
    return {key: rows for key, rows in runs.groupby(ROW_KEY)}


def row_runs(by_row: dict[tuple, pd.DataFrame], task: str, preset: str, slot: str,
             variant: str = "baseline") -> pd.DataFrame | None:
    """The runs of ``variant`` (the baseline unless said otherwise) in a slot: the slot's own, else the
    task's shared one (NMT's baseline: standard attention in every slot, one run for all)."""
    return by_row.get((task, preset, slot, variant), by_row.get((task, preset, "", variant)))


def _pairing(runs: pd.DataFrame, baseline: pd.DataFrame, paired_seeds: list) -> str:
    """How a row was compared with its baseline: "paired", "paired on k of m seeds (why not the others)"
    or "unpaired (why)"."""
    common = sorted(set(runs["seed"]) & set(baseline["seed"]))
    unpaired = [seed for seed in common if seed not in paired_seeds]
    if not unpaired:
        if len(paired_seeds) >= 2:
            return "paired"
        return "unpaired (no seed in common with the baseline)" if not common else "paired on a single seed: no test"
    seed = unpaired[0]
    why = _protocol_mismatch(runs[runs["seed"] == seed].iloc[0], baseline[baseline["seed"] == seed].iloc[0])
    if len(paired_seeds) >= 2:
        return f"paired on {len(paired_seeds)} of {len(common)} seeds (seed {seed}: {why})"
    return f"unpaired (one seed paired; seed {seed}: {why})" if paired_seeds else f"unpaired ({why})"


def _protocol_mismatch(run: pd.Series, reference: pd.Series) -> str:
    """Why two runs at one seed are not paired: the protocol the store lacks for them, or what differs."""
    missing = [c for c in PROTOCOL if not run[c] or not reference[c]]
    if missing:
        lacking = [whose for whose, r in (("this row's runs", run), ("the baseline's runs", reference))
                   if not all(r[c] for c in PROTOCOL)]
        what = "protocol" if len(missing) == len(PROTOCOL) else ", ".join(missing)
        return f"the store records no {what} for {'these runs' if len(lacking) == 2 else lacking[0]}"
    return "; ".join(f"{c} {'differ' if c.endswith('s') else 'differs'}: {run[c] or 'none recorded'} vs "
                     f"{reference[c] or 'none recorded'}" for c in (*PROTOCOL, *SAME_DATA) if run[c] != reference[c])


def summarize(results: pd.DataFrame, reference: str = "baseline") -> pd.DataFrame:
    """Per variant: mean, std and count (``seeds``) over seeds, ``class_agnostic`` and ``context`` (the
    means of ``value_class_agnostic``, detection's class-agnostic AP, and of ``value_context``, the
    diagnostic tasks' context accuracy) and the comparison with the baseline, or with the row
    ``reference`` where a task (and slot) has one (e.g. E2 in a window against dynamic convolution).

    Unpaired: ``delta``, the difference of the means; ``delta_t`` and ``welch_p``, Welch's t and its
    two-sided p (:func:`~attnbench.analysis.stats.welch_test`), where both rows have two seeds or more.

    Paired: a row's run at seed s and the baseline's run at s (for NMT the shared baseline) are paired
    when they share the protocol (:func:`paired_differences`). Over the n paired seeds, ``paired_delta``
    and ``paired_std`` are the mean and sample std of d_s = row_s - baseline_s, ``paired_t =
    paired_delta / (paired_std / sqrt(n))`` and ``paired_p`` its two-sided p from Student's t with n - 1
    degrees of freedom (scipy.stats.ttest_rel's test). With one pair only ``paired_delta`` (its
    difference) is set, with none nothing (``paired_seeds`` counts them); with ``paired_std`` 0 the t
    is ±inf and p 0, unless the mean is 0 too (NaN). ``wilcoxon_p`` is the signed-rank test's p of the
    same d_s (:func:`~attnbench.analysis.stats.wilcoxon_p`: zero differences dropped). ``pairing`` says
    how the row was compared: "paired", "paired on k of m seeds (why not the others)", "paired on a
    single seed: no test" or "unpaired (why)"; "" for baselines and rows without one.

    ``p`` is the paired p where a row has two paired seeds or more, else Welch's; ``p_holm`` is ``p``
    adjusted by Holm's step-down (:func:`~attnbench.analysis.stats.holm`) over the rows of one task,
    preset and slot, all compared with the same reference.

    How far the attention opened: ``gate_lowest`` and ``gate_highest``, the smallest and largest of the
    runs' ``gate_max`` (each run's largest final |gamma|), ``gate_loss_lowest`` and ``gate_loss_highest``
    the same of ``gate_loss_max`` (how far the loss, not weight decay, moved each run's gates), and
    ``offset_px``, the mean of the runs' ``offset_mean_px`` (deformable offsets, pixels); NaN where no run
    records them.

    Where the attention looked: ``mass`` and ``mass_chance``, the means of the runs' ``mass_context`` (the
    attention mass of the object queries on their deciding context) and ``mass_context_chance`` (the
    context's share of the image: uniform attention's mass); NaN where no run records them.

    Diagnostic rows (a context accuracy recorded): ``learnt`` of ``context_seeds`` runs learnt the rule
    (context accuracy at least :data:`~attnbench.analysis.stats.LEARNT_THRESHOLD`), and ``exact_p`` tests
    learnt against not against the reference (:func:`_learnt_test`; ``exact_paired`` says which test).
    """
    runs = successful_runs(results)
    summary = runs.groupby(ROW_KEY, dropna=False).agg(
        metric=("metric", "first"), mean=("value", "mean"), std=("value", "std"), seeds=("value", "count"),
        class_agnostic=("value_class_agnostic", "mean"), context=("value_context", "mean"),
        learnt=("learnt", "sum"), context_seeds=("value_context", "count"), macs_model=("macs_model", "mean"),
        macs_modules=("macs_modules", "mean"), params_model=("params_model", "mean"),
        gate_lowest=("gate_max", "min"), gate_highest=("gate_max", "max"),
        gate_loss_lowest=("gate_loss_max", "min"), gate_loss_highest=("gate_loss_max", "max"),
        offset_px=("offset_mean_px", "mean"), mass=("mass_context", "mean"),
        mass_chance=("mass_context_chance", "mean")).reset_index()
    summary["std"] = summary["std"].fillna(0.0)
    summary = _spread_shared_baselines(summary)
    keys = ["task", "preset", "slot"]
    baseline = summary.loc[summary["variant"] == reference, [*keys, "mean", "std", "seeds"]]
    matched = summary[keys].merge(baseline, on=keys, how="left")  # row for row: a left merge keeps the order
    summary["delta"] = summary["mean"] - matched["mean"]
    t, p = welch_test(summary["delta"], summary["std"], summary["seeds"], matched["std"], matched["seeds"])
    compared = summary["variant"] != reference
    summary["delta_t"], summary["welch_p"] = t.where(compared), p.where(compared)
    by_row, rows = runs_by_row(runs), []
    for task, preset, slot, variant in summary[ROW_KEY].itertuples(index=False):
        base = row_runs(by_row, task, preset, slot, reference)
        if variant == reference or base is None:
            rows.append({**paired_statistics(pd.Series(dtype=float)), "pairing": ""})
            continue
        mine = row_runs(by_row, task, preset, slot, variant)
        differences = paired_differences(mine, base)
        rows.append({**paired_statistics(differences), "wilcoxon_p": wilcoxon_p(differences),
                     "pairing": _pairing(mine, base, list(differences.index)), **_learnt_test(mine, base)})
    summary = pd.concat([summary, pd.DataFrame(rows, index=summary.index, columns=_COMPARED_COLUMNS)], axis=1)
    summary["p"] = summary["paired_p"].where(summary["paired_seeds"] >= 2, summary["welch_p"])
    summary["p_holm"] = summary.groupby(keys)["p"].transform(holm)
    return summary.sort_values(["task", "preset", "slot", "macs_model"]).reset_index(drop=True)


def _learnt_test(runs: pd.DataFrame, reference: pd.DataFrame) -> dict:
    """Learnt the rule or not, against the reference, over the runs with a context accuracy: McNemar's
    exact p of the seeds where the runs pair (:func:`paired_differences`), two or more of them, counting
    the seeds learnt by this row only against those learnt by the reference only (``exact_paired``);
    else Fisher's exact p of the learnt and not learnt runs of each. NaN where either has none."""
    recorded = [frame[frame["value_context"].notna()].assign(value=lambda f: f["learnt"].astype(float))
                for frame in (runs, reference)]
    if any(frame.empty for frame in recorded):
        return dict(exact_p=math.nan, exact_paired=False)
    changes = paired_differences(*recorded)  # +1: learnt by this row only, -1: by the reference only
    if len(changes) >= 2:
        return dict(exact_p=mcnemar_exact_p(int((changes > 0).sum()), int((changes < 0).sum())), exact_paired=True)
    mine, base = recorded
    return dict(exact_p=fisher_exact_p(int(mine["value"].sum()), len(mine), int(base["value"].sum()), len(base)),
                exact_paired=False)


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


def comparison_table(results: pd.DataFrame, fmt: str = "markdown", reference: str = "baseline",
                     holm_adjusted: bool = True) -> str:
    """The :func:`summarize` table as text, markdown or csv: mean ± std over seeds, the delta against
    the baseline and its Welch t; ``paired Δ`` (mean ± std of the paired differences; the difference
    and ``(1 seed)`` for one pair) and ``paired t`` where a row has two paired seeds or more; ``p``,
    two-sided: the paired p where there is one, else Welch's followed by ``u`` (unpaired), e.g.
    ``0.004`` and ``0.210u`` (``<0.001`` below 0.001); ``p_holm``, that p Holm-adjusted over the rows of
    a task (and slot), left out when ``holm_adjusted`` is false; ``p_wilcoxon``, the signed-rank test's
    p of the paired differences; for detection, ``class-agnostic AP`` (blank where the store has none);
    for the diagnostic tasks, ``context accuracy``, ``learnt`` (``k/n``: k of the n runs learnt the rule)
    and ``p_exact``, McNemar's exact p where runs pair, else Fisher's followed by ``u``; where runs record
    them, ``gate |γ|`` (the range over the runs of their largest final gate), ``gate moved by loss`` (the
    range of ``gate_loss_max``: how far the loss, not weight decay, moved the gates) and ``offset px`` (mean
    deformable offset length) and ``context mass (chance)`` (the mean attention mass on the deciding
    context, and in brackets uniform attention's); and the model's and attention's MACs. ``reference``
    compares every row with that row instead of the baseline (:func:`summarize`).
    """
    s = summarize(results, reference)
    unpaired = (s["paired_seeds"] < 2).map({True: "u", False: ""})
    columns = {
        "task": s["task"] + s["slot"].map(lambda x: f"/{x}" if x else ""), "preset": s["preset"],
        "variant": s["variant"], "metric": s["metric"],
        "mean ± std": [f"{m:.4f} ± {d:.4f}" for m, d in zip(s["mean"], s["std"])], "seeds": s["seeds"],
        f"delta vs {reference}": s["delta"].map(lambda d: "" if pd.isna(d) else f"{d:+.4f}"),
        "t": s["delta_t"].map(lambda t: "" if pd.isna(t) else f"{t:+.1f}"),
        "paired Δ": [f"{d:+.4f} ± {sd:.4f}" if n >= 2 else f"{d:+.4f} (1 seed)" if n == 1 else ""
                     for d, sd, n in zip(s["paired_delta"], s["paired_std"], s["paired_seeds"])],
        "paired t": s["paired_t"].map(lambda t: "" if pd.isna(t) else f"{t:+.1f}"),
        "p": list(map(p_text, s["p"], unpaired)), "p_holm": list(map(p_text, s["p_holm"], unpaired)),
        "p_wilcoxon": s["wilcoxon_p"].map(p_text)}
    if not holm_adjusted:
        del columns["p_holm"]
    for column, label in (("class_agnostic", "class-agnostic AP"), ("context", "context accuracy")):
        if s[column].notna().any():
            columns[label] = ["" if pd.isna(x) else f"{x:.4f}" for x in s[column]]
    if s["context"].notna().any():
        columns["learnt"] = [f"{k}/{n}" if n else "" for k, n in zip(s["learnt"], s["context_seeds"])]
        columns["p_exact"] = list(map(p_text, s["exact_p"], s["exact_paired"].eq(True).map({True: "", False: "u"})))
    for column, label in (("gate", "gate |γ|"), ("gate_loss", "gate moved by loss")):
        if s[f"{column}_highest"].notna().any():
            columns[label] = list(map(range_text, s[f"{column}_lowest"], s[f"{column}_highest"]))
    if s["offset_px"].notna().any():
        columns["offset px"] = ["" if pd.isna(x) else f"{x:.2f}" for x in s["offset_px"]]
    if s["mass"].notna().any():
        columns["context mass (chance)"] = ["" if pd.isna(m) else f"{m:.3f} ({c:.3f})"
                                            for m, c in zip(s["mass"], s["mass_chance"])]
    columns |= {"GMACs model": (s["macs_model"] / 1e9).round(3), "GMACs attention": (s["macs_modules"] / 1e9).round(4)}
    table = pd.DataFrame(columns)
    if fmt == "csv":
        return table.to_csv(index=False)
    if fmt == "markdown":
        text = {"task", "preset", "variant", "metric", "mean ± std"}
        return table.to_markdown(index=False, disable_numparse=True,  # keeps the signs of the deltas
                                 colalign=["left" if c in text else "right" for c in table.columns])
    if fmt == "text":
        return table.to_string(index=False)
    raise ValueError(f"unknown format {fmt!r}; choose from text, markdown, csv")


def p_text(p: float, mark: str = "") -> str:
    """A p-value as the tables print it: three decimals, ``<0.001`` below, ``mark`` after; "" for NaN."""
    if pd.isna(p):
        return ""
    return ("<0.001" if p < 0.001 else f"{p:.3f}") + mark


def pairing_notes(summary: pd.DataFrame) -> list[str]:
    """One line for each way rows of a :func:`summarize` table were compared other than fully paired,
    naming the rows: ``det/0010: unpaired (threads differ: 1 vs 2)``, or ``det (all 34 rows): ...`` when
    every row of a task (and slot) with a baseline was compared that way."""
    several_presets = summary["preset"].nunique() > 1
    notes = []
    for pairing, rows in summary[~summary["pairing"].isin(["", "paired"])].groupby("pairing", sort=False):
        names = []
        for (task, preset, slot), group in rows.groupby(["task", "preset", "slot"], sort=False):
            label = task + (f"/{slot}" if slot else "") + (f" ({preset})" if several_presets else "")
            compared = summary[(summary["task"] == task) & (summary["preset"] == preset) & (summary["slot"] == slot)
                               & (summary["pairing"] != "")]
            if len(group) > 1 and len(group) == len(compared):
                names.append(f"{label} (all {len(group)} rows)")
            else:
                names += [f"{label}/{variant}" for variant in group["variant"]]
        notes.append(f"{', '.join(names)}: {pairing}")
    return notes



def cost_table(results: pd.DataFrame) -> pd.DataFrame:
    """Where each finished run's time went (``compare.py --cost``): its wall time, training steps,
    validations and the rest (``outside_seconds``: set-up, FLOPs count, validation, logging), and
    ``outside %``, that part's share of the run. Runs recorded before these columns are left out, and resumed
    runs recorded before their last attempt was told apart (``outside_seconds`` below 0)."""
    columns = ["run_seconds", "train_seconds", "val_seconds", "outside_seconds"]
    if any(c not in results for c in columns):
        return pd.DataFrame(columns=["task", "preset", "variant", "seed", *columns, "outside %"])
    ok = finished_runs(results)
    ok = ok[ok[columns].notna().all(axis=1) & (ok["outside_seconds"] >= 0)]
    table = ok[["task", "preset", "variant", "seed", *columns]].assign(seed=ok["seed"].astype(int))
    table["outside %"] = (100 * table["outside_seconds"] / table["run_seconds"]).round(1)
    return table.sort_values(["task", "preset", "variant", "seed"]).reset_index(drop=True)


def progress(run_ids: list[str], rows: list[tuple[str, str, str]], results: pd.DataFrame, jobs: int,
             costs: pd.DataFrame | None = None) -> dict:
    """What a part's store ``results`` holds of its planned runs (``run_ids``, each with its ``(task, preset,
    variant)`` in ``rows``): runs ``planned``, ``done`` (``ok``), ``failed`` (recorded, not ok) and ``left``, and
    ``hours left`` at ``jobs`` runs at a time. A run left costs the median ``run_seconds`` of the finished runs of
    its task, preset and variant in ``costs`` (default: ``results``), else of its task and preset; unknown (NaN)
    when ``costs`` has neither."""
    recorded = results.drop_duplicates("run_id", keep="last").set_index("run_id")["status"]
    status = recorded.reindex(list(dict.fromkeys(run_ids)))
    ok = finished_runs(results if costs is None else costs)
    seconds = pd.to_numeric(ok["run_seconds"], errors="coerce")
    by_row = seconds.groupby([ok["task"], ok["preset"], ok["variant"]]).median()
    by_task = seconds.groupby([ok["task"], ok["preset"]]).median()
    left = [row for run_id, row in dict(zip(run_ids, rows)).items() if status.get(run_id) != "ok"]
    cost = sum(by_row.get(row, by_task.get(row[:2], math.nan)) for row in left)
    return {"planned": len(status), "done": int((status == "ok").sum()),
            "failed": int((status.notna() & (status != "ok")).sum()), "left": len(left),
            "hours left": round(cost / jobs / 3600, 1) if left else 0.0}


def context_values(results: pd.DataFrame) -> pd.DataFrame:
    """The runs that record a context accuracy, with it as their value (metric ``context/accuracy``)."""
    if "value_context" not in results:
        return results.iloc[:0]
    recorded = results[pd.to_numeric(results["value_context"], errors="coerce").notna()]
    return recorded.assign(value=recorded["value_context"].astype(float), metric="context/accuracy")


def per_seed_table(results: pd.DataFrame) -> pd.DataFrame:
    """``--per-seed``: one row per task, preset, slot and seed, one column per variant: each run's value."""
    ok = finished_runs(results)
    ok = ok.assign(slot=ok["slot"].fillna(""), seed=ok["seed"].astype(int))
    table = ok.pivot_table(index=["task", "preset", "slot", "seed"], columns="variant", values="value", aggfunc="first")
    variants = sorted(table.columns, key=lambda v: (v != "baseline", v))
    table = table[variants].round(4).astype(object).where(table[variants].notna(), "").reset_index()
    table.columns.name = None  # a seed a variant did not run at is blank
    return table.drop(columns="slot") if not (table["slot"] != "").any() else table
