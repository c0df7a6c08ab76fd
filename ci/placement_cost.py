#!/usr/bin/python3
"""Medians of the worker's placement_cost per workload and allocator of a results folder, as the
markdown table in docs/benchmarks.md ("Cost of the placement figures"): ci/placement_cost.py DIR."""
import json, statistics, sys, collections
rows = collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(sys.argv[1] + "/results.jsonl"):
    r = json.loads(line)
    for p in r.get("phases", []):
        c = p.get("placement_cost")
        if not c:
            continue
        k = (r["workload"], r["allocator"])
        rows[k]["numa_maps_us"].append(c["numa_maps_ns"] / 1e3)
        rows[k]["move_pages_us"].append(c["move_pages_ns"] / 1e3)
        rows[k]["addresses"].append(c["sampled_addresses"])
        rows[k]["mappings"].append(p["maps"]["mappings"])
        rows[k]["phase_ms"].append(p["wall_s"] * 1e3)
print("| workload | allocator | numa_maps read (us) | move_pages (us) | addresses queried | mappings | phase wall (ms) |")
print("|---|---|---|---|---|---|---|")
for (w, a), v in rows.items():
    med = {k: statistics.median(x) for k, x in v.items()}
    print("| %s | %s | %.0f | %.1f | %.0f | %.0f | %.1f |" % (w, a, med["numa_maps_us"], med["move_pages_us"], med["addresses"], med["mappings"], med["phase_ms"]))
