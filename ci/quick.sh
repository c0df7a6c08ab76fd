#!/usr/bin/env bash
# Sets up, builds and runs the quick matrix (configs/quick.toml), then draws its charts and writes
# its HTML report (printing the report's path). Extra arguments go to `allocmark run`, e.g.
# ci/quick.sh --reps 3 --threads 1,2.
set -euo pipefail
cd "$(dirname "$0")/.."
ci/setup.sh
out=""
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[i]}" in
    --out|-o) out="${args[i + 1]:-}" ;;
    --out=*) out="${args[i]#--out=}" ;;
  esac
done
if [ -z "$out" ]; then
  out="results/$(date +%Y%m%d-%H%M%S)"
  args+=(--out "$out")
fi
status=0
build/bin/allocmark run "${args[@]}" || status=$?
# Charts and report of whatever finished (also after a failed cell); the run's exit code is kept.
if [ -s "$out/results.jsonl" ]; then
  build/bin/allocmark plot "$out" && echo "charts in $out/charts/ (docs/charts.md says what each shows)"
  report=$(build/bin/allocmark report "$out") && echo "report: $report (open it in a browser; docs/report.md)"
fi
exit "$status"
