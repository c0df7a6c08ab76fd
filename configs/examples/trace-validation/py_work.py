# A standard-library workload: build records, serialise, parse back, sort, group.
import json, collections
rows = [{"id": i, "name": "user%06d" % i, "tags": ["t%d" % (i % 17), "g%d" % (i % 5)], "score": (i * 7919) % 1000} for i in range(150000)]
text = json.dumps(rows)
back = json.loads(text)
back.sort(key=lambda r: (r["score"], r["name"]))
groups = collections.defaultdict(list)
for r in back:
    groups[r["tags"][0]].append(r["id"])
del text, rows
print(len(back), sum(len(v) for v in groups.values()))
