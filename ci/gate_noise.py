#!/usr/bin/python3
"""False positives and power of the gate on real noise (docs/gate.md, docs/benchmarks.md).

    ci/gate_noise.py [--metric peak_rss_bytes] RUN1 RUN2 [RUN3 RUN4 ...]

RUN* are independent runs of one matrix (e.g. ci/gate-matrix.toml) on one machine. Disjoint
pairs (RUN1 vs RUN2, RUN3 vs RUN4, ...) are gated against each other: any `regressed` verdict is a
false positive. Then each pair is gated again with the second run's byte metrics planted +10% and
+20% (a copy of its results.jsonl with every phase's peak/end RSS scaled): the share of verdicts
that come out `regressed` is the rule's power at that size. Standard library only; the figures
come from `allocmark gate --format json` (this script computes none of its own)."""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

# The byte metrics, which planted() scales (as results.jsonl and the gate's verdicts name them).
BYTE_METRICS = ("peak_rss_bytes", "end_rss_bytes")
ALLOCMARK = os.environ.get("ALLOCMARK_BIN", os.path.join(os.path.dirname(__file__), "..", "build", "bin", "allocmark"))


def gate(baseline, results, metric):
    p = subprocess.run([ALLOCMARK, "gate", baseline, results, "--metric", metric,
                        "--format", "json"], capture_output=True, text=True)
    if p.returncode not in (0, 1, 2):
        sys.exit(f"gate failed: {p.stderr}")
    return json.loads(p.stdout)["verdicts"]


def planted(src, dst, factor):
    os.makedirs(dst)
    shutil.copy(os.path.join(src, "meta.json"), dst)
    with open(os.path.join(src, "results.jsonl")) as f, open(os.path.join(dst, "results.jsonl"), "w") as out:
        for line in f:
            r = json.loads(line)
            for ph in r.get("phases", []):
                for k in BYTE_METRICS:
                    if isinstance(ph.get(k), (int, float)):
                        ph[k] = ph[k] * factor
            out.write(json.dumps(r) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--metric", default="peak_rss_bytes")
    ap.add_argument("runs", nargs="+")
    a = ap.parse_args()
    if len(a.runs) < 2:
        sys.exit("need at least two runs")
    tmp = tempfile.mkdtemp(prefix="gate-noise-")
    pairs = list(zip(a.runs[0::2], a.runs[1::2]))
    totals = {"pairs": len(pairs), "verdicts": 0, "false_regressed": 0, "improved": 0, "not_comparable": 0}
    power = {1.10: [0, 0], 1.20: [0, 0]}
    for i, (before, after) in enumerate(pairs):
        base = os.path.join(tmp, f"base{i}.json")
        subprocess.run([ALLOCMARK, "baseline", before, "-o", base], check=True, capture_output=True)
        vs = gate(base, after, a.metric)
        flagged = [v["cell"] for v in vs if v["verdict"] == "regressed"]
        totals["verdicts"] += len(vs)
        totals["false_regressed"] += len(flagged)
        totals["improved"] += sum(v["verdict"] == "improved" for v in vs)
        totals["not_comparable"] += sum(v["verdict"] == "not comparable" for v in vs)
        print(f"pair {i + 1}: {os.path.basename(before)} vs {os.path.basename(after)}: {len(vs)} verdicts, "
              f"{len(flagged)} regressed {flagged}")
        # The verdicts name the metric as the metric table does, whichever name --metric used.
        if vs and all(v["metric"] in BYTE_METRICS for v in vs):
            for factor in power:
                dst = os.path.join(tmp, f"plant{i}-{factor}")
                planted(after, dst, factor)
                pv = gate(base, dst, a.metric)
                power[factor][0] += sum(v["verdict"] == "regressed" for v in pv)
                power[factor][1] += len(pv)
    print(json.dumps(totals))
    # ci/gate.sh's confirmation: against one baseline (the first run), a cell fails the gate only
    # when two consecutive later runs both flag it.
    base = os.path.join(tmp, "confirm-base.json")
    subprocess.run([ALLOCMARK, "baseline", a.runs[0], "-o", base], check=True, capture_output=True)
    flagged = [{(v["cell"], v["metric"]) for v in gate(base, r, a.metric) if v["verdict"] == "regressed"} for r in a.runs[1:]]
    confirmed = [sorted(flagged[i] & flagged[i + 1]) for i in range(0, len(flagged) - 1, 2)]
    print(f"against {os.path.basename(a.runs[0])}: single runs flagging any cell: {sum(bool(f) for f in flagged)} of {len(flagged)}; "
          f"confirmed by the next run: {sum(bool(c) for c in confirmed)} of {len(confirmed)} run pairs {[c for c in confirmed if c]}")
    for factor, (caught, n) in power.items():
        if n:
            print(f"planted +{round((factor - 1) * 100)}%: {caught} of {n} verdicts regressed ({100 * caught / n:.0f}%)")
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
