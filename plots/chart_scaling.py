"""Chart 4: how does each allocator's throughput scale with threads?"""
import matplotlib.pyplot as plt

import data
import style

KIND = "scaling"


def draw(run, opts, out_dir, fmt):
    files, skipped = [], []
    groups = [g for g in run.ok_groups() if data.metric(g, "ops_per_s")]
    cpus = run.cpus_usable()
    backends = {a: run.backend(a) for a in run.allocator_order()}
    for wl in run.ordered("workload", groups):
        wg = [g for g in groups if g["workload"] == wl]
        threads = sorted(run.ordered("threads", wg))
        if len(threads) < 2:
            skipped.append("scaling: %s ran at one thread count only (%s)" % (wl, threads[0] if threads else "-"))
            continue
        phases = run.ordered("phase", wg)
        allocs = run.allocator_order(wg)
        # Phases side by side up to the capped width, then another pair of rows.
        cols = style.columns(len(phases), 3.4)
        blocks = -(-len(phases) // cols)
        fig, axes = plt.subplots(2 * blocks, cols, figsize=(style.width(max(7.0, 3.4 * cols + 1.8)), 0.6 + 6.0 * blocks),
                                 squeeze=False)
        for j in range(len(phases), blocks * cols):
            axes[2 * (j // cols)][j % cols].set_visible(False)
            axes[2 * (j // cols) + 1][j % cols].set_visible(False)
        drawn = set()
        for i, phase in enumerate(phases):
            top, bottom = axes[2 * (i // cols)][i % cols], axes[2 * (i // cols) + 1][i % cols]
            for alloc in allocs:
                pts = {g["threads"]: data.metric(g, "ops_per_s") for g in wg
                       if g["phase"] == phase and g["allocator"] == alloc}
                ts = [t for t in threads if t in pts]
                if not ts:
                    continue
                drawn.add(i)
                c = style.colour(alloc, backends.get(alloc))
                med = [pts[t][0] for t in ts]
                top.errorbar(ts, med, yerr=[[pts[t][0] - pts[t][1] for t in ts], [pts[t][2] - pts[t][0] for t in ts]],
                             color=c, marker="o", capsize=2, linewidth=1.5, label=alloc)
                # Parallel efficiency: median ops/s at t over (t / t0) x median ops/s at the lowest count t0.
                # summary.json has no efficiency field; this divides its medians.
                t0 = ts[0]
                eff = [pts[t][0] / (pts[t0][0] * t / t0) if pts[t0][0] else float("nan") for t in ts]
                bottom.plot(ts, eff, color=c, marker="o", linewidth=1.5, label=alloc)
                if cpus:
                    over = [i for i, t in enumerate(ts) if t > cpus]
                    for ax, ys in ((top, med), (bottom, eff)):
                        ax.scatter([ts[i] for i in over], [ys[i] for i in over], s=110, facecolors="none",
                                   edgecolors="black", linewidths=1.0, zorder=5)
            for ax in (top, bottom):
                ax.set_xticks(threads)
                ax.set_xticklabels([str(t) for t in threads])
                ax.set_xlabel("threads")
                if cpus and threads[-1] > cpus:
                    ax.axvspan(cpus + 0.5 * (min([t for t in threads if t > cpus]) - cpus), threads[-1] + 0.5,
                               color="#fbe3d6", zorder=0)
                    ax.text(threads[-1] + 0.45, ax.get_ylim()[1] if ax is top else 0.02, "oversubscribed\n(> %d usable CPUs)" % cpus,
                            ha="right", va="top" if ax is top else "bottom", fontsize=7, color="#a0522d")
            top.set_title("phase %s" % phase, fontsize=9)
            style.tag(top, workload=wl, phase=phase)
            top.set_ylabel("%s (median, min-max)" % run.axis("ops_per_s").label)
            style.si_axis(top)
            bottom.set_ylabel("parallel efficiency (1 = linear)")
            bottom.axhline(1.0, color="black", linewidth=0.6)
            bottom.set_ylim(bottom=0)
        style.legend(fig, *style.legend_of([a for a in axes.flat if a.get_visible()]))
        fig.suptitle("%s: how does throughput scale with threads?" % wl, fontsize=11)
        note = ("efficiency = median ops/s at t / (t / t0 x median ops/s at the lowest thread count t0), from "
                "summary.json medians; circled points: more threads than the %s usable CPUs (oversubscribed)"
                % (cpus if cpus else "?"))
        path = "%s/scaling-%s.%s" % (out_dir, style.safe_name(wl), fmt)
        files.append(style.finish(fig, run.meta, path, fmt, note))
    return files, skipped
