"""The statistics of the report: t-tests, the Wilcoxon signed-rank test, exact tests of a rule learnt,
Holm's adjustment, and the power of the paired t-test.

scipy's tests where scipy has them (``wilcoxon``, ``binomtest``, ``fisher_exact``, the t and noncentral
t distributions); each function takes plain numbers or a Series, not a results store.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import optimize, stats

LEARNT_THRESHOLD = 0.9
"""A run learnt a diagnostic rule when its context accuracy is at least this: a run that classifies by the
context only part of the time sits at 0.5 (chance) to 0.8, one that learnt the rule at 0.97 to 1.0
(0.51 to 0.78 against 0.976 to 1.0 in results/flags, docs/diagnostics.md), and 0.9 lies between."""


def pooled_std(stds: pd.Series, counts: pd.Series) -> float:
    """``sqrt(sum (n_i - 1) s_i^2 / sum (n_i - 1))`` over the entries with ``n_i >= 2``; NaN without any."""
    repeated = counts > 1
    dof = (counts[repeated] - 1).sum()
    return float((stds[repeated] ** 2 * (counts[repeated] - 1)).sum() / dof) ** 0.5 if dof else math.nan


def t_test(estimate: float, se: float, dof: float) -> tuple[float, float]:
    """``t = estimate / se`` and its two-sided p from Student's t with ``dof`` degrees of freedom (the
    normal where ``dof`` is inf). With ``se`` 0: t = ±inf and p = 0 for a nonzero estimate, NaN for 0."""
    if se == 0:
        return (math.copysign(math.inf, estimate), 0.0) if estimate != 0 else (math.nan, math.nan)
    t = estimate / se
    return t, float(2 * stats.t.sf(abs(t), dof))


def welch_test(delta: pd.Series, std: pd.Series, n: pd.Series, std_reference: pd.Series,
               n_reference: pd.Series) -> tuple[pd.Series, pd.Series]:
    """Welch's t of a difference of means, element-wise: ``t = delta / sqrt(a + b)`` with ``a = std^2 / n``,
    ``b = std_reference^2 / n_reference``, and its two-sided p from Student's t with the
    Welch–Satterthwaite ``(a + b)^2 / (a^2 / (n - 1) + b^2 / (n_reference - 1))`` degrees of freedom
    (scipy.stats.ttest_ind(equal_var=False)); NaN where either side has one run or ``a + b`` is 0."""
    a, b = std ** 2 / n, std_reference ** 2 / n_reference
    tested = (n > 1) & (n_reference > 1) & (a + b > 0)
    t = (delta / (a + b) ** 0.5).where(tested)
    dof = ((a + b) ** 2 / (a ** 2 / (n - 1) + b ** 2 / (n_reference - 1))).where(tested)
    return t, pd.Series(2 * stats.t.sf(t.abs(), dof), index=t.index)


def paired_statistics(differences: pd.Series) -> dict:
    """Over n paired differences d: ``paired_delta`` and ``paired_std``, their mean and sample std,
    ``paired_t = paired_delta / (paired_std / sqrt(n))`` and its two-sided p from Student's t with n - 1
    degrees of freedom (scipy.stats.ttest_rel); with one pair only its difference, with none nothing."""
    n = len(differences)
    if n < 2:  # one pair: its difference, and no spread to test it against
        delta = float(differences.iloc[0]) if n else math.nan
        return dict(paired_seeds=n, paired_delta=delta, paired_std=math.nan, paired_t=math.nan, paired_p=math.nan)
    mean, std = differences.mean(), differences.std()
    t, p = t_test(mean, std / n ** 0.5, n - 1)
    return dict(paired_seeds=n, paired_delta=mean, paired_std=std, paired_t=t, paired_p=p)


#: Decimals paired differences are rounded to before ranking: the stores' metrics have at most 6 (mmdet's AP 3,
#: mmseg's IoU 2, BLEU's float), so this removes only the float noise of subtracting them, which would hide ties
#: (0.013000000000000012 and -0.012999999999999956 are |d| = 0.013 twice).
DIFFERENCE_DECIMALS = 10


def wilcoxon_p(differences: pd.Series) -> float:
    """The two-sided p of Wilcoxon's signed-rank test of paired differences (scipy.stats.wilcoxon), each
    rounded to :data:`DIFFERENCE_DECIMALS` places: zero differences are dropped (``zero_method='wilcox'``),
    the rest ranked by |d|; the p is exact without ties or zeros (up to 50 pairs), from all 2^n sign flips
    with them (up to 13 pairs), else from the normal. NaN with fewer than two pairs (as the paired t) or no
    nonzero difference."""
    differences = np.round(np.asarray(differences, dtype=float), DIFFERENCE_DECIMALS)
    if len(differences) < 2 or not (differences != 0).any():
        return math.nan
    return float(stats.wilcoxon(differences, zero_method="wilcox").pvalue)


def mcnemar_exact_p(gained: int, lost: int) -> float:
    """McNemar's exact test of paired yes/no outcomes: of the ``gained + lost`` discordant pairs (yes for
    this row and no for the reference, or the reverse), the two-sided binomial p of ``gained`` at
    probability 1/2 (scipy.stats.binomtest); 1 without discordant pairs (nothing against the null)."""
    if gained + lost == 0:
        return 1.0
    return float(stats.binomtest(gained, gained + lost, 0.5).pvalue)


def fisher_exact_p(yes: int, n: int, yes_reference: int, n_reference: int) -> float:
    """Fisher's exact test of unpaired yes/no outcomes: the two-sided p of the 2x2 table
    ``[[yes, n - yes], [yes_reference, n_reference - yes_reference]]`` (scipy.stats.fisher_exact)."""
    return float(stats.fisher_exact([[yes, n - yes], [yes_reference, n_reference - yes_reference]]).pvalue)


def holm(p: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjustment of m p-values (NaN ones left out of m, and NaN): with p sorted,
    ``p_(0) <= ... <= p_(m-1)``, the adjusted ``p_(i) = min(1, max_{j <= i} (m - j) p_(j))``, in the
    original order. Rejecting where it is at most alpha keeps the family-wise error rate at alpha."""
    p = np.asarray(p, dtype=float)
    tested = np.flatnonzero(~np.isnan(p))
    order = tested[np.argsort(p[tested], kind="stable")]
    adjusted = np.full_like(p, math.nan)
    adjusted[order] = np.minimum(1.0, np.maximum.accumulate((len(order) - np.arange(len(order))) * p[order]))
    return adjusted


def _power_at(noncentrality: float, n: int, alpha: float) -> float:
    """``P(T > c) + P(T < -c)``, the lower tail as ``P(T' > c)`` for T' of noncentrality -lambda (the same
    by symmetry; scipy's far lower cdf can come out NaN)."""
    critical = stats.t.ppf(1 - alpha / 2, n - 1)
    return float(stats.nct.sf(critical, n - 1, noncentrality) + stats.nct.sf(critical, n - 1, -noncentrality))


def paired_power(effect: float, sd: float, n: int, alpha: float = 0.05) -> float:
    """Power of the two-sided paired t-test at significance alpha over n seeds whose differences have
    mean ``effect`` and standard deviation ``sd``: ``P(|T| > t_{1-alpha/2, n-1})`` with T noncentral t,
    n - 1 degrees of freedom and noncentrality ``effect * sqrt(n) / sd``."""
    return _power_at(effect * n ** 0.5 / sd, n, alpha)


def min_detectable_effect(sd: float, n: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """The smallest mean difference D that a two-sided paired t-test over n seeds detects at significance
    alpha with the given power: ``D = lambda * sd / sqrt(n)``, lambda the noncentrality at which
    :func:`paired_power` reaches ``power`` (solved with Brent's method; for large n, D tends to the
    normal approximation ``(z_{1-alpha/2} + z_power) * sd / sqrt(n)``). NaN for n < 2 or an unknown sd."""
    if not alpha < power < 1:
        raise ValueError(f"power {power} must lie between alpha {alpha} and 1")
    if n < 2 or not sd >= 0:
        return math.nan
    upper = 1.0
    while _power_at(upper, n, alpha) < power:
        upper *= 2
    return optimize.brentq(lambda nc: _power_at(nc, n, alpha) - power, 0.0, upper) * sd / n ** 0.5


def seeds_needed(sd: float, effect: float, alpha: float = 0.05, power: float = 0.8) -> float:
    """The smallest n >= 2 with ``paired_power(effect, sd, n, alpha) >= power`` (the power grows with n:
    found by doubling n, then bisection); 2 where sd is 0, NaN for an unknown sd or a zero effect."""
    if not alpha < power < 1:
        raise ValueError(f"power {power} must lie between alpha {alpha} and 1")
    if not sd >= 0 or effect == 0 or pd.isna(effect):
        return math.nan
    if sd == 0:
        return 2

    def reaches(n: int) -> bool:
        return paired_power(abs(effect), sd, n, alpha) >= power

    too_few, enough = 1, 2  # one seed has no test
    while not reaches(enough):
        too_few, enough = enough, 2 * enough
    while enough - too_few > 1:
        middle = (too_few + enough) // 2
        too_few, enough = (too_few, middle) if reaches(middle) else (middle, enough)
    return enough
