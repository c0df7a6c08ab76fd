#!/usr/bin/env bash
# Packs the built driver, worker, libnumap and the Debian allocator libraries (with the shared
# libraries they need beyond libc and libstdc++) into one folder, so a matrix can run on a machine
# that has none of them installed (the 16-core device used for thread-scaling figures).
#   ci/portable_kit.sh [DIR]      (default .devkit)
set -euo pipefail
cd "$(dirname "$0")/.."
kit=${1:-.devkit}
rm -rf "$kit" && mkdir -p "$kit/bin" "$kit/lib"
cp build/bin/allocmark build/bin/allocmark-worker "$kit/bin/"
cp build/lib/libnumap.so "$kit/lib/"
libdir=/usr/lib/x86_64-linux-gnu
for lib in libjemalloc.so.2 libtcmalloc.so.4 libmimalloc.so.2 libtomlplusplus.so.3 libfmt.so.9 libnuma.so.1 \
           libunwind.so.8 liblzma.so.5; do
  cp -L "$libdir/$lib" "$kit/lib/"
done
echo "$kit: $(du -sh "$kit" | cut -f1)"
