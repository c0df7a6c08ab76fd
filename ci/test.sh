#!/usr/bin/env bash
# Sets up, builds and runs every test (unit and end to end) with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
ci/setup.sh
cd build
ctest --output-on-failure -j"$(nproc)" --timeout 900
cd ..
# allocmark gates itself: a confirmed peak-RSS regression of the CI matrix fails the build (docs/gate.md).
ci/gate.sh
