"""Chart 8: where does each allocator's memory land, per NUMA node, and is it local to the threads
that allocated it? Draws summary.json's node_groups (resident bytes per node from numa_maps, the
local fraction of sampled blocks from move_pages); computes nothing."""
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
    nodes = run.ordered("node", groups)
    if len(nodes) < 2:
        return [], ["placement: one NUMA node (node %s): every page is on the allocating thread's node, so there is "
                    "nothing to place (the NUMA lab gives a multi-node kernel: docs/lab.md)" % nodes[0]]
    allocs = run.allocator_order(groups)
    backends = {a: run.backend(a) for a in allocs}
    width = style.width(max(10.0, 2.0 + 0.4 * len(allocs) * len(run.ordered("phase", groups)) * len(nodes)))
    fig = bars.metric_grid(groups, PANELS, lambda g: "%s\n%dT n%s" % (g["phase"], g["threads"], g["node"]),
                           "phase, threads, node", allocs, backends, width)
    fig.suptitle("Where does each allocator's memory land per NUMA node, and is it local to its threads?", fontsize=11)
    note = ("bars: medians per phase and node of numa_resident_bytes (/proc/PID/numa_maps at the phase end) and "
            "local_fraction (move_pages on sampled blocks), whiskers min-max over repetitions")
    path = "%s/placement.%s" % (out_dir, fmt)
    return [style.finish(fig, run.meta, path, fmt, note)], []
