"""Chart 8: where does each allocator's memory land, per NUMA node, and is it local to the threads
that allocated it? Draws summary.json's node_groups (resident bytes per node from numa_maps, the
local fraction of sampled blocks from move_pages); computes nothing."""
import matplotlib.pyplot as plt

import bars
import data
import style

KIND = "placement"
# (metric in node_groups, axis label, scale to the axis unit, bar label format)
PANELS = (("numa_resident_bytes", "resident at phase end (MiB)", 1.0 / (1 << 20), "%.0f"),
          ("local_fraction", "sampled blocks on the allocating thread's node (%)", 100.0, "%.0f"))


def draw(run, opts, out_dir, fmt):
    groups = [g for g in run.summary.get("node_groups", []) if g.get("phase") != "(cell)" and g.get("metrics")
              and g.get("node") != "-"]
    if not groups:
        return [], ["placement: this run has no per-node figures (summary.json node_groups; records from before "
                    "issue 11 lack phases[].nodes)"]
    allocs = run.allocator_order(groups)
    backends = {a: run.backend(a) for a in allocs}
    workloads = run.ordered("workload", groups)
    width = min(16.0, max(10.0, 2.0 + 0.4 * len(allocs) * len(run.ordered("phase", groups))
                          * len(run.ordered("node", groups))))
    fig, axes = plt.subplots(len(workloads), len(PANELS), squeeze=False, figsize=(width, 1.3 + 2.8 * len(workloads)))
    for row, wl in enumerate(workloads):
        wg = [g for g in groups if g["workload"] == wl]
        for col, (metric, label, scale, text) in enumerate(PANELS):
            ax = axes[row][col]
            cats, values = [], {}
            for g in wg:
                cat = "%s\n%dT n%s" % (g["phase"], g["threads"], g["node"])
                if cat not in cats:
                    cats.append(cat)
                m = data.metric(g, metric)
                if m:
                    values[(cat, g["allocator"])] = tuple(v * scale for v in m)
            if not values:
                ax.text(0.5, 0.5, "no %s in summary.json" % metric, ha="center", va="center", transform=ax.transAxes)
                ax.set_axis_off()
                continue
            bars.grouped(ax, cats, allocs, values, backends,
                         lambda c, a: text % values[(c, a)][0] if (c, a) in values else "")
            ax.set_ylabel(label)
            ax.set_xlabel("phase, threads, node")
            ax.set_title(wl, fontsize=9)
            ax.margins(y=0.2)
            if row == 0 and col == len(PANELS) - 1:
                ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    fig.suptitle("Where does each allocator's memory land per NUMA node, and is it local to its threads?", fontsize=11)
    note = ("bars: medians per phase and node of numa_resident_bytes (/proc/PID/numa_maps at the phase end) and "
            "local_fraction (move_pages on sampled blocks), whiskers min-max over repetitions")
    path = "%s/placement.%s" % (out_dir, fmt)
    return [style.finish(fig, run.meta, path, fmt, note)], []
