"""What the charts read: summary.json (every figure), meta.json (machine, versions, command) and,
streamed line by line, each cell's timeline and phase edges from results.jsonl.

Nothing here computes a metric: medians, spreads and ratios of measurements come from summary.json,
which the C++ results model writes (harness/results/reporters/json.cpp).
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
        self.meta = {}
        meta_path = os.path.join(folder, "meta.json")
        if os.path.isfile(meta_path):
            try:
                with open(meta_path) as f:
                    self.meta = json.load(f)
            except (OSError, ValueError):
                self.meta = {}
        self.results_path = results_path
        self.groups = self.summary["groups"]
        # The names charts draw are labels: long ones cut here, once, so every chart and every
        # lookup (timelines by label, below) uses the same text. `identity` keeps the real names.
        for g in self.groups + list(self.summary.get("node_groups") or []):
            if isinstance(g, dict):
                for key in LABELS:
                    if key in g:
                        g[key] = style.short(g[key])
        self.metric_units = {k: v.get("unit") for k, v in self.summary.get("metrics", {}).items()}

    # ---- summary.json ----
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

    def cpus_usable(self):
        return self.meta.get("machine", {}).get("cpus_usable")

    # ---- results.jsonl, streamed ----
    def _label_index(self):
        """Record identity -> (workload label, allocator label) of summary.json's groups, so records
        whose names the model disambiguated (size_mix[live_mib=64]) land with their group."""
        index = {}
        for g in self.groups:
            ident = g.get("identity", {})
            key = (ident.get("workload"), ident.get("allocator"), _canon(ident.get("params")),
                   _canon(ident.get("env")), ident.get("preload"))
            index.setdefault(key, (g["workload"], g["allocator"]))
        return index

    def timelines(self, workload=None):
        """{(workload, threads, allocator): [record subset, ...]} for ok cells with a timeline.
        Reads results.jsonl a line at a time and keeps only rep, timeline, phases and peaks; among
        records with one key the highest attempt wins (as the C++ reader does)."""
        index = self._label_index()
        by_key = {}
        order = 0
        with open(self.results_path, errors="replace") as f:
            for line in f:
                try:
                    r = json.loads(line)
                except ValueError:
                    continue  # the C++ reader reports corrupt lines; a chart just skips them
                if not isinstance(r, dict) or r.get("status") != "ok" or not r.get("timeline"):
                    continue
                ident = (r.get("workload"), r.get("allocator"), _canon(r.get("params")), _canon(r.get("env")),
                         r.get("preload"))
                wl, alloc = index.get(ident, (style.short(r.get("workload")), style.short(r.get("allocator"))))
                if workload is not None and wl != workload:
                    continue
                keep = {"rep": r.get("rep"), "timeline": r["timeline"], "phases": r.get("phases") or [],
                        "peak_rss_bytes": r.get("peak_rss_bytes"), "peak_live_bytes": r.get("peak_live_bytes"),
                        "attempt": r.get("attempt", 1)}
                k = r.get("key")
                if k is None:
                    k = ("#", order)
                prev = by_key.get(k)
                if prev is None or keep["attempt"] > prev[1]["attempt"]:
                    by_key[k] = ((wl, r.get("threads"), alloc), keep, prev[2] if prev else order)
                order += 1
        out = {}
        for cell, keep, _ in sorted(by_key.values(), key=lambda v: v[2]):
            out.setdefault(cell, []).append(keep)
        return out

    def phase_live(self):
        """{(workload, threads, allocator, phase): [peak_live_bytes of each repetition]}: the raw
        measurement per cell (summary.json has no peak_live_bytes metric)."""
        index = self._label_index()
        out = {}
        with open(self.results_path, errors="replace") as f:
            for line in f:
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(r, dict) or r.get("status") != "ok":
                    continue
                ident = (r.get("workload"), r.get("allocator"), _canon(r.get("params")), _canon(r.get("env")),
                         r.get("preload"))
                wl, alloc = index.get(ident, (style.short(r.get("workload")), style.short(r.get("allocator"))))
                for p in r.get("phases") or []:
                    if p.get("peak_live_bytes") is not None:
                        out.setdefault((wl, r.get("threads"), alloc, style.short(p.get("name"))), []).append(p["peak_live_bytes"])
        return out


def _canon(value):
    return json.dumps(value if value is not None else {}, sort_keys=True)


def metric(group, name):
    """(median, min, max) of a metric in a summary group, or None where the group has no values."""
    m = group.get("metrics", {}).get(name)
    if not m or m.get("median") is None:
        return None
    return m["median"], m.get("min", m["median"]), m.get("max", m["median"])
