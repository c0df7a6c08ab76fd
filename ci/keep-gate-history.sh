#!/usr/bin/env bash
# Carries the gate's history with the run ci/gate.sh just made (BUILD/gate-history.jsonl) into the
# committed ci/baselines/gate-matrix.history.jsonl, for the developer landing a change
# (docs/gate.md "A history of the project's own gate"):
#   git commit ...                      # the change, first: the run must measure a commit
#   ci/test.sh                          # (or ci/gate.sh) at that commit, with nothing uncommitted
#   ci/keep-gate-history.sh             # appends the run's line
#   git commit -m "ci: gate history of $(git rev-parse --short HEAD)" -- ci/baselines/gate-matrix.history.jsonl
# The history commit comes after the measured one (never amend it in: the line names the commit
# that was measured). Exit 2, the committed file unchanged, when there is no run to carry, the run
# measured another commit than HEAD or uncommitted changes, or it lacks a run the committed file
# holds (the file changed since the run loaded it, as after a merge: rerun ci/gate.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${ALLOCMARK_BUILD:-build}
committed=ci/baselines/gate-matrix.history.jsonl
ran=$build/gate-history.jsonl
state=$build/gate-history.state
fail() {
  echo "ci/keep-gate-history.sh: $*; $committed left as it was" >&2
  exit 2
}

[ -f "$ran" ] && [ -f "$state" ] || fail "no gated run's history in $build (ci/gate.sh or ci/test.sh writes it)"
# The run's file is the committed lines plus the run's own: lines, so compared as sorted sets.
missing=$(LC_ALL=C comm -23 <(LC_ALL=C sort -u "$committed") <(LC_ALL=C sort -u "$ran") | wc -l)
[ "$missing" -eq 0 ] || fail "$ran lacks $missing of the $committed runs (did the file change since the run?): rerun ci/gate.sh"
new=$(LC_ALL=C comm -13 <(LC_ALL=C sort -u "$committed") <(LC_ALL=C sort -u "$ran"))
if [ -z "$new" ]; then
  echo "ci/keep-gate-history.sh: $committed holds this run already; nothing to carry"
  exit 0
fi
head=$(git rev-parse HEAD)
measured=$(head -n 1 "$state")
changed=$(tail -n +2 "$state" | awk '{print $NF}' | paste -sd ' ')
[ "$measured" = "$head" ] || fail "the run measured commit $measured, but HEAD is $head: rerun ci/gate.sh at the commit you land"
[ -z "$changed" ] || fail "the run measured uncommitted changes to $changed: commit them and rerun ci/gate.sh"
while IFS= read -r line; do
  case "$line" in
    '{"allocmark_history_export":1,"commit":"'"$head"'"'*) ;;
    *) fail "$ran has a new run that is not of $head: ${line:0:120}" ;;
  esac
done <<<"$new"
cp "$ran" "$committed.tmp"
mv "$committed.tmp" "$committed"
echo "ci/keep-gate-history.sh: $committed: $(wc -l <<<"$new") run(s) of $head added; commit it:"
echo "  git commit -m \"ci: gate history of $(git rev-parse --short HEAD)\" -- $committed"
