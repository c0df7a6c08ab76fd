#!/usr/bin/env bash
# Sets up, builds and runs the quick matrix (configs/quick.toml), then draws its charts. Extra
# arguments go to `allocmark run`, e.g. ci/quick.sh --reps 3 --threads 1,2.
set -euo pipefail
cd "$(dirname "$0")/.."
ci/setup.sh
out=""
for arg in "$@"; do
  case "$arg" in --out|-o|--out=*) out=given ;; esac
done
args=("$@")
if [ -z "$out" ]; then
  out="results/$(date +%Y%m%d-%H%M%S)"
  args+=(--out "$out")
fi
status=0
build/bin/allocmark run "${args[@]}" || status=$?
# Charts of whatever finished (also after a failed cell); the run's exit code is kept.
if [ "$out" != given ] && [ -s "$out/results.jsonl" ]; then
  build/bin/allocmark plot "$out" && echo "charts in $out/charts/ (docs/charts.md says what each shows)"
fi
exit "$status"
