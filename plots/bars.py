"""Grouped bars with min-max error bars: the shape several charts share."""
import numpy as np

import style


def grouped(ax, categories, allocators, values, backends, label_fn=None, scale=1.0):
    """Draw one bar per (category, allocator) present in `values` {(cat, alloc): (median, lo, hi)}.
    Bars are the median, whiskers span min..max. Returns {(cat, alloc): (x, width)}."""
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
        ax.bar(xs, meds, width * 0.92, color=style.colour(alloc, backends.get(alloc)), label=alloc,
               yerr=np.array([los, his]), ecolor="#222222", capsize=2, error_kw={"elinewidth": 0.8})
        if label_fn:
            for x, cat in zip(xs, [c for c in categories if (c, alloc) in values]):
                text = label_fn(cat, alloc)
                if text:
                    top = values[(cat, alloc)][2] * scale
                    ax.annotate(text, (x, top), textcoords="offset points", xytext=(0, 2), ha="center",
                                va="bottom", fontsize=6.5, rotation=90 if n > 3 else 0)
    ax.set_xticks(range(len(categories)))
    ax.set_xticklabels([str(c) for c in categories])
    ax.set_xlim(-0.6, len(categories) - 0.4)
    return where
