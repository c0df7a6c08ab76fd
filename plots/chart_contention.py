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
# Plain panels: metrics in summary.json, each labelled, scaled and written as its row of the metric
# table says (data.Run.axis).
RATES = ("vol_ctx_switches_per_mop", "runqueue_wait_share")
LOCKS = ("lock_wait_s", "contended_share")


def _category(g):
    return "%s\n%dT" % (g["phase"], g["threads"])


def _node_category(g):
    return "%s\n%dT n%s" % (g["phase"], g["threads"], g["node"])


def _values(groups, metric, scale=1.0, category=_category):
    return bars.values_of(groups, metric, category, scale)


def _empty(ax, what):
    bars.empty_panel(ax, what)


def _tail_panel(ax, groups, allocs, backends, prefix, label, category=_category):
    """p50, p99 and p99.9 of one call as a range per (category, allocator) on a log axis: a dot at
    p50, a dash at p99, a triangle at p99.9 (median over repetitions; whiskers: p99.9's min-max)."""
    cats, tail = _values(groups, prefix + "_p999_ns", category=category)
    if not tail:
        return _empty(ax, prefix + "_p999_ns")
    _, p50 = _values(groups, prefix + "_p50_ns", category=category)
    _, p99 = _values(groups, prefix + "_p99_ns", category=category)
    n = max(1, len(allocs))
    step = 0.8 / n
    for i, alloc in enumerate(allocs):
        colour = style.colour(alloc, backends.get(alloc))
        for c, cat in enumerate(cats):
            top = tail.get((cat, alloc))
            if top is None:
                continue
            x = c - 0.4 + step * (i + 0.5)
            low = (p50.get((cat, alloc)) or top)[0]
            ax.vlines(x, low, top[0], color=colour, linewidth=2.2, alpha=0.55)
            ax.errorbar([x], [top[0]], yerr=[[max(0.0, top[0] - top[1])], [max(0.0, top[2] - top[0])]], fmt="^",
                        color=colour, markersize=5, capsize=2, elinewidth=0.8, label=alloc)
            if (cat, alloc) in p50:
                ax.plot([x], [p50[(cat, alloc)][0]], "o", color=colour, markersize=4)
            if (cat, alloc) in p99:
                ax.plot([x], [p99[(cat, alloc)][0]], "_", color="#111111", markersize=9, markeredgewidth=1.4)
    ax.set_xticks(range(len(cats)))
    ax.set_xticklabels(cats)
    ax.set_xlim(-0.6, len(cats) - 0.4)
    style.log_axis(ax)
    ax.set_ylabel(label)


def _plain_panel(ax, groups, allocs, backends, axis):
    cats, values = _values(groups, axis.name, axis.scale)
    if not values:
        return _empty(ax, axis.name)
    bars.grouped(ax, cats, allocs, values, backends, lambda c, a: axis.text(values[(c, a)][0]) if (c, a) in values else "")
    ax.set_ylabel(axis.label)
    if axis.si:
        style.si_axis(ax)


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
    note = ("p50 (dot) to p99.9 (triangle), dash p99, of the calls timed on the node's CPUs (each thread's calls count on "
            "the node of its last timed call); medians per phase over repetitions, whiskers min-max; "
            "lock counters, sleeps and run-queue wait are the process's, in contention-WORKLOAD.%s" % fmt)
    path = "%s/contention-nodes.%s" % (out_dir, fmt)
    return [style.finish(fig, run.meta, path, fmt, note)], []


# Above this share of runnable time spent waiting for a CPU, what the threads waited for was the
# scheduler, not the allocator.
RUNQUEUE_DOMINATES = 0.5


def warnings_of(groups, cpus):
    """What makes this workload's figures the scheduler's: more threads than usable CPUs, or run-queue
    wait above half of the runnable time."""
    out = []
    over = sorted({g["threads"] for g in groups if cpus and g["threads"] > cpus})
    if over:
        out.append("%s thread%s on %d usable CPUs (oversubscribed): latencies, sleeps and lock waits there measure "
                   "time-slicing by the scheduler as much as the allocator"
                   % (", ".join(str(t) for t in over), "" if over == [1] else "s", cpus))
    waits = [(data.metric(g, "runqueue_wait_share")[0], g) for g in groups if data.metric(g, "runqueue_wait_share")]
    dominated = [(w, g) for w, g in waits if w > RUNQUEUE_DOMINATES]
    if dominated:
        worst, g = max(dominated, key=lambda wg: wg[0])
        out.append("run-queue wait above %d%% of runnable time in %d of %d phase groups (up to %.0f%%: %s, %s, %dT): "
                   "threads waited for a CPU, not for the allocator"
                   % (RUNQUEUE_DOMINATES * 100, len(dominated), len(waits), worst * 100, g["allocator"], g["phase"],
                      g["threads"]))
    return out


def draw(run, opts, out_dir, fmt):
    groups = run.ok_groups()
    node_paths, skipped = _draw_nodes(run, out_dir, fmt)
    names = [p + "_p999_ns" for _, p, _ in TAILS] + list(RATES) + list(LOCKS)
    # Phases without operations (idle) made no calls to time, and their few runnable moments say nothing.
    shown = [g for g in groups if any(data.metric(g, m) for m in names) and (data.metric(g, "ops_per_s") or (0,))[0] > 0]
    if not shown:
        return [], skipped + ["contention: summary.json has none of %s" % ", ".join(names)]
    allocs = run.allocator_order(shown)
    backends = {a: run.backend(a) for a in allocs}
    cpus = run.cpus_usable()
    files = []
    for wl in run.ordered("workload", shown):
        files.append(_workload_figure(run, out_dir, fmt, wl, [g for g in shown if g["workload"] == wl], allocs,
                                      backends, cpus))
    return files + node_paths, skipped


def _workload_figure(run, out_dir, fmt, wl, wg, allocs, backends, cpus):
    """One workload: a panel per figure (malloc and free latency, sleeps, run-queue wait, lock
    counters where some allocator keeps them), wrapped into rows at the capped width."""
    with_locks = any(data.metric(g, m) for g in wg for m in LOCKS)
    panels = [("tail",) + t for t in TAILS] + [("plain", m) for m in RATES] + \
        ([("plain", m) for m in LOCKS] if with_locks else [])
    # A figure no group of this workload has (call latency where the calls happen inside a library
    # allocmark does not instrument, or are timed by the workload itself) is named in the caption,
    # not drawn as an empty panel.
    def metric_of(panel):
        return panel[2] + "_p999_ns" if panel[0] == "tail" else panel[1]

    absent = [p for p in panels if not any(data.metric(g, metric_of(p)) for g in wg)]
    panels = [p for p in panels if p not in absent]
    allocs = [a for a in allocs if any(g["allocator"] == a for g in wg)]
    cats = len(run.ordered("phase", wg)) * len(run.ordered("threads", wg))
    # At least two panels to a row: a wide workload's bars get narrower rather than its figure taller.
    panel_width = min((style.MAX_WIDTH_IN - 1.6) / 2, max(style.PANEL_MIN_WIDTH_IN, 1.0 + 0.17 * cats * len(allocs)))
    cols = min(3, style.columns(len(panels), panel_width))
    rows = -(-len(panels) // cols)
    cols = -(-len(panels) // rows)  # as even as the rows allow: four panels are 2 x 2, not 3 + 1
    fig, axes = plt.subplots(rows, cols, squeeze=False, figsize=(style.width(0.6 + panel_width * cols), 1.6 + 3.0 * rows))
    for i, panel in enumerate(panels):
        ax = axes[i // cols][i % cols]
        if panel[0] == "tail":
            _tail_panel(ax, wg, allocs, backends, panel[2], panel[3])
            title = "%s call latency" % panel[1]
        else:
            axis = run.axis(panel[1])
            _plain_panel(ax, wg, allocs, backends, axis)
            title = axis.label
        if not ax.axison:
            continue
        ax.set_xlabel("phase, threads")
        ax.set_title(title, fontsize=9)
        ax.margins(y=0.2)
        if panel[0] == "plain":  # counts and shares start at 0 (an all-zero panel too)
            top = ax.get_ylim()[1]
            ax.set_ylim(0, top if top > 0 else 1)
        ax.tick_params(axis="x", labelsize=7 if cats > 6 else 8)
        style.tag(ax, workload=wl, metric=panel[2] if panel[0] == "tail" else panel[1])
    for j in range(len(panels), rows * cols):
        axes[j // cols][j % cols].set_visible(False)
    style.legend(fig, *style.legend_of([a for a in axes.flat if a.get_visible()]))
    for w in warnings_of(wg, cpus):
        style.warn(fig, w)
    fig.suptitle("%s: where do threads wait in the allocator? Call latency, sleeps and run-queue wait%s"
                 % (wl, "; lock counters where kept" if with_locks else ""), fontsize=11)
    note = ("latency: p50 (dot) to p99.9 (triangle, whiskers its min-max over repetitions), dash p99, of sampled "
            "malloc/free calls (one in N per thread), medians per phase over repetitions; "
            if any(p[0] == "tail" for p in panels) else "")
    note += "bars: medians, whiskers min-max; phases without operations (idle) left out"
    if absent:
        note += "; not recorded for this workload: %s (results.jsonl phases[].latency_absent says why)" % ", ".join(
            "%s call latency" % p[1] if p[0] == "tail" else p[1] for p in absent)
    if with_locks:
        lockless = [a for a in allocs if not any(data.metric(g, "lock_wait_s") for g in wg if g["allocator"] == a)]
        if lockless:
            note += "; no lock counters: " + ", ".join(lockless)
    path = "%s/contention-%s.%s" % (out_dir, style.safe_name(wl), fmt)
    return style.finish(fig, run.meta, path, fmt, note)
