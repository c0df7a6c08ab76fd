"""Chart 2: how does each allocator's RSS move through the phases, and does it return memory?"""
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


def draw(run, opts, out_dir, fmt):
    files, skipped = [], []
    cells = run.timelines()
    if not cells:
        return files, ["timeline: no ok cell in results.jsonl has an RSS timeline"]
    groups = run.ok_groups()
    backends = {a: run.backend(a) for a in run.allocator_order()}
    keys = list(cells.keys())
    for wl in [w for w in run.ordered("workload", groups) if any(k[0] == w for k in keys)] + \
            [w for w in dict.fromkeys(k[0] for k in keys) if w not in run.ordered("workload", groups)]:
        for t in dict.fromkeys(k[1] for k in keys if k[0] == wl):
            allocs = [k[2] for k in keys if k[0] == wl and k[1] == t]
            order = run.allocator_order()
            allocs.sort(key=lambda a: order.index(a) if a in order else len(order))
            fig, ax = plt.subplots(figsize=(9.5, 5.0))
            ref = None
            ymax = 0
            for alloc in allocs:
                reps = cells[(wl, t, alloc)]
                # The target: the highest phase median of exact peak RSS in summary.json (the cell's peak).
                meds = [data.metric(g, "peak_rss_bytes") for g in groups
                        if g["workload"] == wl and g["threads"] == t and g["allocator"] == alloc]
                meds = [m[0] for m in meds if m]
                bold = _bold_rep(reps, max(meds) if meds else None)
                c = style.colour(alloc, backends.get(alloc))
                for r in reps:
                    if r is bold:
                        continue
                    ax.plot([p[0] for p in r["timeline"]], [style.mib(p[1]) for p in r["timeline"]], color=c,
                            alpha=0.3, linewidth=0.8)
                ax.plot([p[0] for p in bold["timeline"]], [style.mib(p[1]) for p in bold["timeline"]], color=c,
                        linewidth=2.0, label="%s (%d reps; bold: rep %s)" % (alloc, len(reps), bold.get("rep")))
                ymax = max([ymax] + [p[1] for r in reps for p in r["timeline"]])
                if ref is None:
                    ref = (alloc, bold)
                # This allocator's own phase edges: short ticks along the top.
                for p in bold["phases"]:
                    if p.get("start_ms") is not None:
                        ax.axvline(p["start_ms"], ymin=0.97, ymax=1.0, color=c, linewidth=1.5)
            # Phases shaded and named as timed in the first allocator's bold repetition.
            alloc0, rec0 = ref
            top = style.mib(ymax) * 1.15
            xmax = max(p[0] for reps in (cells[(wl, t, a)] for a in allocs) for r in reps for p in r["timeline"]) or 1.0
            for i, p in enumerate(rec0["phases"]):
                if p.get("start_ms") is None or p.get("end_ms") is None:
                    continue
                ax.axvspan(p["start_ms"], p["end_ms"], color=PHASE_SHADES[i % 2], zorder=0)
                narrow = (p["end_ms"] - p["start_ms"]) < 0.06 * xmax
                ax.text((p["start_ms"] + p["end_ms"]) / 2, top * 0.955, p.get("name", "?"), ha="center", va="top",
                        fontsize=8, color="#333333", clip_on=True, rotation=90 if narrow else 0)
            # Live requested bytes at the phase edges (exact there), dashed, and each phase's peak.
            xs, ys = [], []
            for p in rec0["phases"]:
                if p.get("start_ms") is None or p.get("start_live_bytes") is None:
                    continue
                xs += [p["start_ms"], p["end_ms"]]
                ys += [style.mib(p["start_live_bytes"]), style.mib(p.get("end_live_bytes", 0))]
            if xs:
                ax.plot(xs, ys, linestyle="--", color="black", linewidth=1.2,
                        label="live requested bytes, exact at phase edges\n(joined by straight lines; %s, rep %s)" % (alloc0, rec0.get("rep")))
                for p in rec0["phases"]:
                    if p.get("peak_live_bytes") is not None and p.get("start_ms") is not None:
                        ax.hlines(style.mib(p["peak_live_bytes"]), p["start_ms"], p["end_ms"], colors="black",
                                  linestyles=":", linewidth=1.0)
            ax.set_ylim(0, top)
            ax.set_xlabel("time since the worker started (ms)")
            ax.set_ylabel("RSS (MiB)")
            ax.set_title("%s, %d thread%s: how does RSS move through the phases, and is memory returned?"
                         % (wl, t, "" if t == 1 else "s"))
            ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
            note = ("faint: every repetition; bold: the repetition whose peak RSS is closest to the median peak RSS "
                    "in summary.json; shading: phases as timed for %s (ticks on top: each allocator's phase starts); "
                    "dotted: peak live bytes per phase; RSS sampled by the driver from /proc/PID/statm" % alloc0)
            path = "%s/timeline-%s-t%d.%s" % (out_dir, style.safe_name(wl), t, fmt)
            files.append(style.finish(fig, run.meta, path, fmt, note))
    return files, skipped
