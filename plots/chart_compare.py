"""Chart 7: two runs of the same cells (allocmark compare): what moved, by how much, with both
runs' spreads; and, for the cells whose RSS moved most, both runs' RSS over time overlaid.
Every figure comes from `allocmark compare --format json` (change, its range from both spreads,
direction by the gate's rule); this module only draws."""
import matplotlib.pyplot as plt

import style

KIND = "compare"
MAX_ROWS = 40
DIRECTION_COLOURS = {"worse": ("#f4a582", "#b2182b"), "better": ("#92c5de", "#2166ac")}
SAME = "#bbbbbb"
LARGE = 0.25  # a change this large (relative) is drawn in the darker shade


def _colour(change):
    pair = DIRECTION_COLOURS.get(change["direction"])
    if not pair:
        return SAME
    return pair[1] if abs(change["change"]) >= LARGE else pair[0]


def draw_changes(comparison, meta, out_dir, fmt):
    rows = [c for c in comparison["changes"] if c["direction"] in ("worse", "better", "same")]
    if not rows:
        return None, "compare: no cell is in both runs with a judgeable figure"
    moved = [c for c in rows if c["moved"]]
    shown = (moved + [c for c in rows if not c["moved"]])[:MAX_ROWS]
    shown.sort(key=lambda c: c["change"])
    fig, ax = plt.subplots(figsize=(10, 1.6 + 0.24 * len(shown)))
    ys = range(len(shown))
    pct = [100 * c["change"] for c in shown]
    lo = [100 * (c["change"] - c["change_low"]) for c in shown]
    hi = [100 * (c["change_high"] - c["change"]) for c in shown]
    ax.barh(list(ys), pct, color=[_colour(c) for c in shown], xerr=[lo, hi], ecolor="#555555", capsize=2)
    ax.set_yticks(list(ys))
    ax.set_yticklabels(["%s  %s" % (c["cell"], c["metric"]) for c in shown], fontsize=7)
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_xlabel("relative change of the median, second run against the first (%)")
    ax.set_title("What moved from %s to %s? %d of %d cell-phase figures moved"
                 % (comparison["before"], comparison["after"], comparison["moved"], len(rows)))
    note = ("red: worse, blue: better, by the gate's rule (band, one huge page, exact one-sided Mann-Whitney U; "
            "docs/gate.md); dark: |change| >= %d%%; grey: not moved; error bars: the change's range given both "
            "runs' min-max; for ops_per_s a negative change is worse" % int(LARGE * 100))
    if len(rows) > len(shown):
        note += "; %d unmoved rows not drawn (allocmark compare lists all)" % (len(rows) - len(shown))
    if comparison.get("machine_difference"):
        note += "; the machines differ: " + comparison["machine_difference"]
    return style.finish(fig, meta, "%s/compare-changes.%s" % (out_dir, fmt), fmt, note), None


def draw_overlays(comparison, before, after, out_dir, fmt):
    files, skipped = [], []
    if not comparison.get("overlay"):
        return files, ["compare overlay: no cell's RSS moved"]
    for cell in comparison["overlay"]:
        wl, t, alloc = cell["workload"], cell["threads"], cell["allocator"]
        fig, ax = plt.subplots(figsize=(9.5, 4.6))
        drawn = 0
        for run, name, colour in ((before, "first run", "#4d4d4d"), (after, "second run", "#d6604d")):
            reps = run.timelines(wl).get((wl, t, alloc), [])
            for i, r in enumerate(reps):
                ax.plot([p[0] for p in r["timeline"]], [style.mib(p[1]) for p in r["timeline"]], color=colour,
                        alpha=0.85 if i == 0 else 0.35, linewidth=1.6 if i == 0 else 0.8,
                        label="%s: %s (%d reps)" % (name, run.folder, len(reps)) if i == 0 else None)
                drawn += 1
        if not drawn:
            plt.close(fig)
            skipped.append("compare overlay %s %s t%d: no timeline in either run" % (alloc, wl, t))
            continue
        ax.set_xlabel("time since the worker started (ms)")
        ax.set_ylabel("RSS (MiB)")
        ax.set_ylim(bottom=0)
        ax.set_title("%s on %s, %d thread%s: RSS over time in both runs (%s %s %+.1f%%)"
                     % (alloc, wl, t, "" if t == 1 else "s", cell["phase"], cell["metric"], 100 * cell["change"]))
        ax.legend(loc="upper left", frameon=False)
        path = "%s/compare-rss-%s-%s-t%d.%s" % (out_dir, style.safe_name(alloc), style.safe_name(wl), t, fmt)
        files.append(style.finish(fig, after.meta, path, fmt,
                                  "every repetition of each run; RSS sampled by the driver from /proc/PID/statm"))
    return files, skipped


def draw(comparison, before, after, out_dir, fmt):
    files, skipped = [], []
    path, why = draw_changes(comparison, after.meta, out_dir, fmt)
    if path:
        files.append(path)
    else:
        skipped.append(why)
    more, why_not = draw_overlays(comparison, before, after, out_dir, fmt)
    return files + more, skipped + why_not
