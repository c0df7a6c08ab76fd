#!/usr/bin/env bash
# numap never aborts a host program for its configuration (issue 24). A real program (sh -c 'echo
# ok', bash -c 'echo ok') preloaded with an unknown NUMAP_* name and a bad value runs to exit 0 with its output intact
# and exactly one warning line per variable on stderr, and numap's exit line counts them
# (option_warnings); NUMAP_STRICT=1 makes each of them abort (SIGABRT) naming the variable. An
# address-space limit too small for the default arena gives one warning and a smaller
# NUMAP_CLASS_SPAN instead of an abort. Every run has a clean environment (env -i).
#   bad_options.sh /path/to/libnumap.so
set -uo pipefail
[ $# -eq 1 ] || { echo "usage: bad_options.sh /path/to/libnumap.so" >&2; exit 2; }
lib=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0

# Runs `$shell -c 'echo ok'` under numap with the given NAME=VALUE settings (under `limit`, ulimit
# -v in KiB, when set): $rc, $work/out, $work/err.
shell=/bin/sh
limit=
run() {
  (
    if [ -n "$limit" ]; then ulimit -v "$limit" || exit 99; fi
    exec env -i PATH="$PATH" LD_PRELOAD="$lib" "$@" "$shell" -c 'echo ok'
  ) >"$work/out" 2>"$work/err"
  rc=$?
}
# check description: fails the test unless every expectation since the last check held.
bad=0
want() { "$@" || { echo "  not met: $*" >&2; bad=1; }; }
check() {
  if [ "$bad" -eq 0 ]; then
    echo "ok: $1"
  else
    echo "FAIL: $1 (exit $rc; stdout '$(head -c 200 "$work/out")'; stderr:)" >&2
    head -20 "$work/err" >&2
    fail=1
  fi
  bad=0
}
status() { [ "$rc" -eq "$1" ]; }
output() { [ "$(cat "$work/out")" = "$1" ]; }
lines() { [ "$(wc -l <"$work/err" | tr -d ' ')" -eq "$1" ]; }
line() { sed -n "${1}p" "$work/err" | grep -Eq -- "$2"; }
stderr_has() { grep -Eq -- "$1" "$work/err"; }

# Warnings, not aborts: the program's exit status and output are its own.
run NUMAP_LIB=x NUMAP_DECAY_MS=banana
want status 0
want output ok
want lines 2
want line 1 "^numap: NUMAP_DECAY_MS='banana': expected an integer from 0 to 3600000; using the default 1000\$"
want line 2 "^numap: NUMAP_LIB='x': not a numap option .*; ignored\$"
check "an unknown name and a bad value: exit 0, output intact, one warning line each (name, value, expected, default)"

# numap_stats counts them: its exit line is derived from the same counters (bash, which leaves
# through exit() and so runs numap's destructor; dash, Debian's sh, leaves with _exit).
shell=/bin/bash
run NUMAP_LIB=x NUMAP_DECAY_MS=banana NUMAP_STATS_AT_EXIT=1
want status 0
want stderr_has "^numap: exit pid=[0-9]+ .* option_warnings=2( |\$)"
check "numap_stats' option_warnings counts the two"
run NUMAP_STATS_AT_EXIT=1
want status 0
want lines 1
want stderr_has "^numap: exit pid=[0-9]+ .* option_warnings=0( |\$)"
check "no warning and option_warnings=0 without a bad variable"
shell=/bin/sh

# stderr a pipe whose reader is gone (closed before the program starts): numap's warning must not
# kill the program with SIGPIPE; its own output is still written.
rc=$(/usr/bin/python3 - "$lib" "$work/out" <<'PY'
import os, subprocess, sys
r, w = os.pipe()
os.close(r)
with open(sys.argv[2], "wb") as out:
    p = subprocess.run(["/bin/sh", "-c", "echo ok"], stdout=out, stderr=w,
                       env={"PATH": os.environ["PATH"], "LD_PRELOAD": sys.argv[1], "NUMAP_LIB": "x"})
print(p.returncode if p.returncode >= 0 else 128 - p.returncode)
PY
)
: >"$work/err"
want status 0
want output ok
check "the warning into a broken stderr pipe: no SIGPIPE, exit 0, output intact"

# NUMAP_STRICT=1: the abort, opt-in, naming the variable (134 = 128 + SIGABRT), before any output.
run NUMAP_STRICT=1 NUMAP_LIB=x
want status 134
want output ""
want lines 1
want line 1 "^numap: NUMAP_LIB='x': .*NUMAP_STRICT=1"
check "STRICT=1 and an unknown name: SIGABRT, one line naming it"
run NUMAP_STRICT=1 NUMAP_DECAY_MS=banana
want status 134
want output ""
want lines 1
want line 1 "^numap: NUMAP_DECAY_MS='banana': .*NUMAP_STRICT=1"
check "STRICT=1 and a bad value: SIGABRT, one line naming it"

# An address-space limit of 20 GiB refuses the default arena (1.1 TiB per node, NUMA off): the
# largest span that fits (256 MiB: 13.5 GiB; 512 MiB needs 29), one warning, the program runs. vm.overcommit_memory=2 refuses even the smallest
# span's reservation: skipped there.
if [ "$(cat /proc/sys/vm/overcommit_memory 2>/dev/null)" != 2 ]; then
  limit=20971520
  run NUMAP_NUMA=0
  want status 0
  want output ok
  want lines 1
  want line 1 "^numap: NUMAP_CLASS_SPAN=17179869184: cannot reserve the arena .*; using 268435456\$"
  check "ulimit -v 20 GiB: exit 0, output intact, one warning, NUMAP_CLASS_SPAN 256 MiB"
  run NUMAP_NUMA=0 NUMAP_STRICT=1
  want status 134
  want line 1 "^numap: NUMAP_CLASS_SPAN=17179869184: cannot reserve the arena .*NUMAP_STRICT=1"
  check "ulimit -v 20 GiB and STRICT=1: SIGABRT naming NUMAP_CLASS_SPAN"
  limit=
else
  echo "skipped: the ulimit -v checks (vm.overcommit_memory=2)"
fi

exit "$fail"
