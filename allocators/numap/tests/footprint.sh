#!/usr/bin/env bash
# numap's start-up footprint (issue 24, target 3), from the kernel's view of a real program
# (numap_footprint, tests/footprint.c), run with and without libnumap.so preloaded in a clean
# environment. Fails unless:
#   - libnumap.so needs no library but libc (no libgcc_s.so.1, no libstdc++);
#   - a program that calls no malloc at all does not even initialise numap (no exit line);
#   - in a program whose only allocation is stdout's buffer (stdio), one malloc(64) or one
#     malloc(1 MiB), numap's resident anonymous memory beyond glibc's (RssAnon, same program, same
#     run) stays within 128 KiB, and numap started no thread (Threads=1: no decay thread while no
#     page was ever given back).
# The bound: what numap must hold to serve one allocation is its data and bss (the Heap, with a
# copy of the topology, and the detected topology: ~32 KiB), its TLS and relro (~8 KiB), the
# stack its start-up parses sysfs with (~12 KiB), seven metadata pages of the first node and
# class it uses and one page of the first slab or the block itself (~32 KiB): measured +76 KiB
# for malloc(64); before the lazy metadata (every NodePart and a page of nearly every Slot's
# bitmaps written at start, the decay thread started at the first allocation) it was +308 KiB.
# RssAnon, not VmRSS: VmRSS adds shared file pages (libc's text mapped by fault-around, which
# moves with ASLR by up to 160 KiB between runs of the same program); docs/benchmarks.md has both.
#   footprint.sh /path/to/libnumap.so /path/to/numap_footprint
set -uo pipefail
[ $# -eq 2 ] || { echo "usage: footprint.sh /path/to/libnumap.so /path/to/numap_footprint" >&2; exit 2; }
lib=$1
prog=$2
bound_kib=128
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0

if command -v readelf >/dev/null; then
  needed=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
  if [ "$needed" = "libc.so.6 " ]; then
    echo "ok: libnumap.so needs only libc.so.6"
  else
    echo "FAIL: libnumap.so needs: $needed(expected libc.so.6 alone)" >&2
    fail=1
  fi
else
  echo "skip: readelf not installed (library dependencies not checked)"
fi

# Without ASLR the layout, and so every figure, is the same from run to run (where setarch may not
# change the personality, as in some sandboxes, plain runs: RssAnon moves by a page at most).
norandom=()
setarch -R true 2>/dev/null && norandom=(setarch -R)

# run NAME PRELOAD ARGS...: the program's line in $work/NAME.out, stderr in $work/NAME.err.
run() {
  local name=$1 pre=$2
  shift 2
  local env_args=(env -i PATH="$PATH")
  [ -n "$pre" ] && env_args+=(LD_PRELOAD="$pre" NUMAP_STATS_AT_EXIT=1)
  "${norandom[@]}" "${env_args[@]}" "$prog" "$@" >"$work/$name.out" 2>"$work/$name.err"
  local rc=$?
  [ "$rc" -eq 0 ] || { echo "FAIL: $name: $prog $* exited with $rc" >&2; cat "$work/$name.err" >&2; fail=1; }
}
value() { sed -n "s/.*$2=\([0-9]*\).*/\1/p" "$work/$1.out"; }

# The preload resolves (a silent failure would make every comparison below pass).
if ! LD_TRACE_LOADED_OBJECTS=1 LD_PRELOAD="$lib" "$prog" | grep -q libnumap; then
  echo "FAIL: LD_PRELOAD=$lib does not load it into $prog" >&2
  exit 1
fi

run none_glibc ""
run none_numap "$lib"
if grep -q "^numap: exit" "$work/none_numap.err"; then
  echo "FAIL: a program that never calls malloc initialised numap" >&2
  fail=1
else
  echo "ok: no malloc, no heap: RssAnon $(value none_numap RssAnon) KiB (glibc $(value none_glibc RssAnon) KiB)"
fi

for case in stdio 64 1048576; do
  run "${case}_glibc" "" "$case"
  run "${case}_numap" "$lib" "$case"
  g=$(value "${case}_glibc" RssAnon)
  n=$(value "${case}_numap" RssAnon)
  t=$(value "${case}_numap" Threads)
  if ! grep -Eq "^numap: exit pid=[0-9]+ allocs=[1-9]" "$work/${case}_numap.err"; then
    echo "FAIL: $case: numap did not serve the allocation (no exit line with allocs > 0)" >&2
    fail=1
  elif [ -z "$g" ] || [ -z "$n" ] || [ $((n - g)) -gt "$bound_kib" ]; then
    echo "FAIL: $case: numap's RssAnon ${n:-?} KiB is more than glibc's ${g:-?} KiB + $bound_kib KiB" >&2
    fail=1
  elif [ "${t:-0}" -ne 1 ]; then
    echo "FAIL: $case: $t threads under numap (no decay thread before a page is given back)" >&2
    fail=1
  else
    echo "ok: $case: RssAnon $n KiB, glibc $g KiB (+$((n - g)) KiB, bound +$bound_kib), one thread"
  fi
done
exit "$fail"
