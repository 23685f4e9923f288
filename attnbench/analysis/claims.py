"""The study's five claims about images (Zhu et al. 2019), each as paired contrasts of rows, tested and decided.

A claim is tested by one or more *contrasts* ``c_s = sum_r w_r value_{r,s}`` over a task's rows ``r`` at
seed ``s`` (coefficients summing to zero, so a contrast compares gains, not levels), each predicted
positive: "``w/o -> 0011`` gains far more than ``0011 -> 1111``" is ``(0011 - baseline) - (1111 - 0011)
= 2 * 0011 - baseline - 1111 > 0``. Rows pair by seed as everywhere in the report (each row against the
contrast's last row, :func:`~attnbench.analysis.summary.paired_differences`), so ``c_s`` is taken over the
seeds at which every row has a run under one protocol.

The test matches the outcomes: on a task that records a context accuracy (the diagnostic suite, whose
runs learn a rule or not) the contrast of the learnt indicators is tested by the exact sign test on the
seeds where it is not zero (for two rows, McNemar's exact test), and its sign, not the metric's, says
which way it went; elsewhere the paired t-test of ``c_s`` (the Wilcoxon signed-rank p beside it). The *family* is every contrast of the five claims tested on
one task (and preset): Holm's adjustment runs over them. Verdict: ``reproduced`` when the Holm-adjusted p is
below alpha and the contrast positive, ``refuted`` when below alpha and negative, else ``undecided``,
with the smallest contrast the seeds detect at alpha over the family's size and 80 % power (paired t).
A contrast whose rows have not all run on a task is listed with the rows it misses, outside the family.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from attnbench.attention.factors import ALL_FACTORS
from attnbench.analysis.summary import p_text, paired_differences, runs_by_row, successful_runs
from attnbench.analysis.stats import holm, mcnemar_exact_p, min_detectable_effect, paired_statistics, wilcoxon_p


@dataclass(frozen=True)
class Contrast:
    """One test of a claim: ``sum_r w_r value_r`` over ``weights`` ((row, w) pairs, w summing to 0) is
    predicted positive; ``says`` is what a positive value means."""

    claim: str
    says: str
    weights: tuple[tuple[str, int], ...]
    slot: str | None = None  # translation's attention slot the rows fill (None: images)

    def __post_init__(self):
        if sum(w for _, w in self.weights) != 0 or len(self.weights) < 2:
            raise ValueError(f"{self.claim}: a contrast needs two rows or more and weights summing to 0")

    @property
    def rows(self) -> list[str]:
        return [row for row, _ in self.weights]

    @property
    def formula(self) -> str:
        """``2 0011 - baseline - 1111``."""
        terms = [f"{'-' if w < 0 else '+'} {f'{abs(w)} ' if abs(w) != 1 else ''}{row}" for row, w in self.weights]
        return " ".join(terms).removeprefix("+ ")


#: The contrasts of the study's claims C1 to C5 (the registered wording, docs/study.md), each predicted positive.
CLAIMS = (
    Contrast("C1", "w/o -> 0011 gains more than 0011 -> 1111",
             (("0011", 2), ("baseline", -1), ("1111", -1))),
    Contrast("C1", "0011's gain over w/o exceeds what E1 adds to 0111",
             (("0011", 1), ("baseline", -1), ("0111", 1), ("1111", -1))),
    Contrast("C2", "0110's gain over w/o exceeds what E1 and E4 add to it",
             (("0110", 2), ("baseline", -1), ("1111", -1))),
    Contrast("C2", "E3 alone improves on w/o", (("0010", 1), ("baseline", -1))),
    Contrast("C3", "deformable convolution beats E2 alone", (("deformable", 1), ("0100", -1))),
    Contrast("C4", "E3 adds more to deformable than E1, E2 and E4 add to 0010+deformable",
             (("0010+deformable", 2), ("deformable", -1), ("1111+deformable", -1))),
    Contrast("C5", "E2 beats dynamic convolution", (("0100", 1), ("dynamic", -1))),
    Contrast("C5", "E2 in a 7x7 window beats dynamic convolution with 7x7 kernels",
             (("0100:range=3", 1), ("dynamic:kernel=7", -1))),
)


#: The contrasts of the study's translation claims T1 to T4, each predicted positive and tested in the slot it
#: names; registered before the real-language runs (docs/study.md, "Translation on real language").
#: T2 compares the loss of removing one term from ``1111``: ``1111 - 1011`` (E2) against ``1111 - 0111`` (E1) is
#: ``0111 - 1011``. T4's windows match: E2 within r positions of the query against a kernel of 2r + 1 taps in the
#: encoder (r = 3: 7 taps), a causal kernel of r + 1 taps in the decoder (r = 6: 7 taps).
TRANSLATION_CLAIMS = (
    Contrast("T1", "E1 is vital in encoder-decoder attention: 1111 without it falls", (("1111", 1), ("0111", -1)),
             "enc-dec"),
    *(Contrast("T2", f"removing E2 from 1111 costs more than removing {term}", ((row, 1), ("1011", -1)), slot)
      for slot in ("enc-self", "dec-self") for term, row in (("E1", "0111"), ("E3", "1101"), ("E4", "1110"))),
    *(Contrast("T3", "deformable convolution beats E2 alone", (("deformable", 1), ("0100", -1)), slot)
      for slot in ("enc-self", "dec-self")),
    *(Contrast("T4", "E2 in a window beats dynamic convolution over the same keys",
               ((f"0100:range={r}", 1), ("dynamic:kernel=7", -1)), slot)
      for slot, r in (("enc-self", 3), ("dec-self", 6))),
)

#: Two image leads registered after the claims re-run (docs/study.md, "Two image leads under the protocol"),
#: each contrast predicted positive, each family tested on its own store and seeds. ``F4``: the study's Figure 4
#: on detection, E2 within r pixels of the query on each axis against dynamic convolution over the same
#: (2r + 1) x (2r + 1) window. ``E4-seg``: the trade-off's E4 lead on the segmentor, as the sum over the eight
#: factor-set pairs that differ in E4 alone (without E4 minus with it: 8 times E4's main effect, negated).
FIGURE4_DET = tuple(
    Contrast("F4", f"E2 in a {2 * r + 1}x{2 * r + 1} window beats dynamic convolution with {2 * r + 1}x{2 * r + 1} kernels",
             ((f"0100:range={r}", 1), (f"dynamic:kernel={2 * r + 1}", -1))) for r in (1, 2, 3))
E4_SEG = (Contrast("E4-seg", "the factor sets without E4 beat those with it (8 times E4's main effect, negated)",
                   tuple((row, -1 if row.endswith("1") else 1)
                         for row in ("baseline", *ALL_FACTORS))),)

#: The translation claims at the small preset (a model that translates), registered as two families in the
#: order they run (docs/study.md, "The translation claims with a model that translates"): T1 and T3 first (the
#: claims that read "reproduced" at the mini preset), then T2 and T4.
TRANSLATION_FIRST = tuple(c for c in TRANSLATION_CLAIMS if c.claim in ("T1", "T3"))
TRANSLATION_REST = tuple(c for c in TRANSLATION_CLAIMS if c.claim in ("T2", "T4"))

#: ``compare.py --claims FAMILY``: the contrasts of each registered family, each tuple one Holm family per task.
CLAIM_FAMILIES = {"study": (CLAIMS, TRANSLATION_CLAIMS), "figure4-det": (FIGURE4_DET,), "e4-seg": (E4_SEG,),
                  "translation-first": (TRANSLATION_FIRST,), "translation-rest": (TRANSLATION_REST,)}

#: Each claim in one line (the study's words, shortened), the claims' order.
CLAIM_STATEMENTS = {
    "C1": "query-independent terms bring much more than query-sensitive ones; E1 adds almost nothing",
    "C2": "E2 and E3 are the important terms: 0110 is close to 1111, E3 alone improves on w/o",
    "C3": "deformable convolution beats E2 alone",
    "C4": "0010+deformable is the best trade-off: about 1111+deformable's accuracy",
    "C5": "dynamic convolution falls behind E2, also in the same window",
    "T1": "E1 is vital in encoder-decoder attention",
    "T2": "E2 is the most important term of self-attention",
    "T3": "the 1D deformable convolution beats E2 alone in self-attention",
    "T4": "E2 in a window beats dynamic convolution over the same keys",
    "F4": "E2 in a window beats dynamic convolution over the same pixels (Figure 4, detection)",
    "E4-seg": "E4 lowers the segmentor's mIoU",
}


def claim_rows(contrasts=CLAIMS, slot: str | None = None) -> list[str]:
    """Every row the contrasts (those of ``slot``, if given) compare but the baseline, in the order they first
    appear (what a re-run trains)."""
    return [row for row in dict.fromkeys(r for c in contrasts if slot in (None, c.slot) for r in c.rows)
            if row != "baseline"]


def contrast_values(by_row: dict, key: tuple, contrast: Contrast, column: str = "value") -> pd.Series:
    """``c_s`` per seed (the index) of one task, preset and slot (``key``), from ``column`` of the runs of
    every row of the contrast (all present in ``by_row``), each paired with the last row by seed and protocol."""
    *others, last = [by_row[(*key, row)].assign(value=lambda f: f[column].astype(float)) for row in contrast.rows]
    total = None
    for (_, weight), frame in zip(contrast.weights, others):
        term = weight * paired_differences(frame, last)
        total = term if total is None else total.add(term).dropna()  # seeds where every row pairs
    return total


def _sign_test_p(values: pd.Series) -> float:
    """The exact two-sided sign test of the nonzero values (McNemar's exact test for a two-row contrast)."""
    return mcnemar_exact_p(int((values > 0).sum()), int((values < 0).sum()))


def claims_table(results: pd.DataFrame, contrasts=CLAIMS, alpha: float = 0.05, power: float = 0.8) -> pd.DataFrame:
    """Every contrast of ``contrasts`` on every task and preset of ``results`` they are about (vision tasks for
    the image claims, a contrast with a ``slot`` in that slot of the translation tasks; verdict
    ``not run: ...``, untested and outside the family, where rows are missing).

    Columns: ``task``, ``preset``, ``claim``, ``contrast`` (the formula), ``says``, ``seeds`` (paired),
    ``mean``, ``std`` (of ``c_s``: of the metric, or of the learnt indicators, 1 or 0, where the test is the
    sign test), ``test`` ('paired t' or 'sign (learnt)'), ``learnt`` (each row's
    k/n on diagnostic tasks), ``p``, ``p_wilcoxon`` (metric tasks), ``p_holm`` (over each task and preset),
    ``verdict``, ``detectable`` (for an undecided paired t: the smallest contrast its seeds detect at
    alpha / the task's family size with ``power``) and ``gmacs_attention`` (each row's attention GMACs).
    """
    from attnbench.sweep.tasks import TASKS, VisionTask

    runs = successful_runs(results)
    about_images = {c.slot is None for c in contrasts}
    if len(about_images) > 1:
        raise ValueError("a family of contrasts is about images (no slot) or translation (every contrast a slot)")
    images = about_images == {True}
    runs = runs[[isinstance(TASKS.get(task), VisionTask) == images for task in runs["task"]]]
    by_row = runs_by_row(runs)
    rows = []
    keys = {key[:3] for key in by_row} if images else \
        {(*key[:2], contrast.slot) for key in by_row for contrast in contrasts}  # every slot a contrast names
    for key in sorted(keys, key=str):
        for contrast in contrasts:
            if not images and contrast.slot != key[2]:
                continue
            row = dict(task=key[0], preset=key[1], slot=key[2], claim=contrast.claim, contrast=contrast.formula,
                       says=contrast.says, seeds=0, p=math.nan, learnt="", gmacs_attention="")
            missing = [r for r in contrast.rows if (*key, r) not in by_row]
            if missing:
                rows.append(row | dict(verdict=f"not run: {', '.join(missing)}"))
                continue
            frames = [by_row[(*key, r)] for r in contrast.rows]
            values = contrast_values(by_row, key, contrast)
            stats = paired_statistics(values)
            row |= dict(seeds=len(values), mean=stats["paired_delta"], std=stats["paired_std"],
                        gmacs_attention=", ".join(f"{r} {frame['macs_modules'].mean() / 1e9:.4g}"
                                                  for r, frame in zip(contrast.rows, frames)))
            if all(frame["value_context"].notna().any() for frame in frames):  # a diagnostic rule: learnt or not
                learnt = contrast_values(by_row, key, contrast, "learnt")
                row |= dict(test="sign (learnt)", mean=learnt.mean(), std=learnt.std(), p=_sign_test_p(learnt),
                            learnt=", ".join(f"{r} {int(f['learnt'].sum())}/{len(f)}"
                                             for r, f in zip(contrast.rows, frames)))
            else:
                row |= dict(test="paired t", p=stats["paired_p"], p_wilcoxon=wilcoxon_p(values))
            rows.append(row)
    table = pd.DataFrame(rows, columns=["task", "preset", "slot", "claim", "contrast", "says", "seeds", "mean", "std",
                                        "test", "learnt", "p", "p_wilcoxon", "gmacs_attention", "verdict"])
    table["p_holm"] = table.groupby(["task", "preset"])["p"].transform(holm) if len(table) else []
    table["family"] = table.groupby(["task", "preset"])["p"].transform("count")
    decided = table["p_holm"] < alpha
    tested = table["p"].notna()
    table["verdict"] = table["verdict"].astype(object)
    table.loc[tested, "verdict"] = "undecided"
    table.loc[tested & decided & (table["mean"] > 0), "verdict"] = "reproduced"
    table.loc[tested & decided & (table["mean"] < 0), "verdict"] = "refuted"
    table["verdict"] = table["verdict"].fillna("no test (fewer than two paired seeds)")
    table["detectable"] = [
        min_detectable_effect(std, n, alpha / m, power) if verdict == "undecided" and test == "paired t" else math.nan
        for std, n, verdict, test, m in table[["std", "seeds", "verdict", "test", "family"]].itertuples(index=False)]
    return table


def all_claims_table(results: pd.DataFrame, alpha: float = 0.05, power: float = 0.8,
                     family: str = "study") -> pd.DataFrame:
    """:func:`claims_table` of each part of a :data:`CLAIM_FAMILIES` family (the study's: the image claims,
    then the translation claims), one after the other."""
    if family not in CLAIM_FAMILIES:
        raise ValueError(f"unknown family of claims {family!r}; known: {', '.join(CLAIM_FAMILIES)}")
    tables = [claims_table(results, contrasts, alpha, power) for contrasts in CLAIM_FAMILIES[family]]
    return pd.concat([t for t in tables if len(t)], ignore_index=True) if any(len(t) for t in tables) else tables[0]


def claim_verdicts(table: pd.DataFrame, line_break: str | None = None) -> pd.DataFrame:
    """One row per claim of a :func:`claims_table`, one column per task (and preset where a task has
    several): the claim's verdict from its contrasts and, per contrast, its slot and formula, mean and
    Holm-adjusted p (``enc-self 0111 - 1011: +5.59, p 0.002``), in brackets after the verdict, or each on
    a line of its own after ``line_break`` where one is given (``<br>`` in a markdown cell).

    A claim is ``reproduced`` on a task when every contrast tested there is, ``refuted`` when any is,
    ``undecided`` otherwise, and ``not run`` when none of its contrasts was tested; contrasts left
    untested are listed as ``not run`` (or ``no test``) beside the others.
    """
    several_presets = table.groupby("task")["preset"].nunique().gt(1)
    rows = {claim: {"claim": claim, "statement": statement} for claim, statement in CLAIM_STATEMENTS.items()
            if claim in set(table["claim"])}
    for (task, preset, claim), contrasts in table.groupby(["task", "preset", "claim"], sort=False):
        tested = contrasts[contrasts["p"].notna()]
        if tested.empty:
            word = "not run"
        elif (tested["verdict"] == "refuted").any():
            word = "refuted"
        elif (tested["verdict"] == "reproduced").all():
            word = "reproduced"
        else:
            word = "undecided"
        details = [(f"{slot} " if isinstance(slot, str) and slot else "") + f"{formula}: " +
                   (f"{mean:+.3g}, p {p_text(p_holm)}" if not pd.isna(p) else
                    ("not run" if str(verdict).startswith("not run") else "no test"))
                   for slot, formula, mean, p, p_holm, verdict
                   in contrasts[["slot", "contrast", "mean", "p", "p_holm", "verdict"]].itertuples(index=False)]
        column = f"{task} ({preset})" if several_presets[task] else task
        rows[claim][column] = (word if word == "not run" else line_break.join([word, *details]) if line_break
                               else f"{word} ({'; '.join(details)})")
    return pd.DataFrame(list(rows.values())).fillna("not run")


def claims_text(table: pd.DataFrame, fmt: str, alpha: float) -> str:
    """``--claims``: the contrasts with mean ± std, p-values as the comparison table prints them, and the verdict."""
    if fmt == "csv":
        return table.to_csv(index=False)
    shown = pd.DataFrame({
        "task": table["task"], "preset": table["preset"], "slot": table["slot"].fillna(""), "claim": table["claim"],
        "contrast": table["contrast"],
        "seeds": table["seeds"],
        "mean ± std": ["" if pd.isna(m) else f"{m:+.4f} ± {s:.4f}" for m, s in zip(table["mean"], table["std"])],
        "test": table["test"].fillna(""), "learnt": table["learnt"], "p": table["p"].map(p_text),
        "p_wilcoxon": table["p_wilcoxon"].map(p_text), "p_holm": table["p_holm"].map(p_text),
        "verdict": [v if pd.isna(d) else f"{v} (detects {d:.4f})"
                    for v, d in zip(table["verdict"], table["detectable"])],
        "GMACs attention": table["gmacs_attention"]})
    shown = shown.drop(columns=[column for column in ("slot", "learnt") if not (shown[column] != "").any()])
    text = shown.to_markdown(index=False) if fmt == "markdown" else shown.to_string(index=False)
    families = table.loc[table["family"] > 0, ["task", "preset", "family"]].drop_duplicates()
    sizes = ", ".join(f"{task} ({preset}) {n}" for task, preset, n in families.itertuples(index=False)) or "none"
    return text + (f"\n\nFamily: each task's tested contrasts (Holm within it): {sizes}; verdict at alpha {alpha}; "
                   "'detects': the smallest contrast the paired seeds detect at alpha / the family's size "
                   "with 80 % power")
