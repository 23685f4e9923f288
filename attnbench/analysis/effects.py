"""Main effects of the terms E1 to E4 over the factor sets, and the power analysis: how many seeds a contrast
needs."""
from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping

import pandas as pd

from attnbench.attention.factors import ALL_FACTORS
from attnbench.analysis.stats import min_detectable_effect, pooled_std, seeds_needed, t_test
from attnbench.analysis.summary import paired_differences, row_runs, runs_by_row, successful_runs, summarize
from attnbench.variants import TRANSLATION_TASKS

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
            runs["0000"] = row_runs(by_row, task, preset, slot)
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
