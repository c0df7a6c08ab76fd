#!/usr/bin/env bash
# Installs what allocmark needs from Debian 12's packages (only what is missing; run as root),
# then configures and builds it in build/. Safe to run again: it does nothing twice.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${ALLOCMARK_DEBUG_INFO:=OFF}" in
  ON|OFF) ;;
  *) echo "ci/setup.sh: ALLOCMARK_DEBUG_INFO must be ON or OFF, not '${ALLOCMARK_DEBUG_INFO}'" >&2; exit 2 ;;
esac

packages=(
  build-essential cmake pkg-config git
  libjemalloc-dev libjemalloc2 libgoogle-perftools-dev libgoogle-perftools4 libtcmalloc-minimal4
  libmimalloc-dev libnuma-dev librocksdb-dev
  libbenchmark-dev libgtest-dev nlohmann-json3-dev libtomlplusplus-dev libcli11-dev libfmt-dev
  python3 python3-matplotlib python3-numpy zlib1g sqlite3 xz-utils zstd perl
  chromium  # tests/report_test.py opens the HTML report in headless Chromium
  slurm-wlm munge
  qemu-system-x86 linux-image-amd64 busybox-static cpio numactl  # allocmark lab (docs/lab.md): Debian's kernel in a NUMA guest
)
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
cmake --build build -j"$(nproc)"
