"""The CPU-scale study as data: each part, the sweeps it runs and the reports it writes.

    python tools/sweep.py --study list                     # every part: its store, sweeps and reports
    python tools/sweep.py --study claims-det               # one part (it resumes: recorded runs are skipped)
    python tools/sweep.py --study det,report --seeds 3     # flags given override the part's own
    python tools/sweep.py --study det --modules 1111       # rows given replace the part's rows

A part's sweeps are ``tools/sweep.py`` argument lists, run in order after :data:`COMMON` (two runs at a time,
one thread each, no plot per sweep, no metric printed as a run finishes); the flags given beside ``--study``
come last and so win, and rows given (``--factors``, ``--modules``) replace the part's rows
(:func:`with_flags`). Parts that run their rows seed by seed leave whole paired contrasts when stopped midway.
A *confirmation* runs the row its screen chose: it needs ``--modules ROW``. A *closed* part is not run again
(its outcome stands, or its screen decided it need not run): ``closed`` says why. Reports write what
``tools/compare.py`` prints into a file of the store, and the plots; ``{results}`` in them is the part's
store (or ``--results``).

Each registered part names its store and the seeds fixed with its predictions (docs/study.md,
docs/diagnostics.md). The seeds of a part never change after its registration: a new question is a new part.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

#: Every sweep of a part starts from these (two runs at a time, no metric printed as runs finish: a part's
#: values wait for its reports; the study's first parts' store and seeds).
COMMON = ("--jobs", "2", "--no-plot", "--blind", "--seeds", "5", "--results", "results/study")

#: The seeds of the translation claims (docs/study.md, "Translation on real language"), registered before
#: their runs; and of the two image leads (docs/study.md, "Two image leads under the protocol").
L10N_SEEDS = range(210, 216)
#: The small preset's pilot on real language (the baseline's cost per run and seed spread, before any
#: registration at that preset): results/l10n-small.
L10N_SMALL_PILOT_SEEDS = "400-402"
#: The translation claims at the small preset, registered before their runs (docs/study.md, "The translation
#: claims with a model that translates"): T1 and T3 first, then T2 and T4, at the same seeds.
L10N_SMALL_SEEDS = range(410, 416)
FIGURE4_DET_SEEDS = "300-344"
E4_SEG_SEEDS = range(230, 235)


@dataclass(frozen=True)
class Report:
    """``tools/<tool>.py ARGS``, what it prints written to the file ``out`` when given; ``{results}`` in either
    is the part's store (or the ``--results`` given)."""

    tool: str  # compare, plot, flops_table or gates
    args: tuple[str, ...]
    out: str | None = None


@dataclass(frozen=True)
class Part:
    """One resumable part of the study: ``sweeps`` (``tools/sweep.py`` arguments each) then ``reports``."""

    name: str
    about: str
    results: str = "results/study"
    sweeps: tuple[tuple[str, ...], ...] = ()
    reports: tuple[Report, ...] = ()
    confirmation: bool = False  # runs the row its screen chose: needs --modules ROW
    closed: str = ""  # why the part is not run again (its outcome stands; its committed runs are elsewhere)


def _rows(rows) -> str:
    return ",".join(rows)


def _module_rows(task: str) -> str:
    """Every row of a task but the baseline and the factor sets (which ``--factors all`` adds)."""
    from attnbench.attention.factors import ALL_FACTORS
    from attnbench.variants import TRANSLATION_MECHANISMS, vision_rows

    rows = TRANSLATION_MECHANISMS if task == "nmt" else vision_rows(task)
    return _rows(v for v in rows if v != "baseline" and v not in ALL_FACTORS)


def _survey_rows(task: str) -> tuple[str, ...]:
    """The survey's rows of a vision task (decode heads on segmentation only)."""
    from attnbench.variants import SURVEY_VARIANTS, vision_rows

    return tuple(v for v in vision_rows(task) if v in SURVEY_VARIANTS)


def _claim_rows(family: str, slot: str | None = None) -> str:
    from attnbench.analysis import claims

    return _rows(claims.claim_rows(getattr(claims, family), slot))


def _store(results: str, *args: str) -> tuple[str, ...]:
    return (*args, "--results", results)


def _claims_reports(seeds: str, power: bool = False, task: str | None = None) -> tuple[Report, ...]:
    """The claims table and the verdicts per claim (of one ``task``'s runs: files named after it)."""
    only, suffix = (("--tasks", task), f"-{task}") if task else ((), "")
    return (Report("compare", ("--results", "{results}", *only, "--seeds", seeds, "--claims", "--format", "markdown"),
                   f"{{results}}/claims{suffix}.md"),
            Report("compare", ("--results", "{results}", *only, "--seeds", seeds, "--claims", "--by-claim",
                               "--format", "markdown"), f"{{results}}/verdicts{suffix}.md"),
            *((Report("compare", ("--results", "{results}", "--power"), "{results}/power.md"),) if power else ()))


def _plots(*costs: str) -> tuple[Report, ...]:
    return tuple(Report("plot", ("--results", "{results}", *(("--cost", cost) if cost else ()))) for cost in costs)


#: The README's figure: the study's rows on the detector and the segmentor, against the attention's MACs.
_STUDY_ROWS_PLOT = Report("plot", ("--results", "{results}", "--cost", "attention", "--tasks", "det,seg", "--rows",
                                   "study", "--out", "{results}/tradeoff_attention_study"))


def _screen(name: str, about: str, tasks: str, seeds: str, *rows: str, preset: str = "mini", closed: str = "") -> Part:
    """A diagnostic screen or confirmation into ``results/protocol``: ``rows`` as sweep flags."""
    return Part(name, about, "results/protocol",
                ((*_store("results/protocol", "--tasks", tasks, *rows, "--seeds", seeds),
                  *(("--preset", preset) if preset != "mini" else ())),), closed=closed)


def _confirmation(name: str, about: str, tasks: str, seeds: str, preset: str = "mini", closed: str = "") -> Part:
    return replace(_screen(name, about, tasks, seeds, preset=preset, closed=closed), confirmation=True)


def _never_run(screen: str) -> str:
    """Why a confirmation was not run: no row of its screen learnt the rule."""
    return f"never run: no row of {screen} learnt the rule"


def _translation_claims(name: str, task: str, family: str = "TRANSLATION_CLAIMS", seeds=L10N_SEEDS,
                        preset: str = "mini", results: str = "results/l10n") -> Part:
    """The rows of a family of translation contrasts (``attnbench.analysis.claims.<family>``) and the baseline, slot
    by slot, seed by seed, at the seeds fixed with the predictions."""
    slots = [slot for slot in ("enc-dec", "enc-self", "dec-self") if _claim_rows(family, slot)]
    where = ("--preset", preset) if preset != "mini" else ()
    return Part(name, f"the translation claims of attnbench.analysis.claims.{family} on {task}"
                      f"{f' at the {preset} preset' if preset != 'mini' else ''}: every row of a contrast in its slot, "
                      "seed by seed, at the seeds fixed with the predictions", results,
                tuple(_store(results, "--tasks", task, *where, "--slot", slot, "--modules", _claim_rows(family, slot),
                             "--seeds", f"{seed}-{seed}")
                      for seed in seeds for slot in slots))


def study_parts() -> dict[str, Part]:
    """Every part of the study, in the order the study ran them."""
    l10n_seeds = f"{L10N_SEEDS[0]}-{L10N_SEEDS[-1]}"
    fig4 = {"enc-self": "dynamic:kernel=3,0100:range=1,dynamic:kernel=7,0100:range=3,dynamic:kernel=15,0100:range=7,0100",
            "dec-self": "dynamic:kernel=3,0100:range=2,dynamic:kernel=7,0100:range=6,dynamic:kernel=15,0100:range=14,0100"}
    first_study = "the first study (attention gates closed): its runs are archived in results/mini-sweep"
    parts = [
        *(Part(task, f"every row of {task} (the baseline, the 15 factor sets, the other mechanisms{extra})",
               sweeps=(("--tasks", task, "--factors", "all", "--modules", _module_rows(task)),), closed=first_study)
          for task, extra in (("det", ", the survey modules"), ("seg", ", the survey modules and the OCR head"),
                              ("nmt", " in each attention slot"))),
        Part("fig4-nmt", "the study's Figure 4 on translation: dynamic convolution with kernels 3, 7, 15 against E2 "
                         "over the same keys (range 1, 3, 7 in the encoder, 2, 6, 14 in the causal decoder) and "
                         "unrestricted E2", sweeps=tuple(("--tasks", "nmt", "--slot", slot, "--modules", rows)
                                                         for slot, rows in fig4.items()),
             closed="ran into results/study; its runs are archived in results/figure4"),
        Part("fig4-det", "the same on detection: kernels 3, 5, 7 against 0100:range=1,2,3 and unrestricted 0100",
             sweeps=(("--tasks", "det", "--modules", "dynamic:kernel=3,0100:range=1,dynamic:kernel=5,0100:range=2,"
                                                    "dynamic:kernel=7,0100:range=3,0100"),),
             closed="ran with its gates closed; its runs are archived in results/figure4, re-run as leads-figure4-det"),
        Part("scores", "E1's score functions (dot, bilinear, additive) and hard attention (top1, top4) on "
                       "translation's enc-dec and enc-self slots, then on detection",
             sweeps=(*(("--tasks", "nmt", "--slot", slot, "--modules",
                        "1000:score=dot,1000:score=bilinear,1000:score=additive,1000:hard=top1,1000:hard=top4")
                       for slot in ("enc-dec", "enc-self")),
                     ("--tasks", "det", "--modules", "1000,1000:score=scaled_dot,1000:score=bilinear,"
                                                     "1000:score=additive,1000:hard=top1,1000:hard=top4")),
             closed="ran into results/study; its runs are archived in results/scores"),
        Part("protocol-screen", "designs for attention that trains on det-flag (gate start 0.1 and 1, attention "
                                "lr x10 and x30, attention from conv3 or conv2 on)", "results/protocol",
             (_store("results/protocol", "--tasks", "det-flag", "--factors",
                     "1111:gate=1,1111:gate=0.1,1111:gate=1:lr=10,1111:gate=1:lr=30", "--seeds", "20-23"),
              _store("results/protocol", "--tasks", "det-flag", "--factors", "1111:gate=1:stages=3-5,1111:gate=1:stages=2-5",
                     "--seeds", "20-23")),
             closed="decided (the mini presets' protocol); its runs predate that protocol, so the run ids it plans "
                    "now differ from those in its store"),
        _screen("protocol-confirm", "the chosen design (the mini presets' gate=1, conv3 on) against the baseline on "
                                    "det-flag and fcn-flag", "det-flag,fcn-flag", "30-39", "--factors", "1111"),
        _screen("position-screen", "the position rule (det-nearest-flag) under the protocol", "det-nearest-flag",
                "40-43", "--factors", "1111,0001,0010", "--modules", "deformable"),
        _screen("side-screen", "the side of one flag (det-flag-side)", "det-flag-side", "60-63",
                "--factors", "0010,0001,0100,1111", "--modules", "deformable"),
        _screen("side-lr-screen", "det-flag-side, the position terms' parameters ten times faster", "det-flag-side",
                "80-83", "--modules", "0001:lr=10,0100:lr=10,1111:lr=10"),
        _confirmation("side-confirm", "the row a side screen chose (--modules ROW) against the baseline",
                      "det-flag-side", "70-79", closed=_never_run("side-screen")),
        _screen("side-long-screen", "det-flag-side trained four times longer, the position terms ten times faster",
                "det-flag-side", "120-123", "--modules", "0001:lr=10,0100:lr=10,1111:lr=10", preset="long"),
        _confirmation("side-long-confirm", "the row that screen chose (--modules ROW), long preset", "det-flag-side",
                      "130-139", preset="long", closed=_never_run("side-long-screen")),
        _screen("flag-long-screen", "det-flag trained four times longer: baseline, 0010, 1111", "det-flag", "140-143",
                "--factors", "0010,1111", preset="long"),
        _screen("flag-long-confirm", "the same rows, long preset", "det-flag", "150-159", "--factors", "0010,1111",
                preset="long", closed="never run: flag-long-screen's baseline learnt the rule too"),
        _screen("side-fcn-screen", "the position rule on the FCN segmentor (fcn-flag-side)", "fcn-flag-side", "84-87",
                "--factors", "0001,0100,1111"),
        _confirmation("side-fcn-confirm", "the row that screen chose (--modules ROW) against the baseline",
                      "fcn-flag-side", "90-99", closed=_never_run("side-fcn-screen")),
        _screen("fcn-flag-screen", "fcn-flag, the attention from conv2 on: does 1111 learn the rule more reliably?",
                "fcn-flag", "240-243", "--modules", "1111:stages=2-5"),
        _screen("fcn-flag-long-screen", "fcn-flag trained four times longer: baseline and 1111", "fcn-flag", "240-243",
                "--factors", "1111", preset="long", closed="never run: fcn-flag-screen's design held at 4 of 4"),
        _confirmation("fcn-flag-confirm", "the design an fcn-flag screen chose (--modules ROW) against the baseline",
                      "fcn-flag", "250-259"),
        _confirmation("fcn-flag-long-confirm", "the same at the long preset (--modules 1111)", "fcn-flag", "250-259",
                      preset="long", closed="never run: fcn-flag-confirm ran the design fcn-flag-screen chose"),
        Part("fcn-flag-start", "where the FCN segmentor's 1111 runs on fcn-flag started (first loss, attention mass "
                               "after one step): one iteration at the seeds of its full runs (30-39, 110-119), and "
                               "whether the start foretells the rule learnt", "results/flag-start",
             (_store("results/flag-start", "--tasks", "fcn-flag", "--factors", "1111", "--no-baseline",
                     "--seeds", "30-39,110-119", "--cfg-options", "train_cfg.max_iters=1"),),
             (Report("gates", ("--results", "results/protocol,results/claims", "--tasks", "fcn-flag",
                               "--start", "{results}", "--format", "markdown"), "{results}/start.md"),)),
        *(Part(f"claims-{task}", f"the study's image claims re-run under the protocol on {task}: the rows of the "
                                 "claims' contrasts at the seeds fixed with the predictions", "results/claims",
               (_store("results/claims", "--tasks", task, "--modules", _claim_rows("CLAIMS"), "--seeds", "110-119"),))
          for task in ("det", "seg")),
        Part("claims-tradeoff", "the study's other rows (the remaining factor sets, area) on det and seg, for the "
                                "trade-off plots", "results/claims",
             (_store("results/claims", "--tasks", "det,seg", "--factors", "0001,0101,1000,1001,1010,1011,1100,1101,1110",
                     "--modules", "area", "--seeds", "110-112"),)),
        *(Part(f"claims-survey-{task}", f"the survey's modules on {task} under the protocol (every gate open), at "
                                        "the trade-off rows' seeds, for the trade-off plots", "results/claims",
               (_store("results/claims", "--tasks", task, "--modules", _rows(_survey_rows(task)), "--no-baseline",
                       "--seeds", "110-112"),))
          for task in ("det", "seg")),
        Part("claims-flag", "C1 and C2 on the flag rule (det-flag, fcn-flag)", "results/claims",
             (_store("results/claims", "--tasks", "det-flag,fcn-flag", "--factors", "0010,0011,0110,0111,1111",
                     "--seeds", "110-119"),)),
        Part("claims-side", "C3 and C5 on the position rule (det-flag-side)", "results/claims",
             (_store("results/claims", "--tasks", "det-flag-side", "--factors", "0100", "--modules", "deformable,dynamic",
                     "--seeds", "110-119"),)),
        Part("claims-report", "the claims table, the verdicts per task and the trade-off plots of results/claims",
             "results/claims", reports=(*_claims_reports("110-119"), *_plots("", "attention"), _STUDY_ROWS_PLOT)),
        Part("l10n-pilot", "real language (nmt-l10n): the baseline's cost per run and seed spread", "results/l10n",
             (_store("results/l10n", "--tasks", "nmt-l10n", "--seeds", "200-202"),)),
        _translation_claims("l10n-claims", "nmt-l10n"),
        Part("l10n-small-pilot", "real language at the small preset (a model that translates): the baseline's BLEU "
                                 "against copying the source, its cost per run and seed spread, on valid and on "
                                 "the held-out packages", "results/l10n-small",
             (_store("results/l10n-small", "--tasks", "nmt-l10n", "--preset", "small", "--seeds",
                     L10N_SMALL_PILOT_SEEDS),),
             (Report("compare", ("--results", "{results}", "--format", "markdown"), "{results}/pilot.md"),)),
        _translation_claims("l10n-small-first", "nmt-l10n", "TRANSLATION_FIRST", L10N_SMALL_SEEDS, "small",
                            "results/l10n-small"),
        _translation_claims("l10n-small-rest", "nmt-l10n", "TRANSLATION_REST", L10N_SMALL_SEEDS, "small",
                            "results/l10n-small"),
        Part("l10n-small-report", "the verdicts of the small preset's two families of translation claims, each once "
                                  "its part is complete", "results/l10n-small",
             reports=tuple(Report("compare", ("--results", "{results}", "--seeds", f"{L10N_SMALL_SEEDS[0]}-"
                                              f"{L10N_SMALL_SEEDS[-1]}", "--claims", family, "--format", "markdown"),
                                  f"{{results}}/claims-{family}.md")
                           for family in ("translation-first", "translation-rest"))),
        _translation_claims("mini-corpus-claims", "nmt"),
        Part("mini-corpus-report", "the translation claims' table and verdicts on the synthetic corpus (task nmt) "
                                   "of results/l10n", "results/l10n",
             reports=_claims_reports(l10n_seeds, task="nmt")),
        Part("l10n-tradeoff", "the 15 factor sets and the other mechanisms in each slot of nmt-l10n at the claims' "
                              "first three seeds, for the trade-off plot", "results/l10n",
             (_store("results/l10n", "--tasks", "nmt-l10n", "--factors", "all", "--modules", _module_rows("nmt"),
                     "--seeds", f"{L10N_SEEDS[0]}-{L10N_SEEDS[2]}"),)),
        Part("l10n-report", "the translation claims' table and verdicts, the power analysis and the plots of "
                            "results/l10n", "results/l10n",
             reports=(*_claims_reports(l10n_seeds, power=True), *_plots(""))),
        Part("leads-figure4-det", "Figure 4 on detection under the protocol: 0100:range=1,2,3 against "
                                  "dynamic:kernel=3,5,7 (no baseline) at the registered seeds", "results/figure4-det",
             (_store("results/figure4-det", "--tasks", "det", "--modules", _claim_rows("FIGURE4_DET"), "--no-baseline",
                     "--seeds", FIGURE4_DET_SEEDS),)),
        Part("leads-e4-seg", "E4's lead on the segmentor: the baseline and the 15 factor sets, seed by seed, at the "
                             "registered seeds", "results/e4-seg",
             tuple(_store("results/e4-seg", "--tasks", "seg", "--factors", "all", "--seeds", f"{seed}-{seed}")
                   for seed in E4_SEG_SEEDS)),
        Part("leads-report", "the verdicts of the two image leads", "results/figure4-det",
             reports=(Report("compare", ("--results", "results/figure4-det", "--seeds", FIGURE4_DET_SEEDS, "--claims",
                                         "figure4-det", "--format", "markdown"), "results/figure4-det/claims.md"),
                      Report("compare", ("--results", "results/e4-seg", "--seeds",
                                         f"{E4_SEG_SEEDS[0]}-{E4_SEG_SEEDS[-1]}", "--claims", "e4-seg", "--format",
                                         "markdown"), "results/e4-seg/claims.md"))),
        Part("flops", "full-scale FLOPs of every variant (no training)", "results/flops-full",
             reports=(Report("flops_table", ("--out", "{results}")),)),
        Part("report", "trade-off plot, comparison table, main effects and power analysis of a store",
             reports=(*_plots(""), Report("compare", ("--results", "{results}", "--format", "markdown"), "{results}/table.md"),
                      Report("compare", ("--results", "{results}", "--effects", "--format", "markdown"),
                             "{results}/effects.md"),
                      Report("compare", ("--results", "{results}", "--power"), "{results}/power.md"))),
    ]
    return {part.name: part for part in parts}


#: ``--study default`` (and ``tools/study.sh`` with no part): the first study's parts, its FLOPs and report.
DEFAULT_PARTS = ("det", "seg", "nmt", "fig4-nmt", "fig4-det", "scores", "flops", "report")


ROW_FLAGS = ("--factors", "--modules")


def with_flags(sweep: tuple[str, ...], flags: list[str]) -> list[str]:
    """A part's sweep arguments, then ``flags``; when ``flags`` name rows, the sweep's own rows are dropped."""
    if not any(flag.split("=")[0] in ROW_FLAGS for flag in flags):
        return [*sweep, *flags]
    kept, skip = [], False
    for arg in sweep:
        if skip:
            skip = False
        elif arg in ROW_FLAGS:
            skip = True
        else:
            kept.append(arg)
    return [*kept, *flags]


def parts_of(spec: str) -> list[Part]:
    """``'claims-det,claims-report'`` -> those parts (``default``: :data:`DEFAULT_PARTS`); ValueError naming
    the known ones otherwise."""
    known = study_parts()
    names = [name.strip() for part in spec.split(",")
             for name in (DEFAULT_PARTS if part.strip() == "default" else (part,)) if name.strip()]
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        raise ValueError(f"--study: unknown part {', '.join(unknown) or repr(spec)}; the parts: default, {', '.join(known)} "
                         "(--study list describes them)")
    return [known[name] for name in names]


def describe(parts: dict[str, Part]) -> str:
    """``--study list``: each part, its store, its sweeps and reports."""
    lines = [f"default  =  {','.join(DEFAULT_PARTS)}"]
    for part in parts.values():
        lines.append(f"{part.name}  ->  {part.results}{'  (a confirmation: needs --modules ROW)' if part.confirmation else ''}")
        lines.append(f"    {part.about}")
        lines += [f"    closed: {part.closed}"] if part.closed else []
        lines += [f"    sweep.py {' '.join(sweep)}" for sweep in part.sweeps[:3]]
        if len(part.sweeps) > 3:
            lines.append(f"    ... {len(part.sweeps)} sweeps in all")
        lines += [f"    {report.tool}.py {' '.join(report.args)}" + (f" > {report.out}" if report.out else "")
                  for report in part.reports]
    return "\n".join(lines)
