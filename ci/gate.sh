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
# The gate's history (docs/gate.md "A history of the project's own gate"): the committed
# ci/baselines/gate-matrix.history.jsonl is loaded into a fresh BUILD/gate-history.db, the run is
# judged for creep against it and added under HEAD, and the history with this run's line is written
# to BUILD/gate-history.jsonl (the artifact; ci/keep-gate-history.sh carries it into a commit).
#   ALLOCMARK_GATE_HISTORY=DB     a history kept between runs (an artifact, a shared disk) instead
#   ALLOCMARK_GATE_TESTBED, ALLOCMARK_GATE_BRANCH   the run's labels (default ci, main)
#   ALLOCMARK_GATE_RESULTS=DIR    gate DIR instead of running the matrix (tests, re-gating a run)
set -euo pipefail
cd "$(dirname "$0")/.."
baseline=ci/baselines/gate-matrix.json
committed=ci/baselines/gate-matrix.history.jsonl
build=${ALLOCMARK_BUILD:-build}
allocmark=$build/bin/allocmark
out=$build/gate-run

rm -rf "$out" "$out-confirm" "$build/gate-verdict.md" "$build/gate-history.jsonl" "$build/gate-history.state"
if [ -n "${ALLOCMARK_GATE_RESULTS:-}" ]; then
  [ "${1:-}" != "--update" ] || { echo "ci/gate.sh: --update runs the matrix; unset ALLOCMARK_GATE_RESULTS" >&2; exit 2; }
  out=$ALLOCMARK_GATE_RESULTS
else
  status=0
  "$allocmark" run ci/gate-matrix.toml --out "$out" >"$out.log" 2>&1 || status=$?
  if [ "$status" -ne 0 ]; then
    tail -n 40 "$out.log" >&2
    echo "ci/gate.sh: the gate matrix did not complete (exit $status); full output in $out.log" >&2
    exit "$status"
  fi
fi
if [ "${1:-}" = "--update" ]; then
  "$allocmark" baseline "$out" -o "$baseline"
  echo "ci/gate.sh: $baseline rewritten; review \`git diff $baseline\` and commit it"
  exit 0
fi
# The history: this project's CI machines keep nothing between runs, so the committed text is
# loaded each time; the fresh DB is never committed (docs/gate.md says why).
history=()
if ! head=$(git rev-parse HEAD 2>/dev/null); then
  echo "ci/gate.sh: not a git checkout, so no commit to add the run under: judged without the history" >&2
else
  db=${ALLOCMARK_GATE_HISTORY:-$build/gate-history.db}
  if [ -z "${ALLOCMARK_GATE_HISTORY:-}" ]; then
    rm -f "$db" "$db-wal" "$db-shm"
    "$allocmark" history import "$db" "$committed"
  fi
  history=(--history "$db" --commit "$head" --branch "${ALLOCMARK_GATE_BRANCH:-main}"
           --testbed "${ALLOCMARK_GATE_TESTBED:-ci}")
  # What the run measured, for ci/keep-gate-history.sh: the commit, then any uncommitted change.
  { echo "$head"; git status --porcelain --untracked-files=no -- . ":(exclude)$committed"; } >"$build/gate-history.state"
fi
# The default 5% band: without arena_churn (whose glibc peaks follow which arena a new thread
# takes, by timing) the matrix passed it in 19 of 19 runs on two CPU models against this baseline, and it
# catches a planted +10% on every cell-phase above 20 MiB (docs/gate.md, "False positives and power").
status=0
"$allocmark" gate "$baseline" "$out" --metric peak_rss_bytes --confirm --allow-mismatch --format markdown "${history[@]}" |
  tee "$build/gate-verdict.md" || status=$?
if [ -n "${db:-}" ] && [ -f "$db" ]; then
  # The committed history keeps what the gate judges, peak RSS; the results folder keeps the rest.
  "$allocmark" history export "$db" --format jsonl --metric peak_rss_bytes >"$build/gate-history.jsonl.tmp"
  mv "$build/gate-history.jsonl.tmp" "$build/gate-history.jsonl"
  echo "ci/gate.sh: the history with this run: $build/gate-history.jsonl ($(wc -l <"$build/gate-history.jsonl") runs;" \
    "ci/keep-gate-history.sh puts it in $committed)" >&2
fi
exit "$status"
