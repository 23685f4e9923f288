"""The numbers the README and the docs state in prose, recomputed from the committed stores.

Each fact is a phrase as the page writes it (whitespace aside), its numbers computed here from the stores
with the package's own statistics; a page whose phrase is missing, or a store whose numbers moved, fails.
Tables between ``<!-- compare.py ... -->`` markers are held by ``tools/readme_tables.py --check`` instead.
"""
import json
import math
import re
from functools import cache
from pathlib import Path

import pandas as pd
import pytest
from scipy.stats import binomtest

from attnbench.analysis.claims import TRANSLATION_CLAIMS, all_claims_table, claim_rows
from attnbench.analysis.effects import factor_effects, power_table
from attnbench.sweep.plan import parse_seeds
from attnbench.analysis.plots import select_rows
from attnbench.analysis.published import PUBLISHED
from attnbench.sweep.store import read_store_or_exit
from attnbench.analysis.studies import E4_SEG_SEEDS, FIGURE4_DET_SEEDS
from attnbench.analysis.summary import successful_runs, summarize

ROOT = Path(__file__).resolve().parents[1]


@cache
def store(name: str) -> pd.DataFrame:
    return read_store_or_exit(ROOT / "results" / name, "test")


def runs_of(name: str, task: str, seeds: range | list[int] | None = None) -> pd.DataFrame:
    runs = store(name)
    runs = runs[runs["task"] == task]
    return runs if seeds is None else runs[runs["seed"].astype(int).isin(seeds)]


def learnt(name: str, task: str, variant: str, seeds: range, preset: str = "mini") -> tuple[int, int]:
    """k of n: the runs of ``variant`` on a diagnostic ``task`` that learnt its rule, at ``seeds``."""
    runs = successful_runs(runs_of(name, task, seeds))
    runs = runs[(runs["variant"] == variant) & (runs["preset"] == preset)]
    return int(runs["learnt"].sum()), len(runs)


def pooled(task: str, variant: str) -> tuple[int, int]:
    """k of n over every registered seed of the ``flag`` rule under the protocol: the confirmation's
    (results/protocol, 30-39) and the claims re-run's (results/claims, 110-119)."""
    confirmation, claims = learnt("protocol", task, variant, range(30, 40)), learnt("claims", task, variant,
                                                                                      range(110, 120))
    return confirmation[0] + claims[0], confirmation[1] + claims[1]


def interval(k: int, n: int) -> str:
    """The 95 % Clopper-Pearson interval of a rate, as the pages write it."""
    ci = binomtest(k, n).proportion_ci()
    return f"{ci.low:.2f} to {ci.high:.2f}"


def detectable(task: str) -> tuple[float, float]:
    """The smallest and largest contrast the claims re-run's ten paired seeds detect on ``task``."""
    table = all_claims_table(runs_of("claims", task, range(110, 120)))
    return table["detectable"].min(), table["detectable"].max()


def full_scale_gmacs(variant: str) -> float:
    flops = pd.read_csv(ROOT / "results/flops-full/flops.csv")
    return float(flops[(flops["task"] == "det") & (flops["variant"] == variant)]["gmacs_model"].iloc[0])


def det_flag() -> str:
    (k_det, n_det), (k_fcn, n_fcn) = pooled("det-flag", "1111"), pooled("fcn-flag", "1111")
    return (f"`1111` at {k_det} of {n_det} registered seeds on the detector, {k_fcn} of {n_fcn} on the FCN segmentor "
            f"(95 % intervals {interval(k_det, n_det)} and {interval(k_fcn, n_fcn)};")


def claims_detect() -> str:
    (det_low, det_high), (seg_low, seg_high) = detectable("det"), detectable("seg")
    return (f"ten paired seeds would detect, with 80 % power, contrasts of {det_low:.3f} to {det_high:.3f} mAP and "
            f"{seg_low:.1f} to {seg_high:.1f} mIoU")


def claim_rows_spread(task: str, unit: str, digits: int) -> str:
    """How far the claims re-run's ten-seed rows lie from the baseline (the largest |delta|, rounded up)."""
    summary = summarize(runs_of("claims", task, range(110, 120)))
    deltas = summary.loc[(summary["seeds"] == 10) & (summary["variant"] != "baseline"), "delta"].abs()
    return f"within {math.ceil(deltas.max() * 10 ** digits) / 10 ** digits:.{digits}f} {unit} of the baseline"


def trade_off() -> str:
    """The published AP of the best detector and of the cheap one that nearly matches it, their GMACs apart."""
    det = {variant: value for (task, variant), (value, _) in PUBLISHED.items() if task == "det"}
    best = max(det, key=det.get)
    saved = full_scale_gmacs(best) - full_scale_gmacs("0010+deformable")
    return (f"`0010+deformable` gets {det['0010+deformable']:.1f} of the best {det[best]:.1f} AP "
            f"(`{best}`) for {saved:.1f} fewer GMACs")


def full_scale_baseline() -> str:
    """The detector baseline's published AP and its GMACs counted at full scale, beside the trade-off."""
    return f"(baseline {PUBLISHED[('det', 'baseline')][0]:.1f} AP, {full_scale_gmacs('baseline'):.1f} GMACs)"


#: Numbers as the prose spells them.
WORDS = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen".split()


def translation_family() -> str:
    """How many contrasts the translation claims' Holm family holds, as a word."""
    return f"Holm over the {WORDS[len(TRANSLATION_CLAIMS)]} contrasts"


def effect(name: str, task: str, term: str, slot: str = "", seeds: range | None = None) -> pd.Series:
    """One term's main effect (``compare.py --effects``) on a task (and slot)."""
    effects = factor_effects(runs_of(name, task, seeds))
    return effects[(effects["term"] == term) & (effects["slot"].fillna("") == slot)].iloc[0]


def image_claims_context() -> str:
    """The image claims' family on each task (the contrasts Holm adjusts over, as many on both) and the baselines'
    means, at the claims re-run's registered seeds (results/claims, 110-119)."""
    sizes = {len(all_claims_table(runs_of("claims", task, range(110, 120)))) for task in ("det", "seg")}
    assert len(sizes) == 1
    det, seg = (successful_runs(runs_of("claims", task, range(110, 120))).query("variant == 'baseline'")["value"].mean()
                for task in ("det", "seg"))
    return f"Holm over each task's {WORDS[sizes.pop()]} contrasts; baselines {det:.3f} bbox mAP and {seg:.1f} mIoU)"


def image_leads() -> str:
    """The two image leads' seeds (figure4-det: rows against each other, no baseline run; e4-seg: its baseline's
    mean at its seeds)."""
    figure4 = runs_of("figure4-det", "det", parse_seeds(FIGURE4_DET_SEEDS))
    assert "baseline" not in set(figure4["variant"])
    e4 = successful_runs(runs_of("e4-seg", "seg", list(E4_SEG_SEEDS)))
    return (f"`results/figure4-det/`, {len(parse_seeds(FIGURE4_DET_SEEDS))} seeds) and E4 lowering the mini "
            f"DeepLabV3's mIoU (`results/e4-seg/`, {len(E4_SEG_SEEDS)} seeds, baseline "
            f"{e4.loc[e4['variant'] == 'baseline', 'value'].mean():.1f} mIoU)")


def flag_learnt_and_baseline() -> tuple[str, str]:
    """What counts as learnt, and the baseline's pooled count on ``flag``, the same on the detector and the FCN
    segmentor."""
    from attnbench.analysis.stats import LEARNT_THRESHOLD

    det, fcn = pooled("det-flag", "baseline"), pooled("fcn-flag", "baseline")
    assert det == fcn
    return (f"context accuracy reaches {LEARNT_THRESHOLD:g}", f"the baseline at {det[0]} of {det[1]} on each")


def translation_runs(task: str) -> pd.DataFrame:
    """The runs of ``task`` in results/l10n at the translation claims' registered seeds 210-215."""
    return runs_of("l10n", task, range(210, 216))


def translation_claims(task: str) -> pd.DataFrame:
    """The eleven translation contrasts on ``task`` at the registered seeds."""
    return all_claims_table(translation_runs(task))


def translation_t1(task: str) -> str:
    t1 = translation_claims(task).query("claim == 'T1'").iloc[0]
    return f"(`{t1['contrast']}` {t1['mean']:+.1f} BLEU, Holm p {t1['p_holm']:.3f})"


def translation_detects() -> str:
    """The smallest and largest contrast six paired seeds detect among the undecided, on each corpus."""
    real, synthetic = ((table["detectable"].min(), table["detectable"].max()) for table in
                       (translation_claims(task).query("verdict != 'reproduced'") for task in ("nmt-l10n", "nmt")))
    return (f"{real[0]:.2f} to {real[1]:.2f} BLEU among the undecided contrasts (column \"detects\" of `python "
            "tools/compare.py --results results/l10n --seeds 210-215 --tasks nmt-l10n --claims`, at 0.05 / 11), "
            f"against {synthetic[0]:.1f} to {synthetic[1]:.1f} on the synthetic corpus")


def l10n_enc_dec_rows() -> str:
    """The enc-dec slot's rows on real language, mean BLEU over the registered seeds (the baseline, standard
    attention in every slot, is stored without one)."""
    runs = successful_runs(translation_runs("nmt-l10n"))
    mean = runs[runs["slot"].fillna("").isin(["enc-dec", ""])].groupby("variant")["value"].mean()
    return f"scores {mean['baseline']:.1f} BLEU, `0111` {mean['0111']:.1f} and `1111` {mean['1111']:.1f}"


def l10n_row_range() -> str:
    """The lowest and highest mean on real language of the rows the claims compare (and the baseline), at the
    registered seeds, in whole BLEU (the trade-off part's other rows are for the plot)."""
    runs = successful_runs(translation_runs("nmt-l10n")).assign(slot=lambda f: f["slot"].fillna(""))
    compared = {(slot, row) for slot in ("enc-dec", "enc-self", "dec-self")
                for row in claim_rows(TRANSLATION_CLAIMS, slot)} | {("", "baseline")}
    means = runs.groupby(["slot", "variant"])["value"].mean()
    means = means[[key in compared for key in means.index]]
    return f"the claims' rows score {means.min():.0f} to {means.max():.0f};"


def l10n_baseline_and_best() -> str:
    """The baseline's mean BLEU on real language over every seed it ran in results/l10n, and the best row's."""
    runs = successful_runs(runs_of("l10n", "nmt-l10n"))
    baseline = runs[runs["variant"] == "baseline"]["value"]
    best = runs[runs["variant"] != "baseline"].groupby(["slot", "variant"])["value"].mean()
    assert best.idxmax() == ("enc-self", "deformable")
    return (f"({baseline.mean():.1f} BLEU over {WORDS[len(baseline)]} seeds), while the best rows pass it (the 1D "
            f"deformable convolution in encoder self-attention {best.max():.1f};")


def l10n_below_copy() -> str:
    """The mini preset's real-language rows of the claims against copying the source (validation BLEU): the
    baseline's mean, the copy score, and which claim rows score below it (every decoder self-attention row,
    T1's ``0111``), at the registered seeds."""
    from attnbench.analysis.curves import copy_scores

    copy = copy_scores(committed_corpus(), "valid")["BLEU"]
    runs = successful_runs(translation_runs("nmt-l10n")).assign(slot=lambda f: f["slot"].fillna(""))
    means = runs.groupby(["slot", "variant"])["value"].mean()
    below = {(slot, row) for slot in ("enc-dec", "enc-self", "dec-self") for row in claim_rows(TRANSLATION_CLAIMS, slot)
             if means[(slot, row)] < copy}
    decoder = means["dec-self"][claim_rows(TRANSLATION_CLAIMS, "dec-self")]
    assert below == {("dec-self", row) for row in decoder.index} | {("enc-dec", "0111")}
    return (f"baseline scores {means[('', 'baseline')]:.1f} BLEU where copying the English source scores {copy:.1f}: "
            f"every decoder self-attention row of the claims scores below copying ({decoder.min():.1f} to "
            f"{decoder.max():.1f}), and so does T1's `0111` ({means[('enc-dec', '0111')]:.2f})")


def small_copy() -> str:
    """What copying the source scores on the committed corpus's validation and held-out splits (BLEU), beside the
    small preset's baseline."""
    from attnbench.analysis.curves import copy_scores

    valid, heldout = (copy_scores(committed_corpus(), split)["BLEU"] for split in ("valid", "heldout"))
    return f"(copying: {valid:.1f} and {heldout:.1f};"


@cache
def small_pilot() -> pd.DataFrame:
    """The small preset's pilot: the baseline's runs at its seeds (results/l10n-small), every one ok."""
    from attnbench.analysis.studies import L10N_SMALL_PILOT_SEEDS

    runs = runs_of("l10n-small", "nmt-l10n", parse_seeds(L10N_SMALL_PILOT_SEEDS))
    runs = runs[(runs["variant"] == "baseline") & (runs["preset"] == "small")]
    assert len(runs) == 3 and (runs["status"] == "ok").all()
    return runs


def small_pilot_scores() -> str:
    """The small preset's baseline at its pilot seeds: validation BLEU (mean ± std) and chrF, held-out BLEU and chrF."""
    runs = small_pilot()
    return (f"{runs['value'].mean():.1f} ± {runs['value'].std():.2f} BLEU (chrF {runs['value_chrf'].mean():.1f}) on "
            f"validation, {runs['heldout_bleu'].mean():.1f} (chrF {runs['heldout_chrf'].mean():.1f}) on the held-out "
            "packages")


def small_run_time() -> str:
    """The small preset's pilot runs' median wall time (training, validation and held-out test), in minutes."""
    return f"about {small_pilot()['run_seconds'].median() / 60:.0f} minutes a run"


def small_registration_power() -> str:
    """The small preset's registration: the pilot's baseline spread and what paired seeds then detect, a contrast's
    spread taken as sqrt(2) times the baseline's (the mini preset's registration did the same)."""
    from attnbench.analysis.stats import min_detectable_effect

    sd = small_pilot()["value"].std()
    first = {n: min_detectable_effect(sd * 2 ** 0.5, n, 0.05 / 3, 0.8) for n in (3, 4, 6)}
    rest = min_detectable_effect(sd * 2 ** 0.5, 6, 0.05 / 8, 0.8)
    return (f"{sd:.2f} BLEU over its three seeds; a two-row contrast of independent rows has about sqrt(2) times "
            f"that, and then three paired seeds would detect {first[3]:.2f} BLEU at 0.05 / 3 with 80 % power, four "
            f"{first[4]:.2f} and six {first[6]:.2f} (and {rest:.2f} at 0.05 / 8 for the second family; `python -c "
            f"\"from attnbench.analysis.stats import min_detectable_effect as m; print(m({sd:.4f} * 2 ** 0.5, 6, 0.05 / 3, "
            f"0.8))\"`).")


def l10n_t3_decoder_rows() -> str:
    """T1's and T3's rows below copying at the mini preset, as study.md's side-by-side table gives them."""
    runs = successful_runs(translation_runs("nmt-l10n")).assign(slot=lambda f: f["slot"].fillna(""))
    means = runs.groupby(["slot", "variant"])["value"].mean()
    t1 = translation_claims("nmt-l10n").query("claim == 'T1'").iloc[0]
    return (f"| T1 | reproduced: `1111 - 0111` {t1['mean']:+.2f} BLEU, Holm p {t1['p_holm']:.3f} (`0111` at "
            f"{means[('enc-dec', '0111')]:.2f} is below copying) |", f"the decoder contrast compares two rows below "
            f"copying ({means[('dec-self', 'deformable')]:.2f} and {means[('dec-self', '0100')]:.2f})")


def synthetic_copy_and_baseline() -> str:
    """Copying the source of the synthetic corpus's validation split, and the mini baseline's mean at the claims' seeds."""
    import tempfile

    from attnbench.data.mini_corpus import ensure_mini_corpus
    from attnbench.analysis.curves import copy_scores

    root = Path(tempfile.mkdtemp(prefix="mini-corpus-"))
    ensure_mini_corpus(str(root))
    copy = copy_scores(root, "valid", "src", "tgt")["BLEU"]
    runs = successful_runs(translation_runs("nmt"))
    baseline = runs.loc[runs["variant"] == "baseline", "value"].mean()
    return f"On the synthetic corpus copying scores {copy:.1f} BLEU and the `mini` baseline {baseline:.1f}"


def l10n_tradeoff_effects() -> str:
    """The main effects on real language from the trade-off part's seeds 210-212, read after it completed."""
    effects = factor_effects(runs_of("l10n", "nmt-l10n", range(210, 213))).set_index(["slot", "term"])["effect"]
    enc, cross = effects["enc-self"], effects["enc-dec"]
    return (f"E4 {enc['E4']:+.2f} and E2 {enc['E2']:+.2f} BLEU, where E1 costs {-enc['E1']:.2f} and E3 adds "
            f"{enc['E3']:.2f}; in encoder-decoder attention E2 adds {cross['E2']:.2f} BLEU, E1 {cross['E1']:.2f}, E4 "
            f"{cross['E4']:.2f} and E3 {cross['E3']:.2f}; in decoder self-attention no term moves it by more than "
            f"{effects['dec-self'].abs().max():.2f} BLEU")


def first_study_translation() -> str:
    e1, e1_self, e2 = (effect("mini-sweep", "nmt", term, slot)
                       for term, slot in (("E1", "enc-dec"), ("E1", "enc-self"), ("E2", "enc-self")))
    return (f"E1 {e1['effect']:+.1f} BLEU in encoder-decoder attention (z = {e1['z']:.2f}), "
            f"{e1_self['effect']:+.1f} in encoder self-attention (z = {e1_self['z']:.2f}); "
            f"E2 the largest self-attention term ({e2['effect']:+.1f} BLEU in the encoder, z = {e2['z']:.2f})")


def flag_claims() -> str:
    """The detector's flag rule in the claims re-run: how often each attention row learnt it, the baseline's
    count, and the smallest Holm p of the contrasts between rows."""
    runs = runs_of("claims", "det-flag", range(110, 120))
    learnt = successful_runs(runs).groupby("variant")["learnt"].sum()
    attention = learnt.drop("baseline")
    table = all_claims_table(runs)
    return (f"({attention.min()} to {attention.max()} of 10 seeds, the baseline at "
            f"{'none' if learnt['baseline'] == 0 else learnt['baseline']}), but no contrast between rows is decided "
            f"(smallest Holm p {table['p_holm'].min():.3f})")


def survey_rows(task: str, unit: str, digits: int) -> str:
    """The survey's modules against the baseline under the protocol (results/claims, seeds 110-112, Holm over
    them: ``compare.py --rows survey``): the lowest and highest paired difference and the smallest Holm p."""
    rows = summarize(select_rows(runs_of("claims", task, range(110, 113)), "survey")).set_index("variant")
    delta, p_holm = rows["paired_delta"].drop("baseline"), rows["p_holm"].drop("baseline")
    return (f"from {delta.min():+.{digits}f} {unit} (`{delta.idxmin()}`) to {delta.max():+.{digits}f} "
            f"(`{delta.idxmax()}`)", f"(smallest Holm p {p_holm.min():.3f}, `{p_holm.idxmin()}`)")


def survey_facts() -> str:
    (det_range, det_p), (seg_range, seg_p) = survey_rows("det", "mAP", 3), survey_rows("seg", "mIoU", 2)
    power = power_table(select_rows(pd.concat([runs_of("claims", task, range(110, 113)) for task in ("det", "seg")]),
                                    "survey"), 0.05, 0.8).set_index("task")["min_detectable_effect"]
    return (f"On the detector the modules lie {det_range} from the baseline {det_p}; on the segmentor {seg_range} "
            f"{seg_p}. Three paired seeds detect, at 0.05 before any adjustment and with 80 % power, differences of "
            f"{power['det']:.3f} mAP and {power['seg']:.2f} mIoU (`--power`).")


def survey_modules() -> str:
    """How many survey modules the re-run trained on the detector and on the segmentor, four of them named."""
    det, seg = (len(set(select_rows(runs_of("claims", task, range(110, 113)), "survey")["variant"]) - {"baseline"})
                for task in ("det", "seg"))
    return f"(SE, CBAM, GC, non-local and {WORDS[det - 4]} more on the detector, {WORDS[seg - 4]} on the segmentor)"


def l10n_run_time() -> str:
    """The median time of a run on real language, two at a time (results/l10n), in whole minutes."""
    runs = successful_runs(store("l10n"))
    return f"about {runs.loc[runs['task'] == 'nmt-l10n', 'run_seconds'].median() / 60:.0f} min a run"


def survey_gates() -> str:
    """How far the loss moved cc's gates on the detector, against every run of the study's rows that records it."""
    runs = runs_of("claims", "det")
    moved = runs[runs["variant"] == "cc"]["gate_loss_max"]
    study = select_rows(runs, "study")["gate_loss_max"].dropna()
    return (f"({moved.min():.2f} to {moved.max():.2f}, against at most {study.max():.3f} in the {len(study)} "
            "runs of the study's rows that record it)")


def e4_lead() -> str:
    return f"E4 on the segmentor ({effect('claims', 'seg', 'E4', seeds=range(110, 113))['effect']:+.2f} mIoU"


def closed_gate_power() -> str:
    power = power_table(runs_of("mini-study", "det"), 0.05, 0.8, 0.01).iloc[0]
    return (f"{power['seeds']} seeds detect {power['min_detectable_effect']:.3f} mAP, 0.01 mAP needs "
            f"{power['seeds_needed']}")


def flag_start() -> str:
    """The start of the FCN segmentor's flag runs against the rule learnt (results/flag-start)."""
    from attnbench.analysis.gates import start_against_learnt

    finals = pd.concat([runs_of("protocol", "fcn-flag"), runs_of("claims", "fcn-flag")])
    _, table = start_against_learnt(finals, store("flag-start"))
    p = table.set_index("start")["p_holm"]
    return f"the prediction holds (Holm p {p['loss_first']:.3f} and {p['mass_context']:.3f})"


def fcn_flag_screen() -> str:
    """The glance table's line of the FCN segmentor's conv2-on screen (results/protocol, seeds 240-243)."""
    (k_base, n_base), (k, n) = (learnt("protocol", "fcn-flag", row, range(240, 244)) for row in ("baseline",
                                                                                             "1111:stages=2-5"))
    return f"| 240-243 | {k_base} of {n_base} | `1111:stages=2-5` {k} of {n}"


def fcn_flag_confirmation() -> str:
    """The glance table's line of the FCN segmentor's conv2-on confirmation (results/protocol, seeds 250-259): the
    counts learnt, the interval, and the exact test against the baseline, as ``compare.py --value context`` has them."""
    summary = summarize(runs_of("protocol", "fcn-flag", range(250, 260))).set_index("variant")
    base, row = summary.loc["baseline"], summary.loc["1111:stages=2-5"]
    k, n = int(row["learnt"]), int(row["context_seeds"])
    test = "McNemar" if row["exact_paired"] else "Fisher"
    return (f"| 250-259 | {int(base['learnt'])} of {int(base['context_seeds'])} | `1111:stages=2-5` {k} of {n} "
            f"(95 % interval {interval(k, n)}; {test} p {row['exact_p']:.3f}) |")


def flag_rows(task: str) -> str:
    """The glance table's line of ``flag`` on a task: the baseline's and ``1111``'s pooled counts."""
    (k_base, n_base), (k, n) = pooled(task, "baseline"), pooled(task, "1111")
    return f"| 30-39, 110-119 | {k_base} of {n_base} | `1111` {k} of {n}"


def fresh_clone(part: int) -> str:
    """The README's Time line from the latest record of tools/fresh_clone_check.sh: its date (0), the main
    command's wall time (1), the test command's (2)."""
    record = sorted((ROOT / "results/fresh-clone").glob("*.md"))[-1]
    rows = [line.split(" | ") for line in record.read_text().splitlines() if line.startswith("| `")]
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed)", rows[1][3])}
    tests = f"the test command {rows[1][2]}, {counts['passed']:,} passed" + \
        (f" and {counts['failed']} failed" if counts.get("failed") else "")
    return (f"Its record of {record.stem}", f"command {rows[0][2]} with", tests)[part]


def l10n_curve() -> str:
    """The validation BLEU of results/l10n-curve's run at each of its three validations (every 500 iterations)."""
    scalars = [json.loads(line) for line in (ROOT / "results/l10n-curve/scalars.json").read_text().splitlines()]
    bleu = [row["translation/BLEU"] for row in scalars if "translation/BLEU" in row]
    assert len(bleu) == 3
    return f"validation BLEU {bleu[0]:.1f} at 500 iterations, {bleu[1]:.1f} at 1,000, {bleu[2]:.1f} at 1,500"


@cache
def committed_corpus() -> Path:
    """The committed l10n corpus, unpacked once into a temporary folder."""
    import tempfile

    from attnbench.data.l10n_corpus import unpack_committed

    return unpack_committed(Path(tempfile.mkdtemp(prefix="l10n-")) / "l10n-ende", log=lambda line: None)


def copy_scores_text() -> str:
    """What copying the source scores on each split of the committed corpus (BLEU and chrF, sacreBLEU)."""
    from attnbench.analysis.curves import copy_scores

    score = {split: copy_scores(committed_corpus(), split) for split in ("valid", "test", "heldout")}
    return (f"{score['valid']['BLEU']:.1f} BLEU (chrF {score['valid']['chrF']:.1f}) on validation, "
            f"{score['test']['BLEU']:.1f} ({score['test']['chrF']:.1f}) on test and {score['heldout']['BLEU']:.1f} "
            f"({score['heldout']['chrF']:.1f}) on the held-out packages")


def heldout_counts() -> str:
    """The held-out split's pairs, entries and pairs dropped for their English in train (the committed manifest)."""
    manifest = json.loads((committed_corpus() / "manifest.json").read_text())
    heldout, pairs = manifest["heldout"], manifest["pairs"]["heldout"]
    return (f"**{pairs:,} held-out pairs** ({heldout['entries']:,} entries of the nine packages; "
            f"{heldout['dropped']['in_train']:,} pairs dropped because their English is in train)")


def learning_curves() -> str:
    """The table of results/l10n-curves (tools/learning_curves.py), as translation.md shows it (spaces collapsed)."""
    from attnbench.analysis.curves import curve_table, read_curves

    return re.sub(r"\s+", " ", curve_table(read_curves(ROOT / "results/l10n-curves")).to_markdown(index=False))


def token_store_benchmark(part: int) -> str:
    """results/benchmark-cpu/translation_data.md's table row (0) and its in-memory comparison's time and memory (1)."""
    text = (ROOT / "results/benchmark-cpu/translation_data.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| 1,000,000 |"))
    return (row, re.search(r"in memory: (\S+ s and \S+ MB)", text)[1])[part]


@cache
def figure4_det() -> str:
    """F4's registered look (results/figure4-det at the part's seeds): the range of its three means, Holm p and
    detectable effects."""
    seeds = parse_seeds(FIGURE4_DET_SEEDS)
    table = all_claims_table(runs_of("figure4-det", "det", seeds), family="figure4-det")
    assert (table["seeds"] == len(seeds)).all() and set(table["verdict"].str.split().str[0]) == {"undecided"}
    return (f"{table['mean'].min():.4f} to {table['mean'].max():.4f} mAP, Holm p {table['p_holm'].min():.2f} to "
            f"{table['p_holm'].max():.2f}; {len(seeds)} seeds detect {table['detectable'].min():.4f} to "
            f"{table['detectable'].max():.4f}")


@cache
def e4_seg() -> str:
    """E4-seg's registered look (results/e4-seg at the part's seeds): the contrast's mean ± std and p, E4's
    main effect (the contrast divided by -8) and what the seeds detect."""
    seeds = list(E4_SEG_SEEDS)
    runs = runs_of("e4-seg", "seg", seeds)
    claim = all_claims_table(runs, family="e4-seg").iloc[0]
    assert claim["seeds"] == len(seeds)
    assert effect("e4-seg", "seg", "E4", seeds=seeds)["effect"] == pytest.approx(-claim["mean"] / 8)
    return (f"{claim['mean']:+.2f} ± {claim['std']:.2f} mIoU, p {claim['p']:.3f} (E4's main effect "
            f"{-claim['mean'] / 8:+.2f}; {len(seeds)} seeds detect {claim['detectable']:.2f})")


def e4_seg_verdict() -> str:
    """study.md's verdict on E4-seg: E4's main effect at the registered seeds and its p."""
    main_effect = effect("e4-seg", "seg", "E4", seeds=list(E4_SEG_SEEDS))
    return f"E4's main effect on the mini segmentor is {main_effect['effect']:+.2f} mIoU (p {main_effect['p']:.2f})"


#: The phrases each page states, by the function that writes them from the stores.
FACTS = {
    "README.md": [det_flag, claims_detect, trade_off, full_scale_baseline, translation_family, survey_modules,
                  l10n_run_time, image_claims_context, image_leads, lambda: flag_learnt_and_baseline()[0],
                  lambda: flag_learnt_and_baseline()[1], small_pilot_scores, small_copy, l10n_below_copy,
                  lambda: translation_t1("nmt-l10n"), lambda: translation_t1("nmt"),
                  lambda: l10n_t3_decoder_rows()[1], synthetic_copy_and_baseline,
                  lambda: fresh_clone(0), lambda: fresh_clone(1), lambda: fresh_clone(2)],
    "docs/study.md": [claims_detect, trade_off, lambda: translation_t1("nmt"), lambda: translation_t1("nmt-l10n"),
                      translation_detects, l10n_enc_dec_rows, l10n_row_range, l10n_tradeoff_effects,
                      first_study_translation, flag_claims, e4_lead, survey_facts, survey_gates,
                      lambda: claim_rows_spread("det", "mAP", 3), lambda: claim_rows_spread("seg", "mIoU", 1),
                      closed_gate_power, figure4_det, e4_seg_verdict, small_pilot_scores, small_registration_power,
                      small_run_time, lambda: l10n_t3_decoder_rows()[0], lambda: l10n_t3_decoder_rows()[1],
                      lambda: f"13 of the 20 registered seeds (95 % interval {interval(*pooled('fcn-flag', '1111'))})"],
    "docs/registry.md": [figure4_det, e4_seg],
    "docs/translation.md": [l10n_curve, l10n_run_time, l10n_baseline_and_best, copy_scores_text, heldout_counts,
                            learning_curves, small_pilot_scores, small_run_time,
                            lambda: token_store_benchmark(0),
                            lambda: token_store_benchmark(1)],
    "docs/diagnostics.md": [lambda: flag_rows("det-flag"), lambda: flag_rows("fcn-flag"),
                            lambda: f"13 of 20 (95 % interval {interval(*pooled('fcn-flag', '1111'))})", flag_start,
                            fcn_flag_screen, fcn_flag_confirmation],
}


def normalized(text: str) -> str:
    return re.sub(r"\s+", " ", text)


@pytest.mark.parametrize("page,fact", [(page, fact) for page, facts in FACTS.items() for fact in facts],
                         ids=lambda value: value if isinstance(value, str) else "")
def test_prose_number(page, fact):
    phrase = fact()
    assert phrase in normalized((ROOT / page).read_text()), f"{page} does not say, as the stores do: {phrase}"
