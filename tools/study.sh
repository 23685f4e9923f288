#!/usr/bin/env bash
# The CPU-scale reproduction study: every mini sweep of the benchmark, the plots, the comparison
# table and the full-scale FLOPs table, all under results/study/ (and results/flops-full/).
#
#   bash tools/study.sh                 # every part, in order: det seg nmt fig4-nmt fig4-det scores flops report
#   bash tools/study.sh det report      # some parts (each resumes: runs already recorded are skipped)
#   SEEDS=5 JOBS=2 RESULTS=results/study bash tools/study.sh det
#   ROWS=1111,0010+deformable bash tools/study.sh det   # only these rows (and the baseline)
#
# Parts:
#   det     detection (mmdet Faster R-CNN, mini-shapes): baseline, the 15 factor sets, deformable,
#           dynamic conv, area attention, 0010+deformable, 1111+deformable and the survey modules
#   seg     segmentation (mmseg DeepLabV3, mini-shapes): the same rows, plus the OCR decode head
#   nmt     translation (mini corpus): baseline, the 15 factor sets, dynamic, lightweight, area and
#           deformable in each attention slot (encoder self, decoder self, encoder-decoder)
#   fig4-nmt  the study's Figure 4 on translation: dynamic convolution with kernels 3, 7, 15 against E2
#           restricted to the same keys (0100:range=1,3,7 in the encoder, range=2,6,14 in the causal
#           decoder) and unrestricted E2, in the encoder and decoder self-attention slots
#   fig4-det  the same on detection: kernels 3, 5, 7 against 0100:range=1,2,3 (keys within r input
#           pixels on each axis: a (2r+1) x (2r+1) window) and unrestricted 0100
#   scores  E1's score functions (dot, bilinear, additive; the baseline is scaled_dot) and hard attention
#           (top1, top4) on translation's encoder-decoder and encoder self-attention slots (E1 alone),
#           then on detection (1000 is mmcv's unscaled dot; scaled_dot, bilinear, additive, top1, top4)
#   protocol-screen  designs for attention that trains, on det-flag at the fresh seeds 20-23 (gate start
#           0.1 and 1, attention learning rate x10 and x30, attention from conv3 or conv2 on), into
#           results/protocol (docs/diagnostics.md)
#   protocol-confirm  the chosen design (1111 at the mini presets' gate=1, attention from conv3 on)
#           against the baseline on det-flag and fcn-flag at the fresh seeds 30-39, into results/protocol
#   position-screen  the position rule (det-nearest-flag) under the protocol: baseline, 1111, 0001,
#           0010, deformable at the fresh seeds 40-43, into results/protocol
#   side-screen  the fourth position rule (det-flag-side: the flag's side, read through its colour) under the
#           protocol: baseline, 0010, 0001, 0100, 1111, deformable at the fresh seeds 60-63, into results/protocol
#   side-lr-screen  det-flag-side again, the position terms' parameters 10 times faster (0001:lr=10,
#           0100:lr=10, 1111:lr=10) and the baseline at the fresh seeds 80-83, into results/protocol
#   side-confirm  the row a side screen chose (ROWS=<row>) against the baseline on det-flag-side at the
#           fresh seeds 70-79, into results/protocol
#   side-long-screen  det-flag-side trained four times longer (the long preset), the position terms'
#           parameters 10 times faster (0001:lr=10, 0100:lr=10, 1111:lr=10), and the baseline at the fresh
#           seeds 120-123, into results/protocol
#   side-long-confirm  the row that screen chose (ROWS=<row>) against the baseline, long preset, at the
#           fresh seeds 130-139, into results/protocol
#   flag-long-screen  det-flag trained four times longer (the long preset): baseline, 0010, 1111 at the
#           fresh seeds 140-143, into results/protocol
#   flag-long-confirm  the same rows, long preset, at the fresh seeds 150-159, into results/protocol (not
#           run: the screen's baseline learnt the rule, docs/diagnostics.md)
#   side-fcn-screen  the position rule on the FCN segmentor (fcn-flag-side): baseline, 0001, 0100, 1111
#           at the fresh seeds 84-87, into results/protocol
#   side-fcn-confirm  the row that screen chose (ROWS=<row>) against the baseline on fcn-flag-side at the
#           fresh seeds 90-99, into results/protocol
#   claims-det, claims-seg  the study's image claims re-run under the protocol (docs/study.md, "The claims
#           re-run"): the rows of the claims' contrasts (attnbench.sweep.claims) at the seeds 110-119 fixed
#           with the predictions, into results/claims
#   claims-tradeoff  the study's other rows (the remaining factor sets, area) on det and seg at seeds
#           110-112, for the trade-off plots only
#   claims-flag, claims-side  the claims' rows on the diagnostic rules aimed at their terms (flag: C1, C2
#           on det-flag and fcn-flag; flag-side: C3, C5 on det-flag-side), seeds 110-119
#   claims-report  the claims table (claims.md), the verdict of each claim per task (verdicts.md) and the
#           trade-off plots of results/claims
#   l10n-pilot  real language (nmt-l10n: Debian's English-German catalogues, tools/make_l10n_corpus.py): the
#           baseline at seeds 200-202, for the cost per run and the seed spread, into results/l10n
#   l10n-claims  the translation claims T1-T4 (attnbench.sweep.claims.TRANSLATION_CLAIMS), every row in its slot
#           at the seeds 210-215 fixed with the predictions (docs/study.md), into results/l10n
#   mini-corpus-claims  the same rows and seeds on the synthetic mini corpus (task nmt), into results/l10n
#   l10n-tradeoff  the 15 factor sets and the other mechanisms in each slot at seeds 210-212,
#           for the trade-off plot
#   l10n-report  the claims table and verdicts, the power analysis and the plots of results/l10n
#   leads-figure4-det  Figure 4 on detection under the protocol: 0100:range=1,2,3 and dynamic:kernel=3,5,7 at the
#           seeds 300-344 fixed with the predictions (docs/study.md, "Two image leads"), into results/figure4-det
#   leads-e4-seg  E4's lead on the segmentor: the sixteen factor sets at the seeds 230-234 fixed with the
#           prediction, seed by seed, into results/e4-seg
#   leads-report  the verdicts of both (claims.md in each store)
#   flops   full-scale FLOPs of every variant (tools/flops_table.py, no training)
#   report  trade-off plots (tradeoff.png/svg), the comparison table (table.md), the main effects
#           of the terms E1..E4 (effects.md) and the power analysis (power.md) of RESULTS
#
# Every row runs at the same seeds 0 .. SEEDS-1 under one protocol (one CPU thread per run, paired
# initialisation), so each row pairs with the baseline seed by seed (docs/sweep.md, "Reproducible,
# paired runs"); `tools/compare.py --power` says how many seeds a difference needs.
# Cost on the 2-core CPU this was written on (two runs at a time, one thread each), wall time per
# run: det ~76 s, seg ~215 s (the deformable seg rows ~15 min of training on torchvision's kernel, before
# deformable convolution's faster CPU path: docs/mechanisms.md), nmt ~37 s: run the
# parts in turn, each resumes where it stopped (docs/study.md, "Reproduction study at CPU scale").
# results/mini-sweep/ holds the first study (398 runs), run before the protocol existed, and
# results/mini-study/ the paired study's first parts, run with mmcv's gate at 0 (both archived).
set -euo pipefail
cd "$(dirname "$0")/.."
# The rest is one group that bash reads whole before running it: editing or pulling this file while
# a part runs changes nothing of that run (bash would otherwise read on from an offset in the new text).
{

PYTHON=${PYTHON:-.venv/bin/python}
SEEDS=${SEEDS:-5}
JOBS=${JOBS:-2}
RESULTS=${RESULTS:-results/study}
ROWS=${ROWS:-}
L10N_SEEDS=210-215  # the real-language claims' seeds (A-B), registered before their runs (docs/study.md)
# every row of a task but the baseline and the factor sets (which --factors all adds), from the
# project's own lists: attnbench.variants.vision_rows and the translation task's mechanisms
module_rows() {
    "$PYTHON" -c "from attnbench.attention.factors import ALL_FACTORS
if '$1' == 'nmt':
    from attnbench.variants import TRANSLATION_MECHANISMS as rows
else:
    from attnbench.variants import vision_rows
    rows = vision_rows('$1')
print(','.join(v for v in rows if v != 'baseline' and v not in ALL_FACTORS))"
}

# the rows of the claims' contrasts but the baseline (attnbench.sweep.claims.CLAIMS, or the family and slot given)
claim_rows() {
    "$PYTHON" -c "import sys; from attnbench.sweep import claims
print(','.join(claims.claim_rows(getattr(claims, sys.argv[1]), sys.argv[2] or None)))" "${1:-CLAIMS}" "${2:-}"
}

failed=()  # parts with a failed run: recorded, the study goes on, the script exits 1 at the end
sweep() {
    "$PYTHON" tools/sweep.py --seeds "$SEEDS" --jobs "$JOBS" --results "$RESULTS" --no-plot "$@" && return
    [[ " ${failed[*]} " == *" $p "* ]] || failed+=("$p")
}

parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(det seg nmt fig4-nmt fig4-det scores flops report)
for p in "${parts[@]}"; do
    case $p in det | seg | nmt | fig4-nmt | fig4-det | scores | protocol-screen | protocol-confirm | position-screen | side-screen | side-lr-screen | side-confirm | side-long-screen | side-long-confirm | flag-long-screen | flag-long-confirm | side-fcn-screen | side-fcn-confirm | claims-det | claims-seg | claims-tradeoff | claims-flag | claims-side | claims-report | l10n-pilot | l10n-claims | mini-corpus-claims | l10n-tradeoff | l10n-report | leads-figure4-det | leads-e4-seg | leads-report | flops | report) ;; *)
        echo "study.sh: unknown part '$p' (det, seg, nmt, fig4-nmt, fig4-det, scores, protocol-screen, protocol-confirm, position-screen, side-screen, side-lr-screen, side-confirm, side-long-screen, side-long-confirm, flag-long-screen, flag-long-confirm, side-fcn-screen, side-fcn-confirm, claims-det, claims-seg, claims-tradeoff, claims-flag, claims-side, claims-report, l10n-pilot, l10n-claims, mini-corpus-claims, l10n-tradeoff, l10n-report, leads-figure4-det, leads-e4-seg, leads-report, flops, report)" >&2
        exit 2 ;;
    esac
done

for p in "${parts[@]}"; do
    echo "== study part: $p ($(date -u +%H:%M:%S))"
    case $p in
        det | seg | nmt)
            if [ -n "$ROWS" ]; then sweep --tasks "$p" --modules "$ROWS"
            else sweep --tasks "$p" --factors all --modules "$(module_rows "$p")"; fi ;;
        fig4-nmt)  # a kernel of k taps sees offsets -(k-1)/2..(k-1)/2, causal: -(k-1)..0
            sweep --tasks nmt --slot enc-self --modules dynamic:kernel=3,0100:range=1,dynamic:kernel=7,0100:range=3,dynamic:kernel=15,0100:range=7,0100
            sweep --tasks nmt --slot dec-self --modules dynamic:kernel=3,0100:range=2,dynamic:kernel=7,0100:range=6,dynamic:kernel=15,0100:range=14,0100 ;;
        fig4-det)
            sweep --tasks det --modules dynamic:kernel=3,0100:range=1,dynamic:kernel=5,0100:range=2,dynamic:kernel=7,0100:range=3,0100 ;;
        scores)
            for slot in enc-dec enc-self; do
                sweep --tasks nmt --slot "$slot" --modules 1000:score=dot,1000:score=bilinear,1000:score=additive,1000:hard=top1,1000:hard=top4
            done
            sweep --tasks det --modules 1000,1000:score=scaled_dot,1000:score=bilinear,1000:score=additive,1000:hard=top1,1000:hard=top4 ;;
        protocol-screen)  # seeds and store fixed with the predictions (docs/diagnostics.md)
            sweep --tasks det-flag --factors 1111:gate=1,1111:gate=0.1,1111:gate=1:lr=10,1111:gate=1:lr=30 \
                --seeds 20-23 --results results/protocol
            sweep --tasks det-flag --factors 1111:gate=1:stages=3-5,1111:gate=1:stages=2-5 \
                --seeds 20-23 --results results/protocol ;;
        protocol-confirm)  # the chosen design (the mini presets' default since the screen) on fresh seeds
            sweep --tasks det-flag,fcn-flag --factors 1111 --seeds 30-39 --results results/protocol ;;
        position-screen)  # the position rule under the protocol, seeds fixed with the predictions
            sweep --tasks det-nearest-flag --factors 1111,0001,0010 --modules deformable --seeds 40-43 \
                --results results/protocol ;;
        side-screen)  # seeds fixed with the predictions (docs/diagnostics.md)
            sweep --tasks det-flag-side --factors 0010,0001,0100,1111 --modules deformable --seeds 60-63 \
                --results results/protocol ;;
        side-lr-screen)  # seeds fixed with the predictions (docs/diagnostics.md)
            sweep --tasks det-flag-side --modules 0001:lr=10,0100:lr=10,1111:lr=10 --seeds 80-83 \
                --results results/protocol ;;
        side-confirm)  # the row a side screen chose, against the baseline, on the seeds fixed before it
            [ -n "$ROWS" ] || { echo "study.sh: side-confirm needs ROWS=<the row the side screen chose>" >&2; exit 2; }
            sweep --tasks det-flag-side --modules "$ROWS" --seeds 70-79 --results results/protocol ;;
        side-long-screen)  # seeds fixed with the predictions (docs/diagnostics.md)
            sweep --tasks det-flag-side --preset long --modules 0001:lr=10,0100:lr=10,1111:lr=10 --seeds 120-123 \
                --results results/protocol ;;
        side-long-confirm)  # the row the long side screen chose, against the baseline, on the seeds fixed before it
            [ -n "$ROWS" ] || { echo "study.sh: side-long-confirm needs ROWS=<the row the screen chose>" >&2; exit 2; }
            sweep --tasks det-flag-side --preset long --modules "$ROWS" --seeds 130-139 --results results/protocol ;;
        flag-long-screen)  # seeds fixed with the predictions (docs/diagnostics.md)
            sweep --tasks det-flag --preset long --factors 0010,1111 --seeds 140-143 --results results/protocol ;;
        flag-long-confirm)  # seeds fixed with the screen's predictions, before its runs
            sweep --tasks det-flag --preset long --factors 0010,1111 --seeds 150-159 --results results/protocol ;;
        side-fcn-screen)  # seeds fixed with the predictions (docs/diagnostics.md)
            sweep --tasks fcn-flag-side --factors 0001,0100,1111 --seeds 84-87 --results results/protocol ;;
        side-fcn-confirm)  # the row the FCN side screen chose, against the baseline, on the seeds fixed before it
            [ -n "$ROWS" ] || { echo "study.sh: side-fcn-confirm needs ROWS=<the row the screen chose>" >&2; exit 2; }
            sweep --tasks fcn-flag-side --modules "$ROWS" --seeds 90-99 --results results/protocol ;;
        claims-det | claims-seg)  # every row of a claim's contrast, seeds fixed with the predictions
            sweep --tasks "${p#claims-}" --modules "$(claim_rows)" --seeds 110-119 \
                --results results/claims ;;
        claims-tradeoff)
            sweep --tasks det,seg --factors 0001,0101,1000,1001,1010,1011,1100,1101,1110 --modules area \
                --seeds 110-112 --results results/claims ;;
        claims-flag)  # C1 and C2 on the rule aimed at E3
            sweep --tasks det-flag,fcn-flag --factors 0010,0011,0110,0111,1111 --seeds 110-119 --results results/claims ;;
        claims-side)  # C3 and C5 on the position rule
            sweep --tasks det-flag-side --factors 0100 --modules deformable,dynamic --seeds 110-119 \
                --results results/claims ;;
        claims-report)
            "$PYTHON" tools/compare.py --results results/claims --seeds 110-119 --claims --format markdown \
                > results/claims/claims.md
            "$PYTHON" tools/compare.py --results results/claims --seeds 110-119 --claims --by-claim --format markdown \
                > results/claims/verdicts.md
            "$PYTHON" tools/plot.py --results results/claims
            "$PYTHON" tools/plot.py --results results/claims --cost attention
            echo results/claims/claims.md results/claims/verdicts.md ;;
        l10n-pilot)  # the real-language task's cost and seed spread, before its claims are registered
            sweep --tasks nmt-l10n --seeds 200-202 --results results/l10n ;;
        l10n-claims | mini-corpus-claims)  # every row of the translation claims' contrasts in its slot, seeds
            # fixed with the predictions; seed by seed, so that a part stopped midway leaves whole paired contrasts
            task=$([ "$p" = l10n-claims ] && echo nmt-l10n || echo nmt)
            for seed in $(seq "${L10N_SEEDS%-*}" "${L10N_SEEDS#*-}"); do
                for slot in enc-dec enc-self dec-self; do
                    sweep --tasks "$task" --slot "$slot" --modules "$(claim_rows TRANSLATION_CLAIMS "$slot")" \
                        --seeds "$seed-$seed" --results results/l10n
                done
            done ;;
        l10n-tradeoff)  # the other factor sets and mechanisms in each slot, at the claims' first three seeds
            sweep --tasks nmt-l10n --factors all --modules "$(module_rows nmt)" --seeds "${L10N_SEEDS%%-*}-$((${L10N_SEEDS%%-*} + 2))" \
                --results results/l10n ;;
        l10n-report)
            "$PYTHON" tools/compare.py --results results/l10n --seeds "$L10N_SEEDS" --claims --format markdown \
                > results/l10n/claims.md
            "$PYTHON" tools/compare.py --results results/l10n --seeds "$L10N_SEEDS" --claims --by-claim --format markdown \
                > results/l10n/verdicts.md
            "$PYTHON" tools/compare.py --results results/l10n --power > results/l10n/power.md
            "$PYTHON" tools/plot.py --results results/l10n
            echo results/l10n/claims.md results/l10n/verdicts.md results/l10n/power.md ;;
        leads-figure4-det)  # E2 in a window against dynamic convolution over it, registered seeds, no baseline
            sweep --tasks det --modules "$(claim_rows FIGURE4_DET)" --no-baseline --seeds 300-344 \
                --results results/figure4-det ;;
        leads-e4-seg)  # the sixteen factor sets, seed by seed (whole contrasts if stopped midway)
            for seed in $(seq 230 234); do
                sweep --tasks seg --factors all --seeds "$seed-$seed" --results results/e4-seg
            done ;;
        leads-report)
            "$PYTHON" tools/compare.py --results results/figure4-det --seeds 300-344 --claims figure4-det \
                --format markdown > results/figure4-det/claims.md
            "$PYTHON" tools/compare.py --results results/e4-seg --seeds 230-234 --claims e4-seg --format markdown \
                > results/e4-seg/claims.md
            echo results/figure4-det/claims.md results/e4-seg/claims.md ;;
        flops) "$PYTHON" tools/flops_table.py --out results/flops-full ;;
        report)
            "$PYTHON" tools/plot.py --results "$RESULTS"
            "$PYTHON" tools/compare.py --results "$RESULTS" --format markdown > "$RESULTS/table.md"
            "$PYTHON" tools/compare.py --results "$RESULTS" --effects --format markdown > "$RESULTS/effects.md"
            "$PYTHON" tools/compare.py --results "$RESULTS" --power > "$RESULTS/power.md"
            echo "$RESULTS/table.md $RESULTS/effects.md $RESULTS/power.md" ;;
    esac
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "study.sh: runs failed in: ${failed[*]} (see $RESULTS/results.csv; rerunning the part redoes them)" >&2
    exit 1
fi
exit 0
}
