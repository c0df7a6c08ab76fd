"""Chart 3: how fast is each allocator, relative to a baseline allocator?"""
import matplotlib.pyplot as plt

import bars
import data
import style

KIND = "throughput"


def baseline_of(run, wanted):
    allocs = run.allocator_order()
    if wanted:
        return wanted if wanted in allocs else None
    return "glibc" if "glibc" in allocs else (allocs[0] if allocs else None)


def draw(run, opts, out_dir, fmt):
    groups = [g for g in run.ok_groups() if data.metric(g, "ops_per_s")]
    allocs = run.allocator_order(groups)
    if len(allocs) < 2:
        return [], ["throughput: needs at least two allocators with ops_per_s to normalise (run has %s)"
                    % (", ".join(allocs) or "none")]
    base = baseline_of(run, opts.baseline)
    if base is None:
        return [], ["throughput: baseline allocator '%s' is not in this run (allocators: %s)"
                    % (opts.baseline, ", ".join(allocs))]
    backends = {a: run.backend(a) for a in allocs}
    threads = run.ordered("threads", groups)
    fig, axes = plt.subplots(len(threads), 1, squeeze=False,
                             figsize=(min(12.0, max(8.0, 1.5 + 0.22 * len(allocs) * len(run.ordered("phase", groups))
                                          * len(run.ordered("workload", groups)))), 1.3 + 3.0 * len(threads)))
    drawn = False
    for row, t in enumerate(threads):
        ax = axes[row][0]
        tg = [g for g in groups if g["threads"] == t]
        base_med = {(g["workload"], g["phase"]): data.metric(g, "ops_per_s")[0]
                    for g in tg if g["allocator"] == base}
        cats, values = [], {}
        for g in tg:
            b = base_med.get((g["workload"], g["phase"]))
            if not b:
                continue
            cat = "%s\n%s" % (g["workload"], g["phase"])
            if cat not in cats:
                cats.append(cat)
            med, lo, hi = data.metric(g, "ops_per_s")
            # The one division this chart makes: two medians of summary.json (it has no ratio field).
            values[(cat, g["allocator"])] = (med / b, lo / b, hi / b)
        if not cats:
            ax.set_visible(False)
            continue
        drawn = True
        bars.grouped(ax, cats, allocs, values, backends,
                     lambda c, a: "%.2f" % values[(c, a)][0] if a != base else "")
        ax.axhline(1.0, color="black", linewidth=0.8)
        if opts.log:
            ax.set_yscale("log")
        ax.set_ylabel("ops/s relative to %s (x)" % base)
        ax.set_title("%d thread%s" % (t, "" if t == 1 else "s"), fontsize=9)
        ax.margins(y=0.15)
        if row == 0:
            ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    if not drawn:
        plt.close(fig)
        return [], ["throughput: the baseline %s has no ops_per_s in any workload and phase" % base]
    fig.suptitle("How fast is each allocator relative to %s? (ops/s per phase, %s = 1)" % (base, base), fontsize=11)
    note = ("bars: median ops/s / median ops/s of %s (both from summary.json); whiskers: the allocator's min and max "
            "over repetitions divided by the same baseline median%s" % (base, "; log scale" if opts.log else ""))
    path = "%s/throughput.%s" % (out_dir, fmt)
    return [style.finish(fig, run.meta, path, fmt, note)], []
