"""Chart 8: where does each allocator's memory land, per NUMA node, and is it local to the threads
that allocated it? Draws summary.json's node_groups (resident bytes per node from numa_maps, the
local fraction of sampled blocks from move_pages); computes nothing."""
import matplotlib.pyplot as plt

import bars
import style

KIND = "placement"
# Metrics in node_groups, labelled and scaled by summary.json's metric table (data.Run.axis).
PANELS = ("numa_resident_bytes", "local_fraction")
MAX_COLUMNS = 4


def draw(run, opts, out_dir, fmt):
    groups = [g for g in run.summary.get("node_groups", []) if g.get("phase") != "(cell)" and g.get("metrics")
              and g.get("node") != "-"]
    if not groups:
        return [], ["placement: this run has no per-node figures (summary.json node_groups; records from before "
                    "issue 11 lack phases[].nodes)"]
    nodes = run.ordered("node", groups)
    if len(nodes) < 2:
        return [], ["placement: one NUMA node (node %s): every page is on the allocating thread's node, so there is "
                    "nothing to place (the NUMA lab gives a multi-node kernel: docs/lab.md)" % nodes[0]]
    allocs = run.allocator_order(groups)
    backends = {a: run.backend(a) for a in allocs}
    # Small multiples: a row of phases per (workload, threads, metric), the nodes along each panel.
    rows = []  # [(workload, threads, metric row, [phases])]
    for wl in run.ordered("workload", groups):
        wg = [g for g in groups if g["workload"] == wl]
        for t in run.ordered("threads", wg):
            phases = run.ordered("phase", [g for g in wg if g["threads"] == t])
            for panel in PANELS:
                for i in range(0, len(phases), MAX_COLUMNS):
                    rows.append((wl, t, panel, phases[i:i + MAX_COLUMNS]))
    cols = max(len(r[3]) for r in rows)
    fig, axes = plt.subplots(len(rows), cols, squeeze=False,
                             figsize=(style.width(1.2 + cols * max(3.0, 0.5 + 0.22 * len(nodes) * len(allocs))),
                                      1.4 + 2.5 * len(rows)))
    for r, (wl, t, metric, phases) in enumerate(rows):
        axis = run.axis(metric)
        for c in range(cols):
            ax = axes[r][c]
            if c >= len(phases):
                ax.set_visible(False)
                continue
            pg = [g for g in groups if g["workload"] == wl and g["threads"] == t and g["phase"] == phases[c]]
            cats, values = bars.values_of(pg, metric, lambda g: "n%s" % g["node"], axis.scale)
            if not values:
                bars.empty_panel(ax, metric)
                continue
            bars.grouped(ax, cats, allocs, values, backends,
                         lambda cat, a: axis.text(values[(cat, a)][0]) if (cat, a) in values else "")
            ax.set_title("%s, %dT, %s" % (wl, t, phases[c]), fontsize=9)
            ax.set_xlabel("node")
            if c == 0:
                ax.set_ylabel(axis.label)
            ax.margins(y=0.2)
            if metric == "local_fraction":
                ax.set_ylim(0, 118)
            style.tag(ax, workload=wl, threads=t, phase=phases[c], metric=metric)
    style.legend(fig, *style.legend_of(axes.flat))
    fig.suptitle("Where does each allocator's memory land per NUMA node, and is it local to its threads?", fontsize=11)
    note = ("bars: medians per phase and node of numa_resident_bytes (/proc/PID/numa_maps at the phase end) and "
            "local_fraction (move_pages on sampled blocks), whiskers min-max over repetitions; a node without sampled "
            "blocks has no local-fraction bar")
    path = "%s/placement.%s" % (out_dir, fmt)
    return [style.finish(fig, run.meta, path, fmt, note)], []
