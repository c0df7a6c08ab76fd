"""Chart 1: how much RSS does each allocator hold at peak, against the live set, per phase?"""
import matplotlib.pyplot as plt

import bars
import data
import style

KIND = "peak_rss"
# Bars in one panel at most: a workload with more phases x allocators wraps its phases into rows
# of panels (sharing one scale per thread count) instead of widening the chart past the page.
MAX_BARS = 30


def chunks(phases, allocs):
    per_panel = max(1, MAX_BARS // max(1, len(allocs)))
    rows = -(-len(phases) // per_panel)
    # As even as the rows allow: 9 phases over two rows are 5 and 4, not 6 and 3.
    size = -(-len(phases) // rows)
    return [phases[i:i + size] for i in range(0, len(phases), size)]


HUGE_LABEL = "in huge pages (phase end)"


def draw(run, opts, out_dir, fmt):
    files, skipped = [], []
    groups = [g for g in run.ok_groups() if data.metric(g, "peak_rss_bytes")]
    if not groups:
        return files, ["peak_rss: no group in summary.json has peak_rss_bytes (no ok cell)"]
    live = run.phase_live()
    backends = {a: run.backend(a) for a in run.allocator_order()}
    for wl in run.ordered("workload", groups):
        files.append(_figure(run, out_dir, fmt, wl, [g for g in groups if g["workload"] == wl], live, backends))
    return files, skipped


def _figure(run, out_dir, fmt, wl, wg, live, backends):
    threads = run.ordered("threads", wg)
    phases = run.ordered("phase", wg)
    allocs = run.allocator_order(wg)
    parts = chunks(phases, allocs)
    widest = max(len(p) for p in parts)
    panels = [(t, part) for t in threads for part in parts]
    fig, axes = plt.subplots(len(panels), 1, squeeze=False,
                             figsize=(style.width(max(8.5, 1.8 + widest * len(allocs) * 0.36)), 1.4 + 2.9 * len(panels)))
    with_idle = all(idle is not None for reps in live.values() for _, idle in reps)
    floor_label = ("floor: idle RSS + peak live requested bytes (each repetition)" if with_idle
                   else "peak live requested bytes (each repetition)")
    below = []  # (phase, threads, allocator, ratio) where RSS above idle is under the live bytes
    drew_huge = False
    for row, (t, part) in enumerate(panels):
        ax = axes[row][0]
        tg = [g for g in wg if g["threads"] == t and g["phase"] in part]
        values = {(g["phase"], g["allocator"]): data.metric(g, "peak_rss_bytes") for g in tg}
        ratio = {(g["phase"], g["allocator"]): data.metric(g, "rss_above_idle_over_live") for g in tg}
        for (phase, alloc), r in ratio.items():
            if r and r[0] < 1.0:
                below.append((phase, t, alloc, r[0]))

        def label(phase, alloc):
            r = ratio.get((phase, alloc))
            return "x%.2f" % r[0] if r else ""

        where = bars.grouped(ax, part, allocs, values, backends, label, scale=run.axis("peak_rss_bytes").scale)
        # What of it is in transparent huge pages (at the phase end): hatched inside the bar, where any.
        huge = {(g["phase"], g["allocator"]): data.metric(g, "anon_huge_bytes") for g in tg}
        first_huge = True
        for key, (x, w) in where.items():
            h = huge.get(key)
            if h and h[0] > 0:
                ax.bar([x], [h[0] * run.axis("anon_huge_bytes").scale], w * 0.6, color="none", edgecolor="#222222",
                       hatch="////", linewidth=0.6, label=HUGE_LABEL if first_huge else None)
                first_huge = False
                drew_huge = True
        first = True
        for (phase, alloc), (x, w) in where.items():
            for peak_live, idle in live.get((wl, t, alloc, phase), []):
                floor = peak_live + (idle or 0) if with_idle else peak_live
                ax.hlines(style.mib(floor), x - w * 0.46, x + w * 0.46, colors="black", linewidth=1.2,
                          label=floor_label if first else None)
                first = False
        ax.set_ylabel(run.axis("peak_rss_bytes").label)
        ax.set_xlabel("phase")
        ax.set_title("%d thread%s%s" % (t, "" if t == 1 else "s", "" if len(parts) == 1 else
                                        ", phases %d-%d of %d" % (phases.index(part[0]) + 1, phases.index(part[-1]) + 1,
                                                                  len(phases))), fontsize=9)
        ax.margins(y=0.18)
        style.tag(ax, workload=wl, threads=t, phases=part)
    # One scale per thread count across its rows of phases.
    for t in threads:
        rows = [axes[i][0] for i, (pt, _) in enumerate(panels) if pt == t]
        top = max(a.get_ylim()[1] for a in rows)
        for a in rows:
            a.set_ylim(0, top)
    style.legend(fig, *style.legend_of(axes.flat))
    if below:
        worst = min(below, key=lambda b: b[3])
        style.notice(fig, "RSS above idle sits below the requested live bytes in %d phase group%s (down to x%.2f: %s, %s, "
                     "%dT): requested bytes the workload never wrote are not resident (untouched pages), and pages "
                     "already resident at idle (set-up's, freed) can serve the phase's blocks, so there the ticks "
                     "are not a floor and x < 1 is not an allocator beating it"
                     % (len(below), "" if len(below) == 1 else "s", worst[3], worst[2], worst[0], worst[1]))
    fig.suptitle("%s: how much RSS does each allocator hold at peak, above the live set?" % wl, fontsize=11)
    note = ("bars: median exact peak RSS per phase, whiskers min-max over repetitions; black ticks: %s; label: "
            "(peak RSS - idle RSS) / peak live, median (x1.00 is the floor)" % floor_label)
    if drew_huge:
        note += "; hatched: anonymous memory in transparent huge pages at the phase end (AnonHugePages), median"
    style.tag_figure(fig, below_floor=[{"phase": p, "threads": t, "allocator": a, "ratio": r} for p, t, a, r in below])
    path = "%s/peak_rss-%s.%s" % (out_dir, style.safe_name(wl), fmt)
    return style.finish(fig, run.meta, path, fmt, note)
