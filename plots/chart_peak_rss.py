"""Chart 1: how much RSS does each allocator hold at peak, against the live set, per phase?"""
import matplotlib.pyplot as plt

import bars
import data
import style

KIND = "peak_rss"


def draw(run, opts, out_dir, fmt):
    files, skipped = [], []
    groups = [g for g in run.ok_groups() if data.metric(g, "peak_rss_bytes")]
    if not groups:
        return files, ["peak_rss: no group in summary.json has peak_rss_bytes (no ok cell)"]
    live = run.phase_live()
    backends = {a: run.backend(a) for a in run.allocator_order()}
    for wl in run.ordered("workload", groups):
        wg = [g for g in groups if g["workload"] == wl]
        threads = run.ordered("threads", wg)
        phases = run.ordered("phase", wg)
        allocs = run.allocator_order(wg)
        fig, axes = plt.subplots(len(threads), 1, figsize=(max(8.5, 1.0 + len(phases) * len(allocs) * 0.55),
                                                         1.2 + 2.9 * len(threads)), squeeze=False)
        for row, t in enumerate(threads):
            ax = axes[row][0]
            tg = [g for g in wg if g["threads"] == t]
            values = {(g["phase"], g["allocator"]): data.metric(g, "peak_rss_bytes") for g in tg}
            ratio = {(g["phase"], g["allocator"]): data.metric(g, "rss_above_idle_over_live") for g in tg}

            def label(phase, alloc):
                r = ratio.get((phase, alloc))
                return "x%.2f" % r[0] if r else ""

            where = bars.grouped(ax, phases, allocs, values, backends, label, scale=1 / (1024.0 * 1024.0))
            first = True
            for (phase, alloc), (x, w) in where.items():
                for lb in live.get((wl, t, alloc, phase), []):
                    ax.hlines(style.mib(lb), x - w * 0.46, x + w * 0.46, colors="black", linewidth=1.2,
                              label="peak live bytes (each repetition)" if first else None)
                    first = False
            ax.set_ylabel("peak RSS (MiB)")
            ax.set_xlabel("phase")
            ax.set_title("%s, %d thread%s" % (wl, t, "" if t == 1 else "s"), fontsize=9)
            ax.margins(y=0.18)
            if row == 0:
                ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
        fig.suptitle("%s: how much RSS does each allocator hold at peak, above the live set?" % wl,
                     fontsize=11)
        note = ("bars: median exact peak RSS per phase, whiskers min-max over repetitions; black ticks: peak live "
                "requested bytes of each repetition (the floor); label: (peak RSS - idle RSS) / peak live, median")
        path = "%s/peak_rss-%s.%s" % (out_dir, style.safe_name(wl), fmt)
        files.append(style.finish(fig, run.meta, path, fmt, note))
    return files, skipped
