"""The statistics of attnbench.analysis.stats, against scipy and against their definitions, on planted stores."""
import io
import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from attnbench.analysis.summary import comparison_table, summarize
from attnbench.analysis.stats import LEARNT_THRESHOLD, fisher_exact_p, holm, mcnemar_exact_p, wilcoxon_p
from test_paired_stats import ALL_ON, BASELINE, compare, rows_of, run, store_frame

DIFFERENCES = [0.5, 0.25, -0.125, 0.0625, 0.1875, 0.3125]  # no ties, no zeros: scipy's exact distribution


def table_of(rows, **options) -> pd.DataFrame:
    text = comparison_table(store_frame(rows), "csv", **options)
    return pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False).set_index("variant")


def paired_rows(differences) -> list[dict]:
    """The baseline at 1 + s/8 and 1111 at that plus ``differences[s]``, seed s: binary fractions, so the
    paired differences are exactly those planted (ties and zeros included)."""
    reference = [1 + seed / 8 for seed in range(len(differences))]
    return rows_of("baseline", reference) + rows_of("1111", np.add(reference, differences))


def wilcoxon_of_rows(differences) -> float:
    return summarize(store_frame(paired_rows(differences))).set_index("variant").loc["1111", "wilcoxon_p"]


def test_wilcoxon_is_scipys_exact_signed_rank_test_of_the_paired_differences():
    p = wilcoxon_of_rows(DIFFERENCES)
    assert p == pytest.approx(stats.wilcoxon(DIFFERENCES).pvalue, rel=1e-12)
    # by hand: ranks of |d| 1..6, the one negative difference has rank 2; of the 64 sign patterns
    # 3 give a negative rank sum of 2 or less ({}, {1}, {2}): p = 2 * 3 / 64
    assert p == pytest.approx(2 * 3 / 64, rel=1e-12)


def test_wilcoxon_drops_zero_differences_and_flips_signs_through_ties():
    with_zero = [-0.125, -0.5, 0.5, -0.125, -0.5, -0.25, -0.125, 0.0, 0.0]  # scipy's permutation over the signs
    nonzero = [d for d in with_zero if d != 0]
    p = wilcoxon_of_rows(with_zero)
    assert p == pytest.approx(stats.wilcoxon(with_zero).pvalue, rel=1e-12)
    assert p == pytest.approx(stats.wilcoxon(nonzero).pvalue, rel=1e-12)  # zero_method="wilcox": dropped
    ranks = stats.rankdata(np.abs(nonzero))
    plus = ranks[np.greater(nonzero, 0)].sum()
    flips = [ranks[np.array(positive)].sum() for positive in itertools.product([False, True], repeat=len(nonzero))]
    by_enumeration = 2 * min(np.mean(np.greater_equal(flips, plus)), np.mean(np.less_equal(flips, plus)))
    assert p == pytest.approx(by_enumeration, rel=1e-12)


def test_wilcoxon_sees_ties_hidden_by_float_noise():
    """Differences equal at the stored precision (det C3's -0.013 and +0.013, as subtracting floats gives them)
    are ties: the p is the all-sign-flip one of the rounded differences, not the no-ties distribution's."""
    noisy = [-0.012999999999999956, 0.013000000000000012, 0.021, -0.004, 0.032]
    exact = [-0.013, 0.013, 0.021, -0.004, 0.032]
    assert wilcoxon_p(pd.Series(noisy)) == pytest.approx(stats.wilcoxon(exact).pvalue, rel=1e-12)
    assert stats.wilcoxon(noisy).pvalue != pytest.approx(stats.wilcoxon(exact).pvalue)  # what rounding prevents


def test_wilcoxon_has_no_test_for_one_pair_or_no_nonzero_difference():
    assert math.isnan(wilcoxon_of_rows([0.25]))  # scipy would say 1.0: one seed has no test here, as the paired t
    assert math.isnan(wilcoxon_of_rows([0.0, 0.0, 0.0]))  # nothing to rank (scipy: 1.0 and a warning)
    assert wilcoxon_p(pd.Series([0.0, 0.25])) == pytest.approx(stats.wilcoxon([0.0, 0.25]).pvalue)
    unpaired = rows_of("baseline", BASELINE) + rows_of("1111", ALL_ON, threads=1)
    assert math.isnan(summarize(store_frame(unpaired)).set_index("variant").loc["1111", "wilcoxon_p"])
    table = table_of(paired_rows(DIFFERENCES))
    assert table.loc["1111", "p_wilcoxon"] == "0.094" and table.loc["baseline", "p_wilcoxon"] == ""


def holm_by_definition(p):
    """Holm's adjusted p_i = min(1, max over the p_j <= p_i of (m - r_j) p_j), r_j the number of p below p_j."""
    tested = [x for x in p if not math.isnan(x)]
    m = len(tested)
    return [math.nan if math.isnan(x) else
            min(1.0, max((m - sum(y < z for y in tested)) * z for z in tested if z <= x)) for x in p]


def holm_rejects(p, alpha):
    """Holm's step-down procedure: with p sorted, reject while p_(i) <= alpha / (m - i), stop at the first that is not."""
    tested = sorted((x, i) for i, x in enumerate(p) if not math.isnan(x))
    rejected = set()
    for rank, (x, i) in enumerate(tested):
        if x > alpha / (len(tested) - rank):
            break
        rejected.add(i)
    return rejected


def test_holm_by_hand():
    # sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1: 0.02, 0.03, 0.06, 0.04; running max 0.02, 0.03, 0.06, 0.06
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02], rel=1e-12)
    assert holm([0.5, 0.6]).tolist() == [1.0, 1.0]  # capped at 1
    adjusted = holm([0.01, math.nan, 0.04])  # NaN is no test: m = 2
    assert adjusted[[0, 2]] == pytest.approx([0.02, 0.04], rel=1e-12) and math.isnan(adjusted[1])
    assert holm([0.03]).tolist() == [0.03] and holm([]).size == 0


@pytest.mark.parametrize("seed", range(20))
def test_holm_is_its_definition_and_its_step_down_procedure(seed):
    rng = np.random.default_rng(seed)
    m = rng.integers(1, 12)
    p = np.where(rng.random(m) < 0.5, rng.uniform(0, 0.2, m), rng.uniform(0, 1, m))
    p[rng.random(m) < 0.2] = p[0]  # ties
    p[rng.random(m) < 0.1] = math.nan  # rows without a test
    np.testing.assert_allclose(holm(p), holm_by_definition(p), rtol=1e-12, equal_nan=True)
    for alpha in (0.01, 0.05, 0.1, 0.2):
        assert set(np.flatnonzero(holm(p) <= alpha)) == holm_rejects(p, alpha)


def test_holm_is_statsmodels_holm():
    from statsmodels.stats import multitest
    p = np.random.default_rng(3).uniform(0, 0.1, size=9)
    np.testing.assert_allclose(holm(p), multitest.multipletests(p, method="holm")[1], rtol=1e-12)


def test_holm_adjusts_over_the_rows_of_one_task_preset_and_slot():
    det = {"1111": ALL_ON, "0010": [0.33, 0.30, 0.315], "0100": [0.35, 0.31, 0.33]}
    seg, seg_baseline, long_1111 = [51.0, 48.0, 50.5], [50.0, 47.0, 49.0], [0.34, 0.33, 0.30]
    rows = rows_of("baseline", BASELINE) + [r for v, xs in det.items() for r in rows_of(v, xs)]
    rows += rows_of("1000", [0.36, 0.33, 0.33], threads=1)  # unpaired: Welch's p joins the family
    rows += rows_of("baseline", seg_baseline, task="seg") + rows_of("0010", seg, task="seg")
    rows += rows_of("baseline", BASELINE, preset="long") + rows_of("1111", long_1111, preset="long")
    bleu, enc_dec, enc_self = [20.0, 23.0, 19.0], [21.0, 24.5, 19.5], [19.0, 22.5, 18.0]
    rows += (rows_of("baseline", bleu, task="nmt") + rows_of("0111", enc_dec, task="nmt", slot="enc-dec")
             + rows_of("0111", enc_self, task="nmt", slot="enc-self"))
    s = summarize(store_frame(rows)).set_index(["task", "preset", "slot", "variant"])
    p = {v: stats.ttest_rel(xs, BASELINE).pvalue for v, xs in det.items()}
    p["1000"] = stats.ttest_ind([0.36, 0.33, 0.33], BASELINE, equal_var=False).pvalue
    for variant, adjusted in zip(p, holm_by_definition(list(p.values()))):
        assert s.loc[("det", "mini", "", variant), "p"] == pytest.approx(p[variant], rel=1e-10)
        assert s.loc[("det", "mini", "", variant), "p_holm"] == pytest.approx(adjusted, rel=1e-10)
    families_of_one = {("seg", "mini", "", "0010"): (seg, seg_baseline), ("det", "long", "", "1111"): (long_1111, BASELINE),
                       ("nmt", "mini", "enc-dec", "0111"): (enc_dec, bleu),
                       ("nmt", "mini", "enc-self", "0111"): (enc_self, bleu)}
    for row, (xs, reference) in families_of_one.items():
        assert s.loc[row, "p_holm"] == pytest.approx(stats.ttest_rel(xs, reference).pvalue, rel=1e-10)
    assert s.loc[s.index.get_level_values("variant") == "baseline", "p_holm"].isna().all()
    table = comparison_table(store_frame(rows), "csv")
    header = table.splitlines()[0].split(",")
    assert header[header.index("p") + 1: header.index("p") + 3] == ["p_holm", "p_wilcoxon"]
    shown = table_of(rows)
    assert shown.loc["1000", "p_holm"].endswith("u") and not shown.loc["0100", "p_holm"].endswith("u")
    assert "p_holm" not in table_of(rows, holm_adjusted=False).columns


def test_compare_no_holm_leaves_the_adjusted_column_out(tmp_path, capsys):
    (tmp_path / "store").mkdir()
    store_frame(rows_of("baseline", BASELINE) + rows_of("1111", ALL_ON)).to_csv(tmp_path / "store" / "results.csv",
                                                                                index=False)
    compare.main(["--results", str(tmp_path / "store"), "--format", "csv"])
    assert "p_holm" in capsys.readouterr().out.splitlines()[0]
    compare.main(["--results", str(tmp_path / "store"), "--format", "csv", "--no-holm"])
    header = capsys.readouterr().out.splitlines()[0].split(",")
    assert "p_holm" not in header and {"p", "p_wilcoxon"} <= set(header)


# context accuracy at seeds 0..7: the baseline learns the rule at seed 5 only; the row at 0, 1, 2, 3 (0.9
# exactly: learnt) and 6, not at 5: 5 seeds learnt by the row only, 1 by the baseline only
BASELINE_CONTEXT = [0.5, 0.6, 0.55, 0.52, 0.51, 0.95, 0.5, 0.53]
ROW_CONTEXT = [0.98, 1.0, 0.97, LEARNT_THRESHOLD, 0.5, 0.6, 0.99, 0.8999]


def diagnostic_rows(variant, context, **fields):
    return [run(variant, seed, 0.3, task="det-flag", value_context=c, **fields) for seed, c in enumerate(context)]


def test_learnt_counts_the_runs_at_the_threshold_or_above():
    table = table_of(diagnostic_rows("baseline", BASELINE_CONTEXT) + diagnostic_rows("1111:gate=1", ROW_CONTEXT))
    assert table.loc["baseline", "learnt"] == "1/8" and table.loc["1111:gate=1", "learnt"] == "5/8"
    assert table.loc["baseline", "p_exact"] == ""


def test_paired_runs_get_mcnemars_exact_test():
    rows = diagnostic_rows("baseline", BASELINE_CONTEXT) + diagnostic_rows("1111:gate=1", ROW_CONTEXT)
    row = summarize(store_frame(rows)).set_index("variant").loc["1111:gate=1"]
    assert row["exact_paired"] and row["exact_p"] == pytest.approx(stats.binomtest(5, 6, 0.5).pvalue, rel=1e-12)
    assert row["exact_p"] == pytest.approx(2 * (math.comb(6, 5) + math.comb(6, 6)) / 2 ** 6, rel=1e-12)
    assert table_of(rows).loc["1111:gate=1", "p_exact"] == "0.219"


@pytest.mark.parametrize("gained,lost", [(5, 1), (0, 4), (3, 3), (10, 2), (1, 0)])
def test_mcnemar_is_the_binomial_test_of_the_discordant_pairs(gained, lost):
    n = gained + lost
    tail = sum(math.comb(n, k) for k in range(min(gained, lost) + 1)) / 2 ** n
    assert mcnemar_exact_p(gained, lost) == pytest.approx(min(1.0, 2 * tail), rel=1e-12)
    assert mcnemar_exact_p(gained, lost) == pytest.approx(stats.binomtest(gained, n, 0.5).pvalue, rel=1e-12)


def test_no_discordant_pairs_give_p_one():
    same = diagnostic_rows("baseline", BASELINE_CONTEXT) + diagnostic_rows("0010", [0.6] * 5 + [0.99] + [0.7] * 2)
    row = summarize(store_frame(same)).set_index("variant").loc["0010"]
    assert row["exact_paired"] and row["exact_p"] == 1.0  # learnt at seed 5 by both, at no other seed by either
    assert mcnemar_exact_p(0, 0) == 1.0


def fisher_by_enumeration(yes, n, yes_reference, n_reference):
    """Two-sided: the hypergeometric probabilities of the tables with the margins seen, at most the one seen."""
    learnt = yes + yes_reference

    def probability(x):
        return math.comb(n, x) * math.comb(n_reference, learnt - x) / math.comb(n + n_reference, learnt)

    tables = range(max(0, learnt - n_reference), min(n, learnt) + 1)
    return sum(probability(x) for x in tables if probability(x) <= probability(yes) * (1 + 1e-7))


def test_unpaired_runs_get_fishers_exact_test():
    rows = diagnostic_rows("baseline", BASELINE_CONTEXT) + diagnostic_rows("1111:gate=1", ROW_CONTEXT, threads=1)
    row = summarize(store_frame(rows)).set_index("variant").loc["1111:gate=1"]
    assert not row["exact_paired"]
    assert row["exact_p"] == pytest.approx(stats.fisher_exact([[5, 3], [1, 7]]).pvalue, rel=1e-12)
    assert row["exact_p"] == pytest.approx(fisher_by_enumeration(5, 8, 1, 8), rel=1e-12)
    assert table_of(rows).loc["1111:gate=1", "p_exact"] == f"{fisher_by_enumeration(5, 8, 1, 8):.3f}u"


@pytest.mark.parametrize("table", [[[5, 3], [1, 7]], [[0, 4], [4, 0]], [[2, 0], [0, 1]], [[3, 3], [3, 3]]])
def test_fisher_exact_p_is_scipys_and_the_hypergeometric_sum(table):
    (yes, no), (yes_reference, no_reference) = table
    p = fisher_exact_p(yes, yes + no, yes_reference, yes_reference + no_reference)
    assert p == pytest.approx(stats.fisher_exact(table).pvalue, rel=1e-12)
    assert p == pytest.approx(fisher_by_enumeration(yes, yes + no, yes_reference, yes_reference + no_reference),
                              rel=1e-12)


def test_one_seed_each_is_tested_unpaired():
    rows = diagnostic_rows("baseline", [0.5]) + diagnostic_rows("1111", [0.99])
    row = summarize(store_frame(rows)).set_index("variant").loc["1111"]
    assert not row["exact_paired"] and row["exact_p"] == pytest.approx(stats.fisher_exact([[1, 0], [0, 1]]).pvalue)


def test_rows_without_a_context_accuracy_have_no_learnt_or_exact_test():
    plain = rows_of("baseline", BASELINE) + rows_of("1111", ALL_ON)
    table = table_of(plain)
    assert "learnt" not in table.columns and "p_exact" not in table.columns
    s = summarize(store_frame(plain)).set_index("variant")
    assert s["exact_p"].isna().all() and (s["context_seeds"] == 0).all()
    mixed = table_of(plain + diagnostic_rows("baseline", BASELINE_CONTEXT) + diagnostic_rows("1111", ROW_CONTEXT)
                     + rows_of("0010", ALL_ON, task="det-flag"))  # a diagnostic row whose runs record none
    det = mixed[mixed["task"] == "det"]
    assert (det["learnt"] == "").all() and (det["p_exact"] == "").all()
    flag = mixed[mixed["task"] == "det-flag"]
    assert flag.loc["1111", "learnt"] == "5/8" and flag.loc["0010", ["learnt", "p_exact"]].tolist() == ["", ""]
