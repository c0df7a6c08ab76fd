#!/usr/bin/python3
"""Chart 7 (docs/charts.md): plots/compare_plots.py COMPARE.json --out DIR [--format png|svg]

COMPARE.json is `allocmark compare BEFORE AFTER --format json` (`allocmark compare --charts DIR`
writes it and runs this). The two results folders it names are read for their timelines and
meta.json. Prints each file written; a chart without data is skipped with one line saying why.
Exit 0 on success, 2 for bad flags or input."""
import argparse
import json
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import chart_compare  # noqa: E402
import data  # noqa: E402
import style  # noqa: E402


def main(argv):
    p = argparse.ArgumentParser(prog="compare_plots.py")
    p.add_argument("comparison")
    p.add_argument("--out", required=True)
    p.add_argument("--format", default="png", choices=("png", "svg"))
    p.add_argument("--quiet", action="store_true", help="print the files written to stderr, not stdout")
    opts = p.parse_args(argv)
    try:
        with open(opts.comparison) as f:
            comparison = json.load(f)
        before, after = data.Run(comparison["before"]), data.Run(comparison["after"])
    except (OSError, ValueError, KeyError, TypeError, data.DataError) as e:
        print("allocmark_plots: error: %s" % e, file=sys.stderr)
        return 2
    try:
        style.output_folder(opts.out)
    except style.OutputError as e:
        print("allocmark_plots: error: %s" % e, file=sys.stderr)
        return 2
    style.apply()
    # The same labels as data.Run's groups, so the overlays find their cells' timelines.
    for change in comparison.get("changes", []) + comparison.get("overlay", []):
        for key in data.LABELS + ("cell",):
            if key in change:
                change[key] = style.short(change[key])
    try:
        files, skipped = chart_compare.draw(comparison, before, after, opts.out, opts.format)
    except Exception as e:
        style.report_failure(chart_compare.KIND, e)
        return 1
    for reason in skipped:
        print("allocmark_plots: skipped %s" % reason, file=sys.stderr)
    for f in files:
        print(f, file=sys.stderr if opts.quiet else sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
