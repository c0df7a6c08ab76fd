#!/usr/bin/env bash
# Real programs under libnumap.so, their outputs compared with the same programs on glibc:
# python3 (dict- and string-heavy), sqlite3 (1e6 rows inserted, indexed and queried), git (log,
# rev-list, grep, clone, fsck on the project repo), multi-threaded compression (xz -T2, zstd -T2
# round trips of the repo's archive), perl (hash- and string-heavy) and a C++ compiler run
# (g++ -O2 -S of numap's own heap.cpp). Exit 0: every output identical and numap really served malloc.
# The glibc side is made once into DIR and compared with by every numap configuration (ctest's
# fixture numap.real_programs.glibc for numap.real_programs and .velox): it is the same each time.
# DIR holds a clone of the repo, which both sides read, so a commit or an edit to the working tree
# between them changes neither side's input.
#   real_programs.sh reference DIR /path/to/repo      # glibc: DIR/<program>.glibc
#   real_programs.sh check DIR /path/to/libnumap.so   # numap against DIR; extra environment
#                                                     # (e.g. NUMAP_NEXT_BELOW=3072) is passed through
#   real_programs.sh /path/to/libnumap.so /path/to/repo   # both, with a temporary DIR
set -euo pipefail
usage() { echo "usage: real_programs.sh reference DIR REPO | check DIR LIBNUMAP | LIBNUMAP REPO" >&2; exit 2; }
[[ $# -eq 3 || $# -eq 2 ]] || usage
if [[ $# -eq 2 ]]; then
  both=$(mktemp -d)
  trap 'rm -rf "$both"' EXIT
  "$0" reference "$both" "$2" && "$0" check "$both" "$1"
  exit
fi
mode=$1
ref=$2
case $mode in
  reference) repo=$3 ;;
  check) lib=$3
         [[ -f $ref/complete ]] || { echo "real_programs.sh: no glibc reference in $ref (real_programs.sh reference DIR REPO makes it)" >&2; exit 2; } ;;
  *) usage ;;
esac
for tool in sqlite3 xz zstd perl g++; do
  command -v "$tool" >/dev/null || { echo "real_programs.sh: $tool missing (ci/setup.sh installs it)" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0

if [[ $mode == reference ]]; then
  # DIR is emptied first; only a folder that is empty or an earlier reference.
  if [[ -d $ref && ! -f $ref/real_programs.reference && -n $(ls -A "$ref") ]]; then
    echo "real_programs.sh: $ref is neither empty nor an earlier reference; not emptying it" >&2
    exit 2
  fi
  rm -rf "$ref"
  mkdir -p "$ref"
  touch "$ref/real_programs.reference"
  git -c advice.detachedHead=false clone -q "$repo" "$ref/repo"
else
  # The preload must take: numap prints its options when asked.
  printed=$(LD_PRELOAD=$lib NUMAP_PRINT_OPTIONS=1 python3 -c pass 2>&1)
  if ! grep -q '^numap: NUMAP_CAPACITY=' <<<"$printed"; then
    echo "FAIL: libnumap.so did not load into python3" >&2
    exit 1
  fi
fi
repo=$ref/repo

compare() {  # name, command...: the reference runs it on glibc, a check under numap against that
  local name=$1
  shift
  if [[ $mode == reference ]]; then
    "$@" >"$ref/$name.glibc" 2>&1 || { echo "FAIL: $name failed on glibc" >&2; tail -5 "$ref/$name.glibc" >&2; fail=1; }
    return
  fi
  LD_PRELOAD=$lib "$@" >"$work/$name.numap" 2>&1 || { echo "FAIL: $name failed under numap" >&2; tail -5 "$work/$name.numap" >&2; fail=1; return; }
  if cmp -s "$ref/$name.glibc" "$work/$name.numap"; then
    echo "ok: $name ($(wc -c <"$ref/$name.glibc") bytes of output identical)"
  else
    echo "FAIL: $name output differs" >&2
    diff "$ref/$name.glibc" "$work/$name.numap" | head -10 >&2 || true  # diff's 1 would end the script (set -e)
    fail=1
  fi
}

# The programs' scripts are the reference's, so both sides run the same text.
script() {  # name: its text on stdin, written by the reference
  if [[ $mode == reference ]]; then cat >"$ref/$1"; else cat >/dev/null; fi
}

script dicts.py <<'PY'
import hashlib, json, random
random.seed(12345)
d = {}
for i in range(300000):
    k = "key-%d-%s" % (i, "x" * (i % 37))
    d[k] = [str(i) * (i % 5), {"n": i, "s": k[::-1]}]
words = sorted(d, key=lambda k: (len(k), k))
for k in words[::3]:
    del d[k]
text = " ".join(words[:50000]).upper().replace("KEY", "k")
parts = text.split(" ")
counts = {}
for p in parts:
    counts[p[-3:]] = counts.get(p[-3:], 0) + 1
blob = json.dumps(d, sort_keys=True)
print(len(d), len(text), len(counts), hashlib.sha256(blob.encode()).hexdigest())
print(sorted(counts.items())[:5])
PY
compare python3 python3 "$ref/dicts.py"

# fork from a multithreaded parent: the child allocates while the parent's threads keep going.
script fork.py <<'PY'
import os, threading
stop = False
def churn():
    while not stop:
        l = [str(i) * 20 for i in range(2000)]
        del l
ts = [threading.Thread(target=churn) for _ in range(3)]
for t in ts: t.start()
codes = []
for k in range(20):
    pid = os.fork()
    if pid == 0:
        d = {i: "v" * (i % 300) for i in range(20000)}
        os._exit(0 if len(d) == 20000 else 1)
    codes.append(os.waitpid(pid, 0)[1])
stop = True
for t in ts: t.join()
print("children ok:", sum(1 for c in codes if c == 0), "of", len(codes))
PY
compare python3-fork python3 "$ref/fork.py"

script rows.sql <<'SQL'
CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT, c REAL);
WITH RECURSIVE cnt(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM cnt WHERE x < 1000000)
INSERT INTO t SELECT x, printf('row-%d-%s', x, hex(x * x)), x * 0.5 FROM cnt;
CREATE INDEX tb ON t(b);
SELECT count(*), sum(length(b)), avg(c) FROM t;
SELECT b FROM t WHERE a % 99991 = 0 ORDER BY b;
SELECT substr(b, 1, 6), count(*) FROM t GROUP BY substr(b, 1, 6) ORDER BY 2 DESC, 1 LIMIT 5;
DELETE FROM t WHERE a % 3 = 0;
SELECT count(*), max(b) FROM t;
SQL
compare sqlite3 sh -c "sqlite3 '$work/db.\$\$' < '$ref/rows.sql'; rm -f '$work'/db.*"

compare git-log git -C "$repo" log --stat -n 300 --format='%H %s'
compare git-rev-list sh -c "git -C '$repo' rev-list --all --objects | sort"
compare git-grep git -C "$repo" grep -n -I -e malloc -e numap HEAD
compare git-clone-fsck sh -c "d=\$(mktemp -d -p '$work'); git clone -q --no-local '$repo' \$d/c && git -C \$d/c fsck --full 2>&1 | sort && git -C \$d/c log --format=%H | head -50; rm -rf \$d"

compare xz-threads sh -c "git -C '$repo' archive HEAD | xz -T2 -6 -c | xz -T2 -d -c | sha256sum"
compare zstd-threads sh -c "git -C '$repo' archive HEAD | zstd -T2 -q -c | zstd -d -q -c | sha256sum"
compare perl perl -e 'my %h; for my $i (1..300000) { $h{"k$i" . ("x" x ($i % 29))} = [$i, reverse("v$i")] }
  delete $h{$_} for grep { /7$/ } keys %h; my $s = join(",", map { $h{$_}[1] } sort keys %h);
  print scalar(keys %h), " ", length($s), " ", substr($s, 0, 60), "\n";'
compare gxx-compile sh -c "g++ -std=c++20 -O2 -S -o - -I '$repo' '$repo/allocators/numap/heap.cpp' | sha256sum"

if [[ $mode == reference && $fail == 0 ]]; then
  touch "$ref/complete"
fi
exit $fail
