#!/usr/bin/env bash
# Instructions per call of an allocator's fast paths, counted by callgrind (valgrind) around the
# counted_* functions of numap_pair_cost (pair_cost.c): deterministic where wall time on a shared
# machine is not. One line per case: mode, size, instructions per malloc+free pair (the calling
# loop's own instructions included, the same for every allocator).
#   allocators/numap/tests/pair_cost.sh LIBRARY|none [numap_pair_cost]
# LIBRARY is preloaded (none: glibc). numap runs with NUMAP_CLASS_SPAN=256M: valgrind cannot
# reserve numap's default 1.1 TiB arena (the span changes no instruction of the fast paths).
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: pair_cost.sh LIBRARY|none [numap_pair_cost]" >&2; exit 2; }
lib=$1
bin=${2:-$(dirname "$0")/../../../build/bin/numap_pair_cost}
command -v valgrind >/dev/null || { echo "pair_cost.sh: valgrind not installed (apt-get install valgrind)" >&2; exit 2; }
[ -x "$bin" ] || { echo "pair_cost.sh: $bin not built (cmake --build build --target numap_pair_cost)" >&2; exit 2; }
[ "$lib" = none ] || [ -f "$lib" ] || { echo "pair_cost.sh: no library at '$lib'" >&2; exit 2; }
pre=(env NUMAP_CLASS_SPAN=256M)
[ "$lib" = none ] || pre+=(LD_PRELOAD="$lib")
count=100000

# mode size batch counted-functions...
run() {
  local mode=$1 size=$2 batch=$3
  shift 3
  local toggles=()
  for f in "$@"; do toggles+=(--toggle-collect="$f"); done
  local out ir
  out=$("${pre[@]}" valgrind --tool=callgrind "${toggles[@]}" --callgrind-out-file=/dev/null \
        "$bin" "$mode" "$size" "$count" "$batch" 2>&1) || { echo "$out" >&2; exit 1; }
  ir=$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' <<<"$out")
  [ -n "$ir" ] || { echo "$out" >&2; exit 1; }
  printf '%s\t%s\t%s\n' "$mode" "$size" "$(awk -v i="$ir" -v n="$count" 'BEGIN { printf "%.1f", i / n }')"
}

printf 'mode\tsize\tinstructions_per_pair\n'
for s in 8 64 1024 4096 16384 65536 262144; do run pairs "$s" 1000 counted_pairs; done
for s in 64 4096; do run batch "$s" 1000 counted_batch; done
for s in 64 4096 65536; do run ring "$s" 1024 counted_ring; done
for s in 64 4096 65536; do run cross "$s" 1000 counted_cross_alloc counted_cross_free; done
