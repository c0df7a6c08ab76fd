#!/usr/bin/env bash
# Sets up, builds and runs every test (unit and end to end) with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
# tests/build_test.py builds allocator releases from their tarballs (docs/versions.md): a clone beside
# shared/ takes them from shared/sources unless ALLOCMARK_SOURCES already names a folder.
if [ -z "${ALLOCMARK_SOURCES:-}" ] && [ -d ../shared/sources ]; then
  ALLOCMARK_SOURCES="$(cd ../shared/sources && pwd)"
  export ALLOCMARK_SOURCES
fi
ci/setup.sh --tests
cd build
# "cpus" slots: every test holds one except the few that mostly wait (labelled "waits",
# cmake/allocmark_test.cmake), which run beside the others: hence more jobs than slots. A test
# holding a slot does not keep its core busy throughout (it starts processes and waits for them,
# sleeps through idle phases and settles), so with one slot per core CI's cores were idle part of
# the time: half a slot more per core fills them (docs/benchmarks.md, "CI's cores kept busy").
cores=$(nproc)
slots=$(( cores + (cores + 1) / 2 ))
mkdir -p Testing/Temporary
printf '{"version": {"major": 1, "minor": 0}, "local": [{"cpus": [{"id": "all", "slots": %d}]}]}\n' "$slots" \
  > Testing/cpu-slots.json
# A clean build has no timings yet: seed ctest's with the CI machine's (ci/test-costs.txt: name, runs,
# mean seconds, the long lines of a CTestCostData.txt), so it starts the longest tests first.
[ -f Testing/Temporary/CTestCostData.txt ] || cp ../ci/test-costs.txt Testing/Temporary/CTestCostData.txt
# Among them ci.Gate: allocmark gates itself, a confirmed peak-RSS regression of the CI matrix
# failing the build (ci/gate.sh, docs/gate.md); its verdict is printed below either way.
status=0
ctest --output-on-failure -j"$(( slots + 4 ))" --resource-spec-file Testing/cpu-slots.json --timeout 900 || status=$?
if [ -f gate-verdict.md ]; then
  echo "ci.Gate's verdict (ci/gate.sh):"
  cat gate-verdict.md
fi
# The gate's history with this run's line (docs/gate.md "A history of the project's own gate"):
# CI's artifact; the developer landing the change carries it into the tree.
if [ -f gate-history.jsonl ]; then
  echo "ci.Gate's history with this run: build/gate-history.jsonl ($(wc -l <gate-history.jsonl) runs);" \
    "ci/keep-gate-history.sh carries it into ci/baselines/gate-matrix.history.jsonl (docs/gate.md)"
fi
exit "$status"
