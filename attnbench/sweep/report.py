"""Tables and accuracy-versus-FLOPs plots from the results store (the study's Figure 2)."""
from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from attnbench.attention.factors import ALL_FACTORS
from attnbench.sweep.stats import (LEARNT_THRESHOLD, fisher_exact_p, holm, mcnemar_exact_p, min_detectable_effect,
                                   paired_statistics, pooled_std, seeds_needed, t_test, welch_test, wilcoxon_p)
from attnbench.sweep.store import finished_runs
from attnbench.variants import SURVEY_VARIANTS, TRANSLATION_TASKS, Variant

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

#: A run's protocol: two runs at one seed are paired only when they agree on all of these, none missing
#: (``world_size``, the processes a run trained on, reads as 1 for rows written before it was recorded).
PROTOCOL = ("threads", "world_size", "device", "torch_version", "mmcv_version")

_COMPARED_COLUMNS = ["paired_seeds", "paired_delta", "paired_std", "paired_t", "paired_p", "wilcoxon_p", "pairing",
                     "exact_p", "exact_paired"]


def successful_runs(results: pd.DataFrame) -> pd.DataFrame:
    """The runs with status ``ok``: slot ``""`` where none, each :data:`PROTOCOL` column as text (``""``
    where the store records none, ``threads`` read back as 2.0 as ``"2"``), ``value_class_agnostic``
    and ``value_context`` (and ``gate_max``, ``gate_loss_max``, ``gate_loss_opened``, ``offset_mean_px``,
    ``mass_context``, ``mass_context_chance``) NaN where the store has no such column, and ``learnt``:
    whether the run learnt its diagnostic rule (context accuracy at least
    :data:`~attnbench.sweep.stats.LEARNT_THRESHOLD`; False without one)."""
    ok = finished_runs(results).copy()
    ok["slot"] = ok["slot"].fillna("")
    world = ok["world_size"] if "world_size" in ok else pd.Series(math.nan, index=ok.index)
    recorded = ok["threads"].notna() if "threads" in ok else False
    ok["world_size"] = world.mask(world.isna() & recorded, 1)  # a protocol recorded before world_size: 1 rank
    for column in PROTOCOL:
        ok[column] = ok[column].map(_protocol_text) if column in ok else ""
    for column in ("value_class_agnostic", "value_context", "gate_max", "gate_loss_max", "gate_loss_opened",
                   "offset_mean_px", "mass_context", "mass_context_chance"):
        ok[column] = pd.to_numeric(ok[column] if column in ok else math.nan, errors="coerce")
    ok["learnt"] = ok["value_context"] >= LEARNT_THRESHOLD
    return ok


def _range_text(low: float, high: float) -> str:
    """``0.990-1.020``, one value where both are equal, blank where there is none."""
    return "" if pd.isna(low) else f"{low:.3f}" if low == high else f"{low:.3f}-{high:.3f}"


def _protocol_text(value) -> str:
    if pd.isna(value) or value == "":
        return ""
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def paired_differences(runs: pd.DataFrame, reference: pd.DataFrame) -> pd.Series:
    """``value - reference value`` per seed (the index), over the seeds at which both have a run with the
    same, fully recorded :data:`PROTOCOL` (the mean where a seed has several such pairs of runs).

    The one pairing rule of the report: the table's paired statistics, the paired effects and the power
    analysis all take their differences from here. Both frames come from :func:`successful_runs`."""
    recorded = [frame.loc[(frame[list(PROTOCOL)] != "").all(axis=1), ["seed", *PROTOCOL, "value"]]
                for frame in (runs, reference)]
    pairs = recorded[0].merge(recorded[1], on=["seed", *PROTOCOL], suffixes=("", "_reference"))
    return (pairs["value"] - pairs["value_reference"]).groupby(pairs["seed"]).mean()


def runs_by_row(runs: pd.DataFrame) -> dict[tuple, pd.DataFrame]:
    """(task, preset, slot, variant) -> that row's runs."""
    return {key: rows for key, rows in runs.groupby(_GROUP)}


def _row_runs(by_row: dict[tuple, pd.DataFrame], task: str, preset: str, slot: str,
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
    return "; ".join(f"{c} {'differ' if c.endswith('s') else 'differs'}: {run[c]} vs {reference[c]}"
                     for c in PROTOCOL if run[c] != reference[c])


def summarize(results: pd.DataFrame, reference: str = "baseline") -> pd.DataFrame:
    """Per variant: mean, std and count (``seeds``) over seeds, ``class_agnostic`` and ``context`` (the
    means of ``value_class_agnostic``, detection's class-agnostic AP, and of ``value_context``, the
    diagnostic tasks' context accuracy) and the comparison with the baseline, or with the row
    ``reference`` where a task (and slot) has one (e.g. E2 in a window against dynamic convolution).

    Unpaired: ``delta``, the difference of the means; ``delta_t`` and ``welch_p``, Welch's t and its
    two-sided p (:func:`~attnbench.sweep.stats.welch_test`), where both rows have two seeds or more.

    Paired: a row's run at seed s and the baseline's run at s (for NMT the shared baseline) are paired
    when they share the protocol (:func:`paired_differences`). Over the n paired seeds, ``paired_delta``
    and ``paired_std`` are the mean and sample std of d_s = row_s - baseline_s, ``paired_t =
    paired_delta / (paired_std / sqrt(n))`` and ``paired_p`` its two-sided p from Student's t with n - 1
    degrees of freedom (scipy.stats.ttest_rel's test). With one pair only ``paired_delta`` (its
    difference) is set, with none nothing (``paired_seeds`` counts them); with ``paired_std`` 0 the t
    is ±inf and p 0, unless the mean is 0 too (NaN). ``wilcoxon_p`` is the signed-rank test's p of the
    same d_s (:func:`~attnbench.sweep.stats.wilcoxon_p`: zero differences dropped). ``pairing`` says
    how the row was compared: "paired", "paired on k of m seeds (why not the others)", "paired on a
    single seed: no test" or "unpaired (why)"; "" for baselines and rows without one.

    ``p`` is the paired p where a row has two paired seeds or more, else Welch's; ``p_holm`` is ``p``
    adjusted by Holm's step-down (:func:`~attnbench.sweep.stats.holm`) over the rows of one task,
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
    (context accuracy at least :data:`~attnbench.sweep.stats.LEARNT_THRESHOLD`), and ``exact_p`` tests
    learnt against not against the reference (:func:`_learnt_test`; ``exact_paired`` says which test).
    """
    runs = successful_runs(results)
    summary = runs.groupby(_GROUP, dropna=False).agg(
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
    for task, preset, slot, variant in summary[_GROUP].itertuples(index=False):
        base = _row_runs(by_row, task, preset, slot, reference)
        if variant == reference or base is None:
            rows.append({**paired_statistics(pd.Series(dtype=float)), "pairing": ""})
            continue
        mine = _row_runs(by_row, task, preset, slot, variant)
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
            columns[label] = list(map(_range_text, s[f"{column}_lowest"], s[f"{column}_highest"]))
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


TERMS = ("E1", "E2", "E3", "E4")


def factor_effects(results: pd.DataFrame) -> pd.DataFrame:
    """Main effect of each term of the generalized attention, per task (and slot).

    For term ``Ek`` every factor set with ``Ek`` on is paired with the same set without it (on the
    vision tasks the baseline is the empty set ``0000``; on translation the baseline is standard
    attention everywhere and is left out): up to 8 pairs per term, fewer when rows are missing. On the
    vision tasks a last row, term ``any``, compares attention of any kind with none: its pairs are each
    factor set with the baseline. ``effect`` is the mean over the pairs of each pair's difference,
    ``effect_std``, ``min`` and ``max`` their spread. ``seed_std`` is the pooled standard deviation over
    seeds of the task's variants run with two seeds or more (NaN without).

    Paired (``paired`` true) when every pair's runs share a protocol (:func:`paired_differences`) at two
    seeds or more common to all the pairs, S: a pair's difference is the mean over S of on_s - off_s,
    the effect at seed s is e_s = the mean over pairs of on_s - off_s, and ``effect_se = std(e_s) /
    sqrt(|S|)``; ``z = effect / effect_se`` is then a t with |S| - 1 degrees of freedom, from which ``p``
    (two-sided) comes. The spread of the per-seed effect, rather than a pooled variance of the pairs'
    differences, keeps what the pairs share at a seed: the pairs of ``any`` all subtract the same
    baseline run, and runs at one seed start from the same initialisation and data order, so the pairs'
    differences are not independent and a pooled variance would misstate the error.

    Unpaired otherwise: a pair's difference is that of the seed means, ``effect_se = seed_std *
    sqrt(sum_r c_r^2 / n_r)`` over the rows r in the pairs, with n_r seeds and net weight c_r in the
    effect (±1/pairs for a term's rows, whose pairs share none: ``seed_std * sqrt(sum over pairs of
    1/n_on + 1/n_off) / pairs``; for ``any`` over K sets, 1/K per set and -1 for the baseline), and ``p``
    is two-sided from the normal (seed_std taken as known).
    """
    s = summarize(results)
    by_row = runs_by_row(successful_runs(results))
    rows = []
    for (task, preset, slot), group in s.groupby(["task", "preset", "slot"]):
        factor_sets = group[group["variant"].isin(ALL_FACTORS)]
        means = dict(zip(factor_sets["variant"], factor_sets["mean"]))
        seeds = dict(zip(group["variant"], group["seeds"]))
        runs = {v: by_row[(task, preset, slot, v)] for v in means}
        if task not in TRANSLATION_TASKS and "baseline" in set(group["variant"]):
            means["0000"] = group.loc[group["variant"] == "baseline", "mean"].iloc[0]
            seeds["0000"] = seeds["baseline"]
            runs["0000"] = _row_runs(by_row, task, preset, slot)
        seed_std = pooled_std(group["std"], group["seeds"])
        terms = {term: [(v, v[:k] + "0" + v[k + 1:]) for v in means if v[k] == "1" and v[:k] + "0" + v[k + 1:] in means]
                 for k, term in enumerate(TERMS)}
        if "0000" in means:
            terms["any"] = [(v, "0000") for v in means if v != "0000"]
        for term, pairs in terms.items():
            if pairs:
                rows.append(dict(task=task, preset=preset, slot=slot, term=term, pairs=len(pairs), seed_std=seed_std,
                                 **_effect(pairs, means, seeds, runs, seed_std)))
    return pd.DataFrame(rows, columns=["task", "preset", "slot", "term", "pairs", "paired", "effect", "effect_std",
                                       "min", "max", "seed_std", "effect_se", "z", "p"])


def _effect(pairs: list[tuple[str, str]], means: dict, seeds: dict, runs: dict, seed_std: float) -> dict:
    """The effect of :func:`factor_effects` over (on, off) pairs of factor sets, paired where it can be."""
    per_pair = [paired_differences(runs[on], runs[off]) for on, off in pairs]
    common = sorted(set.intersection(*(set(d.index) for d in per_pair)))
    if len(common) >= 2:
        at_seed = pd.concat([d.loc[common] for d in per_pair], axis=1)  # one column per pair, one row per seed
        differences = at_seed.mean(axis=0)
        effect_se = at_seed.mean(axis=1).std() / len(common) ** 0.5
        z, p = t_test(differences.mean(), effect_se, len(common) - 1)
    else:
        differences = pd.Series([means[on] - means[off] for on, off in pairs])
        weight = defaultdict(float)
        for on, off in pairs:
            weight[on] += 1 / len(pairs)
            weight[off] -= 1 / len(pairs)
        effect_se = seed_std * sum(c ** 2 / seeds[v] for v, c in weight.items()) ** 0.5
        z, p = t_test(differences.mean(), effect_se, math.inf)
    return dict(paired=len(common) >= 2, effect=differences.mean(),
                effect_std=differences.std() if len(pairs) > 1 else math.nan, min=differences.min(),
                max=differences.max(), effect_se=effect_se, z=z, p=p)


def power_table(results: pd.DataFrame, alpha: float = 0.05, power: float = 0.8,
                effect: float | Mapping[str, float] | None = None) -> pd.DataFrame:
    """Per task (and NMT slot), what the seeds at hand can detect, for a paired t-test of a row against
    the baseline at significance alpha (two-sided) and the given power.

    ``sd_difference`` is the pooled std of the paired differences row - baseline over the rows with two
    paired seeds or more (``paired`` true) and ``seeds`` the median of their paired seeds; with no such
    row, ``sqrt(2)`` times the pooled seed std (the std of a difference of two independent runs) and the
    median seeds of the rows (``paired`` false). ``min_detectable_effect`` is what
    :func:`min_detectable_effect` gives for them; with ``effect`` (one number, or one per task),
    ``seeds_needed`` is :func:`seeds_needed` for it (NaN for tasks without one).
    """
    rows = []
    for (task, preset, slot), group in summarize(results).groupby(["task", "preset", "slot"]):
        compared = group[group["variant"] != "baseline"]
        if compared.empty:
            continue
        paired = compared[compared["paired_seeds"] >= 2]
        if len(paired):
            sd, n = pooled_std(paired["paired_std"], paired["paired_seeds"]), int(paired["paired_seeds"].median())
        else:
            sd, n = 2 ** 0.5 * pooled_std(group["std"], group["seeds"]), int(compared["seeds"].median())
        row = dict(task=task, preset=preset, slot=slot, metric=group["metric"].iloc[0], paired=len(paired) > 0,
                   seeds=n, sd_difference=sd, min_detectable_effect=min_detectable_effect(sd, n, alpha, power))
        if effect is not None:
            wanted = effect.get(task, math.nan) if isinstance(effect, Mapping) else effect
            row |= dict(effect=wanted, seeds_needed=seeds_needed(sd, wanted, alpha, power))
        rows.append(row)
    columns = ["task", "preset", "slot", "metric", "paired", "seeds", "sd_difference", "min_detectable_effect"]
    return pd.DataFrame(rows, columns=columns + ["effect", "seeds_needed"] * (effect is not None))


def cost_table(results: pd.DataFrame) -> pd.DataFrame:
    """Where each finished run's time went (``compare.py --cost``): its wall time, training steps,
    validations and the rest (``outside_seconds``: set-up, FLOPs count, validation, logging), and
    ``outside %``, that part's share of the run. Runs recorded before these columns are left out."""
    columns = ["run_seconds", "train_seconds", "val_seconds", "outside_seconds"]
    if any(c not in results for c in columns):
        return pd.DataFrame(columns=["task", "preset", "variant", "seed", *columns, "outside %"])
    ok = finished_runs(results)
    ok = ok[ok[columns].notna().all(axis=1)]
    table = ok[["task", "preset", "variant", "seed", *columns]].assign(seed=ok["seed"].astype(int))
    table["outside %"] = (100 * table["outside_seconds"] / table["run_seconds"]).round(1)
    return table.sort_values(["task", "preset", "variant", "seed"]).reset_index(drop=True)


def pareto_front(points: pd.DataFrame, cost: str = "macs_model") -> pd.DataFrame:
    """Variants no other variant beats with fewer (or equal) ``cost`` and a higher mean."""
    ordered = points.sort_values([cost, "mean"], ascending=[True, False])
    best, keep = float("-inf"), []
    for idx, row in ordered.iterrows():
        if row["mean"] > best:
            keep.append(idx)
            best = row["mean"]
    return ordered.loc[keep]


#: What a trade-off plot's x axis can be: the store's MAC column and the axis label.
COSTS = {"model": ("macs_model", "model GMACs (multiply-adds) at the task's input size"),
         "attention": ("macs_modules", "attention GMACs (the added modules' multiply-adds) at the task's input size")}


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
    note = f"largest final gate |γ| per gated run: {_range_text(gates.min(), gates.max())} ({_runs_text(gates)})"
    moved = runs.get("gate_loss_max", pd.Series(dtype=float)).dropna()
    if not moved.empty:
        note += (f"\ngate moved by the loss (not weight decay): {_range_text(moved.min(), moved.max())} "
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
    """Metric vs GMACs (``cost``: the model's or the attention's, :data:`COSTS`), one panel per task (and
    NMT slot; survey rows apart): per row its mean ± std over seeds and each seed's run as a small dot
    (rules learnt or not show as two clusters), one marker per kind of row, every point named (labels
    moved apart by adjustText). A one-line title per panel; the gates' range (:func:`gate_note`) in its
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
        x = points[column] / 1e9
        if points["seeds"].min() >= 2:
            front = pareto_front(points, column)
            ax.plot(front[column] / 1e9, front["mean"], "--", color="tab:green", label="Pareto frontier of the means",
                    zorder=1)
        seeds = points[_GROUP + ["kind", column]].merge(runs[_GROUP + ["value", "gate_max", "gate_loss_max"]], on=_GROUP)
        for kind, (label, marker, color) in ROW_KINDS.items():
            mine = points["kind"] == kind
            if mine.any():
                ax.errorbar(x[mine], points["mean"][mine], yerr=points["std"][mine], fmt=marker, color=color,
                            ecolor=matplotlib.colors.to_rgba(color, 0.35), ms=12 if kind == "baseline" else 6,
                            capsize=2, elinewidth=1, label=label, zorder=3 if kind == "baseline" else 2)
                dots = seeds[seeds["kind"] == kind]
                ax.scatter(dots[column] / 1e9, dots["value"], s=6, color=color, alpha=0.4, linewidths=0, zorder=2)
        task, preset = points["task"].iloc[0], points["preset"].iloc[0]
        if published and cost == "model" and task == "det" and preset == "full":
            ref = points[[("det", v) in PUBLISHED for v in points["variant"]]]
            ax.scatter(ref["macs_model"] / 1e9, [PUBLISHED["det", v][0] / 100 for v in ref["variant"]],
                       marker="x", color="black", label="published (mmdet model zoo), not measured")
        labels = [ax.text(xi, yi, name, fontsize=7) for xi, yi, name in zip(x, points["mean"], points["variant"])]
        ax.xaxis.set_major_locator(MaxNLocator(5))  # GMACs that differ in the 4th digit
        ax.ticklabel_format(useOffset=False)
        note = gate_note(seeds)
        ax.set_xlabel(xlabel + (f"\n{note}" if note else ""), fontsize=9)
        one_seed = points["seeds"].max() == 1
        ax.set_ylabel(f"{points['metric'].iloc[0]} ({'one seed' if one_seed else 'mean ± std over seeds, dots: seeds'})")
        ax.set_title(title + (": one seed, differences untested" if one_seed else ""), fontsize=10)
        ax.grid(alpha=0.3)
        legend.update({label: handle for handle, label in zip(*ax.get_legend_handles_labels())})
        adjust_text(labels, x=x.to_numpy(), y=points["mean"].to_numpy(), ax=ax, expand=(1.4, 1.8),
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
    """The study's Figure 4: per task (and NMT slot), the metric and the attention modules' GMACs
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
        for (token, line), color in zip(windowed.groupby("token", sort=True), ("tab:blue", "tab:orange", "tab:green")):
            label = f"E2 ({token}) in a window" if token in ALL_FACTORS else f"{token} convolution"
            row[0].errorbar(line["window"], line["mean"], yerr=line["std"], fmt="o-", color=color, capsize=2,
                            label=label)
            row[1].plot(line["window"], line["macs_modules"] / 1e9, "o-", color=color, label=label)
            free = points[(points["token"] == token) & points["window"].isna()]
            for value, macs in zip(free["mean"], free["macs_modules"]):
                row[0].axhline(value, ls="--", color=color, label=f"{token}, no window")
                row[1].axhline(macs / 1e9, ls="--", color=color, label=f"{token}, no window")
        for value in points.loc[points["token"] == "baseline", "mean"]:  # summarize() spreads NMT's into each slot
            row[0].axhline(value, ls=":", color="tab:red", label="baseline")
        title = f"{task}{'/' + slot if slot else ''} ({preset})"
        row[0].set_ylabel(f"{points['metric'].iloc[0]} (mean ± std over seeds)")
        row[1].set_ylabel("attention GMACs at the task's input size")
        for ax, what in zip(row, ("accuracy", "cost")):
            ax.set_xticks(sorted(windowed["window"].unique()))
            ax.set_xlabel("window size (keys along one axis)")
            ax.set_title(f"{title}: {what}")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
    return save_figure(fig, out_stem)


def save_figure(fig, out_stem: str | Path, bbox_inches: str | None = None) -> list[Path]:
    """Write ``fig`` as OUT_STEM.png and OUT_STEM.svg (their folder made where missing) and close it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    paths = [Path(out_stem).with_suffix(".png"), Path(out_stem).with_suffix(".svg")]
    paths[0].parent.mkdir(parents=True, exist_ok=True)
    for path in paths:
        fig.savefig(path, dpi=120, bbox_inches=bbox_inches)
    plt.close(fig)
    return paths
