#!/usr/bin/env bash
# Sets up, builds and runs the quick matrix (configs/quick.toml). Extra arguments go to
# `allocmark run`, e.g. ci/quick.sh --reps 1.
set -euo pipefail
cd "$(dirname "$0")/.."
ci/setup.sh
exec build/bin/allocmark run "$@"
