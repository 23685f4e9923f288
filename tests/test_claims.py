"""The study's claims as paired contrasts: values, tests against scipy, Holm over the family, verdicts."""
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from attnbench.analysis.claims import CLAIM_STATEMENTS, CLAIMS, Contrast, claim_rows, claim_verdicts, claims_table
from attnbench.analysis.stats import min_detectable_effect
from test_paired_stats import compare, refused, rows_of, run, store_frame

SEEDS = 6
RNG = np.random.default_rng(0)
BASE = 0.30 + 0.02 * RNG.standard_normal(SEEDS)  # the seed moves every row alike: pairing removes it


def row_values(gain: float, noise: float = 0.002, seed: int = 0) -> list[float]:
    return list(BASE + gain + noise * np.random.default_rng(seed).standard_normal(SEEDS))


def c1_store(gain_0011=0.05, gain_1111=0.06, **fields):
    return store_frame(rows_of("baseline", BASE, **fields) + rows_of("0011", row_values(gain_0011, seed=1), **fields)
                       + rows_of("1111", row_values(gain_1111, seed=2), **fields))


def test_contrast_is_the_weighted_sum_per_seed_and_its_t_is_scipys():
    store = c1_store()
    (row,) = claims_table(store, contrasts=CLAIMS[:1]).to_dict("records")
    values = store.pivot(index="seed", columns="variant", values="value")
    expected = 2 * values["0011"] - values["baseline"] - values["1111"]
    assert row["contrast"] == "2 0011 - baseline - 1111" and row["seeds"] == SEEDS and row["test"] == "paired t"
    assert row["mean"] == pytest.approx(expected.mean()) and row["std"] == pytest.approx(expected.std())
    assert row["p"] == pytest.approx(stats.ttest_1samp(expected, 0).pvalue)
    assert row["p_wilcoxon"] == pytest.approx(stats.wilcoxon(expected).pvalue)
    assert row["verdict"] == "reproduced" and row["p_holm"] == row["p"]  # a family of one


def test_a_contrast_decided_negative_is_refuted_and_an_unclear_one_undecided_with_what_it_detects():
    refuted = claims_table(c1_store(gain_0011=0.01, gain_1111=0.08), contrasts=CLAIMS[:1]).iloc[0]
    assert refuted["mean"] < 0 and refuted["verdict"] == "refuted"
    noisy = store_frame(rows_of("baseline", BASE) + rows_of("0010", row_values(0.0, noise=0.02, seed=3)))
    undecided = claims_table(noisy, contrasts=[c for c in CLAIMS if c.rows == ["0010", "baseline"]]).iloc[0]
    assert undecided["claim"] == "C2" and undecided["verdict"] == "undecided"
    assert undecided["detectable"] == pytest.approx(min_detectable_effect(undecided["std"], SEEDS, 0.05))


def test_holm_runs_over_the_contrasts_of_each_task():
    rows = []
    for task, gain in (("det", 0.01), ("seg", 0.002)):
        rows += rows_of("baseline", BASE, task=task) + rows_of("0010", row_values(gain, noise=0.01, seed=4), task=task)
        rows += rows_of("deformable", row_values(gain, noise=0.01, seed=5), task=task)
        rows += rows_of("0100", row_values(0.0, noise=0.01, seed=6), task=task)
    table = claims_table(store_frame(rows))
    table = table[table["p"].notna()]
    assert sorted(zip(table["task"], table["claim"])) == [("det", "C2"), ("det", "C3"), ("seg", "C2"), ("seg", "C3")]
    for _, family in table.groupby("task"):
        low, high = sorted(family["p"])
        assert sorted(family["p_holm"]) == pytest.approx([min(1, 2 * low), min(1, max(2 * low, high))])


def test_runs_pair_only_at_seeds_every_row_has_under_one_protocol():
    rows = rows_of("baseline", BASE) + rows_of("0010", row_values(0.01, seed=7))
    rows[1] = run("baseline", 1, BASE[1], threads=1)  # seed 1's baseline ran under another protocol
    (row,) = claims_table(store_frame(rows), contrasts=[CLAIMS[3]]).to_dict("records")
    assert row["seeds"] == SEEDS - 1


def test_diagnostic_contrasts_use_the_exact_sign_test_of_the_learnt_rule():
    """Two rows: McNemar's exact test on the discordant seeds."""
    base = [0.55, 0.6, 0.5, 0.58, 0.95, 0.52, 0.6, 0.5]
    deformable = [0.99, 1.0, 0.98, 0.6, 0.5, 0.99, 1.0, 0.97]  # learnt at 6, the baseline at 1: 6 against 1 discordant
    rows = [run(v, s, x, task="det-flag-side", value_context=x)
            for v, values in (("0100", base), ("deformable", deformable)) for s, x in enumerate(values)]
    (row,) = claims_table(store_frame(rows), contrasts=[CLAIMS[4]]).to_dict("records")
    assert row["test"] == "sign (learnt)" and row["learnt"] == "deformable 6/8, 0100 1/8"
    assert row["p"] == pytest.approx(stats.binomtest(6, 7, 0.5).pvalue)
    assert row["mean"] == pytest.approx((6 - 1) / 8)  # of the learnt indicators' differences: +1 at 6 seeds, -1 at 1
    assert np.isnan(row["detectable"])


def test_a_diagnostic_contrast_is_decided_by_the_rule_learnt_not_by_the_metric():
    """The learnt row loses bbox AP at every seed: the verdict follows the rule learnt."""
    learnt, chance = [0.99] * 10, [0.5] * 10
    rows = [run(v, s, value, task="det-flag-side", value_context=context)
            for v, contexts, value in (("0100", chance, 0.40), ("deformable", learnt, 0.30))
            for s, context in enumerate(contexts)]
    (row,) = claims_table(store_frame(rows), contrasts=[CLAIMS[4]]).to_dict("records")
    assert row["mean"] == 1.0 and row["std"] == 0.0 and row["p"] == pytest.approx(2 * 0.5 ** 10)
    assert row["verdict"] == "reproduced"


def test_contrasts_missing_rows_are_listed_outside_the_family_and_translation_is_left_out():
    rows = rows_of("baseline", BASE) + rows_of("0010", row_values(0.05, seed=8))
    rows += rows_of("baseline", BASE, task="nmt") + rows_of("1111", BASE, task="nmt", slot="enc-self")
    table = claims_table(store_frame(rows)).set_index("contrast")
    assert set(table["task"]) == {"det"} and len(table) == len(CLAIMS)
    assert table.loc["deformable - 0100", "verdict"] == "not run: deformable, 0100"
    assert table["p"].notna().sum() == 1 and table.loc["0010 - baseline", "p_holm"] == table.loc["0010 - baseline", "p"]


def test_the_claims_rows_are_rows_the_vision_tasks_run():
    from attnbench.sweep.tasks import TASKS

    rows = claim_rows()
    assert "baseline" not in rows and len(rows) == len(set(rows)) == 12
    for task in ("det", "seg"):
        assert [TASKS[task].validate_variant(row) for row in rows] == rows


def test_contrast_weights_must_compare_gains():
    with pytest.raises(ValueError, match="summing to 0"):
        Contrast("C9", "not a contrast", (("0010", 1), ("baseline", 1)))


def test_a_claim_is_reproduced_where_every_tested_contrast_is_and_refuted_where_one_is():
    rows = []
    for task, gain_0011, gain_1111 in (("det", 0.05, 0.06), ("seg", 0.01, 0.08)):
        rows += rows_of("baseline", BASE, task=task) + rows_of("0011", row_values(gain_0011, seed=1), task=task)
        rows += rows_of("1111", row_values(gain_1111, seed=2), task=task)
        rows += rows_of("0111", row_values(gain_0011 if task == "det" else 0.07, seed=3), task=task)
    rows += rows_of("0010", row_values(0.0, noise=0.02, seed=4), task="det")  # C2's second contrast: undecided
    table = claims_table(store_frame(rows))
    verdicts = claim_verdicts(table).set_index("claim")
    assert list(verdicts.index) == ["C1", "C2", "C3", "C4", "C5"] and list(verdicts.columns) == ["statement", "det", "seg"]
    c1 = table[(table["claim"] == "C1") & (table["task"] == "det")]
    assert verdicts.loc["C1", "det"] == "reproduced (2 0011 - baseline - 1111: {:+.3g}, p {}; " \
        "0011 - baseline + 0111 - 1111: {:+.3g}, p {})".format(
        c1["mean"].iloc[0], compare.p_text(c1["p_holm"].iloc[0]), c1["mean"].iloc[1], compare.p_text(c1["p_holm"].iloc[1]))
    assert verdicts.loc["C1", "seg"].startswith("refuted (")  # 0011 gains far less than 0011 -> 1111 there
    assert verdicts.loc["C2", "det"].startswith("undecided (2 0110 - baseline - 1111: not run; 0010 - baseline: ")
    assert verdicts.loc["C2", "seg"] == verdicts.loc["C5", "det"] == "not run"
    lines = claim_verdicts(table, "<br>").set_index("claim")  # markdown: a contrast a line
    assert lines.loc["C2", "det"].startswith("undecided<br>2 0110 - baseline - 1111: not run<br>0010 - baseline: ")
    assert lines.loc["C2", "seg"] == "not run"


def test_compare_prints_the_claims_with_the_family(tmp_path, capsys):
    from attnbench.sweep.store import ResultsStore

    store = ResultsStore(tmp_path)
    for row in c1_store().to_dict("records"):
        store.record(row)
    compare.main(["--results", str(tmp_path), "--claims", "--format", "markdown"])
    out = capsys.readouterr().out
    assert "| C1 " in out and "2 0011 - baseline - 1111" in out and "reproduced" in out
    assert "Family: each task's tested contrasts (Holm within it): det (mini) 1;" in out and "not run: 0110" in out
    compare.main(["--results", str(tmp_path), "--claims", "--by-claim", "--format", "markdown"])
    out = capsys.readouterr().out
    assert "| C1      |" in out and "| reproduced<br>2 0011 - baseline - 1111: +" in out and CLAIM_STATEMENTS["C3"] in out
    assert "incomplete" not in out
    compare.main(["--results", str(tmp_path), "--claims", "--by-claim", "--seeds", f"0-{SEEDS - 1}"])
    assert "incomplete" not in capsys.readouterr().out  # every seed asked is in
    compare.main(["--results", str(tmp_path), "--claims", "--by-claim", "--seeds", f"0-{SEEDS + 3}"])
    assert f"incomplete (det): 1 of 1 tested contrasts paired at {SEEDS} of the {SEEDS + 4} seeds asked" in \
        capsys.readouterr().out  # a look before the registered runs are in says so
    assert "are different outputs: choose one" in refused(["--results", str(tmp_path), "--claims", "--power"], capsys)
    assert "--by-claim needs --claims" in refused(["--results", str(tmp_path), "--by-claim"], capsys)


def test_translation_claims_are_tested_in_their_slots_with_holm_over_the_task():
    from attnbench.analysis.claims import TRANSLATION_CLAIMS, all_claims_table

    rows = rows_of("baseline", BASE, task="nmt-l10n")
    gains = {"enc-dec": {"1111": 0.2, "0111": 0.0}, "enc-self": {"0111": 0.05, "1011": 0.0, "1101": 0.05, "1110": 0.05}}
    for slot, row_gains in gains.items():
        for seed, (variant, gain) in enumerate(row_gains.items(), 7):
            rows += rows_of(variant, row_values(gain, seed=seed), task="nmt-l10n", slot=slot)
    rows += rows_of("1111", row_values(0.0, seed=20), task="det")  # an image task: the image family's
    table = all_claims_table(store_frame(rows))
    translation = table[table["task"] == "nmt-l10n"]
    assert len(translation) == len(TRANSLATION_CLAIMS)  # each contrast once, in its slot
    tested = translation[translation["p"].notna()]
    assert sorted(zip(tested["slot"], tested["contrast"])) == [
        ("enc-dec", "1111 - 0111"), ("enc-self", "0111 - 1011"), ("enc-self", "1101 - 1011"),
        ("enc-self", "1110 - 1011")]
    assert (tested["family"] == 4).all() and (tested["verdict"] == "reproduced").all()
    assert translation.loc[translation["slot"] == "dec-self", "verdict"].str.startswith("not run").all()
    assert set(table.loc[table["task"] == "det", "claim"]) == {"C1", "C2", "C3", "C4", "C5"}
    verdicts = claim_verdicts(translation).set_index("claim")
    assert list(verdicts.index) == ["T1", "T2", "T3", "T4"]
    assert verdicts.loc["T1", "nmt-l10n"].startswith("reproduced (enc-dec 1111 - 0111: +")
    assert verdicts.loc["T3", "nmt-l10n"] == "not run"


def test_the_registered_leads_are_families_of_their_own(tmp_path, capsys):
    """``--claims e4-seg``: E4's lead as one contrast over the sixteen factor sets (8 times the main effect,
    negated), tested alone; ``--claims figure4-det``: E2 in each window against the matching kernel; the
    study's family does not see either."""
    from attnbench.analysis.claims import E4_SEG, FIGURE4_DET
    from attnbench.sweep.store import ResultsStore
    from attnbench.sweep.tasks import TASKS

    (lead,) = E4_SEG
    assert len(lead.rows) == 16 and sum(w for _, w in lead.weights) == 0
    assert all((w < 0) == (row != "baseline" and row[3] == "1") for row, w in lead.weights)
    assert [c.rows for c in FIGURE4_DET] == [[f"0100:range={r}", f"dynamic:kernel={2 * r + 1}"] for r in (1, 2, 3)]
    assert all(TASKS["det"].validate_variant(row) == row for c in FIGURE4_DET for row in c.rows)
    gains = {row: -0.4 * (row != "baseline" and row[3] == "1") for row, _ in lead.weights}
    store = ResultsStore(tmp_path)
    for number, (row, gain) in enumerate(gains.items()):
        for record in rows_of(row, row_values(gain, noise=0.05, seed=number), task="seg"):
            store.record(record)
    frame = store.read()
    (tested,) = claims_table(frame, contrasts=E4_SEG).to_dict("records")
    values = frame.pivot(index="seed", columns="variant", values="value")
    expected = sum(w * values[row] for row, w in lead.weights)
    assert tested["mean"] == pytest.approx(expected.mean()) and expected.mean() == pytest.approx(3.2, abs=0.2)
    assert tested["family"] == 1 and tested["verdict"] == "reproduced"
    compare.main(["--results", str(tmp_path), "--claims", "e4-seg", "--by-claim", "--format", "markdown"])
    assert "| E4-seg " in capsys.readouterr().out
    compare.main(["--results", str(tmp_path), "--claims", "--format", "markdown"])
    assert "E4-seg" not in capsys.readouterr().out  # the study's family: C1-C5 only
    assert "invalid choice: 'figure4'" in refused(["--results", str(tmp_path), "--claims", "figure4"], capsys)
