"""Grouped bars with min-max error bars: the shape several charts share."""
import numpy as np

import data

import style


# Bars in one panel beyond which their value labels stand upright: flat, neighbours' labels run
# into each other ("1.36k2.25k") at the panel widths the charts use.
LABELS_FLAT = 10


def grouped(ax, categories, allocators, values, backends, label_fn=None, scale=1.0, base=0.0):
    """Draw one bar per (category, allocator) present in `values` {(cat, alloc): (median, lo, hi)}.
    Bars are the median, whiskers span min..max. Bars rise from `base` (1 for ratios to a baseline:
    a bar below it is slower or smaller, and a log axis can hold it). Returns {(cat, alloc): (x, width)}."""
    n = max(1, len(allocators))
    width = 0.8 / n
    where = {}
    for i, alloc in enumerate(allocators):
        xs, meds, los, his = [], [], [], []
        for c, cat in enumerate(categories):
            v = values.get((cat, alloc))
            if v is None:
                continue
            x = c - 0.4 + width * (i + 0.5)
            xs.append(x)
            meds.append(v[0] * scale)
            los.append(max(0.0, (v[0] - v[1]) * scale))
            his.append(max(0.0, (v[2] - v[0]) * scale))
            where[(cat, alloc)] = (x, width)
        if not xs:
            continue
        ax.bar(xs, [m - base for m in meds], width * 0.92, bottom=base, color=style.colour(alloc, backends.get(alloc)),
               label=alloc, yerr=np.array([los, his]), ecolor="#222222", capsize=2, error_kw={"elinewidth": 0.8})
        if label_fn:
            for x, cat in zip(xs, [c for c in categories if (c, alloc) in values]):
                text = label_fn(cat, alloc)
                if text:
                    med, lo, hi = (v * scale for v in values[(cat, alloc)])
                    below = med < base
                    ax.annotate(text, (x, lo if below else hi), textcoords="offset points", xytext=(0, -2 if below else 2),
                                ha="center", va="top" if below else "bottom", fontsize=6.5,
                                rotation=90 if n > 3 or n * len(categories) > LABELS_FLAT else 0)
    ax.set_xticks(range(len(categories)))
    ax.set_xticklabels([str(c) for c in categories])
    ax.set_xlim(-0.6, len(categories) - 0.4)
    return where


def values_of(groups, metric, category, scale=1.0):
    """The categories (category(group), first-appearance order) and {(category, allocator): (median,
    min, max) x scale} of `metric` in summary groups."""
    cats, values = [], {}
    for g in groups:
        cat = category(g)
        if cat not in cats:
            cats.append(cat)
        m = data.metric(g, metric)
        if m:
            values[(cat, g["allocator"])] = tuple(v * scale for v in m)
    return cats, values


def empty_panel(ax, what):
    ax.text(0.5, 0.5, "no %s in summary.json" % what, ha="center", va="center", transform=ax.transAxes, fontsize=8)
    ax.set_axis_off()
