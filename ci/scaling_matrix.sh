#!/usr/bin/env bash
# Thread scaling of every backend from a portable kit (ci/portable_kit.sh): writes a matrix whose
# allocators point at the kit's libraries, runs it, and prints the table.
#   ci/scaling_matrix.sh KIT OUT THREADS REPS WORKLOAD [--set ...]
set -euo pipefail
kit=$(realpath "$1"); out=$2; threads=$3; reps=$4; workload=$5; shift 5
export LD_LIBRARY_PATH="$kit/lib" ALLOCMARK_CONFIG_DIR="$(dirname "$0")/../configs" ALLOCMARK_WORKER="$kit/bin/allocmark-worker"
matrix=$(mktemp --suffix=.toml)
cat > "$matrix" <<TOML
[matrix]
allocators = ["glibc", "jemalloc", "tcmalloc", "mimalloc", "numap"]
timeout_s = 300
[allocators.jemalloc]
backend = "jemalloc"
library = "$kit/lib/libjemalloc.so.2"
[allocators.tcmalloc]
backend = "tcmalloc"
library = "$kit/lib/libtcmalloc.so.4"
[allocators.mimalloc]
backend = "mimalloc"
library = "$kit/lib/libmimalloc.so.2"
[allocators.numap]
backend = "numap"
library = "$kit/lib/libnumap.so"
TOML
"$kit/bin/allocmark" run "$matrix" --workloads "$workload" --threads "$threads" --reps "$reps" --out "$out" "$@"
