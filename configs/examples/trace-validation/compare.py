#!/usr/bin/python3
"""Program cells against their traces' replays: median peak RSS per allocator, ranks, and whether
every pair the program orders clearly (min-max ranges apart) is ordered the same by the replay."""
import json, statistics, sys, itertools
def load(folder, workload_prefix):
    out = {}
    for line in open(folder + "/results.jsonl"):
        r = json.loads(line)
        if r["status"] != "ok" or not r["workload"].startswith(workload_prefix): continue
        name = r["workload"] if r["workload"].startswith("program:") else "program:" + r["params"]["name"]
        peak = max(ph["peak_rss_bytes"] for ph in r["phases"] if ph.get("peak_rss_bytes") is not None)
        out.setdefault(name, {}).setdefault(r["allocator"], []).append(peak)
    return out
progs = load(sys.argv[1], "program:")
replays = sys.argv[2]
allocs = ["glibc", "jemalloc", "tcmalloc", "mimalloc", "numap"]
for name in sys.argv[3:]:
    replay = load(replays, "replay")["program:" + name]
    prog = progs["program:" + name]
    med = lambda v: statistics.median(v) / 2**20
    rank = lambda d: {a: i + 1 for i, a in enumerate(sorted(allocs, key=lambda a: statistics.median(d[a])))}
    rp, rr = rank(prog), rank(replay)
    print(f"\n{name}\n| allocator | program peak RSS MiB [min-max] | rank | replay peak RSS MiB [min-max] | rank |\n|---|--:|--:|--:|--:|")
    for a in allocs:
        p, r = prog[a], replay[a]
        print(f"| {a} | {med(p):.1f} [{min(p)/2**20:.1f}-{max(p)/2**20:.1f}] | {rp[a]} | {med(r):.1f} [{min(r)/2**20:.1f}-{max(r)/2**20:.1f}] | {rr[a]} |")
    clear = agree = 0
    disagree = []
    for a, b in itertools.combinations(allocs, 2):
        if max(prog[a]) < min(prog[b]) or max(prog[b]) < min(prog[a]):
            clear += 1
            lo, hi = (a, b) if max(prog[a]) < min(prog[b]) else (b, a)
            if statistics.median(replay[lo]) < statistics.median(replay[hi]): agree += 1
            else: disagree.append(f"{lo}<{hi}")
    print(f"\npairs the program orders clearly: {clear}; the replay orders the same: {agree}" + (f"; not: {', '.join(disagree)}" if disagree else ""))
