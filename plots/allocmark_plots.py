#!/usr/bin/python3
"""allocmark's charts: plots/allocmark_plots.py DIR [--out DIR/charts] [--format png|svg]
[--only KIND,...] [--baseline ALLOCATOR] [--log] [--describe FILE]

Reads DIR/summary.json (every figure: medians, min-max spreads), DIR/meta.json (footer) and
DIR/timelines.jsonl (the kept cells' timelines), both written by the results model; computes no
metric of its own and reads no record. Writes one file per chart into --out; a chart the run has no
data for is skipped with one line on stderr saying why. Exit 0 on success, 2 for bad flags or a
folder that is not a results folder with summary.json and timelines.jsonl.
Needs only Debian's python3-matplotlib and python3-numpy (run with /usr/bin/python3).
"""
import argparse
import json
import os
import sys

sys.dont_write_bytecode = True  # keep plots/ free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import chart_contention  # noqa: E402
import chart_peak_rss  # noqa: E402
import chart_percall  # noqa: E402
import chart_placement  # noqa: E402
import chart_scaling  # noqa: E402
import chart_throughput  # noqa: E402
import chart_timeline  # noqa: E402
import chart_variants  # noqa: E402
import chart_versions  # noqa: E402
import data  # noqa: E402
import style  # noqa: E402

CHARTS = [chart_peak_rss, chart_timeline, chart_throughput, chart_percall, chart_scaling, chart_variants,
          chart_versions, chart_contention, chart_placement]
KINDS = [c.KIND for c in CHARTS]


class UsageError(Exception):
    pass


class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def parse(argv):
    p = Parser(prog="allocmark_plots.py", description="charts of an allocmark results folder")
    p.add_argument("dir", help="results folder (summary.json, timelines.jsonl, meta.json)")
    p.add_argument("--out", help="output folder (default DIR/charts)")
    p.add_argument("--format", default="png", help="png (default) or svg")
    p.add_argument("--only", help="comma-separated chart kinds: " + ",".join(KINDS))
    p.add_argument("--baseline", help="allocator throughput is normalised to (default glibc if present, else the first)")
    p.add_argument("--log", action="store_true", help="log scale for the normalised throughput in every panel")
    p.add_argument("--describe", metavar="FILE",
                   help="also write FILE: each chart's size in pixels, panels (title, axes, what each shows), "
                        "warnings and caption, and the skipped charts' reasons, as JSON")
    opts = p.parse_args(argv)
    if opts.format not in ("png", "svg"):
        raise UsageError("--format: unknown format '%s' (choose from png, svg)" % opts.format)
    if opts.only is not None:
        kinds = opts.only.split(",")
        for k in kinds:
            if k not in KINDS:
                raise UsageError("--only: unknown chart kind '%s' (choose from %s)" % (k, ", ".join(KINDS)))
        opts.only = kinds
    else:
        opts.only = KINDS
    if opts.baseline is not None and not opts.baseline:
        raise UsageError("--baseline: empty allocator name")
    if opts.describe is not None:
        if not opts.describe or os.path.isdir(opts.describe):
            raise UsageError("--describe: '%s' is not a file name (the description is one JSON file)" % opts.describe)
        parent = os.path.dirname(os.path.abspath(opts.describe))
        if not os.path.isdir(parent) or not os.access(parent, os.W_OK):
            raise UsageError("--describe %s: its folder %s does not exist or is not writable" % (opts.describe, parent))
    return opts


def main(argv):
    try:
        opts = parse(argv)
        run = data.Run(opts.dir)
        if opts.baseline and opts.baseline not in run.allocator_order(run.groups):
            raise UsageError("--baseline: allocator '%s' is not in %s (allocators: %s)"
                             % (opts.baseline, opts.dir, ", ".join(run.allocator_order(run.groups))))
    except (UsageError, data.DataError) as e:
        print("allocmark_plots: error: %s" % e, file=sys.stderr)
        return 2
    out = opts.out or os.path.join(opts.dir, "charts")
    try:
        style.output_folder(out)
    except style.OutputError as e:
        print("allocmark_plots: error: %s" % e, file=sys.stderr)
        return 2
    style.apply()
    written = 0
    failed = 0
    all_skipped = []
    for chart in CHARTS:
        if chart.KIND not in opts.only:
            continue
        try:
            files, skipped = chart.draw(run, opts, out, opts.format)
        except Exception as e:  # one broken chart must not hide the others; the exit code says so
            style.report_failure(chart.KIND, e)
            failed += 1
            continue
        all_skipped += skipped
        for reason in skipped:
            print("allocmark_plots: skipped %s" % reason, file=sys.stderr)
        for f in files:
            print(f)
        written += len(files)
    if not written:
        print("allocmark_plots: no chart for this run's data (reasons above)", file=sys.stderr)
    if opts.describe:
        try:
            with open(opts.describe, "w") as f:
                json.dump({"charts": style.DESCRIPTIONS, "skipped": all_skipped}, f, indent=1)
        except OSError as e:
            print("allocmark_plots: error: --describe %s: %s" % (opts.describe, e.strerror or e), file=sys.stderr)
            return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
