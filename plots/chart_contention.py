"""Chart 6: where do threads wait in the allocator? Call latency tails for every backend, sleeps and
run-queue wait, and the lock counters of the allocators that keep them."""
import matplotlib.pyplot as plt

import bars
import data
import style

KIND = "contention"
# Latency panels: bars are p99.9, markers p50 (dot) and p99 (bar) of the same calls.
# (kind, metric prefix, axis label)
TAILS = (("malloc", "alloc", "malloc latency (ns, log)"),
         ("free", "free", "free latency (ns, log)"))
# Plain panels: (metric in summary.json, axis label, scale to the axis unit, bar label format)
RATES = (("vol_ctx_switches_per_mop", "voluntary ctx switches per Mop", 1.0, "%.3g"),
         ("runqueue_wait_share", "run-queue wait (% of runnable time)", 100.0, "%.2g%%"))
LOCKS = (("lock_wait_s", "lock wait (ms, summed over threads)", 1e3, "%.3g"),
         ("contended_share", "contended acquisitions (% of all)", 100.0, "%.2g%%"))


def _category(g):
    return "%s\n%dT" % (g["phase"], g["threads"])


def _node_category(g):
    return "%s\n%dT n%s" % (g["phase"], g["threads"], g["node"])


def _values(groups, metric, scale=1.0, category=_category):
    return bars.values_of(groups, metric, category, scale)


def _empty(ax, what):
    bars.empty_panel(ax, what)


def _tail_panel(ax, groups, allocs, backends, prefix, label, category=_category):
    cats, tail = _values(groups, prefix + "_p999_ns", category=category)
    if not tail:
        return _empty(ax, prefix + "_p999_ns")
    where = bars.grouped(ax, cats, allocs, tail, backends)
    for metric, marker in ((prefix + "_p50_ns", "o"), (prefix + "_p99_ns", "_")):
        _, vals = _values(groups, metric, category=category)
        pts = [(where[k][0], v[0]) for k, v in vals.items() if k in where]
        if pts:
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], marker=marker, s=14, color="#111111", zorder=3,
                       linewidths=1.2)
    ax.set_yscale("log")
    ax.set_ylabel(label)


def _plain_panel(ax, groups, allocs, backends, metric, label, scale, text):
    cats, values = _values(groups, metric, scale)
    if not values:
        return _empty(ax, metric)
    bars.grouped(ax, cats, allocs, values, backends, lambda c, a: text % values[(c, a)][0] if (c, a) in values else "")
    ax.set_ylabel(label)


def _legend_beside(fig, axes, allocs):
    """One legend for the figure, beside the first row's last panel."""
    legend = {}
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            legend.setdefault(label, handle)
    axes[0][-1].legend([legend[a] for a in allocs if a in legend], [a for a in allocs if a in legend],
                       loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)


def _draw_nodes(run, out_dir, fmt):
    """contention-nodes: the latency panels split by NUMA node (summary.json node_groups carry the
    latencies timed on each node's CPUs). (paths, skipped)."""
    names = [p + "_p999_ns" for _, p, _ in TAILS]
    groups = [g for g in run.summary.get("node_groups", []) if g.get("phase") != "(cell)" and g.get("node") != "-"
              and any(data.metric(g, m) for m in names)]
    nodes = run.ordered("node", groups)
    if len(nodes) < 2:
        why = ("one node in these results, so the chart above is that node's"
               if nodes else "no call latency per node in summary.json node_groups (records from before it was recorded)")
        return [], ["contention per NUMA node: " + why]
    allocs = run.allocator_order(groups)
    backends = {a: run.backend(a) for a in allocs}
    workloads = run.ordered("workload", groups)
    per_panel = 0.3 * len(allocs) * len(run.ordered("phase", groups)) * len(nodes)
    width = min(30.0, max(12.0, 2.0 + len(TAILS) * per_panel))
    fig, axes = plt.subplots(len(workloads), len(TAILS), squeeze=False, figsize=(width, 1.5 + 3.0 * len(workloads)))
    for row, wl in enumerate(workloads):
        for col, (_, prefix, label) in enumerate(TAILS):
            ax = axes[row][col]
            _tail_panel(ax, [g for g in groups if g["workload"] == wl], allocs, backends, prefix, label, _node_category)
            if ax.axison:
                ax.set_xlabel("phase, threads, node")
                ax.set_title(wl, fontsize=9)
                ax.tick_params(axis="x", labelsize=7)
    _legend_beside(fig, axes, allocs)
    fig.suptitle("Where do threads wait in the allocator, per NUMA node? Call latency of the threads on each node", fontsize=11)
    note = ("bars p99.9, dots p50, dashes p99 of the calls timed on the node's CPUs (each thread's calls count on "
            "the node of its last timed call); medians per phase over repetitions, whiskers min-max; "
            "lock counters, sleeps and run-queue wait are the process's, in contention.%s" % fmt)
    path = "%s/contention-nodes.%s" % (out_dir, fmt)
    return [style.finish(fig, run.meta, path, fmt, note)], []


def draw(run, opts, out_dir, fmt):
    groups = run.ok_groups()
    node_paths, skipped = _draw_nodes(run, out_dir, fmt)
    names = [p + "_p999_ns" for _, p, _ in TAILS] + [m for m, *_ in RATES] + [m for m, *_ in LOCKS]
    shown = [g for g in groups if any(data.metric(g, m) for m in names)]
    if not shown:
        return [], skipped + ["contention: summary.json has none of %s" % ", ".join(names)]
    with_locks = any(data.metric(g, "lock_wait_s") for g in shown)
    panels = [("tail",) + t for t in TAILS] + [("plain",) + r for r in RATES] + \
        ([("plain",) + l for l in LOCKS] if with_locks else [])
    allocs = run.allocator_order(shown)
    backends = {a: run.backend(a) for a in allocs}
    workloads = run.ordered("workload", shown)
    per_panel = 0.35 * len(allocs) * len(run.ordered("phase", shown)) * len(run.ordered("threads", shown))
    width = min(30.0, max(14.0, 2.0 + len(panels) * max(2.6, per_panel)))
    fig, axes = plt.subplots(len(workloads), len(panels), squeeze=False, figsize=(width, 1.5 + 3.0 * len(workloads)))
    for row, wl in enumerate(workloads):
        wg = [g for g in shown if g["workload"] == wl]
        for col, panel in enumerate(panels):
            ax = axes[row][col]
            if panel[0] == "tail":
                _tail_panel(ax, wg, allocs, backends, panel[2], panel[3])
            else:
                _plain_panel(ax, wg, allocs, backends, *panel[1:])
            if not ax.axison:
                continue
            ax.set_xlabel("phase, threads")
            ax.set_title(wl, fontsize=9)
            ax.margins(y=0.2)
            ax.tick_params(axis="x", labelsize=7)

    # One legend for the figure: the lock panels have only the allocators that keep lock counters.
    _legend_beside(fig, axes, allocs)
    fig.suptitle("Where do threads wait in the allocator? Call latency tails, sleeps and run-queue wait for every "
                 "allocator; lock counters where kept", fontsize=11)
    note = ("latency: bars p99.9, dots p50, dashes p99 of sampled malloc/free calls (one in N per thread); "
            "medians per phase over repetitions, whiskers min-max")
    if with_locks:
        lockless = [a for a in allocs if not any(data.metric(g, "lock_wait_s") for g in shown if g["allocator"] == a)]
        if lockless:
            note += "; no lock counters: " + ", ".join(lockless)
    path = "%s/contention.%s" % (out_dir, fmt)
    return [style.finish(fig, run.meta, path, fmt, note)] + node_paths, skipped
