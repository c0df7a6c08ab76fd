#!/usr/bin/env bash
# Installs what allocmark needs from Debian 12's packages (only what is missing; run as root),
# then configures and builds it in build/. Safe to run again: it does nothing twice.
#   ci/setup.sh            what running needs: the driver, worker and libraries (ci/quick.sh)
#   ci/setup.sh --lab      ... and the NUMA lab's packages (qemu, a kernel image; docs/lab.md)
#   ci/setup.sh --slurm    ... and the Slurm client commands, for a login node (README "Many machines")
#   ci/setup.sh --tests    everything the tests use (lab, Slurm, Chromium, real programs), and every
#                          test binary (ci/test.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
case "${ALLOCMARK_DEBUG_INFO:=OFF}" in
  ON|OFF) ;;
  *) echo "ci/setup.sh: ALLOCMARK_DEBUG_INFO must be ON or OFF, not '${ALLOCMARK_DEBUG_INFO}'" >&2; exit 2 ;;
esac

run_packages=(
  build-essential cmake pkg-config git
  libjemalloc-dev libjemalloc2 libgoogle-perftools-dev libgoogle-perftools4 libtcmalloc-minimal4
  libmimalloc-dev libnuma-dev librocksdb-dev libzstd-dev
  libbenchmark-dev libgtest-dev nlohmann-json3-dev libtomlplusplus-dev libcli11-dev libfmt-dev
  python3 python3-matplotlib python3-numpy zlib1g
)
lab_packages=(qemu-system-x86 linux-image-amd64 busybox-static cpio numactl)  # Debian's kernel in a NUMA guest
slurm_packages=(slurm-client)
test_packages=(
  chromium                      # tests/report_test.py opens the HTML report in headless Chromium
  sqlite3 xz-utils zstd perl    # numap's real-program tests (allocators/numap/tests/real_programs.sh)
  slurm-wlm munge                # tests/slurm_cluster.py starts a one-node cluster (controller, node daemon)
  "${lab_packages[@]}"
)
packages=("${run_packages[@]}")
build_targets=(--target allocmark)  # the driver, and what it runs: worker, numap, preload libraries
for arg in "$@"; do
  case "$arg" in
    --lab) packages+=("${lab_packages[@]}") ;;
    --slurm) packages+=("${slurm_packages[@]}") ;;
    --tests) packages+=("${test_packages[@]}"); build_targets=() ;;
    *) echo "ci/setup.sh: unknown option '$arg' (choose from --lab, --slurm, --tests)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [ "$(id -u)" -ne 0 ]; then
    echo "ci/setup.sh: missing packages: ${missing[*]}; run as root (or: sudo apt-get install ${missing[*]})" >&2
    exit 2
  fi
  echo "ci/setup.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Without debug information unless asked (ALLOCMARK_DEBUG_INFO=ON): GCC generates the same code
# either way, and -g is about a third of a clean build (docs/benchmarks.md "Build time").
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DALLOCMARK_DEBUG_INFO="${ALLOCMARK_DEBUG_INFO}" >/dev/null
cmake --build build -j"$(nproc)" "${build_targets[@]}"
