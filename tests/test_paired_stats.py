"""Paired statistics of the report: runs of a row and of the baseline at one seed that share a protocol."""
import io
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from attnbench.attention.factors import ALL_FACTORS
from attnbench.analysis.effects import factor_effects, power_table
from attnbench.analysis.summary import comparison_table, pairing_notes, summarize
from attnbench.analysis.stats import min_detectable_effect, paired_power, seeds_needed
from attnbench.sweep.store import COLUMNS, ResultsStore

from attnbench.commands import compare  # tools/compare.py's command

PROTOCOL = dict(threads=2, device="cpu", torch_version="2.14.1", mmcv_version="2.1.0")
BASELINE = [0.337, 0.312, 0.311]  # detection over seeds 0, 1, 2
ALL_ON = [0.355, 0.339, 0.335]  # 1111 at the same seeds: paired differences +0.018, +0.027, +0.024


def run(variant, seed, value, task="det", slot=None, **fields):
    """One result row; the protocol of PROTOCOL unless FIELDS says otherwise (None: not recorded)."""
    row = dict(run_id=f"{task}_{slot}_{variant}_{seed}", task=task, preset="mini", slot=slot, variant=variant,
               seed=seed, metric="m", value=value, status="ok", macs_model=1e9, macs_modules=0.0, params_model=1.0,
               **PROTOCOL)
    return {**row, **fields}


def refused(argv: list[str], capsys) -> str:
    """compare.py's one-line error for ``argv`` (exit status 2, argparse's), before any table."""
    with pytest.raises(SystemExit) as exit:
        compare.main(argv)
    out, err = capsys.readouterr()
    errors = [line for line in err.splitlines() if ".py: error: " in line]  # the program's name, as argparse has it
    assert exit.value.code == 2 and not out and len(errors) == 1, (exit.value.code, out, err)
    return errors[0].split(": error: ", 1)[1]


def store_frame(rows):
    return pd.DataFrame(rows).reindex(columns=list(COLUMNS))


def rows_of(variant, values, **fields):
    return [run(variant, seed, value, **fields) for seed, value in enumerate(values)]


def test_paired_t_and_p_are_scipys_ttest_rel_and_welch_p_its_ttest_ind():
    s = summarize(store_frame(rows_of("baseline", BASELINE) + rows_of("1111", ALL_ON))).set_index("variant")
    row = s.loc["1111"]
    differences = np.subtract(ALL_ON, BASELINE)
    paired = stats.ttest_rel(ALL_ON, BASELINE)
    welch = stats.ttest_ind(ALL_ON, BASELINE, equal_var=False)
    assert row["pairing"] == "paired" and row["paired_seeds"] == 3
    assert row["paired_delta"] == pytest.approx(differences.mean())
    assert row["paired_std"] == pytest.approx(differences.std(ddof=1))
    assert (row["paired_t"], row["paired_p"]) == pytest.approx((paired.statistic, paired.pvalue))
    assert row["paired_t"] > 8 and abs(row["delta_t"]) < 2.5  # the seed noise hides the delta from Welch's t
    assert (row["delta_t"], row["welch_p"]) == pytest.approx((welch.statistic, welch.pvalue))
    assert s.loc["baseline", ["paired_t", "paired_p", "welch_p"]].isna().all() and s.loc["baseline", "pairing"] == ""


def test_table_shows_paired_p_and_marks_welch_p_unpaired():
    rows = (rows_of("baseline", BASELINE, value_class_agnostic=0.4) + rows_of("1111", ALL_ON, value_class_agnostic=0.5)
            + rows_of("0010", [0.33, 0.30, 0.31], threads=1))
    table = pd.read_csv(io.StringIO(comparison_table(store_frame(rows), "csv")), dtype=str,
                        keep_default_na=False).set_index("variant")
    paired = stats.ttest_rel(ALL_ON, BASELINE)
    differences = np.subtract(ALL_ON, BASELINE)
    assert table.loc["1111", "paired Δ"] == f"{differences.mean():+.4f} ± {differences.std(ddof=1):.4f}"
    assert table.loc["1111", "paired t"] == f"{paired.statistic:+.1f}"
    assert table.loc["1111", "p"] == f"{paired.pvalue:.3f}"
    welch = stats.ttest_ind([0.33, 0.30, 0.31], BASELINE, equal_var=False)
    assert table.loc["0010", "p"] == f"{welch.pvalue:.3f}u" and table.loc["0010", "paired Δ"] == ""
    assert table["class-agnostic AP"].to_dict() == {"baseline": "0.4000", "1111": "0.5000", "0010": ""}
    seg = store_frame([{**r, "task": "seg"} for r in rows_of("baseline", BASELINE) + rows_of("0010", ALL_ON)])
    assert "class-agnostic AP" not in comparison_table(seg, "csv")


def test_table_shows_the_gates_range_and_how_far_the_loss_moved_them_where_recorded():
    rows = (rows_of("baseline", BASELINE) + rows_of("1111", ALL_ON, gate_max=0.98)
            + [run("0010", seed, 0.3, gate_max=gate, gate_loss_max=moved)
               for seed, (gate, moved) in enumerate([(0.9, 0.01), (1.1, 0.2), (1.0, math.nan)])])
    table = pd.read_csv(io.StringIO(comparison_table(store_frame(rows), "csv")), dtype=str,
                        keep_default_na=False).set_index("variant")
    assert table["gate |γ|"].to_dict() == {"baseline": "", "1111": "0.980", "0010": "0.900-1.100"}
    assert table["gate moved by loss"].to_dict() == {"baseline": "", "1111": "", "0010": "0.010-0.200"}
    older = comparison_table(store_frame(rows_of("baseline", BASELINE) + rows_of("1111", ALL_ON, gate_max=0.98)), "csv")
    assert "gate |γ|" in older and "gate moved by loss" not in older  # rows from before the column


def test_rows_fall_back_to_unpaired_when_the_protocol_differs_or_is_missing():
    no_protocol = dict.fromkeys(PROTOCOL)
    partly = [run("1000", 0, 0.35), run("1000", 1, 0.33), run("1000", 2, 0.32, device="cuda")]
    rows = (rows_of("baseline", BASELINE) + rows_of("0010", [0.33, 0.30, 0.31], threads=1)
            + rows_of("0100", [0.33, 0.30, 0.31], **no_protocol) + partly)
    s = summarize(store_frame(rows)).set_index("variant")
    assert s.loc["0010", "pairing"] == "unpaired (threads differ: 1 vs 2)"
    assert s.loc["0100", "pairing"] == "unpaired (the store records no protocol for this row's runs)"
    assert s.loc[["0010", "0100"], "paired_seeds"].tolist() == [0, 0]
    assert s.loc[["0010", "0100"], ["paired_delta", "paired_t", "paired_p"]].isna().all().all()
    assert s.loc["1000", "pairing"] == "paired on 2 of 3 seeds (seed 2: device differs: cuda vs cpu)"
    assert s.loc["1000", "paired_p"] == pytest.approx(stats.ttest_rel([0.35, 0.33], BASELINE[:2]).pvalue)
    assert sorted(pairing_notes(summarize(store_frame(rows)))) == [
        "det/0010: unpaired (threads differ: 1 vs 2)",
        "det/0100: unpaired (the store records no protocol for this row's runs)",
        "det/1000: paired on 2 of 3 seeds (seed 2: device differs: cuda vs cpu)"]
    # an old store: no protocol columns at all
    old = pd.DataFrame(rows_of("baseline", BASELINE) + rows_of("1111", ALL_ON) + rows_of("0010", ALL_ON))
    old_summary = summarize(old.drop(columns=list(PROTOCOL)))
    assert old_summary["paired_t"].isna().all()
    assert pairing_notes(old_summary) == ["det (all 2 rows): unpaired (the store records no protocol for these runs)"]


def test_nmt_slot_rows_pair_with_the_shared_baseline():
    bleu = [20.0, 23.0, 19.0]
    rows = (rows_of("baseline", bleu, task="nmt") + rows_of("0111", [21.0, 24.5, 19.5], task="nmt", slot="enc-dec")
            + rows_of("0111", [19.0, 22.5, 18.0], task="nmt", slot="enc-self"))
    s = summarize(store_frame(rows)).set_index(["slot", "variant"])
    for slot, values in [("enc-dec", [21.0, 24.5, 19.5]), ("enc-self", [19.0, 22.5, 18.0])]:
        expected = stats.ttest_rel(values, bleu)
        assert s.loc[(slot, "0111"), "pairing"] == "paired"
        assert (s.loc[(slot, "0111"), "paired_t"], s.loc[(slot, "0111"), "paired_p"]) == pytest.approx(
            (expected.statistic, expected.pvalue))


def test_constant_differences_give_an_infinite_t_and_identical_runs_none():
    exact = [0.25, 0.5, 0.375]  # binary fractions: the differences are exactly 0.5
    rows = rows_of("baseline", exact) + rows_of("0010", np.add(exact, 0.5)) + rows_of("0100", exact)
    s = summarize(store_frame(rows)).set_index("variant")
    assert s.loc["0010", "paired_std"] == 0.0
    assert s.loc["0010", "paired_t"] == np.inf and s.loc["0010", "paired_p"] == 0.0
    assert pd.isna(s.loc["0100", "paired_t"]) and pd.isna(s.loc["0100", "paired_p"])


SEED_OFFSETS = [0.0, 0.08, -0.07, 0.05]  # what a seed does to every run: far more than the effect


def planted_rows(**fields):
    """metric = 0.3 + SEED_OFFSETS[s] + 0.02 E1 + noise (sd 0.001), every factor set and the baseline."""
    rng = np.random.default_rng(0)
    return [run(variant, seed, 0.3 + offset + 0.02 * (variant[0] == "1") + rng.normal(0, 0.001), **fields)
            for variant in ["baseline", *ALL_FACTORS] for seed, offset in enumerate(SEED_OFFSETS)]


def test_paired_effects_see_a_planted_term_through_the_seed_noise():
    rows = planted_rows()
    effects = factor_effects(store_frame(rows)).set_index("term")
    assert effects["paired"].all()
    assert effects.loc["E1", "effect"] == pytest.approx(0.02, abs=0.002)
    assert effects.loc["E1", "z"] > 15 and effects.loc["E1", "p"] < 0.001
    assert effects.loc[["E2", "E3", "E4"], "effect"].abs().max() < 0.002
    assert effects.loc["any", "effect"] == pytest.approx(0.02 * 8 / 15, abs=0.002)
    # effect_se = std over seeds of the per-seed effect / sqrt(seeds); p from t with seeds - 1 df
    value = {(r["variant"] if r["variant"] != "baseline" else "0000", r["seed"]): r["value"] for r in rows}
    on = [v for v in ALL_FACTORS if v[0] == "1"]
    per_seed = [np.mean([value[v, s] - value["0" + v[1:], s] for v in on]) for s in range(4)]
    assert effects.loc["E1", "effect_se"] == pytest.approx(np.std(per_seed, ddof=1) / 2)
    assert effects.loc["E1", "p"] == pytest.approx(2 * stats.t.sf(effects.loc["E1", "z"], 3))
    unpaired = factor_effects(store_frame(planted_rows(threads=None))).set_index("term")
    assert not unpaired["paired"].any()
    assert unpaired.loc["E1", "effect"] == pytest.approx(effects.loc["E1", "effect"])  # the same seed means
    assert unpaired.loc["E1", "z"] < 2 and unpaired.loc["E1", "p"] > 0.05  # lost in the seed noise
    assert unpaired.loc["E1", "p"] == pytest.approx(2 * stats.norm.sf(unpaired.loc["E1", "z"]))


@pytest.mark.parametrize("n", [3, 8])
def test_min_detectable_effect_is_detected_with_the_target_power(n):
    sd = 0.01
    effect = min_detectable_effect(sd, n)
    assert effect > (stats.norm.ppf(0.975) + stats.norm.ppf(0.8)) * sd / n ** 0.5  # more than the normal's
    assert paired_power(effect, sd, n) == pytest.approx(0.8)
    differences = np.random.default_rng(1).normal(effect, sd, size=(4000, n))
    rejected = stats.ttest_rel(differences, np.zeros_like(differences), axis=1).pvalue < 0.05
    assert rejected.mean() == pytest.approx(0.8, abs=0.05)


def test_seeds_needed_is_the_fewest_seeds_that_reach_the_power():
    sd, effect = 0.01, 0.008
    n = seeds_needed(sd, effect)
    assert paired_power(effect, sd, n) >= 0.8 > paired_power(effect, sd, n - 1)
    assert min_detectable_effect(sd, n) <= effect < min_detectable_effect(sd, n - 1)
    assert seeds_needed(sd, -effect) == n and seeds_needed(sd, 12 * sd) == 2  # two seeds detect 11.5 sd
    differences = np.random.default_rng(2).normal(effect, sd, size=(4000, n))
    assert (stats.ttest_rel(differences, np.zeros_like(differences), axis=1).pvalue < 0.05).mean() >= 0.77


def test_power_table_pools_the_paired_spread():
    rows = (rows_of("baseline", BASELINE) + rows_of("1111", ALL_ON) + rows_of("0010", [0.33, 0.30, 0.32])
            + [{**r, "task": "seg", "value": 100 * r["value"]} for r in rows_of("baseline", BASELINE, threads=None)
               + rows_of("0010", ALL_ON, threads=None)])
    power = power_table(store_frame(rows), effect={"det": 0.01}).set_index("task")
    differences = [np.subtract(ALL_ON, BASELINE), np.subtract([0.33, 0.30, 0.32], BASELINE)]
    sd = np.mean([d.var(ddof=1) for d in differences]) ** 0.5  # equal seeds: pooling is averaging the variances
    assert power.loc["det", "paired"] and power.loc["det", "seeds"] == 3
    assert power.loc["det", "sd_difference"] == pytest.approx(sd)
    assert power.loc["det", "min_detectable_effect"] == pytest.approx(min_detectable_effect(sd, 3))
    assert power.loc["det", "seeds_needed"] == seeds_needed(sd, 0.01)
    seg_sd = np.mean([np.var(np.multiply(100, BASELINE), ddof=1), np.var(np.multiply(100, ALL_ON), ddof=1)]) ** 0.5
    assert not power.loc["seg", "paired"] and pd.isna(power.loc["seg", "seeds_needed"])  # no effect given for seg
    assert power.loc["seg", "sd_difference"] == pytest.approx(2 ** 0.5 * seg_sd)


def test_compare_prints_power_effects_and_the_unpaired_rows(tmp_path, capsys):
    store = ResultsStore(tmp_path)
    values = {"baseline": BASELINE, "1111": ALL_ON, "0111": [0.330, 0.310, 0.306], "1000": [0.360, 0.331, 0.335]}
    for variant, xs in values.items():
        for row in rows_of(variant, xs, threads=1 if variant == "1000" else 2):
            store.record(row)

    def compare_output(*argv):
        compare.main(["--results", str(tmp_path), *argv])
        return capsys.readouterr()

    table = compare_output()
    assert "paired Δ" in table.out and table.out.rstrip().endswith("det/1000: unpaired (threads differ: 1 vs 2)")
    effects = pd.read_csv(io.StringIO(compare_output("--effects", "--format", "csv").out)).set_index("term")
    # E1 has the pairs (1111, 0111), paired, and (1000, baseline), not: the term falls back to unpaired
    assert not effects.loc["E1", "paired"] and effects.loc["E1", "pairs"] == 2
    assert effects.loc["E1", "effect"] == pytest.approx(np.mean([np.mean(ALL_ON) - np.mean(values["0111"]),
                                                                 np.mean(values["1000"]) - np.mean(BASELINE)]))
    shown = compare_output("--power", "--effect", "0.01", "--alpha", "0.1", "--power-target", "0.9", "--format", "csv")
    power = pd.read_csv(io.StringIO(shown.out)).iloc[0]
    differences = [np.subtract(ALL_ON, BASELINE), np.subtract(values["0111"], BASELINE)]
    sd = np.mean([d.var(ddof=1) for d in differences]) ** 0.5
    assert power["paired"] and power["seeds"] == 3 and power["sd_difference"] == pytest.approx(sd)
    assert power["min_detectable_effect"] == pytest.approx(min_detectable_effect(sd, 3, 0.1, 0.9))
    assert power["seeds_needed"] == seeds_needed(sd, 0.01, 0.1, 0.9)
    assert "at significance 0.1 with power 0.9" in shown.err
    assert "TASK=NUMBER" in refused(["--results", str(tmp_path), "--power", "--effect", "det=0.01,seg"], capsys)


def test_one_seed_shows_its_paired_difference_and_no_test():
    """The README's main command runs one seed: its rows show the one paired difference, untested."""
    rows = rows_of("baseline", BASELINE[:1]) + rows_of("1111", ALL_ON[:1]) + rows_of("0010", [0.30], threads=1)
    s = summarize(store_frame(rows)).set_index("variant")
    assert s.loc["1111", "paired_seeds"] == 1 and s.loc["1111", "paired_delta"] == pytest.approx(0.018)
    assert s.loc["1111", ["paired_std", "paired_t", "paired_p"]].isna().all()
    assert s.loc["0010", "paired_seeds"] == 0 and np.isnan(s.loc["0010", "paired_delta"])
    table = pd.read_csv(io.StringIO(comparison_table(store_frame(rows), "csv")), dtype=str,
                        keep_default_na=False).set_index("variant")
    assert table.loc["1111", "paired Δ"] == "+0.0180 (1 seed)" and table.loc["1111", "p"] == ""
    assert table.loc["0010", "paired Δ"] == ""
    assert sorted(pairing_notes(s.reset_index())) == ["det/0010: unpaired (threads differ: 1 vs 2)",
                                                      "det/1111: paired on a single seed: no test"]


def test_markdown_tables_print_tiny_p_values_as_below_a_thousandth():
    text = compare.frame_text(pd.DataFrame(dict(term=["E1", "E2", "E3"], p=[1e-9, 0.5, np.nan])), "markdown")
    assert "<0.001" in text and "0.500" in text and "0.0000" not in text and "nan" not in text


def test_compare_analyses_the_context_accuracy_when_asked(tmp_path, capsys):
    rows = (rows_of("baseline", BASELINE, task="det-marker", value_context=0.5)
            + rows_of("1111", ALL_ON, task="det-marker", value_context=0.7) + rows_of("1111", ALL_ON))
    (tmp_path / "store").mkdir()
    store_frame(rows).to_csv(tmp_path / "store" / "results.csv", index=False)
    compare.main(["--results", str(tmp_path / "store"), "--value", "context", "--format", "csv"])
    table = pd.read_csv(io.StringIO(capsys.readouterr().out)).set_index("variant")
    assert list(table["task"]) == ["det-marker", "det-marker"]  # the det runs record no context accuracy
    assert (table["metric"] == "context/accuracy").all() and table.loc["1111", "delta vs baseline"] == 0.2
    refusal = refused(["--results", str(tmp_path / "store"), "--value", "context", "--tasks", "det"], capsys)
    assert "--tasks det: no runs in" in refusal


def test_compare_pairs_rows_with_another_reference_row(tmp_path, capsys):
    """--reference: every row against that row, paired by seed, in the slot it is in (translation)."""
    windowed, dynamic = [80.0, 82.5, 81.0], [79.0, 82.0, 79.5]
    rows = (rows_of("baseline", [82.0, 84.0, 83.0], task="nmt") + rows_of("0100:range=3", windowed, task="nmt",
            slot="enc-self") + rows_of("dynamic:kernel=7", dynamic, task="nmt", slot="enc-self"))
    s = summarize(store_frame(rows), "dynamic:kernel=7").set_index("variant")
    expected = stats.ttest_rel(windowed, dynamic)
    assert s.loc["0100:range=3", "pairing"] == "paired"
    assert (s.loc["0100:range=3", "paired_t"], s.loc["0100:range=3", "paired_p"]) == pytest.approx(
        (expected.statistic, expected.pvalue))
    (tmp_path / "store").mkdir()
    store_frame(rows).to_csv(tmp_path / "store" / "results.csv", index=False)
    compare.main(["--results", str(tmp_path / "store"), "--reference", "dynamic:kernel=7", "--format", "csv"])
    table = pd.read_csv(io.StringIO(capsys.readouterr().out)).set_index("variant")
    assert table.loc["0100:range=3", "delta vs dynamic:kernel=7"] == pytest.approx(np.mean(windowed) - np.mean(dynamic))
    for bad, why in (("dynamic:kernel=9", "--reference dynamic:kernel=9 has no runs in"),
                     ("dynamic:kernel=4", "expected an odd integer")):
        assert why in refused(["--results", str(tmp_path / "store"), "--reference", bad], capsys)


def test_compare_keeps_only_the_seeds_asked_for(tmp_path, capsys):
    """--seeds: the statistics of a registered test over the seeds it names, e.g. the runs after a pilot."""
    baseline, row = [0.30, 0.32, 0.31, 0.33, 0.29], [0.50, 0.31, 0.36, 0.40, 0.37]
    (tmp_path / "store").mkdir()
    store_frame(rows_of("baseline", baseline) + rows_of("1111", row)).to_csv(tmp_path / "store" / "results.csv",
                                                                              index=False)
    compare.main(["--results", str(tmp_path / "store"), "--seeds", "2-3,4", "--format", "csv"])
    table = pd.read_csv(io.StringIO(capsys.readouterr().out)).set_index("variant")
    expected = stats.ttest_rel(row[2:], baseline[2:])
    assert table.loc["1111", "seeds"] == 3 and table.loc["1111", "p"] == pytest.approx(expected.pvalue, abs=1e-3)
    assert compare.seed_list("0,2-4") == [0, 2, 3, 4] and compare.seed_list("3") == [0, 1, 2]  # as sweep.py's
    for bad, why in (("4-2", "a range runs up, A-B with A <= B (2-4?)"), ("x", "give seeds as A-B"),
                     ("9-9", "seeds [9]")):
        assert why in refused(["--results", str(tmp_path / "store"), "--seeds", bad], capsys)


def test_compare_rows_shows_the_study_or_the_survey_with_holm_over_those_alone(tmp_path, capsys):
    """--rows: the study's rows or the survey's modules, each with the baseline; Holm adjusts over what is shown."""
    gains = {"1111": [0.02, 0.03, 0.025], "deformable": [0.01, -0.01, 0.015], "se": [0.001, 0.03, -0.01],
             "nonlocal": [0.04, 0.035, 0.05]}
    rows = rows_of("baseline", BASELINE) + [r for variant, gain in gains.items()
                                            for r in rows_of(variant, np.add(BASELINE, gain))]
    (tmp_path / "store").mkdir()
    store_frame(rows).to_csv(tmp_path / "store" / "results.csv", index=False)
    for shown, variants in (("study", ["1111", "deformable"]), ("survey", ["se", "nonlocal"])):
        compare.main(["--results", str(tmp_path / "store"), "--rows", shown, "--format", "csv"])
        table = pd.read_csv(io.StringIO(capsys.readouterr().out)).set_index("variant")
        assert sorted(table.index) == sorted(["baseline", *variants])
        p = [stats.ttest_rel(np.add(BASELINE, gains[v]), BASELINE).pvalue for v in variants]
        assert list(table.loc[variants, "p_holm"]) == pytest.approx(list(multipletests(p, method="holm")[1]), abs=1e-3)
    (tmp_path / "study").mkdir()
    store_frame(rows[:6]).to_csv(tmp_path / "study" / "results.csv", index=False)  # the baseline and 1111 alone
    assert "no survey rows in" in refused(["--results", str(tmp_path / "study"), "--rows", "survey"], capsys)


def test_compare_per_seed_lists_every_run(tmp_path, capsys):
    (tmp_path / "store").mkdir()
    rows = rows_of("baseline", BASELINE, value_context=0.5) + rows_of("1111", ALL_ON[:2], value_context=1.0)
    store_frame(rows).to_csv(tmp_path / "store" / "results.csv", index=False)
    compare.main(["--results", str(tmp_path / "store"), "--per-seed", "--format", "csv"])
    table = pd.read_csv(io.StringIO(capsys.readouterr().out), dtype={"1111": str}).set_index("seed")
    assert list(table.columns) == ["task", "preset", "baseline", "1111"]
    assert list(table["baseline"]) == BASELINE and list(table["1111"].fillna("")) == ["0.355", "0.339", ""]
    compare.main(["--results", str(tmp_path / "store"), "--per-seed", "--value", "context", "--format", "csv"])
    assert pd.read_csv(io.StringIO(capsys.readouterr().out))["1111"].tolist()[:2] == [1.0, 1.0]
    assert "are different outputs: choose one" in refused(["--results", str(tmp_path / "store"), "--per-seed",
                                                          "--power"], capsys)
