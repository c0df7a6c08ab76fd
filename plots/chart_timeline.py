"""Chart 2: how does each allocator's RSS move through the phases, and does it return memory?

One panel per allocator, each on its own clock: time 0 is that repetition's first phase start and
the line ends at its last phase's end, so a faster allocator is not drawn inside another's phases
and the process exit (the worker tearing down) is not drawn as memory returned. After it, the bold
repetition's return curve (the worker's own RSS reads during its idle settle), where it has one."""
import matplotlib.pyplot as plt

import data
import style

KIND = "timeline"
PHASE_SHADES = ("#f2f2f2", "#e3e3e3")


def _bold_rep(cells, target):
    """The repetition whose cell peak RSS is closest to `target` (a summary.json median)."""
    with_peak = [c for c in cells if c.get("peak_rss_bytes") is not None]
    if target is None or not with_peak:
        return cells[0]
    return min(with_peak, key=lambda c: (abs(c["peak_rss_bytes"] - target), c.get("rep") or 0))


def phase_span(cell):
    """(first phase start, last phase end) in ms since the worker started, or None."""
    starts = [p["start_ms"] for p in cell.get("phases") or [] if p.get("start_ms") is not None]
    ends = [p["end_ms"] for p in cell.get("phases") or [] if p.get("end_ms") is not None]
    if not starts or not ends:
        return None
    return min(starts), max(ends)


def _interpolate(points, t):
    for (t0, v0), (t1, v1) in zip(points, points[1:]):
        if t0 <= t <= t1:
            return v0 if t1 == t0 else v0 + (v1 - v0) * (t - t0) / (t1 - t0)
    return points[0][1] if t < points[0][0] else points[-1][1]


def aligned(cell):
    """The cell's RSS timeline on its own phase clock: [(ms since its first phase start, bytes)],
    from that start to its last phase's end (values there interpolated between samples)."""
    points = [(p[0], p[1]) for p in cell["timeline"]]
    span = phase_span(cell)
    if span is None or not points:
        return points
    start, end = span
    inside = [(t, v) for t, v in points if start < t < end]
    return [(0.0, _interpolate(points, start))] + [(t - start, v) for t, v in inside] + \
        [(end - start, _interpolate(points, end))]


def draw(run, opts, out_dir, fmt):
    files, skipped = [], []
    cells = run.timelines()
    if not cells:
        return files, ["timeline: no ok cell in results.jsonl has an RSS timeline"]
    groups = run.ok_groups()
    order = run.allocator_order()
    backends = {a: run.backend(a) for a in order}
    keys = list(cells.keys())
    for wl in [w for w in run.ordered("workload", groups) if any(k[0] == w for k in keys)] + \
            [w for w in dict.fromkeys(k[0] for k in keys) if w not in run.ordered("workload", groups)]:
        for t in dict.fromkeys(k[1] for k in keys if k[0] == wl):
            allocs = [k[2] for k in keys if k[0] == wl and k[1] == t]
            allocs.sort(key=lambda a: order.index(a) if a in order else len(order))
            files.append(_figure(run, out_dir, fmt, wl, t, allocs, cells, groups, backends))
    return files, skipped


def _figure(run, out_dir, fmt, wl, t, allocs, cells, groups, backends):
    fig, axes = plt.subplots(len(allocs), 1, squeeze=False, sharex=True, sharey=True,
                             figsize=(style.width(11.0), 1.6 + 2.1 * len(allocs)))
    # One scale that holds the RSS lines and the live bytes drawn over them (hash_build requests more
    # than it touches: its live line sits above its RSS).
    ymax = max([p[1] for a in allocs for r in cells[(wl, t, a)] for p in r["timeline"]] +
               [ph.get(k) or 0 for a in allocs for r in cells[(wl, t, a)] for ph in r.get("phases") or []
                for k in ("start_live_bytes", "end_live_bytes", "peak_live_bytes")] +
               [p[1] for a in allocs for r in cells[(wl, t, a)] for p in r.get("return_curve") or []]) or 1
    for row, alloc in enumerate(allocs):
        ax = axes[row][0]
        reps = cells[(wl, t, alloc)]
        # The bold repetition: the one whose peak RSS is closest to the highest phase median of
        # exact peak RSS in summary.json (the cell's peak).
        meds = [data.metric(g, "peak_rss_bytes") for g in groups
                if g["workload"] == wl and g["threads"] == t and g["allocator"] == alloc]
        meds = [m[0] for m in meds if m]
        bold = _bold_rep(reps, max(meds) if meds else None)
        c = style.colour(alloc, backends.get(alloc))
        span = phase_span(bold)
        start = span[0] if span else 0.0
        # This allocator's own phases, shaded and named, on its own clock.
        for i, p in enumerate(bold.get("phases") or []):
            if p.get("start_ms") is None or p.get("end_ms") is None:
                continue
            ax.axvspan(p["start_ms"] - start, p["end_ms"] - start, color=PHASE_SHADES[i % 2], zorder=0)
        for r in reps:
            if r is not bold:
                line = aligned(r)
                ax.plot([p[0] for p in line], [style.mib(p[1]) for p in line], color=c, alpha=0.3, linewidth=0.8)
        line = aligned(bold)
        ax.plot([p[0] for p in line], [style.mib(p[1]) for p in line], color=c, linewidth=2.0)
        # The return curve after the last phase (timelines.jsonl: its end, +10 ms, +100 ms, settled),
        # read by the worker itself while it waits idle.
        curve = bold.get("return_curve") or []
        if curve:
            ax.plot([p[0] - start for p in curve], [style.mib(p[1]) for p in curve], color=c, linewidth=1.3,
                    linestyle="-.", marker="o", markersize=3.5)
        # Live requested bytes at this repetition's phase edges (exact there), dashed; each phase's peak dotted.
        xs, ys = [], []
        for p in bold.get("phases") or []:
            if p.get("start_ms") is None or p.get("start_live_bytes") is None:
                continue
            xs += [p["start_ms"] - start, p["end_ms"] - start]
            ys += [style.mib(p["start_live_bytes"]), style.mib(p.get("end_live_bytes") or 0)]
        if xs:
            ax.plot(xs, ys, linestyle="--", color="black", linewidth=1.1)
            for p in bold["phases"]:
                if p.get("peak_live_bytes") is not None and p.get("start_ms") is not None:
                    ax.hlines(style.mib(p["peak_live_bytes"]), p["start_ms"] - start, p["end_ms"] - start,
                              colors="black", linestyles=":", linewidth=1.0)
        ax.set_ylim(0, style.mib(ymax) * 1.22)
        ax.set_ylabel("RSS (MiB)")
        ax.set_title("%s: %d repetition%s, bold rep %s" % (alloc, len(reps), "" if len(reps) == 1 else "s", bold.get("rep")),
                     fontsize=9.5, loc="left", color=c, fontweight="bold")
        first = [p[0] for r in reps for p in aligned(r)[:1]]
        last = [p[0] for r in reps for p in aligned(r)[-1:]]
        style.tag(ax, allocator=alloc, bold_rep=bold.get("rep"), phase_start_ms=start,
                  phases=[{"name": p.get("name"), "start": p["start_ms"] - start, "end": p["end_ms"] - start}
                          for p in bold.get("phases") or [] if p.get("start_ms") is not None and p.get("end_ms") is not None],
                  line_starts=first, line_ends=last,
                  phase_lengths=[(phase_span(r)[1] - phase_span(r)[0]) if phase_span(r) else None for r in reps])
    # Phase names once per panel, inside its own shading, after the shared axis is known.
    for row, alloc in enumerate(allocs):
        ax = axes[row][0]
        lo, hi = ax.get_xlim()
        top = ax.get_ylim()[1]
        for p in ax.allocmark_info["phases"]:
            narrow = (p["end"] - p["start"]) < 0.07 * (hi - lo)
            ax.text((p["start"] + p["end"]) / 2, top * 0.97, p["name"] or "?", ha="center", va="top", fontsize=7.5,
                    color="#333333", clip_on=True, rotation=90 if narrow else 0)
    from matplotlib.lines import Line2D
    style.legend(fig, [Line2D([], [], color="#555555", linewidth=2.0), Line2D([], [], color="#555555", alpha=0.3),
                       Line2D([], [], color="black", linestyle="--", linewidth=1.1),
                       Line2D([], [], color="black", linestyle=":", linewidth=1.0)],
                 ["RSS of the repetition closest to the median peak", "RSS of the other repetitions",
                  "live requested bytes (exact at phase edges)", "peak live bytes of each phase"])
    axes[-1][0].set_xlabel("ms since the allocator's own first phase start (each repetition on its own clock)")
    axes[-1][0].set_xlim(left=0)
    fig.suptitle("%s, %d thread%s: how does RSS move through the phases, and is memory returned?"
                 % (wl, t, "" if t == 1 else "s"), fontsize=11)
    note = ("one panel per allocator, shaded with its own phases; each line starts at its repetition's first phase "
            "start and ends at its last phase's end (the worker's exit is not drawn), then its return curve where "
            "the cell has one, dash-dot with dots (RSS read by the worker, idle, at +10 ms, +100 ms and settle_ms after the last phase); bold: the repetition whose peak "
            "RSS is closest to the median in summary.json; dotted: peak live bytes per phase; RSS sampled by the "
            "driver from /proc/PID/statm; a flat line through an idle phase is memory not returned")
    path = "%s/timeline-%s-t%d.%s" % (out_dir, style.safe_name(wl), t, fmt)
    return style.finish(fig, run.meta, path, fmt, note)
