"""Chart: what does one call cost under each allocator? percall's own figure, ns per operation per
Google Benchmark benchmark (summary.json workload_metrics `ns_per_op.BENCH`), each allocator relative
to a baseline allocator benchmark by benchmark, as Google Benchmark's compare.py reports two runs."""
import re

import matplotlib.pyplot as plt

import style

KIND = "percall"
PREFIX = "ns_per_op."
LOG_SPAN = 10.0
WIDE_BENCHMARKS = 8  # more benchmarks than this in one operation: its panel takes a whole row


def _benchmarks(group):
    return [k[len(PREFIX):] for k in (group.get("workload_metrics") or {}) if k.startswith(PREFIX)]


def size_label_rest(bench, phase):
    """A benchmark's name without its operation: 'malloc_free_1024' in malloc_free -> '1024'."""
    return bench[len(phase) + 1:] if bench.startswith(phase + "_") else bench


def size_label(bench, phase):
    """'malloc_free_1024' in phase malloc_free -> '1 KiB'; 'realloc_double_65536' -> 'double 64 KiB'."""
    rest = size_label_rest(bench, phase)
    m = re.match(r"^(.*?)_?(\d+)$", rest)
    if not m:
        return rest
    size = style.fmt_bytes(int(m.group(2))).replace(".0 ", " ")
    return ("%s %s" % (m.group(1), size)).strip()


def draw(run, opts, out_dir, fmt):
    groups = [g for g in run.ok_groups() if _benchmarks(g)]
    if not groups:
        return [], ["percall: no ns_per_op workload metrics in summary.json (the run has no percall cell)"]
    allocs = run.allocator_order(groups)
    if len(allocs) < 2:
        return [], ["percall: one allocator (%s): nothing to compare ns/op against" % ", ".join(allocs)]
    base = run.baseline(opts.baseline)
    if base not in allocs:
        return [], ["percall: the baseline %s ran no percall cell (allocators: %s)" % (base, ", ".join(allocs))]
    backends = {a: run.backend(a) for a in allocs}
    files = []
    for wl in run.ordered("workload", groups):
        for t in run.ordered("threads", [g for g in groups if g["workload"] == wl]):
            files.append(_figure(run, opts, out_dir, fmt, wl, t, [g for g in groups if g["workload"] == wl and g["threads"] == t],
                                 allocs, base, backends))
    return files, []


def _layout(phases, benchmarks):
    """Rows of panels: an operation with many benchmarks (malloc_free's sizes) gets a whole row, the
    others go two to a row. [(row, first column, last column + 1, phase)] and the row count."""
    places, row, col = [], 0, 0
    for phase in phases:
        wide = len(benchmarks.get(phase, [])) > WIDE_BENCHMARKS
        if col and wide:
            row, col = row + 1, 0
        places.append((row, col, 2 if wide else col + 1, phase))
        if wide or col:
            row, col = row + 1, 0
        else:
            col = 1
    return places, row + (1 if col else 0)


def _figure(run, opts, out_dir, fmt, wl, t, groups, allocs, base, backends):
    phases = run.ordered("phase", groups)
    benchmarks = {g["phase"]: _benchmarks(g) for g in groups if g["allocator"] == base}
    places, rows = _layout(phases, benchmarks)
    fig = plt.figure(figsize=(style.MAX_WIDTH_IN, 1.4 + 3.2 * rows))
    grid = fig.add_gridspec(rows, 2)
    offsets = {a: (i - (len(allocs) - 1) / 2.0) * min(0.12, 0.6 / len(allocs)) for i, a in enumerate(allocs)}
    for row, first, last, phase in places:
        ax = fig.add_subplot(grid[row, first:last])
        by_alloc = {g["allocator"]: g for g in groups if g["phase"] == phase}
        base_group = by_alloc.get(base)
        benches = benchmarks.get(phase, [])
        # A line joins the points only where the benchmarks are one series of sizes.
        series = all(re.fullmatch(r"\d+", size_label_rest(b, phase)) for b in benches)
        ratios = []
        for alloc in allocs:
            g = by_alloc.get(alloc)
            if g is None or alloc == base:
                continue
            xs, meds, los, his = [], [], [], []
            for x, bench in enumerate(benches):
                b = base_group["workload_metrics"][PREFIX + bench]["median"]
                m = (g.get("workload_metrics") or {}).get(PREFIX + bench)
                if not b or not m or m.get("median") is None:
                    continue
                # Each benchmark's median ns/op over the baseline's: summary.json has no ratio field.
                med, lo, hi = m["median"] / b, m.get("min", m["median"]) / b, m.get("max", m["median"]) / b
                xs.append(x + offsets[alloc])
                meds.append(med)
                los.append(med - lo)
                his.append(hi - med)
                ratios += [lo, hi]
            if xs:
                ax.errorbar(xs, meds, yerr=[los, his], color=style.colour(alloc, backends.get(alloc)), marker="o",
                            markersize=4.5, linewidth=1.2 if series else 0, capsize=2, elinewidth=0.8, label=alloc)
        ax.axhline(1.0, color=style.colour(base, backends.get(base)), linewidth=1.4, label="%s (= 1)" % base)
        # The baseline's own spread at 1 (its min and max over its median): a ratio is only as sure
        # as the median under it, and one stalled repetition of the baseline moves every ratio.
        bx, blo, bhi = [], [], []
        for x, bench in enumerate(benches):
            m = base_group["workload_metrics"][PREFIX + bench]
            if m.get("median"):
                bx.append(x)
                blo.append(1.0 - m.get("min", m["median"]) / m["median"])
                bhi.append(m.get("max", m["median"]) / m["median"] - 1.0)
                ratios += [m.get("min", m["median"]) / m["median"], m.get("max", m["median"]) / m["median"]]
        if bx:
            ax.errorbar(bx, [1.0] * len(bx), yerr=[blo, bhi], fmt="none", ecolor=style.colour(base, backends.get(base)),
                        elinewidth=2.4, alpha=0.45, capsize=0, label="%s min-max over its median" % base)
        if not benches:
            ax.text(0.5, 0.5, "%s has no ns_per_op for %s" % (base, phase), transform=ax.transAxes, ha="center")
        ax.set_xticks(range(len(benches)))
        labels = []
        for bench in benches:
            b = base_group["workload_metrics"][PREFIX + bench]["median"]
            labels.append("%s\n%s" % (size_label(bench, phase), style.fmt_ns(b) if b is not None else "-"))
        ax.set_xticklabels(labels, fontsize=7 if len(benches) > 8 else 8)
        ax.set_xlim(-0.6, max(len(benches), 1) - 0.4)
        positive = [r for r in ratios if r > 0] + [1.0]
        log = max(positive) / min(positive) > LOG_SPAN
        if log:
            style.log_axis(ax)
        ax.set_ylabel("ns/op relative to %s (x%s)" % (base, ", log" if log else ""))
        ax.set_title("%s: ns per operation (below 1: faster than %s)" % (phase, base), fontsize=9.5)
        style.tag(ax, workload=wl, threads=t, phase=phase, benchmarks=benches,
                  baseline_band=[benches[x] for x in bx])
    style.legend(fig, *style.legend_of(fig.axes))
    fig.suptitle("%s, %d thread%s: what does one call cost under each allocator, relative to %s?"
                 % (wl, t, "" if t == 1 else "s", base), fontsize=11)
    note = ("points: median ns/op of each Google Benchmark benchmark (summary.json workload_metrics ns_per_op.*) over "
            "%s's median, whiskers the allocator's min and max over repetitions over the same median; the band at 1: "
            "%s's own min and max over its median; under each size, %s's median ns/op; below 1 is faster"
            % (base, base, base))
    path = "%s/percall-%s-t%d.%s" % (out_dir, style.safe_name(wl), t, fmt) if wl != "percall" else \
        "%s/percall-t%d.%s" % (out_dir, t, fmt)
    return style.finish(fig, run.meta, path, fmt, note)
