#!/usr/bin/env bash
# A newcomer's first run, timed: clone this repository's HEAD into a temporary directory, run the README's
# Quick start commands there exactly as written (the set-up included, no data or results carried over), and
# write each command with its exit status and wall time, the machine and its load, the last line of each
# command's output and the main command's table to a record (default results/fresh-clone/<date>.md).
#
#   bash tools/fresh_clone_check.sh            # every Quick start command (the full test suite is the longest)
#   bash tools/fresh_clone_check.sh --main     # the first one only: set-up and the main command
#   bash tools/fresh_clone_check.sh --list     # print the commands it would run, and exit
#   OUT=FILE bash tools/fresh_clone_check.sh   # write the record to FILE
#
# The README's "Time" and "Tests" lines quote these records. The clone is removed afterwards (KEEP=1 keeps it).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${OUT:-$ROOT/results/fresh-clone/$(date -u +%F).md}"
MODE="${1:-all}"
case "$MODE" in
    all | --main | --list) ;;
    *) echo "usage: bash tools/fresh_clone_check.sh [--main | --list]" >&2; exit 2 ;;
esac

# The lines of the first bash block under "## Quick start".
mapfile -t COMMANDS < <(awk '/^## Quick start/ {on = 1} on && /^```bash/ {block = 1; next}
                             block && /^```/ {exit} block && NF {print}' "$ROOT/README.md")
if [[ ${#COMMANDS[@]} -eq 0 ]]; then
    echo "fresh_clone_check.sh: README.md has no bash block under '## Quick start'" >&2
    exit 1
fi
[[ $MODE == --main ]] && COMMANDS=("${COMMANDS[0]}")
if [[ $MODE == --list ]]; then
    printf '%s\n' "${COMMANDS[@]}"
    exit 0
fi

WORK="$(mktemp -d)"
[[ -n "${KEEP:-}" ]] || trap 'rm -rf "$WORK"' EXIT
CLONE="$WORK/attnbench"
failed=()
git clone -q "$ROOT" "$CLONE"
COMMIT="$(git -C "$CLONE" rev-parse --short HEAD)"
mkdir -p "$(dirname "$OUT")"
{
    echo "# A fresh clone of $COMMIT, $(date -u '+%F %H:%M') UTC"
    echo
    echo "Written by \`bash tools/fresh_clone_check.sh${1:+ $1}\`: the README's Quick start commands, as written, in a"
    echo "new clone (no \`.venv/\`, \`data/\` or results of the working tree). Machine: $(lscpu | sed -n 's/^Model name: *//p'),"
    echo "$(nproc) cores, $(free -g | awk '/^Mem:/ {print $2}') GiB memory; load average at the start $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "(over 1, 5 and 15 minutes: near 0 on an idle machine, about the number of cores while other work holds them)."
    echo
    echo "| command | exit | wall time | last line of its output |"
    echo "|---|---|---|---|"
} > "$OUT"
for i in "${!COMMANDS[@]}"; do
    command="${COMMANDS[$i]}"
    log="$WORK/command$i.log"
    echo "[fresh-clone] $command" >&2
    start=$SECONDS
    status=0
    shown="$(sed 's/[[:space:]]*#[^#]*$//' <<< "$command")"  # its comment left out
    (cd "$CLONE" && bash -c "$command") > "$log" 2>&1 || status=$?
    wall=$((SECONDS - start))
    last="$(grep -v '^\s*$' "$log" | tail -1 | tr '|' '/' | cut -c1-160)"
    printf '| `%s` | %d | %d min %02d s | %s |\n' "$shown" "$status" $((wall / 60)) $((wall % 60)) "$last" >> "$OUT"
    echo "[fresh-clone] exit $status after ${wall} s" >&2
    if [[ $status -ne 0 ]]; then  # what failed, kept (the clone and its logs are removed)
        failed+=("$command")
        { printf '\nThe last 30 lines of `%s`:\n\n```\n' "$shown"; tail -30 "$log"; printf '```\n'; } >> "$WORK/failures.md"
    fi
done
[[ -f "$WORK/failures.md" ]] && cat "$WORK/failures.md" >> "$OUT"
{
    echo
    echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
    if [[ -f "$CLONE/results/demo/results.csv" ]]; then
        echo
        echo "The main command's runs (\`python tools/compare.py --results results/demo --format markdown\` in the clone):"
        echo
        (cd "$CLONE" && .venv/bin/python tools/compare.py --results results/demo --format markdown)
    fi
} >> "$OUT"
echo "$OUT"
[[ ${#failed[@]} -eq 0 ]]  # the exit status: 1 when a command failed
