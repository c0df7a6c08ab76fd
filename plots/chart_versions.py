"""Chart: one allocator's releases side by side (issue 43): does a figure change from one version to the next?

Versions lie on the x axis in summary.json's order, which is the matrix's: the plan puts each family's
releases in version order (releases::release_less, 5.9 before 5.10), so nothing here sorts them."""
import matplotlib.pyplot as plt

import data
import style

KIND = "versions"
METRICS = ("peak_rss_bytes", "ops_per_s")  # labelled by summary.json's metric table
THP_MARK = "@thp="


def split_release(name):
    """(variant, version) of NAME@VERSION[:VARIANT] (docs/versions.md); version None without one."""
    at = name.find("@")
    if at < 0 or name.startswith(THP_MARK, at):
        return name, None
    rest = name[at + 1:]
    end = min([i for i in (rest.find(":"), rest.find("@")) if i >= 0], default=len(rest))
    return name[:at] + rest[end:], rest[:end]


def series_of(run, allocs):
    """{(backend, variant): [(version, allocator)...]} for variants run in two or more versions."""
    out = {}
    for a in allocs:
        variant, version = split_release(a)
        if version is not None:
            out.setdefault((style.backend_of(a, run.backend(a)), variant), []).append((version, a))
    return {k: v for k, v in out.items() if len(v) > 1}


def draw_axis(ax, run, groups, members, name, phases):
    axis = run.axis(name)
    for i, phase in enumerate(phases):
        xs, med, lo, hi = [], [], [], []
        for x, (_, a) in enumerate(members):
            for g in groups:
                v = data.metric(g, name) if g["allocator"] == a and g["phase"] == phase else None
                if v:
                    xs.append(x)
                    med.append(v[0] * axis.scale)
                    lo.append((v[0] - v[1]) * axis.scale)
                    hi.append((v[2] - v[0]) * axis.scale)
        if xs and any(med):  # an idle phase's ops/s is 0 in every version: no line
            ax.errorbar(xs, med, yerr=[lo, hi], marker="o", ms=4, capsize=3, lw=1.2, label=phase,
                        color=plt.cm.tab10(i % 10))
    ax.allocmark_info = {"versions": [v for v, _ in members], "metric": name}
    ax.set_xticks(range(len(members)))
    ax.set_xticklabels([v for v, _ in members], rotation=30 if len(members) > 6 else 0, fontsize=8)
    ax.set_ylabel(axis.label)
    if axis.si:
        style.si_axis(ax)
    ax.margins(y=0.1)


def draw(run, opts, out_dir, fmt):
    files = []
    groups = run.ok_groups()
    series = series_of(run, run.allocator_order(groups))
    if not series:
        return files, ["versions: no allocator ran in two or more releases (NAME@VERSION)"]
    for (backend, variant), members in series.items():
        names = [a for _, a in members]
        fg = [g for g in groups if g["allocator"] in names]
        combos = []
        for g in fg:
            if (g["workload"], g["threads"]) not in combos:
                combos.append((g["workload"], g["threads"]))
        fig, axes = plt.subplots(len(combos), len(METRICS), squeeze=False,
                                 figsize=(style.width(max(9.0, len(METRICS) * (2.0 + 0.6 * len(members)))),
                                          1.3 + 2.8 * len(combos)))
        for row, (wl, t) in enumerate(combos):
            cg = [g for g in fg if g["workload"] == wl and g["threads"] == t]
            phases = run.ordered("phase", cg)
            for col, name in enumerate(METRICS):
                draw_axis(axes[row][col], run, cg, members, name, phases)
                axes[row][col].set_title("%s, %d thread%s" % (wl, t, "" if t == 1 else "s"), fontsize=8.5)
        style.legend(fig, *style.legend_of(axes.flat))
        fig.suptitle("%s across releases: what changes from one version to the next?" % variant, fontsize=11)
        note = "one line per phase: median over ok repetitions, whiskers min-max; versions in version order"
        path = "%s/versions-%s.%s" % (out_dir, style.safe_name(variant), fmt)
        files.append(style.finish(fig, run.meta, path, fmt, note))
    return files, []
