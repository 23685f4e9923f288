#!/usr/bin/env bash
# The CPU-scale study, part by part: a wrapper over `tools/sweep.py --study` (the parts, their rows, seeds and
# stores are data in attnbench/analysis/studies.py; `tools/sweep.py --study list` describes them).
#
#   bash tools/study.sh                      # the first study: det seg nmt fig4-nmt fig4-det scores flops report
#   bash tools/study.sh claims-det claims-report   # some parts, in order (each resumes: recorded runs are skipped)
#   SEEDS=3 RESULTS=results/figure4 bash tools/study.sh fig4-nmt   # override the part's seeds or store
#   ROWS=1111,0010+deformable bash tools/study.sh det              # only these rows (and the baseline)
#   ROWS=0100:lr=10 bash tools/study.sh side-confirm                # a confirmation runs the row its screen chose
#   bash tools/study.sh claims-det --dry-run                       # arguments that start with - go to sweep.py
#
# SEEDS, JOBS, RESULTS and ROWS become --seeds, --jobs, --results and --modules; PYTHON picks the interpreter
# (default .venv/bin/python). A part with a failed run is named at the end and the script exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."
flags=()
[ -z "${SEEDS:-}" ] || flags+=(--seeds "$SEEDS")
[ -z "${JOBS:-}" ] || flags+=(--jobs "$JOBS")
[ -z "${RESULTS:-}" ] || flags+=(--results "$RESULTS")
[ -z "${ROWS:-}" ] || flags+=(--modules "$ROWS")
parts=()
while [ $# -gt 0 ] && [[ $1 != -* ]]; do parts+=("$1"); shift; done
[ ${#parts[@]} -gt 0 ] || parts=(default)
exec "${PYTHON:-.venv/bin/python}" tools/sweep.py --study "$(IFS=,; echo "${parts[*]}")" ${flags[@]+"${flags[@]}"} "$@"
