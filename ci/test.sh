#!/usr/bin/env bash
# Sets up, builds and runs every test (unit and end to end) with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
ci/setup.sh
cd build
ctest --output-on-failure -j"$(nproc)" --timeout 900
