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

# What compiling allocmark needs: installed before the build starts.
build_packages=(
  build-essential cmake pkg-config git
  libjemalloc-dev libjemalloc2 libgoogle-perftools-dev libgoogle-perftools4 libtcmalloc-minimal4
  libmimalloc-dev libnuma-dev librocksdb-dev libzstd-dev
  libbenchmark-dev libgtest-dev nlohmann-json3-dev libtomlplusplus-dev libcli11-dev libfmt-dev
  libsqlite3-dev                # the results history (harness/history)
  zlib1g
)
# What running needs and compiling does not: installed while allocmark builds (below), so on a
# fresh machine (CI's) the build starts without waiting for matplotlib's and numpy's dependencies.
run_packages=(
  python3 python3-matplotlib python3-numpy   # plots/ (charts, the report)
  autoconf automake libtool     # `allocmark build`: jemalloc and gperftools tag exports need ./autogen.sh
)
lab_packages=(qemu-system-x86 linux-image-amd64 busybox-static cpio numactl)  # Debian's kernel in a NUMA guest
slurm_packages=(slurm-client)
test_packages=(
  chromium                      # tests/report_test.py opens the HTML report in headless Chromium
  sqlite3 xz-utils zstd perl    # numap's real-program tests (allocators/numap/tests/real_programs.sh)
  slurm-wlm munge                # tests/slurm_cluster.py starts a one-node cluster (controller, node daemon)
  universal-ctags               # tests/function_length_test.py measures functions with ctags
  "${lab_packages[@]}"
)
extra_packages=("${run_packages[@]}")  # what running, the lab, Slurm or the tests need: the build does not wait for them
build_targets=(--target allocmark)  # the driver, and what it runs: worker, numap, preload libraries
for arg in "$@"; do
  case "$arg" in
    --lab) extra_packages+=("${lab_packages[@]}") ;;
    --slurm) extra_packages+=("${slurm_packages[@]}") ;;
    --tests) extra_packages+=("${test_packages[@]}"); build_targets=() ;;
    *) echo "ci/setup.sh: unknown option '$arg' (choose from --lab, --slurm, --tests)" >&2; exit 2 ;;
  esac
done

missing_of() {  # the named packages that are not installed
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}
mapfile -t missing < <(missing_of "${build_packages[@]}")
mapfile -t missing_extra < <(missing_of "${extra_packages[@]}")
if ((${#missing[@]} + ${#missing_extra[@]})); then
  if [ "$(id -u)" -ne 0 ]; then
    echo "ci/setup.sh: missing packages: ${missing[*]} ${missing_extra[*]}; run as root (or: sudo apt-get install ${missing[*]} ${missing_extra[*]})" >&2
    exit 2
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  if ((${#missing[@]})); then
    echo "ci/setup.sh: installing ${missing[*]}"
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
fi
# What running, the lab, Slurm and the tests need (matplotlib, a browser, qemu, a kernel image: most
# of a fresh machine's download) is installed while allocmark builds, which needs none of it.
# Debian's kernel package then builds an initramfs twice (its own hook, then initramfs-tools'
# trigger): 116 CPU s each, taken from the build beside it (docs/benchmarks.md "Build and test time").
# The lab boots that kernel with an initramfs of its own (docs/lab.md), so on a machine that does
# not boot from this /boot (a CI or container machine: its running kernel is not there, no GRUB)
# INITRD=No skips both. A machine that boots from /boot keeps its initramfs.
no_initrd=()
if [ ! -e "/boot/vmlinuz-$(uname -r)" ] && [ ! -d /boot/grub ]; then
  no_initrd=(INITRD=No)
fi
extra_install=""
extra_log=build/setup-packages.log
if ((${#missing_extra[@]})); then
  echo "ci/setup.sh: installing ${missing_extra[*]} while building (log: $extra_log)"
  mkdir -p build
  env "${no_initrd[@]}" apt-get install -y -qq --no-install-recommends "${missing_extra[@]}" >"$extra_log" 2>&1 &
  extra_install=$!
fi

# Without debug information unless asked (ALLOCMARK_DEBUG_INFO=ON): GCC generates the same code
# either way, and -g is about a third of a clean build (docs/benchmarks.md "Build time").
build_status=0
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DALLOCMARK_DEBUG_INFO="${ALLOCMARK_DEBUG_INFO}" >/dev/null &&
  cmake --build build -j"$(nproc)" "${build_targets[@]}" || build_status=$?
if [ -n "$extra_install" ]; then
  install_status=0
  wait "$extra_install" || install_status=$?
  if [ "$install_status" -ne 0 ]; then
    tail -n 20 "$extra_log" >&2
    echo "ci/setup.sh: installing ${missing_extra[*]} failed (exit $install_status); full output in $extra_log" >&2
    exit "$install_status"
  fi
fi
exit "$build_status"
