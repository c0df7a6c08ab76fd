"""One colour per allocator name, the same in every chart and every run, and the shared look.

Known backends have fixed hues; a variant ("jemalloc:bg", "jemalloc-4.5" of kind jemalloc) takes its
backend's hue in another shade, chosen by a stable hash of its name (crc32, not Python's salted
hash()), so a name gets the same colour whatever else is in the run. Unknown backends get a hue
from the same hash.
"""
import colorsys
import os
import sys
import traceback
import zlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.colors as mcolors  # noqa: E402

BACKEND_COLOURS = {
    "glibc": "#1f77b4",     # blue
    "jemalloc": "#d62728",  # red
    "tcmalloc": "#2ca02c",  # green
    "mimalloc": "#9467bd",  # purple
    "numap": "#ff7f0e",     # orange
}
# Lightness offsets for variants: darker and lighter shades of the backend's hue.
_SHADES = (-0.16, 0.14, -0.26, 0.22, -0.08, 0.08)


def _stable_hash(text):
    return zlib.crc32(text.encode("utf-8"))


def backend_of(allocator, backend=None):
    """The backend an allocator name belongs to: the given one, else the name up to ':' or '['."""
    if backend:
        return backend
    for sep in (":", "["):
        allocator = allocator.split(sep, 1)[0]
    return allocator


def colour(allocator, backend=None):
    """Hex colour of an allocator (name as configured); `backend` from summary.json's identity."""
    base_name = backend_of(allocator, backend)
    base = BACKEND_COLOURS.get(base_name)
    if base is None:
        h = _stable_hash(base_name)
        hue = (h % 360) / 360.0
        base = mcolors.to_hex(colorsys.hls_to_rgb(hue, 0.45, 0.65))
    if allocator == base_name:
        return base
    r, g, b = mcolors.to_rgb(base)
    hue, light, sat = colorsys.rgb_to_hls(r, g, b)
    shade = _SHADES[_stable_hash(allocator) % len(_SHADES)]
    light = min(0.85, max(0.15, light + shade))
    return mcolors.to_hex(colorsys.hls_to_rgb(hue, light, sat))


# Chart labels longer than this (a record's allocator, workload or phase name) are cut.
LABEL_LIMIT = 60


def short(text, limit=LABEL_LIMIT):
    """A record's text as a chart label: as it is up to `limit` characters, else its start, an ellipsis
    and a short hash of the whole, so that two long names with one start stay two labels (and a
    megabyte of name does not take minutes to lay out)."""
    if not isinstance(text, str) or len(text) <= limit:
        return text
    return "%s\u2026#%06x" % (text[:limit - 8], zlib.crc32(text.encode("utf-8", "replace")) & 0xFFFFFF)


class OutputError(Exception):
    """The charts' folder cannot be used (exit 2, one line)."""


def output_folder(path):
    """Creates the folder the charts go into, or says in one line why it cannot be."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise OutputError("--out %s: is a file, not a folder (the charts go into a folder)" % path)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise OutputError("--out %s: cannot create the folder: %s" % (path, e.strerror or e))
    if not os.access(path, os.W_OK):
        raise OutputError("--out %s: the folder is not writable" % path)


def failure_reason(error):
    """An exception as one line: its message (matplotlib's span several lines), else its type: never
    empty."""
    text = " ".join(str(error).split())
    return text or type(error).__name__


def report_failure(kind, error):
    """One chart that failed: a traceback only for what nobody foresaw, then the line the driver
    reads (allocmark report lists it under "Charts that failed to draw")."""
    if not isinstance(error, OSError):
        traceback.print_exc()
    print("allocmark_plots: error: chart %s failed: %s" % (kind, failure_reason(error)), file=sys.stderr)


def apply():
    matplotlib.rcParams.update({
        # Names from records are drawn as the text they are: '$x^' is a name, not mathtext to parse.
        "text.parse_math": False,
        "text.usetex": False,
        "figure.dpi": 100,
        "savefig.dpi": 100,
        "font.size": 9,
        "axes.titlesize": 10,
        "axes.labelsize": 9,
        "legend.fontsize": 8,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "axes.spines.top": False,
        "axes.spines.right": False,
    })


def mib(x):
    return x / (1024.0 * 1024.0)


def fmt_bytes(x):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(x) >= scale:
            return "%.3g %s" % (x / scale, unit)
    return "%d B" % x


def fmt_ns(x):
    """Nanoseconds as people read them: 7.9 ns, 513 ns, 16.7 us, 2.1 ms."""
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(x) >= scale:
            return "%.3g %s" % (x / scale, unit)
    return "%.3g ns" % x


def safe_name(text):
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)


# The longest caption drawn under a chart (a few lines at the capped width).
NOTE_LIMIT = 2400


def footer(fig, meta, note=None):
    """Machine, allocator versions and command under the figure (wrapped to the figure's width)."""
    import textwrap
    m = meta.get("machine", {})
    parts = ["machine: %s, %s usable CPUs, %s" % (m.get("cpu_model", "?"), m.get("cpus_usable", "?"),
                                                 m.get("kernel", "?"))]
    versions = ["%s %s" % (a.get("name"), a.get("version") or "?") for a in meta.get("allocators", [])]
    if versions:
        parts.append("allocators: " + "; ".join(versions))
    parts.append("command: " + command_of(meta))
    # Each part from the records is a line or a few: a megabyte-long name would make textwrap
    # quadratic. The chart's own note is built from names already cut (data.Run) and says what was
    # left out, so it gets room for every clause rather than an ellipsis in the middle of a list.
    parts = [short(p, 600) for p in parts]
    if note:
        parts.append(short(note, NOTE_LIMIT))
    width_chars = int(fig.get_figwidth() * 72 / 4.6)
    lines = []
    for p in parts:
        lines.extend(textwrap.wrap(p, width_chars) or [""])
    fig.text(0.01, 0.005, "\n".join(lines), fontsize=7, color="#444444", ha="left", va="bottom",
             family="monospace")
    return len(lines)


def si_axis(ax, axis="y"):
    """Tick labels as 1.5M / 200k instead of an offset exponent."""
    from matplotlib.ticker import EngFormatter
    (ax.yaxis if axis == "y" else ax.xaxis).set_major_formatter(EngFormatter(sep=""))


def command_of(meta):
    runs = meta.get("runs") or []
    if runs and runs[0].get("command"):
        cmd = runs[0]["command"]
        return cmd if isinstance(cmd, str) else " ".join(cmd)
    mx = meta.get("matrix", {})
    if not mx:
        return "(not recorded in meta.json)"
    allocs = ",".join(a.get("name", "?") for a in mx.get("allocators", []))
    wls = ",".join(w.get("name", "?") for w in mx.get("workloads", []))
    thr = ",".join(str(t) for t in mx.get("threads", []))
    return ("(not recorded; matrix as run) allocmark run -a %s -w %s -t %s -r %s --size %s"
            % (allocs, wls, thr, mx.get("reps", "?"), mx.get("size", "?")))


# The widest chart, in inches at figure.dpi: the report's column is at most 1400 px less its
# padding, and a chart drawn wider is scaled down until its labels cannot be read. Charts with more
# panels or bars than fit wrap them into rows instead.
MAX_WIDTH_IN = 13.0
PANEL_MIN_WIDTH_IN = 3.6


def width(inches):
    """A figure width no wider than the cap."""
    return min(MAX_WIDTH_IN, inches)


def columns(panels, panel_width=PANEL_MIN_WIDTH_IN, room=MAX_WIDTH_IN - 1.6):
    """How many panels of `panel_width` inches go side by side in a capped figure (at least one)."""
    return max(1, min(panels, int(room // panel_width)))


def tag(ax, **info):
    """What a panel shows, for --describe (workload, allocator, phases...): structure a test reads
    instead of pixels."""
    ax.allocmark_info = dict(getattr(ax, "allocmark_info", {}), **info)


def tag_figure(fig, **info):
    """What the whole chart shows or leaves out, for --describe."""
    fig.allocmark_info = dict(getattr(fig, "allocmark_info", {}), **info)


def legend(fig, handles, labels):
    """One legend for the whole figure, in a row under its title (finish places it)."""
    fig.allocmark_legend = (handles, labels)


def legend_of(axes):
    """The handles and labels of every panel, each label once, in drawing order."""
    handles, labels = [], []
    for ax in axes:
        for h, l in zip(*ax.get_legend_handles_labels()):
            if l not in labels:
                handles.append(h)
                labels.append(l)
    return handles, labels


def log_axis(ax, axis="y"):
    """A log axis labelled in plain numbers (0.5, 1, 2, 10, 200): with the math parser off,
    matplotlib's own log labels would print as TeX source."""
    from matplotlib.ticker import FuncFormatter, NullFormatter
    target = ax.yaxis if axis == "y" else ax.xaxis
    (ax.set_yscale if axis == "y" else ax.set_xscale)("log")
    target.set_major_formatter(FuncFormatter(lambda v, _: si_text(v)))
    target.set_minor_formatter(NullFormatter())
    ax.allocmark_log = getattr(ax, "allocmark_log", set()) | {axis}


def _log_ticks(ax):
    """Ticks at 1-2-5 over up to three decades, at powers of ten beyond (known once the limits are)."""
    import math
    from matplotlib.ticker import LogLocator
    for axis in getattr(ax, "allocmark_log", ()):
        lo, hi = ax.get_ylim() if axis == "y" else ax.get_xlim()
        decades = math.log10(max(hi, 1e-300) / max(lo, 1e-300)) if lo > 0 and hi > 0 else 0
        subs = (1.0, 2.0, 5.0) if decades <= 3 else (1.0,)
        (ax.yaxis if axis == "y" else ax.xaxis).set_major_locator(LogLocator(base=10, subs=subs))


def percent_text(pct):
    """A percentage as a share is read: 100%, 74%, 3.4%, 0.003% (as `show` writes a percent display)."""
    if pct == 0:
        return "0%"
    return ("%.0f%%" if abs(pct) >= 10 else "%.1f%%" if abs(pct) >= 1 else "%.2g%%") % pct


def si_text(v):
    """A number in three significant digits with k/M/G (0.05, 1, 250, 1.5k, 20M)."""
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= scale:
            return ("%.3g" % (v / scale)) + unit
    return "%.3g" % v


def warn(fig, text):
    """A warning drawn in a red box at the top of the figure (and listed by --describe): the figures
    below do not mean what they seem to."""
    fig.allocmark_warnings = getattr(fig, "allocmark_warnings", []) + [text]


def notice(fig, text):
    """A reading note drawn in an amber box at the top of the figure (listed by --describe)."""
    fig.allocmark_notices = getattr(fig, "allocmark_notices", []) + [text]


_BOXES = (("allocmark_warnings", "\u26a0 ", "#7a1010", "#fdecea", "#c0392b"),
          ("allocmark_notices", "", "#5a3b00", "#fff4d6", "#d4a017"))


# file name -> what --describe writes of it: size in pixels, panels, warnings, caption.
DESCRIPTIONS = {}


def _describe(fig, path, note):
    panels = []
    for ax in fig.axes:
        if not ax.get_visible() or not ax.axison:
            continue
        panels.append({"title": ax.get_title(), "xlabel": ax.get_xlabel(), "ylabel": ax.get_ylabel(),
                       "yscale": ax.get_yscale(), "xlim": list(ax.get_xlim()), "ylim": list(ax.get_ylim()),
                       "info": getattr(ax, "allocmark_info", {})})
    width_px, height_px = fig.canvas.get_width_height()  # as saved (savefig.dpi is figure.dpi)
    DESCRIPTIONS[os.path.basename(path)] = {
        "width_px": width_px, "height_px": height_px,
        "panels": panels, "warnings": list(getattr(fig, "allocmark_warnings", [])),
        "notices": list(getattr(fig, "allocmark_notices", [])), "note": note or "",
        "info": getattr(fig, "allocmark_info", {})}


def finish(fig, meta, path, fmt, note=None):
    """Lay out the figure (the warnings, the title and the figure's legend on top, the footer below,
    the panels between), then save it. The warnings and the legend add to the figure's height, so
    they never squeeze its panels."""
    import textwrap
    fig.set_figwidth(width(fig.get_figwidth()))
    boxes = []
    for attribute, mark, ink, fill, edge in _BOXES:
        texts = getattr(fig, attribute, [])
        chars = int(fig.get_figwidth() * 72 / 6.2)
        lines = [line for w in texts for line in (textwrap.wrap(mark + w, chars) or [""])]
        if lines:
            boxes.append((lines, ink, fill, edge))
    legend_rows, ncol = 0, 1
    if getattr(fig, "allocmark_legend", None):
        labels = fig.allocmark_legend[1]
        ncol = max(1, min(len(labels), int(fig.get_figwidth() // 2.0)))
        legend_rows = -(-len(labels) // ncol)
    # The title at 11 pt averages about 6 pt a character.
    title_chars = int(fig.get_figwidth() * 72 / 6.3)
    title_lines = max(1, len(textwrap.wrap(fig._suptitle.get_text(), title_chars))) if fig._suptitle is not None else 1
    added = 15.0 * (title_lines - 1) + sum(len(lines) * 9.5 * 1.3 + 16 for lines, *_ in boxes) + (legend_rows * 13.0 + 6 if legend_rows else 0)
    fig.set_figheight(fig.get_figheight() + added / 72.0)
    n = footer(fig, meta, note)
    height_pt = fig.get_figheight() * 72.0
    bottom = (n * 7 * 1.35 + 10) / height_pt
    used = 6.0  # points from the top
    for lines, ink, fill, edge in boxes:
        fig.text(0.5, 1.0 - used / height_pt, "\n".join(lines), ha="center", va="top", fontsize=9.5,
                 color=ink, fontweight="bold", linespacing=1.3,
                 bbox={"boxstyle": "round,pad=0.35", "facecolor": fill, "edgecolor": edge})
        used += len(lines) * 9.5 * 1.3 + 16
    if fig._suptitle is not None:
        # A question longer than the figure is wide wraps (a narrow figure cuts it otherwise).
        fig._suptitle.set_text("\n".join(textwrap.wrap(fig._suptitle.get_text(), title_chars)))
        fig._suptitle.set_y(1.0 - used / height_pt)
        fig._suptitle.set_va("top")
        used += 20.0 + 15.0 * (title_lines - 1)
    if legend_rows:
        handles, labels = fig.allocmark_legend
        fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 1.0 - used / height_pt), ncol=ncol,
                   frameon=False)
        used += legend_rows * 13.0 + 6
    for ax in fig.axes:
        _log_ticks(ax)
    fig.tight_layout(rect=(0, bottom, 1, 1.0 - used / height_pt))
    fig.savefig(path, format=fmt)
    _describe(fig, path, note)
    import matplotlib.pyplot as plt
    plt.close(fig)
    return path
