#!/usr/bin/env bash
# Issue 41: numap's default never makes resident what a program has not written. numap_partial_write
# (tests/partial_write.c: 4 threads keep 2000 blocks of 16 B-256 KiB each, write only their first
# 256 bytes and free half of them on another thread) runs preloaded with numap's default and with
# NUMAP_POPULATE=none; fails unless the default's peak (VmHWM) is at most none's plus SLACK_KIB (run
# to run, none's peak moves by about 2 MiB here). On 618abae the default held 147 MiB against 49.
#   partial_write.sh /path/to/libnumap.so /path/to/numap_partial_write
set -uo pipefail
[ $# -eq 2 ] || { echo "usage: partial_write.sh /path/to/libnumap.so /path/to/numap_partial_write" >&2; exit 2; }
lib=$1
prog=$2
slack_kib=8192
args=(4 200000 2000 256)

# run POPULATE: prints the program's VmHWM in kB; fails unless numap served it (its exit line).
run() {
  local out err
  err=$(mktemp)
  out=$(env NUMAP_POPULATE="$1" NUMAP_STATS_AT_EXIT=1 LD_PRELOAD="$lib" "$prog" "${args[@]}" 2>"$err") || {
    echo "FAIL: NUMAP_POPULATE=$1: the program failed: $(cat "$err")" >&2
    rm -f "$err"
    return 1
  }
  if ! grep -q '^numap: exit ' "$err"; then
    echo "FAIL: NUMAP_POPULATE=$1: numap did not serve the program (no exit line)" >&2
    rm -f "$err"
    return 1
  fi
  rm -f "$err"
  echo "NUMAP_POPULATE=$1: $out" >&2
  sed -n 's/^VmHWM=\([0-9]*\) .*/\1/p' <<<"$out"
}

auto=$(run auto) || exit 1
none=$(run none) || exit 1
if [ "$auto" -gt $((none + slack_kib)) ]; then
  echo "FAIL: numap's default held ${auto} kB at its peak, NUMAP_POPULATE=none ${none} kB (slack ${slack_kib} kB)" >&2
  exit 1
fi
echo "ok: numap's default peak ${auto} kB, NUMAP_POPULATE=none ${none} kB"
