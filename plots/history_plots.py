#!/usr/bin/python3
"""The trend page's charts (docs/history.md "The trend page"): plots/history_plots.py TREND.json --out DIR

TREND.json is what `allocmark history report` computes (harness/report/trend_page.cpp): per chart
the commit axis, and per panel (a phase) each commit's median and min-max and the change points'
commit ranges with their labels, in the unit to draw. This script only draws them. Prints each
file written; exit 0 on success, 1 when a chart failed, 2 for bad flags or input."""
import argparse
import json
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import matplotlib.pyplot as plt  # noqa: E402

import style  # noqa: E402

KIND = "history"
LINE = "#1f4e79"
BAND = "#9ecae1"
WORSE, BETTER = "#c0392b", "#1b6e20"
MAX_TICKS = 32  # commit labels drawn at most; every k-th beyond that (the table lists them all)
WIDTH_IN = 12.5
PANEL_HEIGHT_IN = 2.3


def _ticks(ax, chart):
    ticks = chart["ticks"]
    step = max(1, -(-len(ticks) // MAX_TICKS))
    shown = ticks[::-1][::step][::-1]  # the newest commit always labelled
    ax.set_xticks([t["x"] for t in shown])
    ax.set_xticklabels([t["label"] for t in shown], rotation=90, fontsize=7, family="monospace")
    ax.set_xlim(-0.6, max(chart["commits"] - 0.4, 0.6))


def _panel(ax, panel, chart):
    pts = panel["points"]
    xs = [p["x"] for p in pts]
    ax.fill_between(xs, [p["low"] for p in pts], [p["high"] for p in pts], color=BAND, alpha=0.6, linewidth=0,
                    step=None, label="min-max of the repetitions")
    ax.plot(xs, [p["median"] for p in pts], color=LINE, marker="o", markersize=3, linewidth=1.4, label="median")
    for c in panel["changes"]:
        colour = WORSE if c["worse"] else BETTER
        mid = (c["x_from"] + c["x_to"]) / 2.0
        ax.axvspan(c["x_from"], c["x_to"], color=colour, alpha=0.15, linewidth=0)
        ax.axvline(mid, color=colour, linestyle="--", linewidth=1)
        # Written at the top of the panel, on the side with room, over a white box: never over the line.
        right = mid > 0.65 * chart["commits"]
        ax.annotate(c["label"], xy=(mid, 0.97), xycoords=("data", "axes fraction"), xytext=(-5 if right else 5, 0),
                    textcoords="offset points", fontsize=8, color=colour, va="top", ha="right" if right else "left",
                    fontweight="bold", bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "edgecolor": "none",
                                             "alpha": 0.85})
    ax.set_title(style.short(panel["title"]), loc="left", fontsize=9)
    ax.set_ylabel(style.short(chart["ylabel"], 30))
    ax.margins(y=0.35)


def draw(chart, out_dir, fmt):
    panels = chart["panels"]
    fig, axes = plt.subplots(len(panels), 1, figsize=(WIDTH_IN, 0.9 + PANEL_HEIGHT_IN * len(panels)), sharex=True,
                             squeeze=False)
    for ax, panel in zip(axes[:, 0], panels):
        _panel(ax, panel, chart)
    _ticks(axes[-1, 0], chart)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper right", ncol=2, frameon=False, fontsize=8)
    fig.suptitle(style.short(chart["title"], 120), x=0.01, ha="left", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.3 / fig.get_figheight()))
    path = os.path.join(out_dir, "%s.%s" % (style.safe_name(chart["file"]), fmt))
    fig.savefig(path, format=fmt)
    plt.close(fig)
    return path


def main(argv):
    p = argparse.ArgumentParser(prog="history_plots.py")
    p.add_argument("trend")
    p.add_argument("--out", required=True)
    p.add_argument("--format", default="png", choices=("png", "svg"))
    opts = p.parse_args(argv)
    try:
        with open(opts.trend) as f:
            charts = json.load(f)["charts"]
        style.output_folder(opts.out)
    except (OSError, ValueError, KeyError, TypeError, style.OutputError) as e:
        print("allocmark_plots: error: %s" % e, file=sys.stderr)
        return 2
    style.apply()
    failed = False
    if not charts:
        print("allocmark_plots: skipped history: no series to draw", file=sys.stderr)
    for chart in charts:
        try:
            print(draw(chart, opts.out, opts.format))
        except Exception as e:  # one chart failing leaves the others drawn; the page names it
            style.report_failure("%s %s" % (KIND, chart.get("file")), e)
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
