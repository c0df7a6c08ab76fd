"""Chart 6: where do threads wait for allocator locks?"""
import matplotlib.pyplot as plt

import bars
import data
import style

KIND = "contention"


def draw(run, opts, out_dir, fmt):
    groups = run.ok_groups()
    with_wait = [g for g in groups if data.metric(g, "lock_wait_s")]
    allocs_all = run.allocator_order(groups)
    if not with_wait:
        return [], ["contention: no lock_wait_s in summary.json (only jemalloc counts lock waits; allocators "
                    "in this run: %s)" % ", ".join(allocs_all)]
    allocs = run.allocator_order(with_wait)
    without = [a for a in allocs_all if a not in allocs]
    backends = {a: run.backend(a) for a in allocs_all}
    workloads = run.ordered("workload", with_wait)
    fig, axes = plt.subplots(len(workloads), 1, squeeze=False,
                             figsize=(min(12.0, max(8.0, 1.5 + 0.3 * len(allocs) * len(run.ordered("phase", with_wait))
                                          * len(run.ordered("threads", with_wait)))), 1.3 + 2.8 * len(workloads)))
    for row, wl in enumerate(workloads):
        ax = axes[row][0]
        wg = [g for g in with_wait if g["workload"] == wl]
        cats, values = [], {}
        for g in wg:
            cat = "%s\n%dT" % (g["phase"], g["threads"])
            if cat not in cats:
                cats.append(cat)
            med, lo, hi = data.metric(g, "lock_wait_s")
            values[(cat, g["allocator"])] = (med * 1e3, lo * 1e3, hi * 1e3)
        bars.grouped(ax, cats, allocs, values, backends,
                     lambda c, a: "%.3g" % values[(c, a)][0] if (c, a) in values else "")
        ax.set_ylabel("lock wait (ms, summed over threads)")
        ax.set_xlabel("phase, threads")
        ax.set_title(wl, fontsize=9)
        ax.margins(y=0.2)
        if row == 0:
            ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    fig.suptitle("Where do threads wait for allocator locks?", fontsize=11)
    note = "bars: median lock_wait_s per phase, whiskers min-max over repetitions"
    if without:
        note += "; not shown (expose no lock counters): " + ", ".join(without)
    path = "%s/contention.%s" % (out_dir, fmt)
    return [style.finish(fig, run.meta, path, fmt, note)], []
