#!/usr/bin/env bash
# allocmark gates itself: runs the CI gate matrix (ci/gate-matrix.toml) and judges its peak RSS
# against the committed baseline (ci/baselines/gate-matrix.json). docs/gate.md explains the rule.
#   ci/gate.sh            run and judge; exit 0 pass, 1 regressed (confirmed), 2 not comparable
#   ci/gate.sh --update   run and rewrite the baseline; commit its diff after review, like code
# A regression counts only when a second, independent run of the matrix flags the same cell and
# phase again (a confirming rerun; the whole matrix, not only the flagged cells: see docs/gate.md).
# Expects a built tree (ci/setup.sh). Results go to build/gate-run*.
set -euo pipefail
cd "$(dirname "$0")/.."
baseline=ci/baselines/gate-matrix.json

run_matrix() {  # $1: results folder
  rm -rf "$1"
  local status=0
  build/bin/allocmark run ci/gate-matrix.toml --out "$1" >"$1.log" 2>&1 || status=$?
  if [ "$status" -ne 0 ]; then
    tail -n 40 "$1.log" >&2
    echo "ci/gate.sh: the gate matrix did not complete (exit $status); full output in $1.log" >&2
    exit "$status"
  fi
}

judge() {  # $1: results folder, $2: json output file; prints the markdown verdict, returns the gate's exit code
  local status=0
  build/bin/allocmark gate --baseline "$baseline" --results "$1" --metric peak_rss --format markdown || status=$?
  build/bin/allocmark gate --baseline "$baseline" --results "$1" --metric peak_rss --format json >"$2" || true
  return "$status"
}

run_matrix build/gate-run
if [ "${1:-}" = "--update" ]; then
  build/bin/allocmark baseline build/gate-run -o "$baseline"
  echo "ci/gate.sh: $baseline rewritten; review \`git diff $baseline\` and commit it"
  exit 0
fi
status=0
judge build/gate-run build/gate-run.json || status=$?
[ "$status" -ne 1 ] && exit "$status"

echo "ci/gate.sh: regressions flagged; confirming with a second run of the matrix"
run_matrix build/gate-run-confirm
judge build/gate-run-confirm build/gate-run-confirm.json || true
/usr/bin/python3 - build/gate-run.json build/gate-run-confirm.json <<'PY'
import json, sys
def regressed(path):
    with open(path) as f:
        return {(v["cell"], v["metric"]) for v in json.load(f)["verdicts"] if v["verdict"] in ("regressed", "missing")}
both = sorted(regressed(sys.argv[1]) & regressed(sys.argv[2]))
for cell, metric in both:
    print(f"confirmed regression: {cell} {metric}")
print("gate: FAIL (confirmed by a second run)" if both else "gate: PASS (the first run's flags were not confirmed)")
sys.exit(1 if both else 0)
PY
