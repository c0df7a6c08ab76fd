"""Chart 5: how do the variants of one backend differ (decay, background threads, arena limits)?"""
import matplotlib.pyplot as plt

import bars
import data
import style

KIND = "variants"
METRICS = ("peak_rss_bytes", "rss_above_idle_over_live", "ops_per_s")  # labelled by summary.json's metric table


def draw(run, opts, out_dir, fmt):
    files, skipped = [], []
    groups = run.ok_groups()
    allocs = run.allocator_order(groups)
    by_backend = {}
    for a in allocs:
        by_backend.setdefault(style.backend_of(a, run.backend(a)), []).append(a)
    families = {b: members for b, members in by_backend.items() if len(members) > 1}
    if not families:
        return files, ["variants: no backend has more than one allocator in this run (%s)" % ", ".join(allocs)]
    backends = {a: run.backend(a) for a in allocs}
    for backend, members in families.items():
        fg = [g for g in groups if g["allocator"] in members]
        combos = []
        for g in fg:
            if (g["workload"], g["threads"]) not in combos:
                combos.append((g["workload"], g["threads"]))
        phases_n = max(len(run.ordered("phase", [g for g in fg if (g["workload"], g["threads"]) == c])) for c in combos)
        fig, axes = plt.subplots(len(combos), len(METRICS), squeeze=False,
                                 figsize=(style.width(max(9.0, len(METRICS) * (1.0 + 0.3 * phases_n * len(members)))),
                                          1.3 + 2.6 * len(combos)))
        for row, (wl, t) in enumerate(combos):
            cg = [g for g in fg if g["workload"] == wl and g["threads"] == t]
            phases = run.ordered("phase", cg)
            for col, name in enumerate(METRICS):
                axis = run.axis(name)
                ax = axes[row][col]
                values = {(g["phase"], g["allocator"]): data.metric(g, name) for g in cg if data.metric(g, name)}
                if not values:
                    ax.text(0.5, 0.5, "no %s" % name, transform=ax.transAxes, ha="center")
                    continue
                bars.grouped(ax, phases, members, values, backends, scale=axis.scale)
                ax.set_ylabel(axis.label)
                if axis.si:
                    style.si_axis(ax)
                ax.set_title("%s, %d thread%s" % (wl, t, "" if t == 1 else "s"), fontsize=8.5)
                ax.margins(y=0.1)
        style.legend(fig, *style.legend_of(axes.flat))
        fig.suptitle("%s variants side by side: what does each setting change in RSS and speed?" % backend,
                     fontsize=11)
        env = []
        for a in members:
            for g in fg:
                if g["allocator"] == a:
                    e = g.get("identity", {}).get("env") or {}
                    env.append("%s: %s" % (a, " ".join("%s=%s" % kv for kv in sorted(e.items())) or "(defaults)"))
                    break
        note = "bars: median per phase, whiskers min-max over repetitions; settings: " + "; ".join(env)
        path = "%s/variants-%s.%s" % (out_dir, style.safe_name(backend), fmt)
        files.append(style.finish(fig, run.meta, path, fmt, note))
    return files, skipped
