#!/usr/bin/env bash
# allocmark gates itself: runs the CI gate matrix (ci/gate-matrix.toml) and judges its peak RSS
# against the committed baseline (ci/baselines/gate-matrix.json). docs/gate.md explains the rule.
#   ci/gate.sh            run and judge; exit 0 pass, 1 regressed (confirmed), 2 not comparable
#   ci/gate.sh --update   run and rewrite the baseline; commit its diff after review, like code
# A flagged cell counts only when `allocmark gate --confirm` reruns it (only the flagged cells,
# their repetitions interleaved) and the rerun flags it again.
# CI machines are fresh virtual machines of one kind, not one host: a machine difference (a kernel
# build, a CPU stepping) is judged anyway and printed with every verdict (--allow-mismatch), since
# the peak RSS of these workloads is set by glibc and the allocators, which Debian 12 pins.
# Expects a built tree (ci/setup.sh; ALLOCMARK_BUILD names another build folder than build/).
# Results go to BUILD/gate-run*, the verdict also to BUILD/gate-verdict.md. ctest runs it as the
# test ci.Gate (tests/CMakeLists.txt), which ci/test.sh prints the verdict of.
set -euo pipefail
cd "$(dirname "$0")/.."
baseline=ci/baselines/gate-matrix.json
build=${ALLOCMARK_BUILD:-build}
allocmark=$build/bin/allocmark
out=$build/gate-run

rm -rf "$out" "$out-confirm" "$build/gate-verdict.md"
status=0
"$allocmark" run ci/gate-matrix.toml --out "$out" >"$out.log" 2>&1 || status=$?
if [ "$status" -ne 0 ]; then
  tail -n 40 "$out.log" >&2
  echo "ci/gate.sh: the gate matrix did not complete (exit $status); full output in $out.log" >&2
  exit "$status"
fi
if [ "${1:-}" = "--update" ]; then
  "$allocmark" baseline "$out" -o "$baseline"
  echo "ci/gate.sh: $baseline rewritten; review \`git diff $baseline\` and commit it"
  exit 0
fi
# The default 5% band: without arena_churn (whose glibc peaks follow which arena a new thread
# takes, by timing) the matrix passed it in 19 of 19 runs on two CPU models against this baseline, and it
# catches a planted +10% on every cell-phase above 20 MiB (docs/gate.md, "False positives and power").
# ALLOCMARK_GATE_HISTORY=FILE: the gated run is added to that results history (docs/history.md), and
# the gate also judges creep against it; a CI that keeps the file between runs (an artifact, a
# shared disk) sets it. This project's CI machines keep nothing between runs, so its CI leaves it unset.
history=()
if [ -n "${ALLOCMARK_GATE_HISTORY:-}" ]; then
  history=(--history "$ALLOCMARK_GATE_HISTORY" --commit "$(git rev-parse HEAD)")
fi
"$allocmark" gate "$baseline" "$out" --metric peak_rss_bytes --confirm --allow-mismatch --format markdown "${history[@]}" |
  tee "$build/gate-verdict.md"
