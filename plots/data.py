"""What the charts read: summary.json (every figure, and the metric table: unit, better direction,
display, label), meta.json (machine, versions, command) and timelines.jsonl (each kept cell's RSS
timeline and phase edges).

Nothing here computes a metric or decides which record counts: summary.json and timelines.jsonl are
what the C++ results model writes (harness/results/reporters/json.cpp and timelines.cpp), after its
reader rules (retries, merged origins, parts/, duplicates).
"""
import json
import os

import style

LABELS = ("workload", "allocator", "phase")


class DataError(Exception):
    """The folder cannot be charted (exit 2)."""


class Run:
    def __init__(self, folder):
        self.folder = folder
        summary_path = os.path.join(folder, "summary.json")
        results_path = os.path.join(folder, "results.jsonl")
        timelines_path = os.path.join(folder, "timelines.jsonl")
        if not os.path.isdir(folder):
            raise DataError("%s: not a folder" % folder)
        if not os.path.isfile(results_path):
            raise DataError("%s: no results.jsonl (not a results folder)" % folder)
        if not os.path.isfile(summary_path):
            raise DataError("%s: no summary.json (run `allocmark plot %s`, which writes it from results.jsonl)"
                            % (folder, folder))
        try:
            with open(summary_path) as f:
                self.summary = json.load(f)
        except ValueError as e:
            raise DataError("%s: not JSON: %s" % (summary_path, e))
        except OSError as e:
            raise DataError("%s: cannot read: %s" % (summary_path, e.strerror or e))
        if not isinstance(self.summary, dict) or not isinstance(self.summary.get("groups"), list):
            raise DataError("%s: no groups (not a summary.json)" % summary_path)
        if not os.path.isfile(timelines_path):
            raise DataError("%s: no timelines.jsonl (run `allocmark plot %s`, which writes it from results.jsonl)"
                            % (folder, folder))
        self.meta = {}
        meta_path = os.path.join(folder, "meta.json")
        if os.path.isfile(meta_path):
            try:
                with open(meta_path) as f:
                    self.meta = json.load(f)
            except (OSError, ValueError):
                self.meta = {}
        self.timelines_path = timelines_path
        self.groups = self.summary["groups"]
        # The names charts draw are labels: long ones cut here, once, so every chart and every
        # lookup (timelines by label, below) uses the same text. `identity` keeps the real names.
        for g in self.groups + list(self.summary.get("node_groups") or []):
            if isinstance(g, dict):
                for key in LABELS:
                    if key in g:
                        g[key] = style.short(g[key])
        self.metric_units = {k: v.get("unit") for k, v in self.summary.get("metrics", {}).items()}
        self._cells = None

    # ---- summary.json ----
    def axis(self, name):
        """How metric `name` is labelled and scaled on an axis: its row of summary.json's metric table."""
        return Axis(name, (self.summary.get("metrics") or {}).get(name))

    def ok_groups(self):
        """Groups of measured phases (not the "(cell)" groups of failed cells)."""
        return [g for g in self.groups if g.get("phase") != "(cell)" and g.get("metrics")]

    def not_ok_groups(self):
        return [g for g in self.groups if g.get("phase") == "(cell)"]

    def ordered(self, key, groups=None):
        """Distinct values of a dimension in first-appearance (matrix) order."""
        out = []
        for g in groups if groups is not None else self.ok_groups():
            if g[key] not in out:
                out.append(g[key])
        return out

    def backend(self, allocator):
        for g in self.groups:
            if g.get("allocator") == allocator:
                b = g.get("identity", {}).get("backend")
                if b:
                    return b
        return None

    def allocator_order(self, groups=None):
        return self.ordered("allocator", groups)

    def baseline(self, wanted):
        """The allocator others are drawn relative to: `wanted` (--baseline) if in the run, else glibc,
        else the first; None when `wanted` is not in the run."""
        allocs = self.allocator_order()
        if wanted:
            return wanted if wanted in allocs else None
        return "glibc" if "glibc" in allocs else (allocs[0] if allocs else None)

    def cpus_usable(self):
        return self.meta.get("machine", {}).get("cpus_usable")

    # ---- timelines.jsonl ----
    def _kept_cells(self):
        """Every line of timelines.jsonl: one per ok cell the model kept, its labels cut as the
        groups' are."""
        if self._cells is None:
            self._cells = []
            with open(self.timelines_path, errors="replace") as f:
                for line in f:
                    try:
                        c = json.loads(line)
                    except ValueError:
                        raise DataError("%s: not JSON lines (rewrite it with `allocmark plot %s`)"
                                        % (self.timelines_path, self.folder))
                    for key in LABELS:
                        if key in c:
                            c[key] = style.short(c[key])
                    self._cells.append(c)
        return self._cells

    def timelines(self, workload=None):
        """{(workload, threads, allocator): [cell, ...]} for the kept ok cells with a timeline, in
        the model's order; each cell has rep, attempt, timeline, phases, peak_rss_bytes and
        peak_live_bytes (the whole cell's, from the model)."""
        out = {}
        for c in self._kept_cells():
            if not c.get("timeline") or (workload is not None and c.get("workload") != workload):
                continue
            out.setdefault((c.get("workload"), c.get("threads"), c.get("allocator")), []).append(c)
        return out

    def phase_live(self):
        """{(workload, threads, allocator, phase): [(peak_live_bytes, idle_rss_bytes or None) of each
        repetition]}: the raw measurements per kept cell, for marks drawn per repetition (idle RSS is
        missing from timelines.jsonl files written before it was added)."""
        out = {}
        for c in self._kept_cells():
            for p in c.get("phases") or []:
                if p.get("peak_live_bytes") is not None:
                    out.setdefault((c.get("workload"), c.get("threads"), c.get("allocator"), style.short(p.get("name"))),
                                   []).append((p["peak_live_bytes"], c.get("idle_rss_bytes")))
        return out


# How each display of the metric table (summary.json "metrics"[NAME]["display"]) is drawn: the
# scale from the metric's unit to the axis's and how a bar's value is written.
_DISPLAYS = {
    "mib": (1 / (1024.0 * 1024.0), "%.1f"),
    "ratio": (1.0, "%.2f"),
    "si": (1.0, style.si_text),
    "rate": (1.0, style.si_text),
    "percent": (100.0, style.percent_text),
    "nanoseconds": (1.0, style.si_text),
    "seconds": (1.0, "%.3g"),
}


class Axis:
    """A metric as a chart draws it, from summary.json's metric table (the C++ metric table's row):
    `label` its heading ("peak RSS MiB"), `scale` from its unit to the axis's, `text(v)` a bar's
    value on the axis's scale, `si` whether ticks take k/M/G."""

    def __init__(self, name, row):
        row = row if isinstance(row, dict) else {}
        self.name = name
        self.label = (row.get("label") or name) + (" (%)" if row.get("display") == "percent" else "")
        self.description = row.get("description") or ""
        self.scale, fmt = _DISPLAYS.get(row.get("display"), (1.0, "%.3g"))
        self.text = fmt if callable(fmt) else (lambda v, f=fmt: f % v)
        self.si = row.get("display") in ("si", "nanoseconds")


def metric(group, name):
    """(median, min, max) of a metric in a summary group, or None where the group has no values."""
    m = group.get("metrics", {}).get(name)
    if not m or m.get("median") is None:
        return None
    return m["median"], m.get("min", m["median"]), m.get("max", m["median"])
