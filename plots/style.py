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


def safe_name(text):
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)


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
    if note:
        parts.append(note)
    # Each part is a line or a few: a record's megabyte-long name would make textwrap quadratic.
    parts = [short(p, 600) for p in parts]
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


def finish(fig, meta, path, fmt, note=None):
    """Lay out the figure leaving room for the footer, then save it."""
    n = footer(fig, meta, note)
    bottom = (n * 7 * 1.35 + 10) / (fig.get_figheight() * 72.0)
    fig.tight_layout(rect=(0, bottom, 1, 1))
    fig.savefig(path, format=fmt)
    import matplotlib.pyplot as plt
    plt.close(fig)
    return path
