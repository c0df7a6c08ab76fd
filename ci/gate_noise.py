#!/usr/bin/python3
"""False positives and power of the gate on real noise (docs/gate.md, docs/benchmarks.md).

    ci/gate_noise.py [--metric peak_rss_bytes] [--tolerance 5%] [--against BASELINE.json] RUN1 RUN2 [RUN3 ...]

RUN* are independent runs of one matrix (e.g. ci/gate-matrix.toml) on one machine. Disjoint
pairs (RUN1 vs RUN2, RUN3 vs RUN4, ...) are gated against each other: any `regressed` verdict is a
false positive. Then each pair is gated again with the second run's byte metrics planted +10% and
+20% (a copy of its results.jsonl with every phase's peak/end RSS scaled): the share of verdicts
that come out `regressed` is the rule's power at that size, over all cell-phases and over those whose
baseline median is above 20 MiB (below that, 10% is less than one huge page). With --against, every
run is also gated against that baseline (the committed one: ci/gate.sh's judgement, run by run,
without its confirming rerun). Standard library only; the figures
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


LARGE_BYTES = 20 * 1024 * 1024  # issue 23's power target counts cell-phases above this
TOLERANCE = "5%"


def gate_json(baseline, results, metric, *extra):
    p = subprocess.run([ALLOCMARK, "gate", baseline, results, "--metric", metric, "--tolerance", TOLERANCE,
                        "--format", "json", *extra], capture_output=True, text=True)
    if p.returncode not in (0, 1, 2):
        sys.exit(f"gate failed: {p.stderr}")
    return json.loads(p.stdout)


def gate(baseline, results, metric):
    return gate_json(baseline, results, metric)["verdicts"]


def is_large(v):
    return (v.get("baseline") or {}).get("median", 0) > LARGE_BYTES


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
    ap.add_argument("--tolerance", default="5%")
    ap.add_argument("--against", help="a baseline file to gate every run against (--allow-mismatch)")
    ap.add_argument("runs", nargs="+")
    a = ap.parse_args()
    global TOLERANCE
    TOLERANCE = a.tolerance
    if len(a.runs) < 2:
        sys.exit("need at least two runs")
    tmp = tempfile.mkdtemp(prefix="gate-noise-")
    pairs = list(zip(a.runs[0::2], a.runs[1::2]))
    totals = {"pairs": len(pairs), "verdicts": 0, "false_regressed": 0, "improved": 0, "not_comparable": 0}
    power = {1.10: [0, 0], 1.20: [0, 0]}
    power_large = {1.10: [0, 0], 1.20: [0, 0]}
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
                large = [v for v in pv if is_large(v)]
                power_large[factor][0] += sum(v["verdict"] == "regressed" for v in large)
                power_large[factor][1] += len(large)
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
            lc, ln = power_large[factor]
            print(f"planted +{round((factor - 1) * 100)}%: {caught} of {n} verdicts regressed ({100 * caught / n:.0f}%); "
                  f"above 20 MiB: {lc} of {ln} ({100 * lc / max(ln, 1):.0f}%)")
    if a.against:
        passed = 0
        for r in a.runs:
            out = gate_json(a.against, r, a.metric, "--allow-mismatch")
            moved = [f"{v['cell']} {v['change']:+.1%}" for v in out["verdicts"] if v["verdict"] == "regressed"]
            passed += out["exit_code"] == 0
            print(f"against {a.against}: {os.path.basename(r)}: exit {out['exit_code']} {moved}")
        print(f"against {a.against} at {TOLERANCE}: {passed} of {len(a.runs)} runs pass")
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
