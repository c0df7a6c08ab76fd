#!/bin/sh
# One step of `git bisect run`, judged by allocmark's gate (docs/history.md "Bisecting"):
#
#   git bisect start BAD GOOD
#   git bisect run /path/to/allocmark/ci/bisect-step.sh BASELINE BUILD RUN_ARGS...
#
# At the commit git checked out: runs BUILD (one shell command; a failed build skips the commit),
# then `allocmark run RUN_ARGS --out TMP`, then `allocmark gate BASELINE TMP --bisect`. Exit 0 good
# (pass), 1 bad (regressed or missing), 125 skip (cannot judge: not comparable, no finished cell, no
# build). Bad usage (allocmark's exit 2) and an interrupted step end the bisection (exit 128), so a
# typo never marks a commit bad. ALLOCMARK names the binary (default: allocmark on PATH);
# ALLOCMARK_GATE_FLAGS adds gate flags ("--tolerance 10% --phase run"). TMP is removed afterwards.
set -u
if [ $# -lt 3 ]; then
  echo "usage: bisect-step.sh BASELINE BUILD RUN_ARGS... (docs/history.md, Bisecting)" >&2
  exit 128
fi
baseline=$1
build=$2
shift 2
allocmark=${ALLOCMARK:-allocmark}
here=$(git rev-parse --short HEAD 2>/dev/null || echo "this commit")
stop() { echo "bisect-step: $1: stopping the bisection" >&2; exit 128; }

[ -f "$baseline" ] || stop "$baseline: no such baseline file"
if ! sh -c "$build" >&2; then
  echo "bisect-step: the build failed at $here: skipping it (125)" >&2
  exit 125
fi
out=$(mktemp -d "${TMPDIR:-/tmp}/allocmark-bisect.XXXXXX") || stop "cannot create a temporary folder"
trap 'rm -rf "$out"' EXIT
"$allocmark" run "$@" --out "$out/results" >&2
case $? in
  0 | 1) ;;  # 1: some cell failed; recorded, so the gate judges it (missing: bad)
  2) stop "allocmark run: bad usage (exit 2)" ;;
  3) echo "bisect-step: allocmark run stopped on an environment failure at $here: skipping it (125)" >&2; exit 125 ;;
  *) stop "allocmark run was interrupted" ;;
esac
# shellcheck disable=SC2086  # ALLOCMARK_GATE_FLAGS is a list of flags
"$allocmark" gate "$baseline" "$out/results" --bisect ${ALLOCMARK_GATE_FLAGS:-} >&2
verdict=$?
case $verdict in
  0) echo "bisect-step: $here is good" >&2 ;;
  1) echo "bisect-step: $here is bad" >&2 ;;
  125) echo "bisect-step: $here cannot be judged: skipping it" >&2 ;;
  2) stop "allocmark gate: bad usage (exit 2)" ;;
  *) stop "allocmark gate exited $verdict" ;;
esac
exit $verdict
