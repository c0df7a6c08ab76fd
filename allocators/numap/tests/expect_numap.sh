#!/usr/bin/env bash
# Runs a program (normally with LD_PRELOAD=libnumap.so from ctest's environment) and fails unless
# it succeeded AND numap itself served its allocations: with NUMAP_STATS_AT_EXIT=1 libnumap prints
# "numap: exit pid=P allocs=N ..." when the process exits, so a preload that silently did not take
# (glibc serving everything) prints nothing and fails here.
#   expect_numap.sh program [args...]
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: expect_numap.sh program [args...]" >&2; exit 2; }
case "${LD_PRELOAD:-}" in
  *libnumap.so*) ;;
  *) echo "expect_numap.sh: LD_PRELOAD does not name libnumap.so (got '${LD_PRELOAD:-}')" >&2; exit 1 ;;
esac
err=$(mktemp)
trap 'rm -f "$err"' EXIT
NUMAP_STATS_AT_EXIT=1 "$@" 2>"$err" &
pid=$!
wait "$pid"
rc=$?
cat "$err" >&2
if [ "$rc" -ne 0 ]; then
  echo "expect_numap.sh: $1 exited with $rc" >&2
  exit "$rc"
fi
line=$(grep -E "^numap: exit pid=$pid allocs=" "$err" | tail -1)
allocs=$(sed -E 's/.* allocs=([0-9]+).*/\1/' <<<"$line")
if [ -z "$line" ] || [ "${allocs:-0}" -eq 0 ]; then
  echo "expect_numap.sh: $1 (pid $pid) ran, but libnumap did not serve its allocations (no numap exit line with allocs > 0)" >&2
  exit 1
fi
echo "expect_numap.sh: libnumap served $allocs allocations of $1 (pid $pid)"
