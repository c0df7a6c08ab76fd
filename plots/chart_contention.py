"""Chart 6: where do threads wait for allocator locks, and how often does a lock acquisition wait?"""
import bars
import data
import style

KIND = "contention"
# (metric in summary.json, axis label, scale to the axis unit, bar label format)
PANELS = (("lock_wait_s", "lock wait (ms, summed over threads)", 1e3, "%.3g"),
          ("contended_share", "contended acquisitions (% of all)", 100.0, "%.2g%%"))


def draw(run, opts, out_dir, fmt):
    groups = run.ok_groups()
    with_wait = [g for g in groups if data.metric(g, "lock_wait_s")]
    allocs_all = run.allocator_order(groups)
    skipped = []
    # Lock counters are the allocator's, process-wide: there is no per-node lock figure to split.
    # Per-node placement (resident bytes, local fraction) is the placement chart.
    skipped.append("contention per NUMA node: allocator lock counters are process-wide, not per node; "
                   "per-node memory and locality are in the placement chart")
    if not with_wait:
        return [], skipped + ["contention: no lock_wait_s in summary.json (only jemalloc and numap count lock waits; "
                              "allocators in this run: %s)" % ", ".join(allocs_all)]
    allocs = run.allocator_order(with_wait)
    without = [a for a in allocs_all if a not in allocs]
    backends = {a: run.backend(a) for a in allocs_all}
    width = min(16.0, max(10.0, 2.0 + 0.5 * len(allocs) * len(run.ordered("phase", with_wait))
                          * len(run.ordered("threads", with_wait))))
    fig = bars.metric_grid(with_wait, PANELS, lambda g: "%s\n%dT" % (g["phase"], g["threads"]), "phase, threads",
                           allocs, backends, width)
    fig.suptitle("Where do threads wait for allocator locks, and how often does an acquisition wait?", fontsize=11)
    note = ("bars: medians per phase of lock_wait_s and contended_share (num_wait / num_ops of the allocator's "
            "lock counters), whiskers min-max over repetitions")
    if without:
        note += "; not shown (expose no lock counters): " + ", ".join(without)
    path = "%s/contention.%s" % (out_dir, fmt)
    return [style.finish(fig, run.meta, path, fmt, note)], skipped
