"""Chart 3: how fast is each allocator, relative to a baseline allocator? One panel per workload and
thread count, each with its own scale, over the phases whose ops/s is a speed."""
import math

import matplotlib.pyplot as plt

import bars
import data
import style

KIND = "throughput"
# A panel whose ratios span more than this factor gets a log axis: one outlier no longer flattens
# every other bar.
LOG_SPAN = 10.0


def left_out(groups):
    """{(workload, phase): why its ops/s is not drawn}: the workload's own word (summary.json
    `ops_per_s_not_a_speed`: a fixed rate or wall time, unlike operations summed), or no operations."""
    why = {}
    for g in groups:
        key = (g["workload"], g["phase"])
        if g.get("ops_per_s_not_a_speed"):
            why[key] = g["ops_per_s_not_a_speed"]
    for g in groups:
        key = (g["workload"], g["phase"])
        if key in why:
            continue
        if not any((data.metric(o, "ops_per_s") or (0,))[0] > 0 for o in groups if (o["workload"], o["phase"]) == key):
            why[key] = "did no operations"
    return why


def left_out_note(why):
    """One clause per reason: 'insert_phases idle.x, idle.end (did no operations)'."""
    by_reason = {}
    for (wl, phase), reason in why.items():
        by_reason.setdefault(reason, {}).setdefault(wl, []).append(phase)
    parts = []
    for reason, workloads in by_reason.items():
        parts.append("%s: %s" % ("; ".join("%s %s" % (wl, ", ".join(ps)) for wl, ps in workloads.items()), reason))
    return "left out: " + " | ".join(parts) if parts else ""


def draw(run, opts, out_dir, fmt):
    groups = run.ok_groups()
    why = left_out(groups)
    speed = [g for g in groups if (g["workload"], g["phase"]) not in why and data.metric(g, "ops_per_s")]
    allocs = run.allocator_order(speed)
    if len(allocs) < 2:
        return [], ["throughput: needs at least two allocators with ops_per_s to normalise (run has %s)%s"
                    % (", ".join(allocs) or "none", "; " + left_out_note(why) if why else "")]
    base = run.baseline(opts.baseline)
    if base is None:
        return [], ["throughput: baseline allocator '%s' is not in this run (allocators: %s)"
                    % (opts.baseline, ", ".join(allocs))]
    backends = {a: run.backend(a) for a in allocs}
    panels = []  # (workload, threads, categories, values)
    for wl in run.ordered("workload", speed):
        for t in run.ordered("threads", [g for g in speed if g["workload"] == wl]):
            pg = [g for g in speed if g["workload"] == wl and g["threads"] == t]
            base_med = {g["phase"]: data.metric(g, "ops_per_s")[0] for g in pg if g["allocator"] == base}
            cats, values = [], {}
            for g in pg:
                b = base_med.get(g["phase"])
                if not b:
                    continue
                if g["phase"] not in cats:
                    cats.append(g["phase"])
                med, lo, hi = data.metric(g, "ops_per_s")
                # The one division this chart makes: two medians of summary.json (it has no ratio field).
                values[(g["phase"], g["allocator"])] = (med / b, lo / b, hi / b)
            if any(a != base for _, a in values):
                panels.append((wl, t, cats, values))
    if not panels:
        return [], ["throughput: the baseline %s has no ops_per_s in any workload and phase that another allocator "
                    "also ran" % base]
    widest = max(len(cats) for _, _, cats, _ in panels)
    panel_width = max(style.PANEL_MIN_WIDTH_IN, 0.9 + 0.16 * widest * len(allocs))
    cols = style.columns(len(panels), panel_width)
    rows = int(math.ceil(len(panels) / float(cols)))
    fig, axes = plt.subplots(rows, cols, squeeze=False, figsize=(style.width(1.6 + panel_width * cols), 1.5 + 3.1 * rows))
    for i, (wl, t, cats, values) in enumerate(panels):
        ax = axes[i // cols][i % cols]
        bars.grouped(ax, cats, allocs, values, backends, lambda c, a: "%.2f" % values[(c, a)][0] if a != base and
                     (c, a) in values else "", base=1.0)
        ax.axhline(1.0, color="black", linewidth=0.8)
        lows = [v[1] for v in values.values() if v[1] > 0] + [1.0]
        highs = [v[2] for v in values.values()] + [1.0]
        log = opts.log or max(highs) / min(lows) > LOG_SPAN
        if log:
            style.log_axis(ax)
            ax.set_ylim(min(lows) / 1.6, max(highs) * 1.8)
        else:
            ax.set_ylim(0, max(highs) * 1.22)
        ax.set_ylabel("ops/s relative to %s (x%s)" % (base, ", log" if log else ""))
        ax.set_title("%s, %d thread%s" % (wl, t, "" if t == 1 else "s"), fontsize=9.5)
        if len(cats) > 4:
            ax.tick_params(axis="x", labelsize=7.5)
        style.tag(ax, workload=wl, threads=t, phases=cats)
    for j in range(len(panels), rows * cols):
        axes[j // cols][j % cols].set_visible(False)
    style.legend(fig, *style.legend_of(axes.flat))
    fig.suptitle("How fast is each allocator relative to %s? (ops/s per phase, %s = 1, each workload on its own scale)"
                 % (base, base), fontsize=11)
    style.tag_figure(fig, left_out=[{"workload": wl, "phase": ph, "why": r} for (wl, ph), r in why.items()])
    note = ("bars: median ops/s / median ops/s of %s (both from summary.json), rising from 1 when faster, falling when "
            "slower; whiskers: the allocator's min and max over repetitions divided by the same baseline median; "
            "a panel whose ratios span more than %gx has a log axis" % (base, LOG_SPAN))
    if why:
        note += "; " + left_out_note(why)
    path = "%s/throughput.%s" % (out_dir, fmt)
    return [style.finish(fig, run.meta, path, fmt, note)], []
